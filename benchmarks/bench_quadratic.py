"""Held-out log loss of quadratic scaling for several ridge penalties on the squared term,
against platt-logit, beta, temperature scaling and the uncalibrated scores: the measurement
behind ``quadratic``'s default ``penalty`` (docs/quadratic.md).

    PYTHONPATH=. python benchmarks/bench_quadratic.py            # a few minutes on 2 cores
    PYTHONPATH=. python benchmarks/bench_quadratic.py --quick

Tasks: ``bench_quality.py``'s three simulations (known truth) and two where the true log-odds
is a quadratic in the score's log-odds (``sim-bent``: ``0.2 + 0.8 z - 0.08 z^2``,
``sim-bent-strong``: ``- 0.2 z^2``, ``z ~ N(0, 4)``), at calibration sizes 30 to 3000 (5 seeds),
and from ``bench_quality.py`` real scores of linear, naive Bayes, linear SVM (margins) and
histogram gradient boosting base models on breast_cancer, digits<5 (3 splits each) and the two
make_classification tasks at N_cal 100 to 3000. Per task, each method's held-out log loss
(predictions clipped to [1e-15, 1 - 1e-15]); the tables give the mean log loss, the mean rank
(1 = best, per task) and the mean log-loss difference to ``platt-logit`` on the same task,
overall and by calibration-set size.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_quality as bq  # noqa: E402

PENALTIES = (0.0, 0.1, 1.0, 10.0, 100.0)
OTHERS = ("platt-logit", "beta", "temperature", "uncalibrated")


def log_loss(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


#: true log-odds 0.2 + 0.8 z - BEND z^2 for scores expit(z), z ~ N(0, 2^2): a calibration curve
#: that quadratic scaling fits exactly and Platt on the log-odds cannot
BENDS = {"sim-bent": 0.08, "sim-bent-strong": 0.2}


def bent_tasks(sizes, n_seeds: int, n_test: int):
    for kind, bend in BENDS.items():
        for n in sizes:
            for seed in range(n_seeds):
                rng = np.random.default_rng([seed, n, len(kind), 7])

                def draw(m):
                    z = rng.normal(0.0, 2.0, m)
                    truth = bq.expit(0.2 + 0.8 * z - bend * z * z)
                    return bq.expit(z), (rng.random(m) < truth).astype(int), truth
                s_cal, y_cal, _ = draw(n)
                s_te, y_te, p_te = draw(n_test)
                yield bq.Task(kind, n, s_cal, y_cal, s_te, y_te, p_te)


def tasks(quick: bool, groups=("sim", "real")):
    sizes = (30, 100, 300, 1000) if quick else (30, 100, 300, 1000, 3000)
    seeds = 2 if quick else 5
    if "sim" in groups:
        yield from bq.sim_tasks(sizes, seeds, 20_000)
        yield from bent_tasks(sizes, seeds, 20_000)
    if "real" not in groups:
        return
    orig = bq.base_models
    # the linear family and one boosted-tree model (cheap enough for a shared machine)
    bq.base_models = lambda seed, families=("linear",): {
        **orig(seed, ("linear",)),
        "HGB": bq.HistGradientBoostingClassifier(random_state=seed)}
    saved = bq.MAX_REAL_SIZE
    try:
        for t in bq.real_tasks([n for n in sizes if n >= 100], 1 if quick else 3, ("linear",)):
            yield t
    finally:
        bq.base_models = orig
        bq.MAX_REAL_SIZE = saved


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--groups", nargs="+", choices=("sim", "real"), default=("sim", "real"))
    args = ap.parse_args(argv)
    methods = [f"quadratic:penalty={lam:g}" for lam in PENALTIES] + list(OTHERS)
    rows = []
    for task in tasks(args.quick, args.groups):
        if task.y_cal.min() == task.y_cal.max():   # a single class: nothing to calibrate
            continue
        losses = {}
        for name in methods:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                predict = bq.make_method(name)(task.s_cal, task.y_cal)
                losses[name] = log_loss(task.y_test, predict(task.s_test))
        rows.append((task.name, task.n_cal, losses))
    print(f"{len(rows)} tasks")
    buckets = defaultdict(list)
    for name, n, losses in rows:
        if name.startswith("sim-bent"):
            buckets["bent (quadratic truth)"].append(losses)
        elif name.startswith("sim-"):
            buckets["other simulations"].append(losses)
        else:
            buckets["real scores"].append(losses)
        key = "N<=100" if n <= 100 else ("N<=1000" if n <= 1000 else "N>1000")
        buckets[key].append(losses)
        buckets["all"].append(losses)
    for key in ("all", "N<=100", "N<=1000", "N>1000", "bent (quadratic truth)",
                "other simulations", "real scores"):
        group = buckets[key]
        if not group:
            continue
        ll = np.array([[g[m] for m in methods] for g in group])
        ranks = np.array([rankdata(r) for r in ll])
        diff = ll - ll[:, [methods.index("platt-logit")]]
        print(f"\n{key}: {len(group)} tasks")
        print(f"{'method':26s} {'mean log loss':>14s} {'mean rank':>10s} {'vs platt-logit':>15s}"
              f" {'worse than platt-logit':>23s}")
        for j, m in enumerate(methods):
            print(f"{m:26s} {ll[:, j].mean():14.5f} {ranks[:, j].mean():10.2f} "
                  f"{diff[:, j].mean():+15.5f} {np.mean(diff[:, j] > 1e-12):23.0%}")


if __name__ == "__main__":
    main()
