"""Reliability diagrams and calibration-map plots (matplotlib, imported only when called).

Figures are built with matplotlib's object API (no pyplot state, no GUI backend), so they work
in servers and CI. Pass ``path=`` to write a PNG.

Small and imbalanced evaluation sets make reliability diagrams lie: a bin with three items
shows a fraction of positives of 0 or 1/3 or 1 as if it were a fact. The diagram therefore
draws each bin's confidence interval (Wilson by default, or Clopper-Pearson) and its count,
and can use log-odds axes (``scale="logit"``) or zoom onto the predictions (``zoom=True``) so
that rare-positive data are not squeezed into the bottom-left corner.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from mlcal._dispatch import registered_types
from mlcal.maps import BetaMap, LinearMap, QuadraticMap, SigmoidMap, StepMap
from mlcal.maps.offset import OffsetMap
from mlcal.metrics import ece, proportion_interval, reliability_curve

SCALES = ("linear", "logit")


@functools.singledispatch
def map_breaks(m) -> np.ndarray:
    """Scores where map ``m`` jumps, bends or turns (between them it is monotone): added to
    :func:`plot_map`'s grid so steps and kinks are drawn sharply, and the cell extremes of
    ``mlcal.spark``'s grid error bound. One ``map_breaks.register(MapClass)`` per map type."""
    raise ValueError(f"plot_map cannot draw {type(m).__name__}: no break points are registered "
                     f"for it (expected one of {registered_types(map_breaks)})")


@map_breaks.register
def _(m: StepMap) -> np.ndarray:
    return m.thresholds


@map_breaks.register
def _(m: LinearMap) -> np.ndarray:
    return m.knots


@map_breaks.register
def _(m: SigmoidMap) -> np.ndarray:
    return np.empty(0)   # smooth everywhere


@map_breaks.register
def _(m: BetaMap) -> np.ndarray:
    # z(s) = a ln s - b ln(1 - s) + c has z'(s) = a/s + b/(1 - s), zero only at
    # s* = a / (a - b) when a and b have opposite signs; the clamp ends are kinks
    b = list(m.clamp)
    if m.a * m.b < 0:
        b.append(m.a / (m.a - m.b))
    return np.unique(np.asarray(b))


@map_breaks.register
def _(m: QuadraticMap) -> np.ndarray:
    # eta(z) = a z + b z^2 + c turns at z* = -a / (2 b); on probabilities z is the log-odds of
    # the score (s* = expit(z*)) and the clamp ends are kinks
    b = list(m.clamp) if m.on == "logit" else []
    if m.b != 0.0:
        z = -m.a / (2.0 * m.b)
        if m.on == "margin":
            b.append(z)
        elif abs(z) < 745.0:
            s_star = float(1.0 / (1.0 + np.exp(-z)))
            if m.clamp[0] < s_star < m.clamp[1]:
                b.append(s_star)
    return np.unique(np.asarray(b, dtype=np.float64))


def _save(fig, path: str | None):
    if path is not None:
        from mlcal._atomic import atomic_path

        # plots are regenerated output (no user data), so they replace an existing file, but
        # never leave a half-written PNG behind
        # no bbox_inches="tight": every figure here is laid out when built (constrained layout
        # or tight_layout) and fits its canvas; "tight" would draw it twice to crop a few
        # points of margin (tests/test_report.py checks the fit)
        with atomic_path(path, overwrite=True) as tmp:
            fig.savefig(tmp, dpi=110)
    return fig


def _limits(values: list[np.ndarray], scale: str, zoom: bool) -> tuple[float, float]:
    """Axis range: [0, 1], or (zoom / logit) the range of the bins' mean predictions and
    fractions of positives, padded; on the logit axis values of exactly 0 or 1 are left out
    (they sit at minus or plus infinity)."""
    if scale == "linear" and not zoom:
        return 0.0, 1.0
    v = np.concatenate(values)
    if scale == "logit":
        v = v[(v > 0) & (v < 1)]
        if v.size == 0:
            return 1e-3, 1 - 1e-3
        t = np.log(v / (1 - v))
        lo, hi = t.min() - 0.5, t.max() + 0.5
        return float(1 / (1 + np.exp(-lo))), float(1 / (1 + np.exp(-hi)))
    lo, hi = float(v.min()), float(v.max())
    pad = 0.08 * max(hi - lo, 0.02)
    return max(0.0, lo - pad), min(1.0, hi + pad)


