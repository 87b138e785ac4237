"""``mlcal evaluate``: before/after metric table of a saved calibrator on a CSV file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlcal._safe_json import dumps_safe
from mlcal.calibrators.base import load_calibrator
from mlcal.maps import apply_input_transform
from mlcal.calibrators.multiclass import (MulticlassCalibrator, NotProbabilitiesError,
                                          check_probability_rows)
from mlcal.cli._io import add_data_arguments, binary_label_column, read_columns
from mlcal.cli._multiclass import add_multiclass_arguments, read_multiclass, reject_pos_label
from mlcal.metrics import BIN_STRATEGIES, calibration_report, format_report
from mlcal.metrics.multiclass import multiclass_report


def uncalibrated_probabilities(scores: np.ndarray) -> np.ndarray:
    """The multiclass calibrator's starting point: the rows themselves when they are
    probability rows, else the softmax of the rows (logits)."""
    from scipy.special import softmax

    try:
        check_probability_rows(scores)
    except NotProbabilitiesError:
        return softmax(scores, axis=1)
    return scores


def run_multiclass(args, cal) -> int:
    """Multiclass metrics before/after a multiclass calibrator on --score-columns."""
    if args.score_columns is None:
        raise ValueError(f"{args.calibrator} holds a multiclass calibrator "
                         f"({cal.map_.n_classes} classes): pass its class columns with "
                         "--score-columns C1,C2,...")
    reject_pos_label(args)
    scores, y, _ = read_multiclass(args)
    if scores.shape[1] != cal.map_.n_classes:
        raise ValueError(f"--score-columns has {scores.shape[1]} columns but the calibrator "
                         f"was fitted on {cal.map_.n_classes} classes")
    report = multiclass_report(y, uncalibrated_probabilities(scores), cal.predict_proba(scores),
                               n_bins=args.n_bins, strategy=args.strategy)
    if args.json:
        print(dumps_safe(report, indent=1))
    else:
        print(f"{type(cal).__name__} ({cal.map_.kind} map, {report['n_classes']} classes) on "
              f"{args.data}")
        print(format_report(report))
    return 0


def run(args) -> int:
    cal = load_calibrator(Path(args.calibrator))   # a path, never JSON text
    if isinstance(cal, MulticlassCalibrator):
        return run_multiclass(args, cal)
    from mlcal.calibrators.segmented import SegmentedCalibrator

    if isinstance(cal, SegmentedCalibrator):   # needs segments besides the score
        raise ValueError(f"{args.calibrator} holds a segmented calibrator (segment columns "
                         f"{cal.map_.column_names}); mlcal evaluate reads a score column only. "
                         "Score it in Python: SegmentedCalibrator.predict(scores, segments)")
    if args.score_columns is not None or args.classes is not None:
        raise ValueError(f"--score-columns/--classes are for multiclass calibrators; "
                         f"{args.calibrator} holds a binary one ({type(cal).__name__})")
    data = read_columns(args.data, [args.score_column, args.label_column])
    scores = np.asarray(data[args.score_column], dtype=float)
    # the uncalibrated probability the map itself starts from (a multicalibration map has no
    # input transform: it takes probabilities, and raises naming its feature columns)
    before = apply_input_transform(scores, getattr(cal.map_, "input_transform", "identity"))
    report = calibration_report(binary_label_column(data, args), before, cal.predict(scores),
                                n_bins=args.n_bins, strategy=args.strategy)
    if args.json:
        print(dumps_safe(report, indent=1))   # NaN (e.g. AUC of one class) -> null
    else:
        print(f"{type(cal).__name__} ({cal.map_.kind} map) on {args.data}")
        print(format_report(report))
    return 0


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="compare metrics before and after a saved calibrator",
                       description="Print ECE, MCE, Brier, RMSE, log loss, AUC and accuracy "
                                   "before and after calibration. Scores must be probabilities "
                                   "unless the calibrator squashes raw scores with a sigmoid. "
                                   "A multiclass calibrator (--score-columns) reports top-label "
                                   "and class-wise ECE, multiclass Brier, log loss and accuracy; "
                                   "its 'before' is the score rows when they are probabilities, "
                                   "else their softmax.")
    p.add_argument("--calibrator", required=True, help="calibrator JSON written by `mlcal fit`")
    add_data_arguments(p)
    add_multiclass_arguments(p)
    p.add_argument("--n-bins", type=int, default=10, help="bins for ECE/MCE (default 10)")
    p.add_argument("--strategy", choices=BIN_STRATEGIES, default="uniform",
                   help="equal-width (uniform, default) or equal-count (quantile) bins")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)
