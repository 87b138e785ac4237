"""Time of ``mlcal.mlflow.log_model`` / ``save_model`` with default arguments vs
``mlflow.sklearn.log_model`` of the same base model, in one run (sqlite store in a temp dir).

Default arguments means no ``pip_requirements``: MLflow's sklearn flavour then infers the
requirements by loading the model in a subprocess; mlcal lists what it knows instead
(:mod:`mlcal.mlflow.requirements`). The goal is mlcal <= 0.3x the reference.

Calls alternate (reference, mlcal log, mlcal save) ``--repeats`` times after one untimed
warm-up round (imports, first skops dump); the table shows the median seconds and the ratio
to the reference's median.

    python benchmarks/bench_log_model.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd


def _bases(X, y):
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    return {"LogisticRegression": LogisticRegression().fit(X, y),
            "HistGradientBoosting": HistGradientBoostingClassifier(max_iter=50).fit(X, y)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    import mlflow
    import mlflow.sklearn

    import mlcal.mlflow
    from mlcal.mlflow.base_models import trusted_types
    from mlcal.model import CalibratedModel

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(4000, 6)), columns=[f"x{i}" for i in range(6)])
    y = (X["x0"] - X["x1"] + rng.normal(size=len(X)) > 0).astype(int)
    root = Path(tempfile.mkdtemp(prefix="bench_log_model_"))
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "bench", artifact_location=(root / "artifacts").as_uri()))
    example = X[:3]
    print(f"{'base model':<22}{'call':<34}{'median s':>9}{'ratio':>7}")
    for name, base in _bases(X[:2000], y[:2000]).items():
        model = CalibratedModel(base, "isotonic").fit(X[2000:], y[2000:])
        counter = iter(range(10 ** 6))
        trusted = trusted_types(base)   # HistGradientBoosting's tree type must be trusted
        calls = {
            "mlflow.sklearn.log_model (ref)": lambda: mlflow.sklearn.log_model(
                base, name="base", input_example=example, skops_trusted_types=trusted),
            "mlcal.mlflow.log_model": lambda: mlcal.mlflow.log_model(
                model, name="cal", input_example=example),
            "mlcal.mlflow.save_model": lambda: mlcal.mlflow.save_model(
                model, str(root / f"{name}-{next(counter)}"), input_example=example),
        }
        times = {k: [] for k in calls}
        with mlflow.start_run():
            for round_ in range(args.repeats + 1):
                for label, call in calls.items():
                    t0 = time.perf_counter()
                    call()
                    if round_:                     # round 0 is the warm-up
                        times[label].append(time.perf_counter() - t0)
        ref = float(np.median(times["mlflow.sklearn.log_model (ref)"]))
        for label, ts in times.items():
            med = float(np.median(ts))
            print(f"{name:<22}{label:<34}{med:>9.3f}{med / ref:>7.3f}")


if __name__ == "__main__":
    main()
