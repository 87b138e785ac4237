"""Calibrators. Importing a method's module adds it to the catalog under its name."""

from mlcal.calibrators.auto import AutoCalibrator
from mlcal.calibrators.base import (BaseCalibrator, CalibratorFormatError, load_calibrator,
                                    save_calibrator)
from mlcal.calibrators.bayesian_binning import ABB, SBB, PreAggregationWarning
from mlcal.calibrators.bbq import BBQ
from mlcal.calibrators.beta import Beta
from mlcal.calibrators.elite import ELiTE
from mlcal.calibrators.enir import ENIR
from mlcal.calibrators.histogram import HistogramBinning
from mlcal.calibrators.isotonic import Isotonic
from mlcal.calibrators.kde import KDECalibrator
from mlcal.calibrators.logit_scaling import PlattLogit, Temperature
from mlcal.calibrators.platt import Platt
from mlcal.calibrators.quadratic import Quadratic
from mlcal.calibrators.spline import MonotoneSpline
from mlcal.calibrators.venn_abers import VennAbers
from mlcal.calibrators.catalog import (available_calibrators, get_calibrator, register,
                                      register_calibrator)

__all__ = ["ABB", "AutoCalibrator", "BBQ", "BaseCalibrator", "CalibratorFormatError", "ELiTE", "ENIR", "HistogramBinning",
           "Isotonic", "KDECalibrator", "Platt", "PreAggregationWarning", "SBB",
           "available_calibrators", "get_calibrator", "load_calibrator",
           "register_calibrator", "save_calibrator"]  # `register`: deprecated, not exported
__all__ += ["Beta", "MonotoneSpline", "PlattLogit", "Quadratic", "Temperature", "VennAbers"]

from mlcal.calibrators.multiclass import (MatrixScaling, MissingClassError,  # noqa: E402
                                          MulticlassCalibrator, NotProbabilitiesError,
                                          OneVsRest, TemperatureScaling, TooFewClassesError,
                                          VectorScaling)
from mlcal.calibrators.multiclass_auto import MulticlassAuto  # noqa: E402

__all__ += ["MatrixScaling", "MissingClassError", "MulticlassAuto", "MulticlassCalibrator",
            "NotProbabilitiesError", "OneVsRest", "TemperatureScaling", "TooFewClassesError",
            "VectorScaling"]

from mlcal.calibrators.structured_scaling import (StructuredMatrixScaling,  # noqa: E402
                                                  StructuredVectorScaling, TemperatureMixScaling)

__all__ += ["StructuredMatrixScaling", "StructuredVectorScaling", "TemperatureMixScaling"]
