"""CORP reliability diagrams with consistency bands (matplotlib, imported only when called).

Each panel draws the CORP curve (isotonic recalibration, :mod:`mlcal.metrics.reliability_bands`) as a
solid line, its consistency band as a shaded area around the diagonal (where a calibrated
forecaster's curve would fall), the binned fractions of positives as hollow markers with each
bin's item count, and the forecasts' histogram underneath. ``scale="logit"`` and ``zoom=True``
spread out rare events as in :func:`mlcal.plotting.reliability_diagram`.

Binary: one panel per series (before | after), sharing their axes. Multiclass: one
one-vs-rest panel per class and a top-label panel (confidence against "the top label is
right"), the series overlaid; ``scale``/``zoom`` apply to every panel, each on its own range.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mlcal.metrics import reliability_curve
from mlcal.metrics.decomposition import corp_decomposition
from mlcal.plotting.diagrams import (SCALES, _annotate_counts, _forecast_histogram, _limits,
                            _multiclass_inputs, _save, _set_axes_range)
from mlcal.metrics.reliability_bands import (DEFAULT_BAND_LEVEL, DEFAULT_BAND_RESAMPLES, CorpCurve,
                                     corp_curve)

#: most points of a drawn band outline (its envelope over groups of cells beyond that), which
#: keeps an SVG figure small whatever the number of rows
MAX_DRAWN_BAND_POINTS = 300
COLOURS = ("tab:red", "tab:blue")
MULTICLASS_PANELS = ("all", "top_label", "classes")


def _curve_outline(c: CorpCurve) -> tuple[np.ndarray, np.ndarray]:
    """The CORP curve reduced to each constant block's first and last forecast (the curve is
    linear between blocks), so it draws in O(blocks) points."""
    change = np.flatnonzero(np.diff(c.fitted)) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change - 1, [c.x.size - 1]))
    idx = np.unique(np.concatenate((starts, ends)))
    return c.x[idx], c.fitted[idx]


def _band_outline(c: CorpCurve) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The band with at most MAX_DRAWN_BAND_POINTS points: over groups of consecutive cells
    the lowest lower and highest upper bound (never narrower than computed)."""
    m = c.band_x.size
    if m <= MAX_DRAWN_BAND_POINTS:
        return c.band_x, c.band_lower, c.band_upper
    starts = np.linspace(0, m, MAX_DRAWN_BAND_POINTS, endpoint=False).astype(np.int64)
    return (np.add.reduceat(c.band_x, starts) / np.diff(np.append(starts, m)),
            np.minimum.reduceat(c.band_lower, starts), np.maximum.reduceat(c.band_upper, starts))


