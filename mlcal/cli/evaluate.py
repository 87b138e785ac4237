"""``mlcal evaluate``: before/after metric table of a saved calibrator on a CSV file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlcal._safe_json import dumps_safe
from mlcal.calibrators.base import load_calibrator
from mlcal.maps import apply_input_transform
from mlcal.cli._io import add_data_arguments, read_columns
from mlcal.metrics import BIN_STRATEGIES, calibration_report, format_report


def run(args) -> int:
    cal = load_calibrator(Path(args.calibrator))   # a path, never JSON text
    data = read_columns(args.data, [args.score_column, args.label_column])
    scores = np.asarray(data[args.score_column], dtype=float)
    # the uncalibrated probability the map itself starts from
    before = apply_input_transform(scores, cal.map_.input_transform)
    report = calibration_report(data[args.label_column], before, cal.predict(scores),
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
                                   "unless the calibrator squashes raw scores with a sigmoid.")
    p.add_argument("--calibrator", required=True, help="calibrator JSON written by `mlcal fit`")
    add_data_arguments(p)
    p.add_argument("--n-bins", type=int, default=10, help="bins for ECE/MCE (default 10)")
    p.add_argument("--strategy", choices=BIN_STRATEGIES, default="uniform",
                   help="equal-width (uniform, default) or equal-count (quantile) bins")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)
