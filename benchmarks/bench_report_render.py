"""HTML report rendering time: each figure (built and written as inline SVG) and the whole page,
the former settings ("before": ``bbox_inches="tight"``, forecast histograms as 40 bar patches)
against the current ones, measured in the same run, interleaved, by CPU time; and the PNG plots
(``path=``: MLflow artifacts, monitor diagrams) written with and without the tight bbox.

    python benchmarks/bench_report_render.py [--repeats 3] [--map-rows 1000,10000,100000]

Cases: the three reports of ``tests/test_report_browser.py`` (a balanced binary set of 2,000
rows, a 2 %-positive set of 5,000 rows (its log-odds diagram too) and a 10-class set of 3,000
rows) and a report of a fitted isotonic calibrator with its calibration map (5,000 rows). Each
time is the best of ``--repeats`` CPU times (``time.process_time``: the machine may be shared);
"ratio" is before / now (above 1: now faster). The SVG sizes are those of the last repeat.

Calibration-map scatter by size (``--map-rows``): reports of a fitted isotonic calibrator with
its calibration data of 1e3, 1e4 and 1e5 rows, the data drawn as one SVG marker per row
("before": the plain ``ax.scatter``) against one marker per occupied pixel (now); the page's
size and its ``render_html`` CPU seconds, interleaved, best of ``--repeats``, and with Chromium
installed the CPU seconds headless Chromium spends loading and screenshotting the page (its
child processes' ``getrusage``; one load each).
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


def _before_scatter_data(ax, x, y):
    """The map's calibration data as they were drawn: one marker per row."""
    return ax.scatter(x, y, s=4, alpha=0.25, color="grey", label="calibration data")


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
def scatter_setting(which: str):
    """The map's calibration data one marker per row ("before") or per pixel ("now")."""
    from mlcal.plotting import diagrams

    saved = diagrams._scatter_data
    if which == "before":
        diagrams._scatter_data = _before_scatter_data
    try:
        yield
    finally:
        diagrams._scatter_data = saved


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
    ap.add_argument("--map-rows", default="1000,10000,100000",
                    help="row counts of the map-scatter table (comma-separated; empty: skip)")
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
    if args.map_rows:
        map_scatter([int(n) for n in args.map_rows.split(",")], args.repeats)


def map_report(n: int):
    from mlcal.calibrators import get_calibrator
    from mlcal.report.data import assemble_report

    rng = np.random.default_rng(3)
    z = rng.normal(-1.0, 1.5, n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    b = 1 / (1 + np.exp(-1.8 * z))
    cal = get_calibrator("isotonic").fit(b, y)
    return assemble_report(y, b, cal.predict(b), title=f"map {n}", n_resamples=20,
                           calibrator=cal, map_data=(b, y))


def chromium_cpu(html: str, name: str) -> float | None:
    """CPU seconds of a headless Chromium loading ``html`` and taking a full-page screenshot
    (kept as ``$MLCAL_REPORT_SCREENSHOTS/<name>.png`` when that is set)."""
    import os
    import resource
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.browser import find_chromium, render_page

    chromium = find_chromium()
    if chromium is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(html, encoding="utf-8")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = render_page(chromium, path, timeout=600.0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = os.environ.get("MLCAL_REPORT_SCREENSHOTS")
    if out:
        os.makedirs(out, exist_ok=True)
        Path(out, f"{name}.png").write_bytes(result.screenshot)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def map_scatter(rows: list[int], repeats: int) -> None:
    """The map report's size and rendering cost by number of calibration rows."""
    from mlcal.report.html import render_html

    reports = [(n, map_report(n)) for n in rows]
    best: dict[tuple[int, str], tuple[float, int]] = {}
    pages: dict[tuple[int, str], str] = {}
    for _ in range(repeats):
        for n, rep in reports:
            for which in ("before", "now"):     # interleaved
                with scatter_setting(which):
                    t, html = cpu(lambda: render_html(rep))
                old = best.get((n, which))
                best[(n, which)] = (min(t, old[0]) if old else t, len(html))
                pages[(n, which)] = html
    browser = {(n, which): chromium_cpu(html, f"map-{n}-{which}")
               for (n, which), html in pages.items()}
    print("\ncalibration-map scatter: one marker per row (before) or per pixel (now); the map "
          "report by rows\n(render_html CPU s, best of", repeats, "; page kB; Chromium load + "
          "screenshot CPU s, one load)")
    print(f"{'rows':>8s} {'before s':>9s} {'now s':>7s} {'ratio':>6s} {'before kB':>10s} "
          f"{'now kB':>7s} {'ratio':>6s} {'chrome before s':>16s} {'now s':>7s}")
    for n, _ in reports:
        b, w = best[(n, "before")], best[(n, "now")]
        cb, cn = browser[(n, "before")], browser[(n, "now")]
        chrome = (f"{cb:16.2f} {cn:7.2f}" if cb is not None and cn is not None
                  else f"{'(no chromium)':>16s} {'':7s}")
        print(f"{n:8d} {b[0]:9.3f} {w[0]:7.3f} {b[0] / w[0]:6.2f} {b[1] / 1e3:10.0f} "
              f"{w[1] / 1e3:7.0f} {b[1] / w[1]:6.1f} {chrome}")


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
