"""``mlcal promote``: move a registry alias to a model version only if it passes the ECE gate.

Exit codes: 0 promoted, 1 refused, 2 error, so the command can gate a CI pipeline.
"""

from __future__ import annotations

import sys

from mlcal.metrics import BIN_STRATEGIES


def run(args) -> int:
    import mlflow
    from mlflow.exceptions import MlflowException

    from mlcal.registry import DEFAULT_METRIC_KEY, promote

    if args.tracking_uri:
        mlflow.set_tracking_uri(args.tracking_uri)
    try:
        decision = promote(args.model_name, args.version, max_ece=args.max_ece, alias=args.alias,
                           data=args.data, label_column=args.label_column, margin=args.margin,
                           metric_key=args.metric_key or DEFAULT_METRIC_KEY, n_bins=args.n_bins,
                           strategy=args.strategy)
    except MlflowException as exc:
        print(f"mlcal promote: error: {exc.message}", file=sys.stderr)
        return 2
    print(decision.explain())
    return 0 if decision.promoted else 1


def register(sub) -> None:
    p = sub.add_parser("promote", help="promote a registered model version if its ECE passes",
                       description="Move a registry alias to a model version only if its ECE is "
                                   "<= --max-ece and it is not worse than the current alias "
                                   "holder by more than --margin. Exit code 0 promoted, 1 "
                                   "refused, 2 error.")
    p.add_argument("--model-name", required=True, help="registered model name")
    p.add_argument("--version", default=None, help="candidate version (default: newest)")
    p.add_argument("--max-ece", type=float, required=True, help="ECE threshold")
    p.add_argument("--alias", default="champion", help="alias to move (default: champion)")
    p.add_argument("--margin", type=float, default=0.0,
                   help="allowed ECE excess over the current alias holder (default 0)")
    p.add_argument("--data", default=None,
                   help="hold-out CSV (features + label); ECE is then recomputed for the "
                        "candidate and the current holder on the same rows")
    p.add_argument("--label-column", default="y", help="label column of --data (default: y)")
    p.add_argument("--metric-key", default=None,
                   help="logged run metric used without --data (default: ece_after)")
    p.add_argument("--n-bins", type=int, default=10)
    p.add_argument("--strategy", choices=BIN_STRATEGIES, default="uniform")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking/registry URI (default: MLFLOW_TRACKING_URI or MLflow's)")
    p.set_defaults(handler=run)