def _annotate_counts(ax, x, f, n, shift: int, fontsize: float, color: str) -> None:
    """Write each bin's item count ``n`` next to its point ``(x, f)`` (``shift`` = -1 or 1
    puts two series' counts below or above their points)."""
    for xi, fi, ni in zip(x, f, n):
        ax.annotate(f"{int(ni)}", (xi, fi), textcoords="offset points",
                    xytext=(4, 6 * shift), fontsize=fontsize - 0.5, color=color)


def _forecast_histogram(hist, p: np.ndarray, lo: float, hi: float, scale: str, color: str,
                        name: str) -> None:
    """Histogram of the forecasts ``p`` on ``hist``: 40 bins over [lo, hi], equal in log-odds
    on the logit scale; forecasts outside a zoomed range are piled into the edge bins."""
    if scale == "logit":
        edges = 1 / (1 + np.exp(-np.linspace(np.log(lo / (1 - lo)), np.log(hi / (1 - hi)), 41)))
    else:
        edges = np.linspace(lo, hi, 41)
    # one filled outline instead of 40 touching bars: the same shape, one SVG path (not 40)
    hist.hist(np.clip(p, edges[0], edges[-1]), bins=edges, color=color, alpha=0.45, label=name,
              histtype="stepfilled", lw=0)


def _set_axes_range(ax, hist, lo: float, hi: float, scale: str) -> None:
    """Reliability panel ``ax`` and its histogram ``hist``: logit axes when asked, both
    axes of the panel limited to [lo, hi]."""
    if scale == "logit":
        for a in (ax, hist):
            a.set_xscale("logit", nonpositive="clip")
        ax.set_yscale("logit", nonpositive="clip")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)


