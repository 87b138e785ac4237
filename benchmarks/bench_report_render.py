"""HTML report rendering time: each figure (built and written as inline SVG) and the whole page,
the former settings ("before": ``bbox_inches="tight"``, forecast histograms as 40 bar patches)
against the current ones, measured in the same run, interleaved, by CPU time; and the PNG plots
(``path=``: MLflow artifacts, monitor diagrams) written with and without the tight bbox.

    python benchmarks/bench_report_render.py [--repeats 3]

Cases: the three reports of ``tests/test_report_browser.py`` (a balanced binary set of 2,000
rows, a 2 %-positive set of 5,000 rows (its log-odds diagram too) and a 10-class set of 3,000
rows) and a report of a fitted isotonic calibrator with its calibration map (5,000 rows). Each
time is the best of ``--repeats`` CPU times (``time.process_time``: the machine may be shared);
"ratio" is before / now (above 1: now faster). The SVG sizes are those of the last repeat.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import time

import numpy as np


def _before_figure_svg(fig, prefix: str) -> str:
    """figure_svg as it was: the same post-processing, the SVG written with a tight bbox."""
    import matplotlib

    from mlcal.report import figures as F

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "mlcal", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = F._PROLOG.sub("", buf.getvalue())
    svg = F._NAMESPACES.sub("", svg)
    svg = re.sub(r'\bid="', f'id="{prefix}-', svg)
    svg = re.sub(r'href="#', f'href="#{prefix}-', svg)
    svg = svg.replace("url(#", f"url(#{prefix}-")
    svg = F._SIZE.sub(lambda m: f'<svg{m.group(1)} class="figure" '
                                f'style="max-width: {float(m.group(2)) * 4 / 3:.0f}px"', svg,
                      count=1)
    return svg.strip()


def _before_save(fig, path):
    """The plots' PNG writer as it was: a tight bbox."""
    if path is not None:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


def _before_histogram(hist, p, lo, hi, scale, color, name):
    """The forecast histogram as it was: 40 bar patches."""
    if scale == "logit":
        edges = 1 / (1 + np.exp(-np.linspace(np.log(lo / (1 - lo)), np.log(hi / (1 - hi)), 41)))
    else:
        edges = np.linspace(lo, hi, 41)
    hist.hist(np.clip(p, edges[0], edges[-1]), bins=edges, color=color, alpha=0.45, label=name)


@contextlib.contextmanager
def settings(which: str):
    from mlcal.plotting import corp, diagrams
    from mlcal.report import figures

    saved = (figures.figure_svg, diagrams._forecast_histogram, corp._forecast_histogram,
             diagrams._save, corp._save)
    if which == "before":
        figures.figure_svg = _before_figure_svg
        diagrams._forecast_histogram = corp._forecast_histogram = _before_histogram
        diagrams._save = corp._save = _before_save
    try:
        yield
    finally:
        (figures.figure_svg, diagrams._forecast_histogram, corp._forecast_histogram,
         diagrams._save, corp._save) = saved


def cases():
    from mlcal.calibrators import get_calibrator
    from mlcal.report.data import assemble_report

    def binary(shift, n, seed):
        rng = np.random.default_rng(seed)
        z = rng.normal(shift, 1.5, n)
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
        return y, 1 / (1 + np.exp(-1.8 * z)), 1 / (1 + np.exp(-z))

    y, b, a = binary(0.0, 2000, 1)
    yield "balanced", assemble_report(y, b, a, title="balanced", n_resamples=50)
    y, b, a = binary(-5.2, 5000, 2)
    yield "rare", assemble_report(y, b, a, title="rare", n_resamples=50)
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 1.2, (3000, 10))
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    yk = (proba.cumsum(1) < rng.uniform(size=(3000, 1))).sum(1)
    sharp = np.exp(2.5 * logits) / np.exp(2.5 * logits).sum(1, keepdims=True)
    yield "ten-class", assemble_report(yk, sharp, proba, title="ten-class", n_resamples=50,
                                       classes=[f"class {c}" for c in "ABCDEFGHIJ"])
    y, b, _ = binary(-1.0, 5000, 3)
    cal = get_calibrator("isotonic").fit(b, y)
    yield "with map", assemble_report(y, b, cal.predict(b), title="with map", n_resamples=50,
                                      calibrator=cal, map_data=(b, y))


