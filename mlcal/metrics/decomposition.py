"""CORP decomposition of a proper score into miscalibration, discrimination and uncertainty.

Dimitriadis, Gneiting & Jordan (PNAS 2021, "Stable reliability diagrams for probabilistic
classifiers"): with ``S`` a proper score averaged over the rows, ``p`` the forecast, ``p_hat`` the
isotonic (PAV) recalibration of ``p`` on the labels and ``r`` the (weighted) base rate::

    MCB = S(p) - S(p_hat)      miscalibration, >= 0
    DSC = S(r) - S(p_hat)      discrimination, >= 0
    UNC = S(r)                 uncertainty
    S(p) = MCB - DSC + UNC

``p_hat`` is a function of ``p``: rows with equal forecasts are pooled before PAV (CORP's
"pooled ties"), so two rows with the same ``p`` always get the same ``p_hat``.

Floating point: each of ``S(p)``, ``S(p_hat)`` and ``S(r)`` is a correctly rounded weighted mean
(``math.fsum`` of the per-row terms); ``MCB`` and ``DSC`` are the rounded differences, and the
reported ``score`` is the correctly rounded value of ``MCB - DSC + UNC``
(``math.fsum((mcb, -dsc, unc))``). The identity therefore holds exactly in that form, and
``score`` differs from the direct mean score (:func:`mlcal.metrics.brier`, an unclipped log loss)
by a few units in the last place at most.

Log loss uses ``0 log 0 = 0``: ``p_hat`` is 0 or 1 only on a block whose labels are all 0 or all 1,
so ``S(p_hat)`` stays finite. A forecast of exactly 0 or 1 contradicted by its label makes ``S(p)``
and ``MCB`` infinite (no clipping, unlike :func:`mlcal.metrics.log_loss`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import xlog1py, xlogy

from mlcal._solvers.pava import pava_blocks
from mlcal._solvers.ties import sort_and_collapse
from mlcal._validation import as_weights, check_binary_forecasts

CORP_SCORES = ("brier", "log_loss")


@dataclass(frozen=True)
class CorpDecomposition:
    """``score = mcb - dsc + unc`` for one proper score (see the module docstring)."""

    score_name: str
    score: float
    mcb: float
    dsc: float
    unc: float
    base_rate: float

    def as_dict(self) -> dict:
        """Plain-JSON form."""
        return {"score_name": self.score_name, "score": self.score, "mcb": self.mcb,
                "dsc": self.dsc, "unc": self.unc, "base_rate": self.base_rate}


def _row_loss(score: str, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    if score == "brier":
        return (y - q) ** 2
    # 0 log 0 = 0 (xlogy/xlog1py), so a certain forecast matching its label costs nothing
    with np.errstate(divide="ignore"):
        return -(xlogy(y, q) + xlog1py(1.0 - y, -q))


def _mean(values: np.ndarray, w: np.ndarray, total: float) -> float:
    terms = values * w
    if np.isinf(terms).any():
        return math.inf
    return math.fsum(terms.tolist()) / total


def _check_binary(y, p, sample_weight):
    y, p = check_binary_forecasts(y, p)
    w = as_weights(sample_weight, p.shape[0])
    keep = w > 0            # zero-weight rows carry nothing (and must not turn 0 * inf into NaN)
    return y[keep], p[keep], w[keep]


def isotonic_recalibration(y, p, sample_weight=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CORP recalibration curve: PAV of the labels on the forecasts, ties pooled.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Forecast probabilities of the positive class.
    sample_weight : array-like of shape (n,), optional

    Returns
    -------
    x : ndarray
        The distinct forecasts (of rows with positive weight), increasing.
    fitted : ndarray
        The recalibrated probability ``p_hat`` at each of ``x`` (non-decreasing, in [0, 1]).
    weight : ndarray
        The total weight of the rows at each of ``x``.
    """
    y, p, w = _check_binary(y, p, sample_weight)
    return _recalibration(y, p, w)


def _recalibration(y, p, w):
    x, ybar, wsum = sort_and_collapse(p, y, w)
    starts, values = pava_blocks(np.ascontiguousarray(ybar), np.ascontiguousarray(wsum))
    fitted = np.repeat(values, np.diff(np.append(starts, x.size)))
    # a block mean of 0/1 labels lies in [0, 1]; the clip only absorbs a rounding excursion
    return x, np.clip(fitted, 0.0, 1.0), wsum


