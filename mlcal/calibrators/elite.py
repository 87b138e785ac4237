"""ELiTE: ensemble of linear trend estimation (Naeini & Cooper, SDM 2016; KAIS 2018 section 5).

Recipe (``docs/elite.md``; KAIS 2018 §5; faithful to the authors' R package except where noted):

1. Sort the scores, collapse exact ties into weighted points, and merge the points that share a
   ``thin_tol``-wide cell ``floor(s / thin_tol)`` (ELiTE's ``thinningLocal``, 1e-5; done after
   sorting, so unlike the authors' code it does not depend on the input order). As a numerical
   safeguard (glmgen's own thinning plays this role in the reference), runs of points closer
   than ``1e-12`` (or ``1e-10`` of the score range) are merged too, whatever ``thin_tol``.
2. Linear trend filtering (``mlcal._solvers.trend_filter``) at 50 lambdas log-spaced from
   ``lambda_max`` (whose solution is the weighted least-squares line) down to
   ``1e-4 * lambda_max``. Each solution is exact (the authors' ADMM stops at a 1e-5 relative
   objective change; see docs/elite.md, 'Solver (deviation: exact instead of ADMM)').
3. Each model is extended beyond the data by linear extrapolation and clipped to [0, 1]; it is
   scored by AICc with ``df = knots + 2``, the weighted Bernoulli log-likelihood
   ``sum w (ybar log p + (1 - ybar) log(1 - p))`` over **every** thinned point, and ``N`` = the
   number of instances (total weight), the sample size AICc is defined for (ENIR's BIC uses the
   same N). Deviation from the authors' R code, which drops the non-finite terms (a prediction of
   exactly 0 or 1 after clipping) from LL and from N: that rewards a model for clipping, because
   the positives it calls impossible vanish from its likelihood. On large imbalanced data the
   straight line, clipped to 0 over the low scores, then scored best and took all the weight
   (200k rows, 5.6 % positives, ``benchmarks/bench_elite.py --accuracy``: held-out mean
   |p - p_true| 0.013 against isotonic's 0.003; now 0.0013). The intended
   likelihood is ``-inf`` for such a model; mlcal floors the clipped prediction at
   ``LL_FLOOR = 1e-12`` (each instance called impossible costs ``log 1e-12 = -27.6``) so that
   such models stay finite and ordered, and takes ``0 log 0 = 0``, so a stretch of equal labels
   fitted exactly costs nothing. The floor's value hardly matters: 1e-6 instead gave the same
   best model and held-out figures on the data above.
4. All models are averaged with relative-likelihood weights ``exp((AICc_min - AICc) / 2)``. The
   average of clipped piecewise-linear functions is piecewise linear, and it is folded exactly
   into one :class:`~mlcal.maps.LinearMap`.
"""

from __future__ import annotations

import numpy as np

from mlcal._solvers.linear_fold import fold_clipped_average
from mlcal._solvers.model_average import aic, aicc, bic, relative_likelihood_weights
from mlcal._solvers.ties import merge_close, sort_and_collapse
from mlcal._solvers.trend_filter import thin, trend_filter_path
from mlcal._validation import as_scores
from mlcal.calibrators._params import Integer, IsNone, Options, Real
from mlcal.calibrators.base import BOUND_SMOOTHING_CONSTRAINTS, BaseCalibrator
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import LinearMap, apply_input_transform

CRITERIA = ("aicc", "aic", "bic")
LL_FLOOR = 1e-12  # clipped predictions are floored here in the log-likelihood (never log 0)
# points closer than this (on the [0, 1] score scale, or this fraction of the score range) are
# merged: slopes across smaller gaps are not representable in double precision
MIN_GAP_ABS = 1e-12
MIN_GAP_REL = 1e-10
# members lighter than this are left out of the folded map: together (at most 50 of them) they
# move it by less than 5e-14, and their knots would only bloat the map
FOLD_MIN_WEIGHT = 1e-15


