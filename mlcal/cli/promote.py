"""``mlcal promote``: move a registry alias to a model version only if it passes the gate.

Exit codes: 0 promoted, 1 refused, 2 error (nothing changed), so the command can gate a CI
pipeline. ``--history NAME`` prints every recorded decision instead.
"""

from __future__ import annotations

import sys

from mlcal._safe_json import dumps_safe
from mlcal.metrics.bootstrap import DEFAULT_RESAMPLES
from mlcal.cli._io import parse_columns
from mlcal.metrics import BIN_STRATEGIES


def _history(args) -> int:
    from mlcal.mlflow.gate import format_history, gate_history

    entries = gate_history(args.history, alias=args.alias_filter)
    print(dumps_safe(entries, indent=1) if args.json else format_history(entries))
    return 0


def run(args) -> int:
    from mlcal.mlflow.gate import DEFAULT_METRIC_KEY, promote  # first: names the missing extra
    import mlflow
    from mlflow.exceptions import MlflowException


    if args.tracking_uri:
        mlflow.set_tracking_uri(args.tracking_uri)
    try:
        if args.history:
            return _history(args)
        if args.model_name is None or args.max_ece is None:
            raise ValueError("--model-name and --max-ece are required (or use --history NAME)")
        decision = promote(args.model_name, args.version, alias=args.alias, data=args.data,
                           label_column=args.label_column,
                           metric_key=args.metric_key or DEFAULT_METRIC_KEY,
                           allow_in_sample=args.allow_in_sample, **policy_kwargs(args))
    except MlflowException as exc:
        print(f"mlcal promote: error: {exc.message}", file=sys.stderr)
        return 2
    print(dumps_safe(decision.as_dict(), indent=1) if args.json else decision.explain())
    return 0 if decision.promoted else 1


def register(sub) -> None:
    p = sub.add_parser("promote", help="promote a registered model version if it passes the gate",
                       description="Move a registry alias to a model version only if its ECE is "
                                   "<= --max-ece, it is not worse than the current alias "
                                   "holder on log loss, Brier score and AUC beyond the allowed "
                                   "margins, and it beats the constant base-rate predictor "
                                   "with confidence (with no holder also not worse than its "
                                   "own uncalibrated base model; this needs --data). Multiclass models: top-label ECE, multiclass "
                                   "log loss and Brier, no AUC; the holder must have the same "
                                   "classes. Exit code 0 promoted, 1 refused, 2 error (nothing "
                                   "changed).")
    p.add_argument("--model-name", default=None, help="registered model name")
    p.add_argument("--version", default=None, help="candidate version (default: newest)")
    add_policy_arguments(p)
    p.add_argument("--data", default=None,
                   help="hold-out CSV (features + label); every metric is then recomputed for "
                        "the candidate and the holder on the same rows")
    p.add_argument("--allow-in-sample", action="store_true",
                   help="without --data, accept logged metrics computed in-sample or of "
                        "unknown origin (run tag mlcal.metrics_source not 'held-out')")
    p.add_argument("--metric-key", default=None,
                   help="logged ECE metric used without --data (default: ece_after)")
    p.add_argument("--json", action="store_true", help="print the decision (or history) as JSON")
    p.add_argument("--history", metavar="NAME", default=None,
                   help="print every recorded gate decision of registered model NAME and exit")
    p.add_argument("--alias-filter", default=None, help="with --history: only this alias")
    p.set_defaults(handler=run)


def policy_kwargs(args) -> dict:
    """The :func:`mlcal.mlflow.gate.promote` keyword arguments set by
    :func:`add_policy_arguments` (all but ``alias``, ``label_column`` and the tracking URI)."""
    return dict(max_ece=args.max_ece, margin=args.margin,
                max_log_loss_increase=args.max_log_loss_increase,
                max_brier_increase=args.max_brier_increase,
                max_auc_decrease=args.max_auc_decrease, confidence=args.confidence,
                n_resamples=args.n_resamples, seed=args.seed, n_bins=args.n_bins,
                strategy=args.strategy, min_rows=args.min_rows,
                skill_confidence=args.skill_confidence, allow_pickle=args.allow_pickle,
                max_mcb=args.max_mcb, max_segment_citl=args.max_segment_citl,
                segment_columns=parse_columns(args.segment_columns),
                min_segment_rows=args.min_segment_rows,
                segment_confidence=args.segment_confidence, report=not args.no_report)


def add_policy_arguments(p) -> None:
    """The gate policy options shared by ``mlcal promote`` and ``mlcal gate-server``: alias,
    thresholds, evaluation-row options, model loading, report and tracking URI."""
    p.add_argument("--max-ece", type=float, default=None, help="ECE threshold")
    p.add_argument("--alias", default="champion", help="alias to move (default: champion)")
    p.add_argument("--max-log-loss-increase", type=float, default=0.01,
                   help="allowed log-loss excess over the holder (default 0.01)")
    p.add_argument("--max-brier-increase", type=float, default=0.0025,
                   help="allowed Brier excess over the holder (default 0.0025)")
    p.add_argument("--max-auc-decrease", type=float, default=0.01,
                   help="allowed AUC drop against the holder (default 0.01)")
    p.add_argument("--margin", type=float, default=None,
                   help="also require ECE <= holder's ECE + MARGIN (off by default)")
    p.add_argument("--label-column", default="y", help="label column of --data (default: y)")
    p.add_argument("--min-rows", type=int, default=None,
                   help="fewest rows --data may have (default derived from --max-ece: "
                        "ceil((1.96 * 0.5 / max_ece)^2), 385 for 0.05)")
    p.add_argument("--skill-confidence", type=float, default=0.95,
                   help="one-sided level of the usefulness tests against the constant "
                        "predictor and the base model (default 0.95)")
    p.add_argument("--allow-pickle", action="store_true",
                   help="with --data, also load versions that are not mlcal-flavour models "
                        "(MLflow's sklearn/pyfunc loaders unpickle them: trusted registries "
                        "only; refused by default, exit 2)")
    p.add_argument("--max-mcb", type=float, default=None,
                   help="also require the candidate's CORP Brier miscalibration (top-label for "
                        "multiclass) on --data to be <= MAX_MCB (off by default; needs --data)")
    p.add_argument("--segment-columns", default=None, metavar="A,B",
                   help="columns of --data that define segments (a composite key when "
                        "several), for --max-segment-citl")
    p.add_argument("--max-segment-citl", type=float, default=None,
                   help="also refuse when some segment's |observed - predicted| exceeds this "
                        "with confidence: the worst segment's lower bound, simultaneous over "
                        "the segments (off by default; needs --data and --segment-columns)")
    p.add_argument("--min-segment-rows", type=int, default=100,
                   help="segments with fewer rows are reported but not used (default 100)")
    p.add_argument("--segment-confidence", type=float, default=0.95,
                   help="simultaneous level of the segment intervals (default 0.95)")
    p.add_argument("--no-report", action="store_true",
                   help="with --data, do not log the HTML gate report to the candidate "
                        "version's run (gate/gate_report_<alias>_<time>.html)")
    p.add_argument("--confidence", type=float, default=None,
                   help="decide on paired bootstrap intervals at this confidence, e.g. 0.95 "
                        "(needs --data)")
    p.add_argument("--n-resamples", type=int, default=None,
                   help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--n-bins", type=int, default=10)
    p.add_argument("--strategy", choices=BIN_STRATEGIES, default="uniform")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking/registry URI (default: MLFLOW_TRACKING_URI or MLflow's)")