def reliability_diagram(y, p_before, p_after=None, *, n_bins: int = 10,
                        strategy: str = "uniform",
                        labels: Sequence[str] = ("uncalibrated", "calibrated"),
                        interval: str | None = "wilson", confidence: float = 0.95,
                        scale: str = "linear", zoom: bool = False, show_counts: bool = True,
                        title: str | None = None, path: str | None = None):
    """Reliability diagram with per-bin intervals and counts, and the prediction histogram.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p_before : array-like of shape (n,)
        Predicted probabilities before calibration.
    p_after : array-like of shape (n,), optional
        Predicted probabilities after calibration, drawn on the same axes.
    n_bins, strategy
        Binning, as in :func:`mlcal.metrics.ece`.
    labels : two strings
        Legend names of the two curves.
    interval : {"wilson", "clopper-pearson"} or None, default="wilson"
        Confidence interval of each bin's fraction of positives, drawn as an error bar.
    confidence : float, default=0.95
    scale : {"linear", "logit"}, default="linear"
        "logit" draws both axes in log-odds, which spreads out predictions near 0 or 1 (rare
        positives).
    zoom : bool, default=False
        With the linear scale, limit both axes to the range of the predictions and bin
        fractions instead of [0, 1].
    show_counts : bool, default=True
        Write each bin's item count next to its point.
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
    series = [(np.asarray(p_before, dtype=float), labels[0], "tab:red")]
    if p_after is not None:
        series.append((np.asarray(p_after, dtype=float), labels[1], "tab:blue"))
    fig = Figure(figsize=(5.8, 6.8))
    ax, hist = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    _draw_reliability(ax, hist, y, series, n_bins=n_bins, strategy=strategy, interval=interval,
                      confidence=confidence, scale=scale, zoom=zoom, show_counts=show_counts)
    ax.set_title(title or f"Reliability diagram ({n_bins} {strategy} bins; numbers = items "
                          "per bin)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _draw_reliability(ax, hist, y, series, *, n_bins: int, strategy: str, interval,
                      confidence: float, scale: str, zoom: bool, show_counts: bool,
                      fontsize: float = 7) -> None:
    """One reliability panel: ``series`` = [(p, name, colour)] drawn on ``ax`` (curves with
    intervals and counts) and ``hist`` (prediction histogram), against binary labels ``y``
    (or a list of label vectors, one per series)."""
    ys = list(y) if isinstance(y, list) else [y] * len(series)
    curves = [reliability_curve(yy, p, n_bins, strategy) for yy, (p, _, _) in zip(ys, series)]
    extent = [c[k] for c in curves for k in ("mean_predicted", "fraction_positive")]
    lo, hi = _limits(extent, scale, zoom)
    diag = np.linspace(lo, hi, 200)
    ax.plot(diag, diag, ls="--", color="grey", lw=1, label="perfectly calibrated")
    for (p, name, color), yy, c, shift in zip(series, ys, curves, (-1, 1)):
        err = ece(yy, p, n_bins, strategy)
        x, f, n = c["mean_predicted"], c["fraction_positive"], c["count"]
        label = f"{name} (ECE {err:.4f}, n={p.size})"
        if interval is not None:
            low, up = proportion_interval(np.round(f * n), n, method=interval,
                                          confidence=confidence)
            yerr = np.maximum([f - low, up - f], 0.0)  # float rounding at k = 0 or n
            ax.errorbar(x, f, yerr=yerr, fmt="o-", color=color, ms=4, lw=1.2,
                        elinewidth=1, capsize=2.5,
                        label=f"{label}; {confidence:.0%} {interval} interval")
        else:
            ax.plot(x, f, marker="o", color=color, ms=4, label=label)
        if show_counts:
            _annotate_counts(ax, x, f, n, shift, fontsize, color)
        _forecast_histogram(hist, p, lo, hi, scale, color, name)
    _set_axes_range(ax, hist, lo, hi, scale)
    ax.set_ylabel("fraction of positives" + (" (log-odds axis)" if scale == "logit" else ""))
    ax.legend(loc="upper left", fontsize=fontsize)
    hist.set_xlabel("predicted probability" + (" (log-odds axis)" if scale == "logit" else ""))
    hist.set_ylabel("count")
    if max(p.size for p, _, _ in series) >= 1000:
        hist.set_yscale("log")  # large samples: keep sparse tails visible next to the bulk


#: opacity of one calibration-data marker in :func:`plot_map`
DATA_ALPHA = 0.25


def pixel_markers(xy: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One marker per occupied pixel: the centres and opacities that draw ``xy`` as it looks.

    Parameters
    ----------
    xy : ndarray of shape (n, 2)
        Marker positions in display coordinates (pixels, or points for a vector backend: the
        renderer's own grid at the dpi the figure is drawn at).
    alpha : float
        The opacity of one marker, in [0, 1].

    Returns
    -------
    centres : ndarray of shape (m, 2)
        The centre of every pixel holding at least one marker (``floor(xy) + 0.5``), sorted by
        pixel (x first).
    opacity : ndarray of shape (m,)
        ``1 - (1 - alpha) ** count`` rounded to 3 decimals: ``count`` markers of one colour
        drawn on the same spot, one over the other, composite to exactly that opacity, so the
        stack of markers and the single marker look the same (the move to the pixel centre is
        at most half a pixel).
    """
    xy = np.asarray(xy, dtype=np.float64)
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise ValueError(f"xy must have shape (n, 2), got {xy.shape}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    cells = np.floor(xy[np.isfinite(xy).all(axis=1)])
    if not len(cells):
        return np.zeros((0, 2)), np.zeros(0)
    # sorted by pixel (x, then y), then one entry per run of equal pixels (a lexsort is ~3x
    # faster than np.unique(axis=0) at 1e6 rows)
    cells = cells[np.lexsort((cells[:, 1], cells[:, 0]))]
    first = np.flatnonzero(np.r_[True, np.any(cells[1:] != cells[:-1], axis=1)])
    counts = np.diff(np.r_[first, len(cells)])
    return cells[first] + 0.5, np.round(1.0 - (1.0 - alpha) ** counts, 3)


@functools.cache
def _pixel_scatter_type():
    from matplotlib.collections import PathCollection

    class PixelScatter(PathCollection):
        """A one-colour scatter drawn as one marker per occupied pixel of the renderer.

        The artist keeps every point (its offsets, colour and legend entry are those of a plain
        scatter); only :meth:`draw` maps them to display coordinates at the dpi being drawn
        (72 for SVG, the ``dpi`` of a PNG), merges the markers of each pixel into one at the
        pixel's centre with the stacked opacity (:func:`pixel_markers`), draws those and puts
        the points back. A report's SVG then holds at most one ``<use>`` element per pixel of
        the plot area, whatever the number of rows, and looks the same.
        """

        def draw(self, renderer):
            if not self.get_visible():
                return
            offsets = self.get_offsets()
            face = self.get_facecolor()     # the edges follow the face ("face")
            rgba = np.array(face[0], dtype=np.float64)
            trans = self.get_offset_transform()
            centres, opacity = pixel_markers(trans.transform(np.asarray(offsets)),
                                             float(rgba[3]))
            try:
                # one draw per opacity (at most ~30: the opacity reaches 1 by 27 markers), so
                # each is a one-colour marker run: in SVG one group of bare <use> elements
                # rather than a clipped group per marker
                for level in np.unique(opacity):
                    self.set_offsets(trans.inverted().transform(centres[opacity == level]))
                    self.set_facecolor((*rgba[:3], level))
                    super().draw(renderer)
            finally:
                self.set_offsets(offsets)
                self.set_facecolor(face)

    return PixelScatter


def _scatter_data(ax, x: np.ndarray, y: np.ndarray):
    """Scatter the calibration data: grey markers of 4 square points at :data:`DATA_ALPHA`,
    drawn one per occupied pixel (:func:`pixel_markers`), so the figure's size does not grow
    with the number of rows."""
    plain = ax.scatter(x, y, s=4, color="grey", label="calibration data")
    rgba = np.array(plain.get_facecolor()[0], dtype=np.float64)
    rgba[3] = DATA_ALPHA
    coll = _pixel_scatter_type()(plain.get_paths(), plain.get_sizes(),
                                 offsets=plain.get_offsets(),
                                 offset_transform=plain.get_offset_transform())
    coll.update_from(plain)
    coll.set_facecolor(rgba)
    coll.set_edgecolor("face")
    plain.remove()
    ax.add_collection(coll, autolim=False)
    return coll


def map_label(calibrator_or_map, m) -> str:
    """The legend entry of a plotted map: the method that fitted it (and, for ``auto``, the
    method it chose) with the map's kind, e.g. ``"isotonic (linear map)"`` (an isotonic fit is
    drawn by linear interpolation, which the kind alone would leave the reader to guess); the
    kind alone for a bare map."""
    method = getattr(calibrator_or_map, "method_name", None)
    if not isinstance(method, str) or calibrator_or_map is m:
        return f"{m.kind} map"
    chosen = getattr(calibrator_or_map, "chosen_", None)
    if isinstance(chosen, str):
        method = f"{method}: {chosen}"
    return f"{method} ({m.kind} map)"


def plot_map(calibrator_or_map, *, scores=None, y=None, title: str | None = None,
             path: str | None = None):
    """Plot a fitted calibration map over its score domain.

    Only the domain the map was fitted on is drawn (outside it the map just extends its end
    values, which says nothing about the data); calibration data outside the domain are not
    shown.

    Parameters
    ----------
    calibrator_or_map : fitted calibrator or map
    scores, y : array-like, optional
        Calibration data to scatter under the map (labels jittered at 0 and 1).
    title : str, optional
    path : str, optional
        Write the figure as PNG here.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        A multicalibration map (a function of the score and feature columns).
    """
    from matplotlib.figure import Figure

    m = getattr(calibrator_or_map, "map_", calibrator_or_map)
    if getattr(m, "kind", None) == "multicalibration":
        raise ValueError("a multicalibration map reads feature columns besides the score; it "
                         "has no one curve over the score to plot")
    if m.domain is not None:
        lo, hi = m.domain
    elif scores is not None:
        lo, hi = float(np.min(scores)), float(np.max(scores))
    else:
        lo, hi = 0.0, 1.0
    if not hi > lo:
        hi = lo + 1e-9
    # dense grid plus the map's own break points so steps and kinks are drawn sharply
    grid = np.linspace(lo, hi, 2001)
    breaks = map_breaks(m)
    if m.input_transform == "identity" and breaks.size <= 20000:
        extra = np.concatenate((breaks, np.nextafter(breaks, -np.inf)))
        grid = np.union1d(grid, extra[(extra >= lo) & (extra <= hi)])
    fig = Figure(figsize=(5.5, 4.5))
    ax = fig.subplots()
    if scores is not None and y is not None:
        s = np.asarray(scores, dtype=float)
        lab = np.asarray(y, dtype=float)
        inside = (s >= lo) & (s <= hi)
        jitter = np.random.default_rng(0).uniform(-0.02, 0.02, s.size)
        _scatter_data(ax, s[inside], (lab + jitter)[inside])
    ax.plot(grid, m(grid), color="tab:blue", lw=1.8, label=map_label(calibrator_or_map, m))
    ax.set_xlim(lo, hi)
    xlabel = "score" if m.input_transform == "identity" else "raw score (sigmoid applied first)"
    ax.set_xlabel(xlabel + f" (fitted domain [{lo:.4g}, {hi:.4g}])")
    ax.set_ylabel("calibrated probability")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or "Calibration map")
    fig.tight_layout()
    return _save(fig, path)


