"""The report's figures as inline SVG: matplotlib figures made self-contained for one HTML page.

Several SVGs inlined in one page share its id namespace, so every id (and every ``#id``
reference) of a figure gets the figure's own prefix; the XML prolog, DOCTYPE, RDF metadata and
namespace declarations (all of which name external URLs) are dropped -- the HTML parser puts
``<svg>`` in the SVG namespace by itself. Text is drawn as glyph outlines (matplotlib's
default), so a figure looks the same whatever fonts the viewer has.

Rendering time: the report's figures are laid out by matplotlib when they are built or drawn
(constrained layout, or ``tight_layout`` for the map), so the SVG is the figure's own canvas;
``bbox_inches="tight"`` would draw every figure twice (once to measure its ink) for a crop of a
few points of white margin. ``benchmarks/bench_report_render.py`` measures it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

import numpy as np

from mlcal.report.data import CalibrationReport

#: below this base rate (or above 1 minus it) the report adds log-odds-axis diagrams
RARE_EVENT_RATE = 0.1


@dataclass(frozen=True)
class ReportFigure:
    """One figure of a report: its anchor id, caption and inline SVG markup."""

    key: str
    caption: str
    svg: str


_PROLOG = re.compile(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<metadata>.*?</metadata>", re.S)
_NAMESPACES = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_SIZE = re.compile(r'<svg([^>]*?)\s+width="([0-9.]+)pt"\s+height="[^"]*"')


def figure_svg(fig, prefix: str) -> str:
    """``fig`` as an ``<svg>`` element for inlining in HTML, its ids prefixed by ``prefix``."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "mlcal", "svg.fonttype": "path"}):
        # no bbox_inches="tight": the figure's layout already fits its contents (module doc)
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = _PROLOG.sub("", buf.getvalue())
    svg = _NAMESPACES.sub("", svg)
    svg = re.sub(r'\bid="', f'id="{prefix}-', svg)
    svg = re.sub(r'href="#', f'href="#{prefix}-', svg)
    svg = svg.replace("url(#", f"url(#{prefix}-")
    # the viewBox keeps the aspect ratio; CSS fits the figure to the page, never wider than
    # its natural size (1 pt = 4/3 CSS px)
    svg = _SIZE.sub(lambda m: f'<svg{m.group(1)} class="figure" '
                              f'style="max-width: {float(m.group(2)) * 4 / 3:.0f}px"', svg,
                    count=1)
    return svg.strip()


def _rare(y: np.ndarray) -> bool:
    rate = float(np.mean(y))
    return min(rate, 1.0 - rate) < RARE_EVENT_RATE


def report_figures(report: CalibrationReport) -> list[ReportFigure]:
    """The figures of ``report``: CORP reliability diagrams (log-odds axes too for rare
    events; per class and top label for multiclass) and the calibration map."""
    from mlcal.plotting import plot_map
    from mlcal.plotting.corp import corp_reliability_diagram, plot_multiclass_corp_reliability

    s = report.summary["settings"]
    bins = {"n_bins": s["n_bins"], "strategy": s["strategy"]}
    out = []
    if report.multiclass:
        args = (report.y, report.p_before, report.p_after)
        fig = plot_multiclass_corp_reliability(*args, class_names=report.class_names,
                                               panels="top_label", **bins)
        out.append(ReportFigure(
            "reliability", "Top-label CORP reliability diagram: the confidence (largest class "
            "probability) against whether that class is right, before (red) and after (blue) "
            "calibration.", figure_svg(fig, "f1")))
        fig = plot_multiclass_corp_reliability(*args, class_names=report.class_names,
                                               panels="classes", **bins)
        out.append(ReportFigure(
            "reliability-classes", "Each class against the rest, before (red) and after "
            "(blue) calibration; panel titles give the class's MCB before \u2192 after.",
            figure_svg(fig, "f2")))
    else:
        fig = corp_reliability_diagram(report.y, report.p_before, report.p_after, **bins)
        out.append(ReportFigure(
            "reliability", "CORP reliability diagram before and after calibration.",
            figure_svg(fig, "f1")))
        if _rare(report.y):
            fig = corp_reliability_diagram(report.y, report.p_before, report.p_after,
                                           scale="logit", **bins)
            out.append(ReportFigure(
                "reliability-logit", "The same diagram on log-odds axes, which spread out "
                "the rare events near 0 (or 1).", figure_svg(fig, "f2")))
    if report.calibrator is not None and not report.multiclass:
        scores, labels = report.map_data if report.map_data is not None else (None, None)
        try:
            fig = plot_map(report.calibrator, scores=scores, y=labels)
        except ValueError:   # a map type without a plot
            fig = None
        if fig is not None:
            out.append(ReportFigure("map", "The calibration map over its fitted domain, with "
                                           "the calibration data (labels jittered at 0 and 1).",
                                    figure_svg(fig, "f3")))
    return out
