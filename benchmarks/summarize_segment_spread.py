"""Paired table for docs/segments.md "Seventh round": SegmentedCalibrator's default (REML spread,
``fold_shared="chosen"``) against the same fits with the spread ``tau^2`` by moments
(DerSimonian-Laird), moments with centre 0, and ``max(REML, moments)``.

Reads the per-draw rows of ``bench_segment_vs_probcal.py`` (``--rows``, one or more JSON files
with the ``auto cvfix ...`` variants) and the cached rows of ``bench_segments_report.py`` for
global ``auto``, probcal and MCGrad on the same draws (``--refs``; MCGrad is not rerun). Prints,
per set, each variant's paired difference to the default (mean +- SE over draws, and how many
draws are lower) in worst |O-E|, worst ECE and held-out log loss, its log loss relative to
global ``auto`` (ratio of mean log losses) and its worst |O-E| paired against probcal and MCGrad.

    python benchmarks/summarize_segment_spread.py --rows a.json [b.json ...] --refs c.json [...]
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

SIM = ("offsets", "slopes", "confounded", "null")
# the sixth round's default: with 60 segments (tau="auto") REML's plug-in; with 2 (diabetes)
# or 5 (gapminder) segments it averages over tau ("int mu"). Since the seventh round the
# default's plug-in is "auto cvfix dl 0" (shrinkage="moments"); on the real sets it is unchanged.
DEFAULT = {"sim": "auto cvfix reml mu", "real": "auto cvfix int mu"}
VARIANTS = ("auto cvfix dl mu", "auto cvfix dl 0", "auto cvfix reml 0", "auto cvfix max mu",
            "auto cvfix reml mu")


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows.extend(json.load(f))
    return {(r["set"], r["method"], r["draw"]): r for r in rows}


def paired(a, b):
    d = np.asarray(a) - np.asarray(b)
    return f"{d.mean():+.5f} +- {d.std(ddof=1) / math.sqrt(d.size):.5f} ({int((d < 0).sum())})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="+", required=True)
    ap.add_argument("--refs", nargs="+", required=True)
    args = ap.parse_args()
    rows, refs = load(args.rows), load(args.refs)
    for set_name in (*SIM, "diabetes", "gapminder"):
        default = DEFAULT["sim" if set_name in SIM else "real"]
        draws = sorted({k[2] for k in rows if k[0] == set_name and k[1] == default})
        if not draws:
            continue
        # the cached references must be the same draws: probcal reproduces to the last bit
        pc = [(rows.get((set_name, "probcal", d)), refs.get((set_name, "probcal", d)))
              for d in draws]
        same = all(a is None or b is None or a["worst_oe"] == b["worst_oe"] for a, b in pc)
        print(f"\n{set_name} ({len(draws)} draws; cached probcal rows identical: {same})")

        def col(method, key, src=rows):
            return [src[(set_name, method, d)][key] for d in draws]

        glob = np.mean(col("global auto", "log_loss", refs))
        print(f"  {'variant':22} worst|O-E|-default      worstECE-default       "
              f"logloss-default        ll/global  worst-probcal          worst-MCGrad")
        for m in dict.fromkeys((default, *VARIANTS)):    # the default first, once
            if not all((set_name, m, d) in rows for d in draws):
                continue
            line = f"  {m + (' (default)' if m == default else ''):22}"
            for k in ("worst_oe", "worst_ece", "log_loss"):
                line += f" {paired(col(m, k), col(default, k)):22}"
            line += f" {np.mean(col(m, 'log_loss')) / glob:.4f}"
            line += f"    {paired(col(m, 'worst_oe'), col('probcal', 'worst_oe', refs)):22}"
            line += f" {paired(col(m, 'worst_oe'), col('mcgrad', 'worst_oe', refs))}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