def _multiclass_inputs(y, proba, proba_after, class_names, labels):
    """The checked inputs of a multiclass diagram: ``(class indices, [(probabilities, name,
    colour)] one per series, K class names)``, or ``ValueError`` naming what is wrong."""
    from mlcal.metrics.multiclass import _check

    yi, p = _check(y, proba)
    sets = [(p, labels[0], "tab:red")]
    if proba_after is not None:
        pa = _check(yi, proba_after)[1]
        if pa.shape != p.shape:
            raise ValueError(f"proba_after has shape {pa.shape}, proba {p.shape}")
        sets.append((pa, labels[1], "tab:blue"))
    k = p.shape[1]
    names = [f"class {j}" for j in range(k)] if class_names is None else list(class_names)
    if len(names) != k:
        raise ValueError(f"class_names has {len(names)} names for {k} classes")
    return yi, sets, names


def plot_multiclass_reliability(y, proba, proba_after=None, *,
                                class_names: Sequence[str] | None = None, n_bins: int = 10,
                                strategy: str = "uniform",
                                labels: Sequence[str] = ("uncalibrated", "calibrated"),
                                interval: str | None = "wilson", scale: str = "linear",
                                zoom: bool = False, title: str | None = None,
                                path: str | None = None):
    """Multiclass reliability diagrams: one one-vs-rest panel per class (column ``k`` against
    ``y == k``, as in class-wise ECE) and a top-label confidence panel (``max_k p`` against
    "the top label is right", as in top-label ECE), each drawn like
    :func:`reliability_diagram` (intervals, counts, histogram).

    Parameters
    ----------
    y : array-like of shape (n,)
        Class indices in ``0 .. K-1``.
    proba : array-like of shape (n, K)
        Class probabilities (rows sum to 1), e.g. before calibration.
    proba_after : array-like of shape (n, K), optional
        Probabilities after calibration, drawn on the same panels.
    class_names : sequence of K str, optional
        Panel titles (default ``class 0`` ...).
    n_bins, strategy
        Binning, as in :func:`mlcal.metrics.ece`.
    labels : two strings
        Legend names of the two series.
    interval : {"wilson", "clopper-pearson"} or None, default="wilson"
    scale : {"linear", "logit"}, default="linear"
        "logit" draws both axes of every panel in log-odds.
    zoom : bool, default=False
        Linear scale limited, panel by panel, to the range of that panel's bins.
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
    yi, sets, names = _multiclass_inputs(y, proba, proba_after, class_names, labels)
    k = len(names)
    rows = np.arange(yi.size)
    # (binary labels, [(probabilities, name, colour)], panel title) per panel
    panels = [((yi == j).astype(float), [(q[:, j], n, c) for q, n, c in sets],
               f"{names[j]} vs rest") for j in range(k)]
    # each series' own top label: its confidence against whether that label is right
    tops = [np.argmax(q, axis=1) for q, _, _ in sets]
    panels.append(([(t == yi).astype(float) for t in tops],
                   [(q[rows, t], n, c) for t, (q, n, c) in zip(tops, sets)],
                   "top label (confidence vs accuracy)"))
    ncols = min(3, k + 1)
    nrows = -(-(k + 1) // ncols)
    fig = Figure(figsize=(4.6 * ncols, 5.2 * nrows))
    grid = fig.add_gridspec(nrows, ncols)
    for i, (y01, series, panel_title) in enumerate(panels):
        ax, hist = grid[i // ncols, i % ncols].subgridspec(
            2, 1, height_ratios=[3, 1], hspace=0.05).subplots(sharex=True)
        _draw_reliability(ax, hist, y01, series, n_bins=n_bins, strategy=strategy,
                          interval=interval, confidence=0.95, scale=scale, zoom=zoom,
                          show_counts=True, fontsize=6)
        ax.set_title(panel_title, fontsize=9)
    fig.suptitle(title or f"Multiclass reliability ({k} classes one-vs-rest + top label; "
                          f"{n_bins} {strategy} bins; numbers = items per bin)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


@map_breaks.register
def _(m: OffsetMap) -> np.ndarray:
    return map_breaks(m.inner)   # the offset is smooth and strictly increasing in p
