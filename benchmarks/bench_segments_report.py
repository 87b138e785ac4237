"""Segmented calibration, issue #30's measurement: per method, the held-out global log loss,
the worst segment's calibration error and the fit time, with ratios measured in the same run.

    python benchmarks/bench_segments_report.py [--rows 20000] [--repeats 1] [--real-repeats 10]
        [--big] [--big-rows 1000000] [--with-multicalibration WORKTREE]
        [--scenarios slopes confounded] [--draws 0-19] [--json results.json] [--summarize]

``--json PATH`` saves every (set, draw, method) result to ``PATH`` as soon as it is measured
(rewritten atomically after each one) and skips those already in the file, so a long run (MCGrad
on 20 draws: hours) can be stopped and resumed and a partial run is usable. Simulated draws are
taken draw by draw across ``--scenarios`` (draw ``r`` is seed ``r``, as in ``--repeats``:
``--draws 0-19`` is ``--repeats 20``), so a partial run is balanced between scenarios.
``--real-draws 0-29`` adds those random splits of ``--real-sets`` (after the simulated draws;
``--scenarios`` with no name: real sets only). ``--summarize`` (with ``--json``) measures nothing and prints, per set, each method's mean log
loss, worst |O-E| and worst ECE over the draws that every method finished, and the PAIRED
difference of each method to MCGrad (or ``--reference``; mean, its standard error, and the
draws where the method is lower).

Methods: the global ``auto`` map (``mlcal.AutoCalibrator``, no segments: the log-loss
reference), mlcal's ``SegmentedCalibrator`` variants (``... off``, ``mlcal offsets`` and
``mlcal +slopes``: the default ``select="off"``, always adjusting; ``... cv``:
``select="cv"``, the cross-validated choice; ``+sl``:
``min_rows_for_slope=200``), probcal's ``SegmentedCalibrator``,
Meta's MCGrad (the segment as its categorical feature), and ``mlcal.Multicalibration`` (boosted
corrections on the segment and ``logit(score)``) when ``mlcal.multicalibration`` imports; the
peers are optional (a printed note when missing), see ``bench_segmented.contenders``.

Worst-segment error (:func:`mlcal.metrics.segment_report` on the held-out rows): among segments
with at least ``--min-rows`` held-out rows (default 100 simulated, 30 real; smaller segments
are too noisy to rank), the largest ``|observed rate - mean prediction|`` ("worst |O-E|") and
the largest segment ECE (10 equal-width bins; "worst ECE"). Both include sampling noise (a
perfectly calibrated model's |O-E| has standard deviation ``sqrt(p(1-p)/n)``, 0.05 at 100 rows),
which is why the simulated scenarios also show the **oracle** (the true probabilities): the
floor no method can beat on average.

Data. Simulated: ``bench_segmented.simulate`` (scenarios offsets, slopes, confounded, null;
half the rows fit, half score). Real (no download; both ship inside installed packages):

* ``diabetes``: scikit-learn's bundled diabetes data (442 patients, BSD-3 licence with
  scikit-learn; Efron et al. 2004). Label: disease progression above its median; segment:
  ``sex`` (2 values); the base model is a logistic regression on the nine other features.
* ``gapminder``: the Gapminder extract bundled with plotly (1,704 country-years, MIT licence with
  plotly; data from gapminder.org, CC BY 4.0). Label: life expectancy above 60 years; segment:
  ``continent`` (5 values); base model: logistic regression on log GDP per capita, year and
  log population (not the continent).

Each real set is split at random into thirds (base model, calibration, held out), repeated
``--real-repeats`` times; the tables show means over the splits.

``--big``: one fit each at ``--big-rows`` simulated rows (offsets scenario, ``--big-segments``
segments) of the global ``auto`` map, mlcal's SegmentedCalibrator (the default ``auto`` and
``beta``, cross-fitted and in-sample; ``--big-extra`` adds others), probcal and MCGrad (last),
with wall and CPU seconds and their ratios to MCGrad's and global ``auto``'s (issue #30: within
3x MCGrad). MCGrad may take many minutes there; ``--big-skip mcgrad`` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlcal  # noqa: E402
from bench_segmented import contenders, log_loss, simulate_with_truth  # noqa: E402
from mlcal.metrics import segment_report  # noqa: E402

GLOBAL = "global auto"
SCENARIOS = ("offsets", "slopes", "confounded", "null")


def worst_segment_errors(y, p, seg, min_rows: int) -> tuple[float, float]:
    """(worst |O - E|, worst ECE) among the segments with at least ``min_rows`` rows."""
    eligible = segment_report(y, p, seg, min_segment_rows=min_rows).eligible
    return (max(abs(s["citl"]) for s in eligible), max(s["ece"] for s in eligible))


def add_multicalibration(runs: dict, worktree: str | None) -> None:
    """Add ``mlcal.Multicalibration`` when ``mlcal.multicalibration`` imports (optionally found
    in another worktree's ``mlcal`` package: only that subpackage is taken from there)."""
    if worktree:
        mlcal.__path__.append(os.path.join(os.path.abspath(worktree), "mlcal"))
    try:
        from mlcal.multicalibration import Multicalibration
    except ImportError as exc:
        print(f"note: mlcal.multicalibration does not import ({exc}); its rows are skipped")
        return

    def run(s, y, g, st, gt):
        return Multicalibration(random_state=0).fit(s, y, {"segment": g}).predict(
            st, {"segment": gt})

    runs["multicalibration"] = run


def methods(args) -> dict:
    runs = {GLOBAL: lambda s, y, g, st, gt: mlcal.AutoCalibrator().fit(s, y).predict(st)}
    runs.update({k: v for k, v in contenders().items() if k in args.methods})
    add_multicalibration(runs, args.with_multicalibration)
    return runs


def real_sets():
    """Yield (name, base-model features, labels, segment keys) of each packaged real set."""
    from sklearn.datasets import load_diabetes

    d = load_diabetes(as_frame=True)
    X = d.data
    yield ("diabetes", X.drop(columns="sex").to_numpy(),
           (d.target > d.target.median()).to_numpy().astype(int),
           np.where(X["sex"].to_numpy() > 0, "s1", "s0"))
    try:
        import plotly.data
        gm = plotly.data.gapminder()
    except ImportError:
        print("note: plotly is not installed; the gapminder set is skipped")
        return
    feats = np.column_stack([np.log(gm["gdpPercap"]), gm["year"], np.log(gm["pop"])])
    yield ("gapminder", feats, (gm["lifeExp"] > 60).to_numpy().astype(int),
           gm["continent"].to_numpy().astype(str))


def real_draws(repeats: int):
    """Per real set, ``repeats`` random thirds: base-model scores for calibration and held-out
    rows."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    for name, X, y, seg in real_sets():
        draws = []
        for r in range(repeats):
            part = np.random.default_rng(1000 + r).integers(0, 3, y.size)
            base = make_pipeline(StandardScaler(), LogisticRegression()).fit(
                X[part == 0], y[part == 0])
            s = base.predict_proba(X)[:, 1]
            draws.append((s, y, seg, part == 1, part == 2, None))
        yield name, draws


def simulated_draws(args):
    for scenario in ("offsets", "slopes", "confounded", "null"):
        draws = []
        for r in range(args.repeats):
            s, y, g, train, truth = simulate_with_truth(scenario, args.segments, args.rows, r)
            draws.append((s, y, g, train, ~train, truth))
        yield scenario, draws


def evaluate(label: str, draws, runs: dict, min_rows: int) -> None:
    acc = {k: [] for k in runs}
    oracle = []
    for s, y, g, fit, test, truth in draws:
        if truth is not None:
            oracle.append((log_loss(y[test], truth[test]),
                           *worst_segment_errors(y[test], truth[test], g[test], min_rows)))
        for name, run in runs.items():
            t0 = time.perf_counter()
            p = np.asarray(run(s[fit], y[fit], g[fit], s[test], g[test]), dtype=float)
            secs = time.perf_counter() - t0
            acc[name].append((log_loss(y[test], p),
                              *worst_segment_errors(y[test], p, g[test], min_rows), secs))
    ref = np.mean(acc[GLOBAL], axis=0)
    rows = [(name, *np.mean(v, axis=0)) for name, v in acc.items()]
    if oracle:
        rows.append(("oracle (truth)", *np.mean(oracle, axis=0), np.nan))
    for name, ll, citl, ece, secs in rows:
        print(f"{label:11} {name:18} {ll:9.5f} {ll / ref[0]:8.4f} {citl:10.4f} {ece:10.4f} "
              f"{secs:8.2f} {secs / ref[3]:8.1f}", flush=True)


def parse_draws(text: str) -> list[int]:
    """``"0-19"`` or ``"0,3,5-7"`` -> the draw indices."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def load_records(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def save_records(path: str, records: list[dict]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(records, f, indent=0)
    os.replace(tmp, path)


def incremental(args, runs: dict) -> None:
    """Measure draw by draw, saving each (set, draw, method) result to ``args.json``."""
    records = load_records(args.json)
    done = {(r["set"], r["draw"], r["method"]) for r in records}
    jobs = []          # (set, draw, min rows, draw factory)
    for r in parse_draws(args.draws or f"0-{args.repeats - 1}"):
        for scenario in args.scenarios:
            jobs.append((scenario, r, args.min_rows,
                         (lambda sc, r: lambda: simulate_with_truth(sc, args.segments,
                                                                    args.rows, r))(scenario, r)))
    if args.real_draws:
        real = parse_draws(args.real_draws)
        for name, draws in real_draws(max(real) + 1):
            if name in args.real_sets:
                for r in real:
                    s, y, g, fit, test, _ = draws[r]
                    jobs.append((name, r, args.real_min_rows,
                                 (lambda d: lambda: (d[0][d[3] | d[4]], d[1][d[3] | d[4]],
                                                     d[2][d[3] | d[4]], d[3][d[3] | d[4]],
                                                     None))(draws[r])))
    for set_name, draw, min_rows, make in jobs:
        names = [*runs] + (["oracle (truth)"] if set_name in SCENARIOS else [])
        todo = [m for m in names if (set_name, draw, m) not in done]
        if not todo:
            continue
        s, y, g, train, truth = make()
        test = ~train
        for name in todo:
            t0 = time.perf_counter()
            if name == "oracle (truth)":
                p, secs = truth[test], float("nan")
            else:
                p = np.asarray(runs[name](s[train], y[train], g[train], s[test], g[test]),
                               dtype=float)
                secs = time.perf_counter() - t0
            citl, ece = worst_segment_errors(y[test], p, g[test], min_rows)
            records.append({"set": set_name, "draw": draw, "method": name,
                            "log_loss": log_loss(y[test], p), "worst_oe": citl,
                            "worst_ece": ece, "fit_s": secs})
            save_records(args.json, records)
            print(f"{set_name:11} draw {draw:2d} {name:18} {records[-1]['log_loss']:9.5f} "
                  f"{citl:8.4f} {ece:8.4f} {secs:8.2f}", flush=True)


def summarize(path: str, reference: str = "mcgrad") -> None:
    """Per set: means over the draws every method finished, and paired differences to
    ``reference``."""
    records = load_records(path)
    sets = list(dict.fromkeys(r["set"] for r in records))
    keys = ("log_loss", "worst_oe", "worst_ece")
    for set_name in sets:
        rs = [r for r in records if r["set"] == set_name]
        names = list(dict.fromkeys(r["method"] for r in rs))
        by = {(r["method"], r["draw"]): r for r in rs}
        draws = sorted(d for d in {r["draw"] for r in rs}
                       if all((m, d) in by for m in names))
        if not draws:
            continue
        print(f"\n{set_name}: {len(draws)} draws ({draws[0]}-{draws[-1]}) with every method")
        glob = np.mean([by[(GLOBAL, d)]["log_loss"] for d in draws]) \
            if GLOBAL in names else np.nan
        print(f"{'method':18} {'log loss':>9} {'x global':>8} {'worst|O-E|':>10} "
              f"{'worst ECE':>9} {'fit s':>7}   paired - {reference} (mean +- SE; wins/draws)")
        for m in names:
            v = {k: np.array([by[(m, d)][k] for d in draws]) for k in (*keys, "fit_s")}
            line = (f"{m:18} {v['log_loss'].mean():9.5f} {v['log_loss'].mean() / glob:8.4f} "
                    f"{v['worst_oe'].mean():10.4f} {v['worst_ece'].mean():9.4f} "
                    f"{np.nanmean(v['fit_s']) if np.isfinite(v['fit_s']).any() else np.nan:7.2f}")
            if reference in names and m != reference:
                parts = []
                for k in keys:
                    diff = v[k] - np.array([by[(reference, d)][k] for d in draws])
                    se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else np.nan
                    parts.append(f"{k} {diff.mean():+.4f} +- {se:.4f} "
                                 f"({int((diff < 0).sum())}/{diff.size})")
                line += "   " + "; ".join(parts)
            print(line, flush=True)


def big(args) -> None:
    from bench_segmented import simulate

    s, y, g, train = simulate("offsets", args.big_segments, args.big_rows, seed=0)
    print(f"\nfit time at {y.size} rows, {args.big_segments} segments (offsets scenario, "
          f"one fit each; wall seconds and this process's CPU seconds, all threads)",
          flush=True)
    fits = {
        "global auto": lambda: mlcal.AutoCalibrator().fit(s, y),
        "mlcal auto cv": lambda: mlcal.SegmentedCalibrator().fit(s, y, g),
        "mlcal auto in-sam": lambda: mlcal.SegmentedCalibrator("auto", n_folds=None).fit(
            s, y, g),
        "mlcal beta cv": lambda: mlcal.SegmentedCalibrator("beta").fit(s, y, g),
        "mlcal beta in-sam": lambda: mlcal.SegmentedCalibrator("beta", n_folds=None).fit(
            s, y, g),
    }
    for extra in args.big_extra:
        # "name=key:value,key:value" SegmentedCalibrator parameters (None, ints, floats or
        # strings)
        name, _, spec = extra.partition("=")
        kw = {}
        for item in filter(None, spec.split(",")):
            k, _, v = item.partition(":")
            if v == "None":
                kw[k] = None
                continue
            try:
                kw[k] = int(v)
            except ValueError:
                try:
                    kw[k] = float(v)
                except ValueError:
                    kw[k] = v
        fits[name] = (lambda kw: lambda: mlcal.SegmentedCalibrator(**kw).fit(s, y, g))(kw)
    peers = contenders()
    # the peers last: MCGrad takes many minutes, and every mlcal figure is printed before it
    for name in ("probcal", "mcgrad"):
        if name in peers and name not in args.big_skip:
            # fit, then predict ten rows (the fit is the cost)
            fits[name] = (lambda run: lambda: run(s, y, g, s[:10], g[:10]))(peers[name])
    small = simulate("offsets", 5, 2000, seed=99)     # compile the kernels untimed
    for method in ("beta", "auto"):
        mlcal.SegmentedCalibrator(method).fit(*small[:3])
    mlcal.AutoCalibrator().fit(*small[:2])
    times = {}
    for name, fit in fits.items():
        if name in args.big_skip:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        fit()
        times[name] = (time.perf_counter() - t0, time.process_time() - c0)
        print(f"{name:18} {times[name][0]:9.1f} s wall {times[name][1]:9.1f} s CPU", flush=True)
    print("\nratios (wall; CPU)")
    for name, (wall, cpu) in times.items():
        parts = [f"{name:18} {wall:9.1f} s {cpu:9.1f} s CPU"]
        for ref in ("mcgrad", "global auto"):
            if ref in times:
                parts.append(f"x {ref} {wall / times[ref][0]:6.3f}; {cpu / times[ref][1]:6.3f}")
        print("   ".join(parts), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--segments", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--real-repeats", type=int, default=10)
    ap.add_argument("--min-rows", type=int, default=100, help="simulated sets")
    ap.add_argument("--real-min-rows", type=int, default=30)
    ap.add_argument("--methods", nargs="*", default=[
        "mlcal offsets", "mlcal +slopes", "mlcal beta cv", "mlcal beta+sl cv", "mlcal auto off",
        "mlcal auto cv", "mlcal auto+sl cv", "probcal", "mcgrad"])
    ap.add_argument("--no-simulated", action="store_true")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--with-multicalibration", metavar="WORKTREE", default=None)
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--big-only", action="store_true")
    ap.add_argument("--big-rows", type=int, default=1_000_000)
    ap.add_argument("--big-segments", type=int, default=50)
    ap.add_argument("--big-skip", nargs="*", default=[])
    ap.add_argument("--big-extra", nargs="*", default=[],
                    help='--big: further SegmentedCalibrator fits, "name=key:value,..."')
    ap.add_argument("--scenarios", nargs="*",
                    default=["offsets", "slopes", "confounded", "null"])
    ap.add_argument("--draws", default=None, help='e.g. "0-19" (with --json)')
    ap.add_argument("--real-draws", default=None,
                    help='with --json: also these splits of --real-sets, e.g. "0-29"')
    ap.add_argument("--real-sets", nargs="*", default=["diabetes", "gapminder"])
    ap.add_argument("--json", default=None, help="save/resume per-draw results here")
    ap.add_argument("--summarize", action="store_true", help="print the --json file's table")
    ap.add_argument("--reference", default="mcgrad",
                    help="--summarize: the method of the paired differences")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.json, args.reference)
        return
    runs = methods(args)
    if args.json:
        draw = next(simulated_draws(argparse.Namespace(segments=5, rows=2000, repeats=1)))[1][0]
        s, y, g, fit, test, _ = draw      # compile the kernels untimed
        for run in runs.values():
            run(s[fit], y[fit], g[fit], s[test], g[test])
        incremental(args, runs)
        return
    if not args.big_only:
        draw = next(simulated_draws(argparse.Namespace(segments=5, rows=2000, repeats=1)))[1][0]
        s, y, g, fit, test, _ = draw      # compile the kernels untimed
        for run in runs.values():
            run(s[fit], y[fit], g[fit], s[test], g[test])
        print(f"{'set':11} {'method':18} {'log loss':>9} {'x global':>8} {'worst|O-E|':>10} "
              f"{'worst ECE':>10} {'fit s':>8} {'x global':>8}")
    if not (args.no_simulated or args.big_only):
        print(f"# simulated: {args.rows} rows, {args.segments} segments, {args.repeats} "
              f"draw(s); segments with >= {args.min_rows} held-out rows")
        for scenario, draws in simulated_draws(args):
            evaluate(scenario, draws, runs, args.min_rows)
    if not (args.no_real or args.big_only):
        print(f"# real: {args.real_repeats} random splits into thirds; segments with >= "
              f"{args.real_min_rows} held-out rows")
        for name, draws in real_draws(args.real_repeats):
            evaluate(name, draws, runs, args.real_min_rows)
    if args.big or args.big_only:
        big(args)


if __name__ == "__main__":
    main()
