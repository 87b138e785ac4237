"""``mlcal quickstart``: the main job, end to end on bundled data with a local MLflow store."""

from __future__ import annotations

import time


def run(args) -> int:
    from mlcal.quickstart import run_quickstart

    start = time.perf_counter()
    result = run_quickstart(workdir=args.workdir, tracking_uri=args.tracking_uri,
                            methods=args.methods, fast=args.fast, max_ece=args.max_ece,
                            seed=args.seed)
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 0 if result.decision.promoted else 1


def register(sub) -> None:
    p = sub.add_parser("quickstart", help="the main job: calibrate, log, register, gate, export",
                       description="Train Gaussian naive Bayes on scikit-learn's bundled "
                                   "breast-cancer data, calibrate it with every registered "
                                   "method, log each as an MLflow run in a local sqlite store, "
                                   "register the models, pick the one of lowest log loss on "
                                   "held-out selection rows, promote it through the gate on "
                                   "rows used neither to fit nor to pick it, "
                                   "export it to ONNX and print how to serve it. Exit code 0 "
                                   "when a champion was promoted, 1 when the gate refused.")
    p.add_argument("--workdir", default="mlcal-quickstart",
                   help="folder for mlflow.db, run artifacts and the ONNX file "
                        "(default: ./mlcal-quickstart)")
    p.add_argument("--tracking-uri", default=None,
                   help="use this MLflow tracking server/store instead of <workdir>/mlflow.db")
    p.add_argument("--methods", nargs="+", default=None, help="calibrators (default: all)")
    p.add_argument("--fast", action="store_true",
                   help="only auto, platt, histogram, isotonic and enir")
    p.add_argument("--max-ece", type=float, default=None,
                   help="ECE threshold of the promotion gate (default: the ECE that a "
                        "perfectly calibrated model with the candidate's predictions exceeds "
                        "5%% of the time on the gate rows, as binned ECE on ~100 rows is "
                        "mostly noise)")
    p.add_argument("--seed", type=int, default=0, help="data split seed")
    p.set_defaults(handler=run)
