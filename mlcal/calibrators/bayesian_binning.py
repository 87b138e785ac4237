"""SBB and ABB: selection and averaging over Bayesian binnings (Naeini, Cooper & Hauskrecht,
"Binary Classifier Calibration Using a Bayesian Non-Parametric Approach", SDM 2015).

Both methods score every partition of the sorted training scores into contiguous bins with the
paper's Bayesian score (Eq. 2.4-2.7): a Beta(1, 1) marginal likelihood per bin times a structure
prior in which a boundary between consecutive scores ``k`` and ``k+1`` is present with
probability ``1 - exp(-lam * gap_k / range)``. A zero gap has prior probability 0, so tied scores
can never be split; the methods therefore run on tie-collapsed weighted points. SBB keeps the
best binning, ABB averages all ``2**(N-1)`` of them. The dynamic programs live in
:mod:`mlcal._solvers.binning_dp`.
"""

from __future__ import annotations

import warnings

import numpy as np

from mlcal._solvers.binning import equal_frequency_bins
from mlcal._solvers.binning_dp import (BinningProblem, abb_point_means, backward_log_sums,
                                       make_problem, sbb_binning)
from mlcal._solvers.ties import midpoint_cuts, sort_and_collapse
from mlcal.calibrators._params import Integer, IsNone, ListOf, Options, Real
from mlcal.calibrators.base import (BOUND_SMOOTHING_CONSTRAINTS, MAX_MAP_SIZE_CONSTRAINTS,
                                    BaseCalibrator)
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, StepMap

#: lam values tried when ``lam="auto"``: half-decades from 0.1 to 1000 (lam is the prior mean
#: number of bin boundaries over the whole score range).
DEFAULT_LAMBDA_GRID = (0.1, 0.31622776601683794, 1.0, 3.1622776601683795, 10.0,
                       31.622776601683793, 100.0, 316.22776601683796, 1000.0)
#: above this many unique scores the data are pre-aggregated (the programs are O(N^2)).
DEFAULT_MAX_UNIQUE = 5000


class PreAggregationWarning(UserWarning):
    """SBB/ABB grouped the unique training scores into fewer weighted points before fitting."""


