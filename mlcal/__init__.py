"""mlcal: probability calibration for binary and multiclass classifiers, from fitting to serving.

Every calibrator reduces to one canonical map (:class:`StepMap`, :class:`LinearMap`,
:class:`SigmoidMap`, :class:`BetaMap` or :class:`QuadraticMap`) stored as JSON, optionally followed by a logit offset
(:class:`OffsetMap`, :func:`reoffset`); :class:`CalibratedModel` wraps a fitted classifier with one.
"""

__version__ = "0.1.0"

# before any kernel is defined: numba picks each kernel's cache folder when it is decorated
from mlcal import _kernel_cache  # noqa: E402

_kernel_cache.install_locator()
_kernel_cache.install_compile_notice()

from mlcal.calibrators import *  # noqa: E402,F401,F403
from mlcal.calibrators import __all__ as _calibrator_names  # noqa: E402
from mlcal.calibrators.catalog import register  # noqa: E402,F401  (deprecated alias)
from mlcal.maps import BetaMap, QuadraticMap  # noqa: E402
from mlcal.maps import (LinearMap, MapFormatError, MulticlassMap, SigmoidMap,  # noqa: E402
                        SoftmaxAffineMap, StepMap, map_from_dict)
from mlcal.model import CalibratedModel  # noqa: E402
from mlcal.multicalibration import Multicalibration, MulticalibrationMap  # noqa: E402
from mlcal.maps.offset import OffsetMap  # noqa: E402
from mlcal.maps.reoffset import fit_delta, prior_shift_delta, reoffset  # noqa: E402
from mlcal.calibrators.segmented import SegmentedCalibrator  # noqa: E402
from mlcal.maps.segment_keys import SegmentKeyError  # noqa: E402
from mlcal.maps.segmented import SegmentedMap, UnseenSegmentError  # noqa: E402

__all__ = [*_calibrator_names, "BetaMap", "CalibratedModel", "LinearMap", "MapFormatError", "MulticlassMap",
           "Multicalibration", "MulticalibrationMap", "OffsetMap", "SigmoidMap", "SoftmaxAffineMap", "StepMap", "fit_delta", "map_from_dict",
           "prior_shift_delta", "reoffset", "__version__"]
__all__ += ["QuadraticMap"]
__all__ += ["SegmentKeyError", "SegmentedCalibrator", "SegmentedMap", "UnseenSegmentError"]
