"""Does a change to ``auto``'s fitting code keep its choices? ``auto``'s chosen method and every
candidate's CV log loss on the same data sets, from two (or more) source trees.

    python benchmarks/compare_auto_choices.py --trees /work/main <worktree>

Each tree's mlcal runs in a process of its own (``PYTHONPATH=<tree>``) on the three
simulations of ``bench_quality`` at 200 to 1e5 rows with two seeds (20 data sets by default).
Prints one row per data set: the choice in each tree and the largest relative change of a
candidate's CV log loss against the first tree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

KINDS = ("sim-beta", "sim-overconfident", "sim-imbalanced")
SIZES = (200, 2_000, 20_000, 100_000)


def cases(sizes) -> list[tuple[str, int, int]]:
    out = [(kind, n, seed) for kind in KINDS for n in sizes for seed in (0, 1)]
    return [c for c in out if not (c[0] == "sim-imbalanced" and c[1] == 200)]   # (no CV)


def worker(sizes) -> None:
    """One JSON line: per case, the choice and the candidates' CV log losses."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import mlcal
    from bench_quality import simulated

    out = {}
    for kind, n, seed in cases(sizes):
        s, y = simulated(kind, n, np.random.default_rng(seed))
        auto = mlcal.AutoCalibrator().fit(s, y)
        out[f"{kind} {n} {seed}"] = {
            "chosen": auto.chosen_,
            "cv": {r["method"]: r.get("cv_log_loss") for r in auto.selection_["candidates"]}}
    print(json.dumps(out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", required=False)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.sizes)
        return
    results = []
    for tree in args.trees:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--sizes",
                              *map(str, args.sizes)], env=env, cwd=os.path.abspath(tree),
                             capture_output=True, text=True, check=True)
        results.append(json.loads(res.stdout.strip().splitlines()[-1]))
    first = results[0]
    print("| data set | " + " | ".join(f"chosen ({t})" for t in args.trees) +
          " | max relative CV log-loss change |")
    print("|---" * (len(args.trees) + 2) + "|")
    same, worst = 0, 0.0
    for key in first:
        change = 0.0
        for other in results[1:]:
            for m, v in first[key]["cv"].items():
                w = other[key]["cv"].get(m)
                if v is not None and w is not None:
                    change = max(change, abs(w - v) / abs(v))
        worst = max(worst, change)
        choices = [r[key]["chosen"] for r in results]
        same += len(set(choices)) == 1
        print(f"| {key} | " + " | ".join(choices) + f" | {change:.1e} |")
    print(f"\nsame choice on {same} of {len(first)} data sets; largest relative CV log-loss "
          f"change {worst:.1e}")


if __name__ == "__main__":
    main()