class _BayesianBinning(BaseCalibrator):
    """Shared data preparation, lam selection and map building of SBB and ABB.

    A subclass implements ``_point_values(problem, lam, backward) -> values`` giving the
    calibrated probability at each (possibly pre-aggregated) training point; ``backward`` is the
    backward sum-product row of ``lam`` (``backward[0]`` is its log evidence).
    """

    requires_unit_interval = True
    map_kinds = ("step",)
    _parameter_constraints = {
        "lam": [Options(("auto",)), Real(0.0, closed="neither")],
        "lam_grid": [IsNone(), ListOf(Real(0.0, closed="neither"))],
        "max_unique": [IsNone(), Integer(2)],
        "max_map_size": MAX_MAP_SIZE_CONSTRAINTS,
        "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS,
    }

    def __init__(self, lam: float | str = "auto", lam_grid: list[float] | None = None,
                 max_unique: int | None = DEFAULT_MAX_UNIQUE, input_transform: str = "auto",
                 max_map_size: int | None = DEFAULT_MAX_MAP_SIZE,
                 bound_smoothing: float | None = None):
        self.lam = lam
        self.lam_grid = lam_grid
        self.max_unique = max_unique
        self.input_transform = input_transform
        self.max_map_size = max_map_size
        self.bound_smoothing = bound_smoothing

    # -- parameters ----------------------------------------------------------------------------
    # (values already checked against _parameter_constraints by fit)
    def _lambda_grid(self) -> np.ndarray:
        if isinstance(self.lam, str):   # "auto"
            grid = DEFAULT_LAMBDA_GRID if self.lam_grid is None else self.lam_grid
            return np.array([float(v) for v in grid])
        return np.array([float(self.lam)])

    def _max_unique(self) -> int | None:
        return None if self.max_unique is None else int(self.max_unique)

    # -- fitting -------------------------------------------------------------------------------
    def _fit(self, scores, y, w):
        grid = self._lambda_grid()
        max_unique = self._max_unique()
        x, ybar, wsum = sort_and_collapse(scores, y, w)
        pos = ybar * wsum
        lo = hi = x
        self.n_unique_ = int(x.shape[0])
        self.aggregated_ = bool(max_unique is not None and x.shape[0] > max_unique)
        if self.aggregated_:
            # weighted quantile groups of whole tie blocks; the binnings then run over the
            # boundaries between groups, with those gaps in the prior (exact for that family)
            group = equal_frequency_bins(wsum, max_unique)
            first = np.concatenate(([0], np.flatnonzero(np.diff(group)) + 1))
            last = np.append(first[1:] - 1, x.shape[0] - 1)
            lo, hi = x[first], x[last]
            pos = np.add.reduceat(pos, first)
            wsum = np.add.reduceat(wsum, first)
            warnings.warn(
                f"{type(self).__name__}: {self.n_unique_} unique scores exceed max_unique="
                f"{max_unique}; pre-aggregated them into {lo.shape[0]} weighted quantile groups "
                "(tied scores are never split; bin boundaries can only fall between groups). "
                "Raise max_unique, or set it to None, to use every unique score at O(N^2) cost.",
                PreAggregationWarning, stacklevel=3)
        self.n_points_ = int(lo.shape[0])
        span = x[-1] - x[0]
        gaps = (lo[1:] - hi[:-1]) / span if lo.shape[0] > 1 else np.empty(0)
        problem = make_problem(pos, np.maximum(wsum - pos, 0.0), gaps)

        backward = backward_log_sums(problem, grid)     # one O(N^2) pass for the whole grid
        evidence = backward[:, 0].copy()
        best = int(np.argmax(evidence))          # first (smallest lam) on exact ties
        self.lambda_grid_ = grid
        self.log_evidence_ = evidence
        self.lambda_ = float(grid[best])
        values = self._point_values(problem, self.lambda_, backward[best])

        # one cut halfway between neighbouring points (the upper point itself when the two are
        # adjacent floats and the midpoint rounds down), so every training score keeps its own
        # value; then merge runs of identical values
        cuts = midpoint_cuts(hi[:-1], lo[1:])
        keep = values[1:] != values[:-1]
        return StepMap(cuts[keep], np.clip(np.concatenate((values[:1], values[1:][keep])), 0, 1))

    def _point_values(self, problem: BinningProblem, lam: float,
                      backward: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


_SHARED_DOC = """
    Parameters
    ----------
    lam : float or "auto", default="auto"
        Rate of the boundary prior: a boundary between consecutive (unique) training scores
        ``k`` and ``k+1`` has prior probability ``1 - exp(-lam * d(k, k+1) / d(1, N))``, so
        ``lam`` is the prior mean number of boundaries over the score range. The papers do not
        state its value. ``"auto"`` picks, at every fit, the value of ``lam_grid`` with the
        largest marginal likelihood ``sum_M P(M | lam) P(D | M)`` (empirical Bayes; the first,
        smallest one on exact ties).
    lam_grid : list of float or None, default=None
        Values tried by ``lam="auto"``; None means :data:`DEFAULT_LAMBDA_GRID` (0.1 to 1000 in
        half-decades). Ignored when ``lam`` is a number.
    max_unique : int or None, default=5000
        The dynamic programs take O(N^2) time in the number N of unique scores. Above
        ``max_unique`` unique scores, the (sorted, tie-collapsed) points are first grouped into
        ``max_unique`` weighted equal-frequency groups (whole tie blocks, never split), a
        :class:`PreAggregationWarning` is emitted and ``aggregated_`` is set. The fit is then
        exact over binnings whose boundaries fall between groups, with the prior of each
        boundary computed from the real gap between the groups. None never aggregates.
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        The score prior depends on gaps relative to the range, so it is invariant to affine
        transforms of the scores but not to monotone ones. The papers always work on
        probabilities (raw SVM margins are first passed through the logistic sigmoid), which also
        bounds the range so that one outlying margin cannot dominate ``d(1, N)``. Hence
        ``requires_unit_interval = True``: with "auto", scores outside [0, 1] are squashed with
        the sigmoid (recorded on the map), probabilities are used as they are.
    max_map_size : int or None, default=10000
        Cap on the size of the fitted map (bins); a larger map is reduced by
        :func:`mlcal.maps.reduce_map` and ``map_reduction_`` records the original size and the
        measured sup-norm error. ``None`` keeps the map as fitted.
    bound_smoothing : float or None, default=None
        ``a > 0`` keeps predictions off exactly 0 and 1: runs of the map at a bound take their
        Beta(a, a) posterior mean, clipped to their neighbours (monotone maps stay monotone; see
        :func:`mlcal.calibrators.base.keep_off_bounds`). ``None`` keeps the map as fitted.

    Attributes
    ----------
    map_ : StepMap
        Cuts halfway between neighbouring training points (unique scores, or groups when
        aggregated); a test score is given the value of the training point it is nearest to,
        and a score equal to a cut takes the upper point's value.
    lambda_ : float
        The ``lam`` used.
    lambda_grid_ : ndarray
        The values of ``lam`` evaluated (just ``[lam]`` when ``lam`` is a number).
    log_evidence_ : ndarray
        ``log sum_M P(M | lam) P(D | M)`` for each value in ``lambda_grid_``.
    n_unique_ : int
        Number of unique training scores (after the input transform).
    n_points_ : int
        Number of points the dynamic programs ran on (``n_unique_`` unless aggregated).
    aggregated_ : bool
        Whether the unique scores were pre-aggregated into ``max_unique`` groups.
    map_reduction_ : MapReduction
        Original map size, final size and measured sup-norm error of the size cap.
"""


@register_calibrator("sbb")
class SBB(_BayesianBinning):
    __doc__ = """Selection over Bayesian Binnings (SBB): the maximum a-posteriori binning.

    Among all ``2**(N-1)`` partitions of the N sorted unique training scores into contiguous
    bins, the one maximising ``P(M) P(D | M)`` (SDM 2015, Eq. 2.7) is found by dynamic
    programming with back-pointers in log space (``lnGamma`` for the factorials), O(N^2) time
    and O(N) memory. Each bin predicts the Beta(1, 1) posterior mean ``(n1 + 1) / (n + 2)``
    (the paper's "smoothing of these counts, consistent with the Bayesian priors"). Sample
    weights act as fractional counts.
    """ + _SHARED_DOC + """    n_bins_ : int
        Number of bins of the selected binning.
    log_score_ : float
        ``log P(M) P(D | M)`` of the selected binning.
    log_posterior_ : float
        ``log P(M | D)`` of the selected binning (``log_score_`` minus the log evidence).

    Examples
    --------
    >>> import numpy as np
    >>> from mlcal.calibrators.bayesian_binning import SBB
    >>> s = np.linspace(0, 1, 200); y = (s > 0.5).astype(int)
    >>> SBB().fit(s, y).n_bins_
    2
    """

    def _point_values(self, problem, lam, backward):
        starts, log_score = sbb_binning(problem, lam)
        ends = np.append(starts[1:], problem.n_points)
        n1 = problem.cum_pos[ends] - problem.cum_pos[starts]
        n = n1 + problem.cum_neg[ends] - problem.cum_neg[starts]
        self.n_bins_ = int(starts.shape[0])
        self.log_score_ = log_score
        self.log_posterior_ = log_score - float(backward[0])
        return np.repeat((n1 + 1.0) / (n + 2.0), ends - starts)


@register_calibrator("abb")
class ABB(_BayesianBinning):
    __doc__ = """Averaging over Bayesian Binnings (ABB): the exact Bayesian model average.

    The calibrated probability is ``P(x) = sum_M P(M | D) P(x | M)`` over all ``2**(N-1)``
    binnings of the N sorted unique training scores (SDM 2015, Eq. 2.8), with each bin
    predicting ``(n1 + 1) / (n + 2)``.

    **Sum, not max.** The paper's Eq. 2.9 builds this average from ``V^f`` and ``V^b``, which
    its text defines as the *highest* scores of the prefix and suffix binnings (the SBB max
    recursion). That weights each bin by its best completion only and is not the model average
    of Eq. 2.8. Here ``V^f`` and ``V^b`` are *sums* over all prefix and suffix binnings
    (forward-backward, sum-product), so ``pi(l, u) = V^f(l-1) Score(l, u) V^b(u+1) / Z`` is the
    exact posterior probability that ``[l, u]`` is a bin, and ``P(x)`` the exact average. All
    of it runs in log space (log-sum-exp, ``lnGamma``).

    **Exact fold.** ``P(x)`` depends only on the training point ``x`` is attached to (the
    nearest one; cuts at the midpoints), so the average is computed once for every training
    point, in O(N^2) time and O(N) memory with a difference array over bins, and stored as a
    :class:`~mlcal.maps.StepMap`. This replaces the paper's per-query O(N^2) evaluation and its
    approximate cache of R equally spaced bins.
    """ + _SHARED_DOC + """    expected_n_bins_ : float
        Posterior mean number of bins.

    Examples
    --------
    >>> import numpy as np
    >>> from mlcal.calibrators.bayesian_binning import ABB
    >>> s = np.linspace(0, 1, 200); y = (s > 0.5).astype(int)
    >>> p = ABB().fit(s, y).predict([0.1, 0.9])
    >>> bool(p[0] < 0.05 and p[1] > 0.95)
    True
    """

    def _point_values(self, problem, lam, backward):
        values, _log_z, n_bins = abb_point_means(problem, lam, backward)
        self.expected_n_bins_ = n_bins
        return values