def corp_decomposition(y, p, *, score: str = "brier", sample_weight=None) -> CorpDecomposition:
    """CORP decomposition ``S(p) = MCB - DSC + UNC`` of the Brier score or the log loss.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Forecast probabilities of the positive class.
    score : {"brier", "log_loss"}, default="brier"
        The proper score ``S``: ``(y - p)^2`` or ``-y log p - (1 - y) log(1 - p)`` (natural log,
        not clipped), averaged with the sample weights.
    sample_weight : array-like of shape (n,), optional
        Case weights; rows with weight 0 are ignored.

    Returns
    -------
    CorpDecomposition
        ``score``, ``mcb``, ``dsc``, ``unc`` and the weighted ``base_rate``;
        ``score == math.fsum((mcb, -dsc, unc))`` exactly.
    """
    if score not in CORP_SCORES:
        raise ValueError(f"score must be one of {CORP_SCORES}, got {score!r}")
    y, p, w = _check_binary(y, p, sample_weight)
    total = math.fsum(w.tolist())
    rate = min(1.0, math.fsum((w * y).tolist()) / total)
    x, fitted, _ = _recalibration(y, p, w)
    p_hat = fitted[np.searchsorted(x, p)]
    s_p = _mean(_row_loss(score, y, p), w, total)
    s_hat = _mean(_row_loss(score, y, p_hat), w, total)
    unc = _mean(_row_loss(score, y, np.full(y.shape, rate)), w, total)
    mcb = s_p - s_hat
    dsc = unc - s_hat
    return CorpDecomposition(score, math.fsum((mcb, -dsc, unc)), mcb, dsc, unc, rate)


def class_indices_and_matrix(y, p) -> tuple[np.ndarray, np.ndarray]:
    """Validated class indices and (n, K) probability matrix (the checks of
    :mod:`mlcal.metrics.multiclass`)."""
    from mlcal.metrics.multiclass import _check as check_multiclass

    return check_multiclass(y, p)


def top_label_events(y, p) -> tuple[np.ndarray, np.ndarray]:
    """``(correct, confidence)``: whether the top class (first on ties, as ``argmax``) is the
    true one, as 0/1 floats, and its probability ``max_k p_ik``."""
    yi, prob = class_indices_and_matrix(y, p)
    top = np.argmax(prob, axis=1)
    return (top == yi).astype(np.float64), prob[np.arange(prob.shape[0]), top]


def corp_mcb(y, p, sample_weight=None, *, score: str = "brier") -> float:
    """The miscalibration term ``MCB`` of :func:`corp_decomposition` alone, as a plain
    ``metric(y, p[, w]) -> float`` for :func:`mlcal.metrics.bootstrap.bootstrap_ci` and gate criteria."""
    return corp_decomposition(y, p, score=score, sample_weight=sample_weight).mcb


@dataclass(frozen=True)
class ClasswiseCorp:
    """Per-class one-vs-rest CORP decompositions and their sums over the classes.

    For the Brier score the summed ``score`` is the multiclass Brier score
    ``mean_i sum_k (p_ik - [y_i = k])^2``; for log loss it is the sum of the K one-vs-rest binary
    log losses (itself a proper score for the vector of class probabilities).
    """

    score_name: str
    score: float
    mcb: float
    dsc: float
    unc: float
    per_class: tuple[CorpDecomposition, ...]

    def as_dict(self) -> dict:
        """Plain-JSON form."""
        return {"score_name": self.score_name, "score": self.score, "mcb": self.mcb,
                "dsc": self.dsc, "unc": self.unc,
                "per_class": [c.as_dict() for c in self.per_class]}


def top_label_corp_decomposition(y, p, *, score: str = "brier",
                                 sample_weight=None) -> CorpDecomposition:
    """CORP decomposition of the top-label forecast: the confidence ``max_k p_ik`` against
    whether the top class (first on ties) is right.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class indices ``0 .. K-1``.
    p : array-like of shape (n, K)
        Class probabilities (rows sum to 1).
    score, sample_weight
        As in :func:`corp_decomposition`.
    """
    correct, conf = top_label_events(y, p)
    return corp_decomposition(correct, conf, score=score, sample_weight=sample_weight)


def classwise_corp_decomposition(y, p, *, score: str = "brier",
                                 sample_weight=None) -> ClasswiseCorp:
    """One-vs-rest CORP decomposition of every class and their sums (see :class:`ClasswiseCorp`).

    Parameters as in :func:`top_label_corp_decomposition`. The sums keep the identity:
    ``score == math.fsum((mcb, -dsc, unc))``.
    """
    yi, prob = class_indices_and_matrix(y, p)
    per = tuple(corp_decomposition((yi == k).astype(np.float64), prob[:, k], score=score,
                                   sample_weight=sample_weight) for k in range(prob.shape[1]))
    mcb = math.fsum(c.mcb for c in per)
    dsc = math.fsum(c.dsc for c in per)
    unc = math.fsum(c.unc for c in per)
    return ClasswiseCorp(score, math.fsum((mcb, -dsc, unc)), mcb, dsc, unc, per)
