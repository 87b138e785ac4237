"""``mlcal monitor``: one step of the monitoring loop (see :mod:`mlcal.monitor.loop`)."""

from __future__ import annotations

import sys

EPILOG = """\
exit codes:
  0  no alarm (state updated, metrics logged)
  3  alarm; the candidate passed the gate and now holds the alias
  4  alarm; the candidate was refused by the gate (the alias holder is unchanged)
  5  alarm; too few rows since the estimated change to fit and gate a candidate
  2  usage or data error, named (the batch is not counted; an error while building or
     gating a candidate comes after the batch was counted and logged)

On an alarm the rows of the window since the estimated change are split in arrival order: the
earlier half fits the candidate (maximum-likelihood offset for re-offset; the same calibration
method re-fitted on the base model's scores for re-fit), the later half is the gate's hold-out.
When the URI's alias has moved to another version since the last run, a new monitor starts.
"""


def read_batch(path: str):
    """A CSV or parquet batch as a DataFrame (by extension), errors naming the file."""
    import pandas as pd

    from mlcal.cli._io import read_frame

    if path.lower().endswith((".parquet", ".pq")):
        try:
            frame = pd.read_parquet(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"data file not found: {path}") from None
        except ImportError as exc:
            raise ValueError(f"{path}: reading parquet needs pyarrow ({exc})") from None
        except Exception as exc:  # pyarrow's own errors for a file that is not parquet
            raise ValueError(f"{path}: not a readable parquet file ({exc})") from None
        if frame.shape[0] == 0:
            raise ValueError(f"{path} has no data rows")
        return frame
    return read_frame(path)


def run(args) -> int:
    import mlcal.mlflow  # noqa: F401  first: a missing extra is named, not a bare ImportError
    import mlflow
    from mlflow.exceptions import MlflowException

    from mlcal.monitor.loop import run_batch

    if args.tracking_uri:
        mlflow.set_tracking_uri(args.tracking_uri)
    if args.window_batches < 1:
        raise ValueError("--window-batches must be at least 1")
    if (args.data is None) == (args.spark_table is None):
        raise ValueError("give the batch as exactly one of --data FILE or --spark-table NAME")
    update = None
    if args.spark_table is not None:
        if args.score_column is None:
            raise ValueError("--spark-table needs --score-column (the probability the model "
                             "served): the statistics are computed in Spark, where the model "
                             "does not run")
        from pyspark.sql import SparkSession

        from mlcal.spark.monitor_batches import monitor_spark_table

        table = SparkSession.builder.getOrCreate().table(args.spark_table)
        frame, update = monitor_spark_table(table, label_col=args.label_column,
                                            score_col=args.score_column,
                                            weight_col=args.weight_column,
                                            sample_rows=args.sample_rows,
                                            what=f"Spark table {args.spark_table!r}")
    else:
        frame = read_batch(args.data)
    gate_options = {}
    if args.confidence is not None:
        gate_options["confidence"] = args.confidence
    if not args.gate_report:
        gate_options["report"] = False
    try:
        result = run_batch(state_path=args.state, model_uri=args.model_uri, frame=frame,
                           label_column=args.label_column, score_column=args.score_column,
                           weight_column=args.weight_column, alpha=args.alpha,
                           window_batches=args.window_batches, max_ece=args.max_ece,
                           gate_min_rows=args.gate_min_rows, gate_options=gate_options,
                           diagrams=args.diagrams, monitor_update=update)
    except MlflowException as exc:
        print(f"mlcal monitor: error: {exc.message}", file=sys.stderr)
        return 2
    print(result.summary())
    if result.decision is not None and args.verbose:
        print(result.decision.explain())
    return result.exit_code


def register(sub) -> None:
    import argparse

    p = sub.add_parser(
        "monitor", help="monitor a registered model on a labelled batch; on alarm build, "
                        "register and gate a candidate",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Feed one matured, labelled batch to the calibration monitor kept in "
                    "--state, log its metrics (ECE, log loss, offset estimate and interval, "
                    "e-values, alarm) to the monitored version's MLflow run with step = batch "
                    "number, and on an alarm build the recommended candidate (re-offset or "
                    "re-fit) from the rows since the estimated change, register it under the "
                    "model's name and send it through the gate, which alone moves the alias.")
    p.add_argument("--model-uri", required=True,
                   help="models:/NAME@ALIAS (e.g. @champion) or models:/NAME/VERSION")
    p.add_argument("--data", default=None,
                   help="the batch: CSV or parquet (.parquet) with the model's feature columns "
                        "and the label column")
    p.add_argument("--spark-table", default=None, metavar="NAME",
                   help="the batch as a Spark table (instead of --data; needs --score-column): "
                        "the monitor's statistics are computed over all its rows in Spark, and "
                        "a sample of at most --sample-rows rows is collected for the candidate "
                        "window and the diagrams")
    p.add_argument("--sample-rows", type=int, default=100_000,
                   help="rows of a --spark-table batch collected to the driver (default 100000)")
    p.add_argument("--label-column", default="y", help="label column (default: y)")
    p.add_argument("--score-column", default=None,
                   help="column holding the probabilities the model served for these rows "
                        "(monitored as they are instead of re-scoring the features)")
    p.add_argument("--weight-column", default=None, help="optional frequency-weight column")
    p.add_argument("--state", required=True,
                   help="state file (JSON; created on the first run, with a window file "
                        "STATE.window-<batch>.npz beside it)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="monitor level: alarm when the e-value reaches 1/alpha (default 0.05; "
                        "used when a monitor starts)")
    p.add_argument("--window-batches", type=int, default=20,
                   help="batches whose rows are kept for building a candidate (default 20)")
    p.add_argument("--max-ece", type=float, default=0.05, help="gate's ECE threshold (0.05)")
    p.add_argument("--gate-min-rows", type=int, default=None,
                   help="fewest hold-out rows for the gate (default: the gate's, 385 for "
                        "--max-ece 0.05)")
    p.add_argument("--confidence", type=float, default=None,
                   help="gate on paired bootstrap intervals at this confidence")
    p.add_argument("--no-gate-report", dest="gate_report", action="store_false",
                   help="the gate of a candidate logs no HTML gate report to the candidate's "
                        "run (gate/gate_report_<alias>_<time>.html; mlcal promote --no-report)")
    p.add_argument("--diagrams", choices=["batch", "alarm", "off"], default="batch",
                   help="CORP reliability diagrams logged to the run under monitor/: 'batch' "
                        "(default) every batch plus the window at an alarm or when a window "
                        "closes, 'alarm' only the latter, 'off' none")
    p.add_argument("--verbose", action="store_true", help="also print the gate's decision")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking/registry URI (default: MLFLOW_TRACKING_URI or MLflow's)")
    p.set_defaults(handler=run)
