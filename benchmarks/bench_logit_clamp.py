"""The data-taken logit clamp (issue #26) before and after: held-out quality and map identity of
the logit-family methods and ``auto``, from two (or more) source trees.

    python benchmarks/bench_logit_clamp.py --trees /work/main <worktree> --only NB
    python benchmarks/bench_logit_clamp.py --trees /work/main <worktree> --groups linear trees

Each tree's mlcal runs in a process of its own (``PYTHONPATH=<tree>``) on bench_quality.py's real
tasks (``--groups``, ``--sizes``, ``--seeds``; ``--only`` keeps some base models, e.g. ``NB``
whose scores saturate far below ``2**-40``) and, with ``--sims``, its three simulations. Per
task and method (``beta``, ``platt-logit``, ``temperature``, ``quadratic``, ``auto``) it records
the held-out log loss (predictions clipped to ``[1e-15, 1 - 1e-15]`` as
bench_quadratic_saturated.py does), Brier score and AUC, the SHA-256 of the map's canonical JSON
and, for ``auto``, the chosen method.

Printed: per group of tasks (the saturated ones: a calibration score in ``(0, BETA_EPS)`` or
``(1 - BETA_EPS, 1)``; the other probability-score tasks; margin tasks), each tree's mean log
loss / Brier / AUC and mean AUC change against the raw scores, and on how many tasks the map's
JSON is byte-identical to the first tree's (and ``auto``'s choice the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

METHODS = ("beta", "platt-logit", "temperature", "quadratic", "auto")
BETA_EPS = 2.0 ** -40


def worker(args) -> None:
    """One JSON line: per task, the raw AUC, whether it saturates, and each method's figures."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_quality import real_tasks, sim_tasks
    from sklearn.metrics import log_loss, roc_auc_score

    import mlcal
    from mlcal.calibrators.catalog import get_calibrator

    def figures(y, p):
        p = np.clip(p, 1e-15, 1 - 1e-15)
        return [float(log_loss(y, p, labels=[0, 1])), float(np.mean((p - y) ** 2)),
                float(roc_auc_score(y, p))]

    tasks = list(real_tasks([int(n) for n in args.sizes], args.seeds, tuple(args.groups)))
    if args.only:
        tasks = [t for t in tasks if t.name.split("/")[1] in args.only]
    if args.sims:
        tasks += list(sim_tasks([int(n) for n in args.sizes], args.seeds, 20_000))
    out = []
    for t in tasks:
        s_cal = np.asarray(t.s_cal, dtype=float)
        probs = bool(s_cal.min() >= 0 and s_cal.max() <= 1)
        inner = s_cal[(s_cal > 0) & (s_cal < 1)]
        sat = probs and bool(((inner < BETA_EPS) | (inner > 1 - BETA_EPS)).any())
        row = {"task": t.name, "n": int(t.n_cal), "probs": probs, "saturated": sat,
               "auc_raw": float(roc_auc_score(t.y_test, t.s_test)), "m": {}}
        for method in METHODS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal = (mlcal.AutoCalibrator() if method == "auto"
                       else get_calibrator(method)).fit(s_cal, t.y_cal)
                p = cal.predict(np.asarray(t.s_test, dtype=float))
            doc = json.dumps(cal.map_.to_dict(), sort_keys=True).encode()
            row["m"][method] = {"fig": figures(t.y_test, p),
                                "sha": hashlib.sha256(doc).hexdigest()[:16],
                                "chosen": getattr(cal, "chosen_", None)}
        out.append(row)
    print(json.dumps(out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+")
    ap.add_argument("--sizes", type=float, nargs="+", default=[200, 300, 600, 1000])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--groups", nargs="+", default=["linear"])
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--sims", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return
    passthrough = ["--sizes", *map(str, args.sizes), "--seeds", str(args.seeds),
                   "--groups", *args.groups] + (["--only", *args.only] if args.only else []) \
        + (["--sims"] if args.sims else [])
    results = []
    for tree in args.trees:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker",
                              *passthrough], env=env, cwd=os.path.abspath(tree),
                             capture_output=True, text=True, check=True)
        results.append(json.loads(res.stdout.strip().splitlines()[-1]))
    first = results[0]
    groups = {"saturated probability scores": lambda r: r["saturated"],
              "other probability scores": lambda r: r["probs"] and not r["saturated"],
              "margins": lambda r: not r["probs"]}
    for gname, keep in groups.items():
        idx = [i for i, r in enumerate(first) if keep(r)]
        if not idx:
            continue
        bases = sorted({first[i]["task"].split("/")[-1] for i in idx})
        print(f"\n{gname}: {len(idx)} tasks ({', '.join(bases)})")
        print("| method | " + " | ".join(f"tree {k}: log loss / Brier / AUC / dAUC"
                                        for k in range(len(results)))
              + " | same JSON as tree 0 |")
        print("|---" * (len(results) + 2) + "|")
        for method in METHODS:
            cells = []
            for res in results:
                fig = np.array([res[i]["m"][method]["fig"] for i in idx])
                d_auc = np.mean([res[i]["m"][method]["fig"][2] - res[i]["auc_raw"] for i in idx])
                m = fig.mean(0)
                cells.append(f"{m[0]:.5f} / {m[1]:.5f} / {m[2]:.5f} / {d_auc:+.4f}")
            same = [sum(res[i]["m"][method]["sha"] == first[i]["m"][method]["sha"]
                        and res[i]["m"][method]["chosen"] == first[i]["m"][method]["chosen"]
                        for i in idx) for res in results[1:]]
            print(f"| {method} | " + " | ".join(cells) + " | "
                  + ", ".join(f"{s}/{len(idx)}" for s in same) + " |")
        for res in results[1:]:
            changed = [(first[i]["task"], first[i]["n"], first[i]["m"]["auto"]["chosen"],
                        res[i]["m"]["auto"]["chosen"]) for i in idx
                       if first[i]["m"]["auto"]["chosen"] != res[i]["m"]["auto"]["chosen"]]
            if changed:
                print("auto's choice changed: " + "; ".join(f"{t} N={n}: {a} -> {b}"
                                                            for t, n, a, b in changed))


if __name__ == "__main__":
    main()
