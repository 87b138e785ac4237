"""Reliability diagrams and calibration-map plots (matplotlib, imported only when called).

Figures are built with matplotlib's object API (no pyplot state, no GUI backend), so they work
in servers and CI. Pass ``path=`` to write a PNG.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mlcal.metrics import ece, reliability_curve


def _save(fig, path: str | None):
    if path is not None:
        from mlcal._atomic import atomic_path

        # plots are regenerated output (no user data), so they replace an existing file, but
        # never leave a half-written PNG behind
        with atomic_path(path, overwrite=True) as tmp:
            fig.savefig(tmp, dpi=110, bbox_inches="tight")
    return fig


def reliability_diagram(y, p_before, p_after=None, *, n_bins: int = 10,
                        strategy: str = "uniform",
                        labels: Sequence[str] = ("uncalibrated", "calibrated"),
                        title: str | None = None, path: str | None = None):
    """Reliability diagram with the prediction histogram under it, before/after overlaid.

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
    title : str, optional
    path : str, optional
        Write the figure as PNG here.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 6.5))
    ax, hist = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfectly calibrated")
    series = [(p_before, labels[0], "tab:red")]
    if p_after is not None:
        series.append((p_after, labels[1], "tab:blue"))
    for p, name, color in series:
        c = reliability_curve(y, p, n_bins, strategy)
        err = ece(y, p, n_bins, strategy)
        ax.plot(c["mean_predicted"], c["fraction_positive"], marker="o", color=color,
                label=f"{name} (ECE {err:.4f})")
        hist.hist(np.asarray(p, dtype=float), bins=np.linspace(0, 1, 41), color=color,
                  alpha=0.45, label=name)
    ax.set_ylabel("fraction of positives")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or f"Reliability diagram ({n_bins} {strategy} bins)")
    hist.set_xlabel("predicted probability")
    hist.set_ylabel("count")
    fig.tight_layout()
    return _save(fig, path)


def plot_map(calibrator_or_map, *, scores=None, y=None, title: str | None = None,
             path: str | None = None):
    """Plot a fitted calibration map over its score domain.

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
    """
    from matplotlib.figure import Figure

    m = getattr(calibrator_or_map, "map_", calibrator_or_map)
    lo, hi = m.domain if m.domain is not None else (0.0, 1.0)
    pad = 0.05 * (hi - lo) if hi > lo else 0.5
    # dense grid plus the map's own break points so steps and kinks are drawn sharply
    grid = np.linspace(lo - pad, hi + pad, 2001)
    breaks = getattr(m, "thresholds", getattr(m, "knots", np.empty(0)))
    if m.input_transform == "identity" and breaks.size <= 20000:
        grid = np.union1d(grid, np.concatenate((breaks, np.nextafter(breaks, -np.inf))))
    fig = Figure(figsize=(5.5, 4.5))
    ax = fig.subplots()
    if scores is not None and y is not None:
        s = np.asarray(scores, dtype=float)
        jitter = np.random.default_rng(0).uniform(-0.02, 0.02, s.size)
        ax.scatter(s, np.asarray(y, dtype=float) + jitter, s=4, alpha=0.25, color="grey",
                   label="calibration data")
    ax.plot(grid, m(grid), color="tab:blue", lw=1.8, label=f"{m.kind} map")
    xlabel = "score" if m.input_transform == "identity" else "raw score (sigmoid applied first)"
    ax.set_xlabel(xlabel)
    ax.set_ylabel("calibrated probability")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title or "Calibration map")
    fig.tight_layout()
    return _save(fig, path)