def information_criterion(ll: float, df: int, n_used: float, criterion: str = "aicc") -> float:
    """ELiTE's model score (lower is better).

    * ``aicc``: ``2 df - 2 LL + 2 df (df + 1) / (N - df - 1)``; ``+inf`` when ``N - df - 1 <= 0``
      (the correction is undefined: too few points for that many parameters).
    * ``aic``: ``2 df - 2 LL``.
    * ``bic``: ``-2 LL + df (log N + log 2 pi)`` (the authors' form).
    """
    if criterion == "aic":
        return aic(ll, df)
    if criterion == "bic":
        return float(bic(ll, df, float(n_used)))
    return aicc(ll, df, float(n_used))


@register_calibrator("elite")
class ELiTE(BaseCalibrator):
    """Ensemble of linear trend estimation: an AICc-weighted average of piecewise-linear maps.

    Fits l1 (linear) trend filtering of the labels on the sorted scores at 50 penalties, clips
    every model to [0, 1] (extrapolating linearly beyond the training scores first), weights the
    models by relative likelihood under AICc, and folds the weighted average exactly into one
    :class:`~mlcal.maps.LinearMap`. See :mod:`mlcal.calibrators.elite` for the full recipe and
    :mod:`mlcal._solvers.trend_filter` for the exact, fast solver.

    Parameters
    ----------
    n_lambdas : int, default=50
        Number of penalties on the path (glmgen's default, used by ELiTE).
    lambda_min_ratio : float, default=1e-4
        Smallest penalty as a fraction of ``lambda_max`` (ELiTE's choice).
    thin_tol : float or None, default=1e-5
        Width of the score cells whose points are merged (weighted mean score and label, summed
        weight) before fitting, as ELiTE's ``thinningLocal`` does. ``None`` or 0 merges only
        exactly equal scores (and, always, scores closer than 1e-12: a numerical safeguard).
        Scores are in [0, 1] after the input transform.
    criterion : {"aicc", "aic", "bic"}, default="aicc"
        Model score; the authors' package defaults to AICc.
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        ELiTE assumes scores in [0, 1]; ``"auto"`` squashes raw margins with the logistic sigmoid.
    bound_smoothing : float or None, default=None
        ``a > 0`` keeps predictions off exactly 0 and 1: runs of the map at a bound take their
        Beta(a, a) posterior mean, clipped to their neighbours (monotone maps stay monotone; see
        :func:`mlcal.calibrators.base.keep_off_bounds`). ``None`` keeps the map as fitted.

    Attributes
    ----------
    map_ : LinearMap
        The folded average, equal to ``weights_ @ predict_path(s)`` for every real ``s`` up to
        rounding (members with weight below 1e-15 are left out: < 5e-14 in total). Its knots are
        the breakpoints of the members (data points), their 0/1 crossings (on the extrapolation
        rays too); beyond the outermost knots every member is saturated or flat.
    lambdas_, df_, aicc_, weights_ : ndarray of shape (n_lambdas,)
        The path: penalties (decreasing), degrees of freedom (knots + 2), scores under
        ``criterion`` and averaging weights.
    log_likelihood_ : ndarray of shape (n_lambdas,)
        Log-likelihood of each clipped model (floored at 1e-12) on the thinned points.
    n_used_ : ndarray of shape (n_lambdas,)
        The ``N`` of each score: the number of instances (total sample weight), the same for
        every model (before issue 15 it was the count of thinned points with a finite term).
    n_impossible_ : ndarray of int, shape (n_lambdas,)
        Thinned points whose observed labels each clipped model gives probability 0 (these
        cost ``log 1e-12`` per instance in its likelihood).
    lambda_max_ : float
        Smallest penalty whose solution is the weighted least-squares line (0 if degenerate).
    n_points_ : int
        Number of (thinned) points the path was fitted on.
    path_ : TrendFilterPath
        The fitted models themselves (breakpoints and values), for :meth:`predict_path`.

    Notes
    -----
    Degenerate inputs: a single distinct (thinned) score gives the constant map at its weighted
    label mean; two give the line through both (clipped); data whose labels lie exactly on a line
    (``lambda_max = 0``) give that line for every penalty. When no model has ``N - df - 1 > 0``
    (``N`` = total sample weight; e.g. fewer than four instances) every AICc is infinite and the
    models are averaged uniformly.

    Examples
    --------
    >>> import numpy as np
    >>> from mlcal.calibrators.elite import ELiTE
    >>> rng = np.random.default_rng(0)
    >>> s = rng.random(2000)
    >>> y = (rng.random(2000) < s ** 2).astype(int)
    >>> cal = ELiTE().fit(s, y)
    >>> cal.predict([0.1, 0.5, 0.9]).round(1).tolist()
    [0.0, 0.3, 0.8]
    """

    requires_unit_interval = True

    map_kinds = ("linear",)   # trend filtering: not monotone
    _parameter_constraints = {
        "n_lambdas": [Integer(1)],
        "lambda_min_ratio": [Real(0.0, 1.0, closed="right")],
        "thin_tol": [IsNone(), Real(0.0)],
        "criterion": [Options(CRITERIA)],
        "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS,
    }

    def __init__(self, n_lambdas: int = 50, lambda_min_ratio: float = 1e-4,
                 thin_tol: float | None = 1e-5, criterion: str = "aicc",
                 input_transform: str = "auto",
                 bound_smoothing: float | None = None):
        self.n_lambdas = n_lambdas
        self.lambda_min_ratio = lambda_min_ratio
        self.thin_tol = thin_tol
        self.criterion = criterion
        self.input_transform = input_transform
        self.bound_smoothing = bound_smoothing

    def _fit(self, scores, y, w):
        return self._fit_points(*sort_and_collapse(scores, y, w), scores)

    def _fit_points(self, x, ybar, wsum, scores):
        x, ybar, wsum = thin(x, ybar, wsum, float(self.thin_tol or 0.0))
        x, ybar, wsum = merge_close(x, ybar, wsum,
                                    max(MIN_GAP_ABS, MIN_GAP_REL * (x[-1] - x[0])))
        path = trend_filter_path(x, ybar, wsum, n_lambdas=int(self.n_lambdas),
                                 lambda_min_ratio=float(self.lambda_min_ratio))
        L = path.lambdas.size
        df = np.minimum(path.n_knots + 2, x.size)
        ll, n_impossible = path.clipped_log_likelihoods(ybar, wsum, LL_FLOOR)
        n_total = float(np.sum(wsum))   # sample size of AICc: instances, not thinned points
        if self.criterion == "aicc":   # aicc's operations elementwise (the same values)
            dff = df.astype(np.float64)
            denom = n_total - dff - 1.0
            with np.errstate(divide="ignore", invalid="ignore"):
                score = np.where(denom > 0, (2.0 * dff - 2.0 * ll) + 2.0 * dff * (dff + 1.0)
                                 / denom, np.inf)
        else:
            score = np.array([information_criterion(ll[j], int(df[j]), n_total,
                                                    self.criterion) for j in range(L)])
        weights = relative_likelihood_weights(score)
        members = [(x[path.knot_index[j]], path.knot_value[j]) for j in range(L)]
        knots, values = fold_clipped_average(members, weights, FOLD_MIN_WEIGHT)

        self.path_ = path
        self.lambdas_ = path.lambdas
        self.lambda_max_ = path.lambda_max
        self.df_ = df
        self.aicc_ = score
        self.weights_ = weights
        self.log_likelihood_ = ll
        self.n_used_ = np.full(L, n_total)
        self.n_impossible_ = n_impossible
        self.n_points_ = int(x.size)
        return LinearMap(knots, values)

    def predict_path(self, scores, clip: bool = True) -> np.ndarray:
        """Every path model's prediction, shape ``(n_lambdas, len(scores))``.

        Scores go through the fitted input transform; models are extrapolated linearly beyond the
        training scores and, with ``clip=True``, clipped to [0, 1] (what is averaged).
        ``weights_ @ predict_path(s)`` equals ``predict(s)`` up to rounding.
        """
        self._check_fitted()
        if not hasattr(self, "path_"):
            raise ValueError("the path is not stored in a calibrator loaded from JSON; refit")
        s = apply_input_transform(as_scores(scores), self.map_.input_transform)
        out = np.vstack([self.path_.evaluate(j, s) for j in range(self.lambdas_.size)])
        return np.clip(out, 0.0, 1.0) if clip else out
