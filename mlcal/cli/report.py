"""``mlcal report``: a self-contained HTML calibration report of a saved or logged mlcal model
on a CSV file (features plus a label column)."""

from __future__ import annotations

import sys
from pathlib import Path

from mlcal.metrics import BIN_STRATEGIES


def _read_gate(path: str | None):
    """A gate decision saved as JSON (``mlcal promote --json``), or None."""
    if path is None:
        return None
    from mlcal._safe_json import loads_strict

    try:
        gate = loads_strict(Path(path).read_bytes())
    except FileNotFoundError:
        raise FileNotFoundError(f"gate decision file not found: {path}") from None
    if not isinstance(gate, dict) or not isinstance(gate.get("criteria"), list):
        raise ValueError(f"{path} is not a gate decision (a JSON object with 'criteria', as "
                         "written by `mlcal promote --json`)")
    return gate


def run(args) -> int:
    from mlcal.mlflow.flavor import load_model   # first: names the missing extra
    import mlflow
    import pandas as pd
    from mlflow.exceptions import MlflowException

    from mlcal.report import report_for_model, write_report

    if args.tracking_uri:
        mlflow.set_tracking_uri(args.tracking_uri)
    try:
        frame = pd.read_csv(args.data)
    except FileNotFoundError:
        raise FileNotFoundError(f"data file not found: {args.data}") from None
    if args.label_column not in frame.columns:
        raise ValueError(f"{args.data} has no label column {args.label_column!r}; columns are "
                         f"{list(frame.columns)}")
    gate = _read_gate(args.gate)
    try:
        model = load_model(args.model_uri)
    except MlflowException as exc:
        print(f"mlcal report: error: {exc.message}", file=sys.stderr)
        return 2
    X = frame.drop(columns=[args.label_column])
    report = report_for_model(model, X, frame[args.label_column].to_numpy(), gate=gate,
                              title=args.title or f"Calibration report: {args.model_uri}",
                              source={"model": args.model_uri, "data": args.data},
                              n_bins=args.n_bins, strategy=args.strategy,
                              n_resamples=args.n_resamples, seed=args.seed)
    write_report(args.output, report)
    print(f"wrote {args.output}")
    return 0


def register(sub) -> None:
    from mlcal.report.data import DEFAULT_REPORT_RESAMPLES

    p = sub.add_parser("report", help="write an HTML calibration report of an mlcal model",
                       description="Evaluate a saved or logged mlcal model (runs:/..., "
                                   "models:/..., a local path) on a CSV file and write one "
                                   "self-contained HTML page (inline figures and CSS, no "
                                   "network): metrics before/after calibration with bootstrap "
                                   "intervals, the CORP decomposition, CORP reliability "
                                   "diagrams with consistency bands, the calibration map and "
                                   "auto's candidates.")
    p.add_argument("model_uri", metavar="MODEL_URI", help="mlcal model URI or local path")
    p.add_argument("--data", required=True,
                   help="CSV file: the model's feature columns plus the label column")
    p.add_argument("--label-column", default="y", help="label column (default: y)")
    p.add_argument("-o", "--output", required=True, help="HTML file to write (replaced)")
    p.add_argument("--title", default=None, help="report title (default: names the model)")
    p.add_argument("--gate", default=None, metavar="JSON",
                   help="also show a gate decision saved by `mlcal promote --json`")
    p.add_argument("--n-bins", type=int, default=10, help="bins of the ECE (default 10)")
    p.add_argument("--strategy", choices=BIN_STRATEGIES, default="uniform")
    p.add_argument("--n-resamples", type=int, default=DEFAULT_REPORT_RESAMPLES,
                   help=f"bootstrap resamples of the intervals (default "
                        f"{DEFAULT_REPORT_RESAMPLES})")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or MLflow's)")
    p.set_defaults(handler=run)
