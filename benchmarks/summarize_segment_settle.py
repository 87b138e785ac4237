"""Paired tables for docs/segments.md "Eighth round": SegmentedCalibrator's default against
``shrinkage="regression"`` (and ``select="cv"``) and the references, over every draw measured.

Reads per-draw rows of ``bench_segments_report.py --json`` (``--rows``: files of this round,
every method taken) and cached rows of earlier rounds (``--refs``: only the methods named in
``--ref-methods`` are taken, by default global ``auto``, probcal and MCGrad, whose code has not
changed; an earlier file's ``mlcal auto off`` is an earlier default and is left out). A row
present in two files should agree to the last bit (deterministic fits on the same draws): the
disagreements are counted and printed (a cached global ``auto`` row differs where main's ``auto``
changed since; this round's value is used). Per set: each method's mean held-out log loss,
its ratio to global ``auto``, mean worst |O-E| and worst ECE; then paired differences (mean +-
SE over the draws both have, and in how many draws the first is lower).

    python benchmarks/summarize_segment_settle.py --rows a.json [...] --refs b.json [...]
"""

from __future__ import annotations

import argparse
import json
import math
import os

import numpy as np

DEFAULT = "mlcal auto off"
SETS = ("offsets", "slopes", "confounded", "null", "diabetes", "gapminder")


def load(paths, methods=None):
    out, clash = {}, 0
    for p in paths:
        if not os.path.exists(p):
            print(f"note: {p} missing (not measured yet)")
            continue
        with open(p) as f:
            for r in json.load(f):
                if methods is not None and r["method"] not in methods:
                    continue
                key = (r["set"], r["method"], r["draw"])
                if key in out and (out[key]["log_loss"], out[key]["worst_oe"]) != (
                        r["log_loss"], r["worst_oe"]):
                    clash += 1
                out.setdefault(key, r)
    return out, clash


def paired(rows, set_name, a, b, key):
    draws = sorted(d for (s, m, d) in rows if s == set_name and m == a
                   and (set_name, b, d) in rows)
    if len(draws) < 2:
        return "n/a", 0
    diff = np.array([rows[(set_name, a, d)][key] - rows[(set_name, b, d)][key] for d in draws])
    se = diff.std(ddof=1) / math.sqrt(diff.size)
    return f"{diff.mean():+.5f} +- {se:.5f} ({int((diff < 0).sum())}/{diff.size})", diff.size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="+", required=True)
    ap.add_argument("--refs", nargs="*", default=[])
    ap.add_argument("--ref-methods", nargs="*", default=["global auto", "probcal", "mcgrad"])
    ap.add_argument("--methods", nargs="*", default=[DEFAULT, "mlcal auto reg", "mlcal auto cv"])
    args = ap.parse_args()
    rows, c1 = load(args.rows)
    refs, c2 = load(args.refs, set(args.ref_methods))
    both = dict(refs)
    cross = 0
    for k, r in rows.items():
        if k in both and (both[k]["log_loss"], both[k]["worst_oe"]) != (r["log_loss"],
                                                                       r["worst_oe"]):
            cross += 1      # a method whose code changed since the cached run: --rows wins
        both[k] = r
    print(f"rows disagreeing: among --rows files {c1}, among --refs files {c2}, "
          f"--refs against --rows {cross} (the --rows value is used)")
    for set_name in SETS:
        present = [m for m in (*args.methods, "probcal", "mcgrad", "global auto")
                   if any(k[0] == set_name and k[1] == m for k in both)]
        if DEFAULT not in present:
            continue
        print(f"\n{set_name}")
        for m in present:
            ds = sorted(k[2] for k in both if k[0] == set_name and k[1] == m)
            g = [both[(set_name, "global auto", d)]["log_loss"] for d in ds
                 if (set_name, "global auto", d) in both]
            v = {k: np.mean([both[(set_name, m, d)][k] for d in ds])
                 for k in ("log_loss", "worst_oe", "worst_ece")}
            print(f"  {m:16} draws {len(ds):2d}  log loss {v['log_loss']:.5f} "
                  f"(x global {v['log_loss'] / np.mean(g):.4f})  worst|O-E| "
                  f"{v['worst_oe']:.4f}  worst ECE {v['worst_ece']:.4f}")
        for m in [x for x in args.methods if x in present]:
            for ref in [x for x in (DEFAULT, "global auto", "probcal", "mcgrad")
                        if x in present and x != m]:
                line = f"  {m:16} - {ref:14}"
                for key in ("log_loss", "worst_oe", "worst_ece"):
                    text, _ = paired(both, set_name, m, ref, key)
                    line += f"  {key} {text:26}"
                print(line)


if __name__ == "__main__":
    main()
