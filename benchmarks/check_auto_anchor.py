"""``AutoCalibrator(anchor="beta-temperature")`` (the implementation) against the replay's
guarded anchor (``tune_auto_smsbin.choose(..., "anchor-guarded", anchor_se)``, K = 300 rows,
fold seed 0) on a collection's tasks: the number of tasks where the chosen method or the
held-out log loss differ (docs/auto.md, "The temperature anchor").

    # the unseen tasks (the collection of tune_auto_smsbin.py --unseen-collect)
    PYTHONPATH=. python benchmarks/check_auto_anchor.py --collection /tmp/unseen.pkl --unseen
    # a suite's collection (tune_auto_rule.py's --sizes/--seeds/--groups of that collection)
    PYTHONPATH=. python benchmarks/check_auto_anchor.py --collection /tmp/fresh2.pkl \\
        --sizes 300 600 --seeds 4 --groups linear trees
"""

from __future__ import annotations

import argparse
import pickle
import sys
import warnings

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import tune_auto_rule as T  # noqa: E402
import tune_auto_smsbin as S  # noqa: E402
from mlcal import AutoCalibrator  # noqa: E402


def check(data, tasks, anchor_se=1.0, k=300):
    v = f"{S.TB}{k}"
    names = [v] + S.DEF
    # the collection's names of auto's candidates -> auto's candidate names
    alias = {v: "beta-temperature", S.K100: "beta", T.ADOPTED_QUADRATIC: "quadratic"}
    if len(tasks) != len(data) or any(t.name != d["task"] or t.n_cal != d["n"]
                                      for t, d in zip(tasks, data)):
        raise SystemExit("not the tasks of the loaded collection")
    differ, anchored, guarded = 0, 0, 0
    for task, d in zip(tasks, data):
        record = dict(d, reps=d["reps"][:1])
        want = S.choose(record, names, "anchor-guarded", anchor_se)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = AutoCalibrator(anchor="beta-temperature", anchor_se=anchor_se,
                                 anchor_prior=float(k)).fit(
                np.asarray(task.s_cal, dtype=float), task.y_cal)
        anchored += cal.chosen_ == "beta-temperature"
        guarded += cal.selection_["anchor"]["guard"] is not None
        ll = T.log_loss(task.y_test, cal.predict(task.s_test))
        if cal.chosen_ != alias.get(want, want) or abs(ll - d["held"][want][0]) > 1e-9:
            differ += 1
            print(f"  {task.name} N={task.n_cal}: auto {cal.chosen_} {ll:.6f}, replay "
                  f"{alias.get(want, want)} {d['held'][want][0]:.6f}")
    print(f"check: {len(tasks) - differ} of {len(tasks)} tasks agree (choice and held-out "
          f"log loss); anchor chosen on {anchored}, guard applied on {guarded}")
    return differ


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collection", required=True)
    ap.add_argument("--unseen", action="store_true", help="the unseen tasks")
    ap.add_argument("--sizes", nargs="+", default=["300", "600"])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--groups", nargs="+", default=["linear", "trees"])
    ap.add_argument("--anchor-se", type=float, default=1.0)
    args = ap.parse_args()
    with open(args.collection, "rb") as fh:
        data = pickle.load(fh)   # a collection this project's tune_auto_rule.py wrote
    tasks = list(S.unseen_tasks()) if args.unseen else T.make_tasks(args)
    check(data, tasks, args.anchor_se)


if __name__ == "__main__":
    main()
