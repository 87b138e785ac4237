"""Information criteria and relative-likelihood weights, shared by the ensemble calibrators.

BBQ, ENIR and ELiTE each score a family of models with an information criterion ``S`` (lower
is better; ``S = -2 log ML`` for BBQ) and average them with weights proportional to the
relative likelihood ``exp((S_min - S) / 2)`` (Burnham & Anderson, *Model Selection and
Multimodel Inference*, 2002, §2.9). The exponentials and logarithms here are mlcal's own
deterministic ones, so the weights, which go into the calibrator JSON, are the same on every CPU.
"""

from __future__ import annotations

import math

import numpy as np

from mlcal._solvers.detmath import det_exp_array, det_log

LOG_2PI = 1.8378770664093453   # log(2 pi), correctly rounded


def bic(loglik: float | np.ndarray, df: float | np.ndarray, n: float) -> float | np.ndarray:
    """Bayesian information criterion in the form the ENIR/ELiTE authors use:
    ``-2 LL + df (log N + log 2 pi)``; ``N`` the (total weight of the) sample."""
    return -2.0 * loglik + df * (det_log(float(max(n, 1.0))) + LOG_2PI)


def aic(loglik: float, df: float) -> float:
    """Akaike information criterion ``2 df - 2 LL``."""
    return 2.0 * df - 2.0 * loglik


def aicc(loglik: float, df: float, n: float) -> float:
    """AIC with the small-sample correction ``2 df (df + 1) / (N - df - 1)`` (Hurvich & Tsai
    1989); ``+inf`` when ``N - df - 1 <= 0`` (too few points for that many parameters)."""
    denom = n - df - 1.0
    if denom <= 0:
        return math.inf
    return aic(loglik, df) + 2.0 * df * (df + 1.0) / denom


def relative_likelihoods(scores: np.ndarray) -> np.ndarray:
    """``exp((S_min - S) / 2)`` for each score: 1 for the best model, 0 for infinite scores
    (and all 0 when no score is finite)."""
    s = np.asarray(scores, dtype=np.float64)
    out = np.zeros(s.size)
    finite = np.isfinite(s)
    if finite.any():
        out[finite] = det_exp_array(np.ascontiguousarray(-0.5 * (s[finite] - s[finite].min())))
    return out


def relative_likelihood_weights(scores: np.ndarray) -> np.ndarray:
    """Relative likelihoods normalised to sum to 1. Infinite scores get weight 0; when no score
    is finite every model gets the same weight."""
    r = relative_likelihoods(scores)
    if not r.any():
        return np.full(r.size, 1.0 / r.size)
    return r / np.sum(r)