def _draw_panel(ax, hist, series, curves, lo: float, hi: float, *, scale: str, n_bins: int,
                strategy: str, show_counts: bool, fontsize: float,
                legend: bool = True) -> list[float]:
    """Draw ``series`` = [(y, p, name, colour)] with their ``curves`` on ``ax``/``hist``;
    returns each series' CORP miscalibration (MCB, Brier)."""
    mcbs = []
    diag = np.linspace(lo, hi, 200)
    ax.plot(diag, diag, ls="--", color="grey", lw=1, label="perfectly calibrated")
    level = curves[0].level
    for (y, p, name, colour), c, shift in zip(series, curves, (-1, 1)):
        bx, blo, bup = _band_outline(c)
        ax.fill_between(bx, blo, bup, color=colour, alpha=0.15, lw=0,
                        label=f"{name}: {level:.0%} consistency band")
        cx, cy = _curve_outline(c)
        mcb = corp_decomposition(y, p).mcb
        mcbs.append(mcb)
        ax.plot(cx, cy, color=colour, lw=1.8, label=f"{name}: CORP curve (MCB {mcb:.4f}, "
                                                     f"n={p.size})")
        b = reliability_curve(y, p, n_bins, strategy)
        ax.plot(b["mean_predicted"], b["fraction_positive"], ls="none", marker="o", ms=4.5,
                mfc="white", mec=colour, mew=1.2, label=f"{name}: {n_bins} {strategy} bins")
        if show_counts:
            _annotate_counts(ax, b["mean_predicted"], b["fraction_positive"], b["count"], shift,
                             fontsize, colour)
        _forecast_histogram(hist, p, lo, hi, scale, colour, name)
    _set_axes_range(ax, hist, lo, hi, scale)
    axis_note = " (log-odds axis)" if scale == "logit" else ""
    ax.set_ylabel("observed frequency" + axis_note, fontsize=fontsize + 1)
    if legend:
        ax.legend(loc="upper left", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    hist.tick_params(labelsize=fontsize)
    hist.set_xlabel("forecast probability" + axis_note, fontsize=fontsize + 1)
    hist.set_ylabel("count", fontsize=fontsize + 1)
    if max(p.size for _, p, _, _ in series) >= 1000:
        hist.set_yscale("log")  # large samples: keep sparse tails visible next to the bulk
        from matplotlib.ticker import NullFormatter

        hist.yaxis.set_minor_formatter(NullFormatter())   # no "4 x 10^1" clutter
    return mcbs


def _extent(curves: list[CorpCurve], series) -> list[np.ndarray]:
    out = []
    for c, (y, p, _, _) in zip(curves, series):
        out += [c.x, c.fitted]
    return out


def corp_reliability_diagram(y, p_before, p_after=None, *,
                             labels: Sequence[str] = ("uncalibrated", "calibrated"),
                             level: float = DEFAULT_BAND_LEVEL,
                             n_resamples: int = DEFAULT_BAND_RESAMPLES, seed: int = 0,
                             n_bins: int = 10, strategy: str = "uniform",
                             scale: str = "linear", zoom: bool = False,
                             show_counts: bool = True, title: str | None = None,
                             path: str | None = None):
    """CORP reliability diagram with consistency bands: one panel per series.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p_before : array-like of shape (n,)
        Forecast probabilities (e.g. before calibration).
    p_after : array-like of shape (n,), optional
        A second series (e.g. after calibration), drawn in its own panel on the same axes.
    labels : two strings
        Names of the series.
    level, n_resamples, seed
        The consistency band (:func:`mlcal.metrics.reliability_bands.consistency_band`).
    n_bins, strategy
        The binned points drawn with their counts (:func:`mlcal.metrics.reliability_curve`).
    scale : {"linear", "logit"}, default="linear"
        "logit" draws both axes in log-odds (rare events).
    zoom : bool, default=False
        Linear scale limited to the range of the forecasts and the curves.
    show_counts : bool, default=True
        Write each bin's item count next to its marker.
    title : str, optional
    path : str, optional
        Write the figure as PNG here.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    y = np.asarray(y, dtype=np.float64)
    series = [(y, np.asarray(p_before, dtype=np.float64), labels[0], COLOURS[0])]
    if p_after is not None:
        series.append((y, np.asarray(p_after, dtype=np.float64), labels[1], COLOURS[1]))
    curves = [corp_curve(yy, p, level=level, n_resamples=n_resamples, seed=seed)
              for yy, p, _, _ in series]
    lo, hi = _limits(_extent(curves, series), scale, zoom)
    fig = Figure(figsize=(5.4 * len(series), 6.4), layout="constrained")
    grid = fig.add_gridspec(1, len(series))
    for i, (s, c) in enumerate(zip(series, curves)):
        ax, hist = grid[0, i].subgridspec(2, 1, height_ratios=[3, 1], hspace=0.06).subplots(
            sharex=True)
        _draw_panel(ax, hist, [s], [c], lo, hi, scale=scale, n_bins=n_bins, strategy=strategy,
                    show_counts=show_counts, fontsize=8)
        ax.set_title(s[2], fontsize=10)
    fig.suptitle(title or "CORP reliability diagram"
                 + (" (log-odds axes)" if scale == "logit" else ""), fontsize=11)
    return _save(fig, path)


def plot_multiclass_corp_reliability(y, proba, proba_after=None, *,
                                     class_names: Sequence[str] | None = None,
                                     labels: Sequence[str] = ("uncalibrated", "calibrated"),
                                     level: float = DEFAULT_BAND_LEVEL,
                                     n_resamples: int = DEFAULT_BAND_RESAMPLES, seed: int = 0,
                                     n_bins: int = 10, strategy: str = "uniform",
                                     panels: str = "all", scale: str = "linear",
                                     zoom: bool = False, title: str | None = None,
                                     path: str | None = None):
    """Multiclass CORP reliability diagrams with consistency bands: a top-label panel
    (confidence ``max_k p`` against "the top label is right") and one one-vs-rest panel per
    class; the series overlaid.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class indices in ``0 .. K-1``.
    proba : array-like of shape (n, K)
        Class probabilities (e.g. before calibration).
    proba_after : array-like of shape (n, K), optional
    class_names : sequence of K str, optional
    labels, level, n_resamples, seed, n_bins, strategy
        As in :func:`corp_reliability_diagram`.
    panels : {"all", "top_label", "classes"}, default="all"
        Which panels to draw.
    scale : {"linear", "logit"}, default="linear"
        "logit" draws both axes of every panel in log-odds (rare classes, confident models).
    zoom : bool, default=False
        Linear scale limited, panel by panel, to the range of that panel's forecasts and
        curves (a rare class's panel then spreads over its own small probabilities).
    title, path
        As in :func:`corp_reliability_diagram`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    if panels not in MULTICLASS_PANELS:
        raise ValueError(f"panels must be one of {MULTICLASS_PANELS}, got {panels!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    yi, sets, names = _multiclass_inputs(y, proba, proba_after, class_names, labels)
    k = len(names)
    rows = np.arange(yi.size)
    tops = [np.argmax(q, axis=1) for q, _, _ in sets]
    drawn = []
    if panels != "classes":
        drawn.append(([((t == yi).astype(np.float64), q[rows, t], n, c)
                       for t, (q, n, c) in zip(tops, sets)], "top label (confidence vs accuracy)"))
    if panels != "top_label":
        drawn += [([((yi == j).astype(np.float64), q[:, j], n, c) for q, n, c in sets],
                   f"{names[j]} vs rest") for j in range(k)]
    ncols = min(4, len(drawn))
    nrows = -(-len(drawn) // ncols)
    fontsize = 8 if len(drawn) == 1 else 6.5
    fig = Figure(figsize=(6.4, 6.8) if len(drawn) == 1 else (4.4 * ncols, 4.6 * nrows + 0.4),
                 layout="constrained")
    grid = fig.add_gridspec(nrows, ncols)
    for i, (series, panel_title) in enumerate(drawn):
        curves = [corp_curve(yy, pp, level=level, n_resamples=n_resamples, seed=seed)
                  for yy, pp, _, _ in series]
        ax, hist = grid[i // ncols, i % ncols].subgridspec(
            2, 1, height_ratios=[3, 1], hspace=0.06).subplots(sharex=True)
        # each panel its own range: a rare class's forecasts are not squeezed by another's
        lo, hi = _limits(_extent(curves, series), scale, zoom)
        mcbs = _draw_panel(ax, hist, series, curves, lo, hi, scale=scale, n_bins=n_bins,
                           strategy=strategy, show_counts=True, fontsize=fontsize,
                           legend=i == 0)
        ax.set_title(f"{panel_title}\nMCB " + " \u2192 ".join(f"{m:.4f}" for m in mcbs),
                     fontsize=fontsize + 2)
        if panel_title.startswith("top label"):
            hist.set_xlabel("confidence (largest class probability)"
                            + (" (log-odds axis)" if scale == "logit" else ""),
                            fontsize=fontsize + 1)
    if len(drawn) > 1 or title:
        fig.suptitle(title or f"CORP reliability diagrams ({k} classes; shaded: {level:.0%} "
                              "consistency bands; numbers = items per bin"
                              + ("; log-odds axes)" if scale == "logit" else ")"), fontsize=11)
    return _save(fig, path)