def cpu(fn) -> tuple[float, object]:
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    from mlcal.report import figures
    from mlcal.report.html import render_html

    reports = list(cases())
    for _, rep in reports:                      # warm-up: imports, numba, mathtext caches
        for which in ("before", "now"):
            with settings(which):
                figures.report_figures(rep)
    fig_rows: dict[tuple[str, str], dict[str, list]] = {}
    page_rows: dict[str, dict[str, list]] = {}
    for _ in range(args.repeats):
        for name, rep in reports:
            for which in ("before", "now"):     # interleaved
                with settings(which):
                    calls = []
                    inner = figures.figure_svg

                    def timed(fig, prefix, inner=inner, calls=calls):
                        t, svg = cpu(lambda: inner(fig, prefix))
                        calls.append((prefix, t, len(svg)))
                        return svg

                    figures.figure_svg = timed
                    try:
                        t_page, html = cpu(lambda: render_html(rep))
                    finally:
                        figures.figure_svg = inner
                for prefix, t, size in calls:
                    d = fig_rows.setdefault((name, prefix), {"before": [], "now": []})
                    d[which].append((t, size))
                page_rows.setdefault(name, {"before": [], "now": []})[which].append(
                    (t_page, len(html)))

    print("per figure: SVG writing (figure_svg) CPU seconds, best of", args.repeats)
    print(f"{'report':10s} {'figure':6s} {'before s':>9s} {'now s':>7s} {'ratio':>6s} "
          f"{'before kB':>10s} {'now kB':>7s}")
    for (name, prefix), d in fig_rows.items():
        b, n = min(d["before"]), min(d["now"])
        print(f"{name:10s} {prefix:6s} {b[0]:9.3f} {n[0]:7.3f} {b[0] / n[0]:6.2f} "
              f"{d['before'][-1][1] / 1e3:10.0f} {d['now'][-1][1] / 1e3:7.0f}")
    print("\nwhole report: render_html (figures built and written, tables, page) CPU seconds")
    print(f"{'report':10s} {'before s':>9s} {'now s':>7s} {'ratio':>6s} {'before kB':>10s} "
          f"{'now kB':>7s}")
    tb = tn = 0.0
    for name, d in page_rows.items():
        b, n = min(d["before"]), min(d["now"])
        tb, tn = tb + b[0], tn + n[0]
        print(f"{name:10s} {b[0]:9.3f} {n[0]:7.3f} {b[0] / n[0]:6.2f} "
              f"{d['before'][-1][1] / 1e3:10.0f} {d['now'][-1][1] / 1e3:7.0f}")
    print(f"{'all four':10s} {tb:9.3f} {tn:7.3f} {tb / tn:6.2f}")
    png_plots(reports[-1][1], args.repeats)


def png_plots(rep, repeats: int) -> None:
    """The PNG plots log_calibration and the monitor write (built and saved to a file)."""
    import tempfile

    from mlcal.plotting import corp, diagrams

    plots = {"reliability_diagram": lambda path: diagrams.reliability_diagram(
                 rep.y, rep.p_before, rep.p_after, path=path),
             "corp_reliability_diagram": lambda path: corp.corp_reliability_diagram(
                 rep.y, rep.p_before, rep.p_after, path=path),
             "plot_map": lambda path: diagrams.plot_map(
                 rep.calibrator, scores=rep.map_data[0], y=rep.map_data[1], path=path)}
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats + 1):            # the first round warms up
            for name, plot in plots.items():
                for which in ("before", "now"):
                    with settings(which):
                        t, _ = cpu(lambda: plot(f"{tmp}/{name}.png"))
                    if r:
                        best[(name, which)] = min(best.get((name, which), t), t)
    print("\nPNG plots (the 'with map' data; built and written) CPU seconds")
    print(f"{'plot':26s} {'before s':>9s} {'now s':>7s} {'ratio':>6s}")
    for name in plots:
        b, n = best[(name, "before")], best[(name, "now")]
        print(f"{name:26s} {b:9.3f} {n:7.3f} {b / n:6.2f}")


if __name__ == "__main__":
    main()
