"""Calibration and discrimination metrics.

* :mod:`mlcal.metrics.binary` -- ECE, MCE, Brier, log loss, AUC, reliability curves, the
  estimators of ECE (debiased, smooth, adaptive), Spiegelhalter's z, :func:`compute_all`;
* :mod:`mlcal.metrics.curves` -- calibration slope and intercept, ICI / E50 / E90;
* :mod:`mlcal.metrics.decomposition` -- the CORP decomposition (miscalibration, discrimination,
  uncertainty);
* :mod:`mlcal.metrics.sweep` -- ECE-sweep;
* :mod:`mlcal.metrics.multiclass` -- top-label and classwise ECE, multiclass Brier and log loss;
* :mod:`mlcal.metrics.bootstrap` -- bootstrap confidence intervals, single or paired;
* :mod:`mlcal.metrics.reliability_bands` -- the CORP reliability curve with consistency bands;
* :mod:`mlcal.metrics.segments` -- per-segment calibration (:func:`segment_report`).

The binary metrics of the first four modules are importable from here
(``from mlcal.metrics import ece``).
"""

from mlcal.metrics.binary import (BIN_STRATEGIES, DIAGNOSTIC_NAMES, HIGHER_IS_BETTER,
                                  INTERVAL_METHODS, METRIC_NAMES, accuracy, adaptive_ece, auc,
                                  brier, brier_per_row, calibration_diagnostics,
                                  calibration_report, compute_all, debiased_ece, ece,
                                  format_report, log_loss, log_loss_per_row, mce,
                                  proportion_interval, reliability_curve, rmse, smooth_ece,
                                  smooth_ece_at, spiegelhalter_z)
from mlcal.metrics.curves import (CalibrationSlopeIntercept, IntegratedCalibrationIndex,
                                  calibration_slope_intercept, classwise_ici,
                                  integrated_calibration_index, loess_calibration_curve,
                                  top_label_ici)
from mlcal.metrics.decomposition import (ClasswiseCorp, CorpDecomposition,
                                         classwise_corp_decomposition, corp_decomposition,
                                         corp_mcb, isotonic_recalibration,
                                         top_label_corp_decomposition)
from mlcal.metrics.segments import SegmentReport, segment_report
from mlcal.metrics.sweep import classwise_ece_sweep, ece_sweep, sweep_n_bins, top_label_ece_sweep

__all__ = [
    "BIN_STRATEGIES", "CalibrationSlopeIntercept", "ClasswiseCorp", "CorpDecomposition",
    "DIAGNOSTIC_NAMES", "HIGHER_IS_BETTER", "INTERVAL_METHODS", "IntegratedCalibrationIndex",
    "METRIC_NAMES", "SegmentReport", "accuracy", "adaptive_ece", "auc", "brier", "brier_per_row",
    "calibration_diagnostics", "calibration_report", "calibration_slope_intercept",
    "classwise_corp_decomposition", "classwise_ece_sweep", "classwise_ici", "compute_all",
    "corp_decomposition", "corp_mcb", "debiased_ece", "ece", "ece_sweep", "format_report",
    "integrated_calibration_index", "isotonic_recalibration", "loess_calibration_curve", "log_loss",
    "log_loss_per_row", "mce", "proportion_interval", "reliability_curve", "rmse", "segment_report",
    "smooth_ece", "smooth_ece_at", "spiegelhalter_z", "sweep_n_bins", "top_label_corp_decomposition",
    "top_label_ece_sweep", "top_label_ici"]
