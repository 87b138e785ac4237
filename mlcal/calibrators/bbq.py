"""BBQ: Bayesian Binning into Quantiles (Naeini, Cooper & Hauskrecht, AAAI 2015)."""

from __future__ import annotations

import numpy as np

from mlcal._solvers.bbq_models import (SortedCalibrationSet, bbq_bin_range, elbow,
                                       fold_step_functions)
from mlcal._solvers.model_average import relative_likelihood_weights, relative_likelihoods
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators._params import Options, Real
from mlcal.calibrators.base import (BOUND_SMOOTHING_CONSTRAINTS, MAX_MAP_SIZE_CONSTRAINTS,
                                    BaseCalibrator)
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, StepMap

BIN_ESTIMATES = ("authors", "beta_mean")


@register_calibrator("bbq")
class BBQ(BaseCalibrator):
    """Bayesian Binning into Quantiles: a selective Bayesian average of equal-frequency binnings.

    The recipe is the authors' MATLAB code (``BBQ/build.m``, the "BDeu2" score):

    * candidates: equal-frequency binnings with B = max(1, floor(N^(1/3)/10)) ...
      min(ceil(N/5), ceil(10 N^(1/3))) bins (exact integer roots; N = total sample weight),
      both ends capped at the number M of unique scores (our rule: no binning can realise more
      than M bins, and the cap bounds the cost by M, so fitting from pre-aggregated counts with
      large weights is as cheap as from the distinct scores; in the paper's setting of unit
      weights without ties ``ceil(N/5) < M`` and nothing changes);
    * score: Beta-binomial log marginal likelihood with 2 prior pseudo-counts per bin centred on
      the bin midpoint clipped to [0.005, 0.995]; S = -2 log ML;
    * bin estimate ``(n1 + p0) / (n + 1)`` with ``p0 = (sum of the positives' scores + m) /
      (n1 + 1)``, m the bin midpoint (edges 0 and 1 at the outer ends);
    * relative likelihoods exp((S_min - S)/2), pruned by the elbow rule with threshold
      ``alpha``, then renormalised;
    * the kept models are folded into one :class:`~mlcal.maps.StepMap` whose thresholds are the
      union of their cuts (a score equal to a cut takes the upper bin, as in the code).

    Ties: equal scores are collapsed first and never split across bins (a nominal boundary
    inside a run of equal scores moves to the end of the run, so a model may realise fewer than
    B bins). The code's own rule can leave a tie run partly in two bins depending on the input
    order, which no function of the score reproduces; it is not offered. Without ties the bins
    equal the code's.

    Degenerate inputs (the code fails on both): for N <= 5 the family is the one-bin model, and
    with a single distinct score every model realises one bin, so all score the same and the
    elbow keeps all of them (it keeps every model whenever all relative likelihoods are equal);
    either way the map is the constant ``(n1 + p0)/(n + 1)`` with m = 0.5.

    Sample weights are frequency weights: they enter every count (n, n1, N), so integer weights
    equal repeated rows and rescaling all weights changes the fit.

    Parameters
    ----------
    alpha : float, default=0.001
        Elbow threshold on gaps between sorted relative likelihoods, in units of their variance.
    bin_estimate : {"authors", "beta_mean"}, default="authors"
        ``"authors"``: the code's ``(n1 + p0)/(n + 1)``; ``"beta_mean"``: the posterior mean
        ``(n1 + 2p)/(n + 2)`` of the scoring prior (p the clipped midpoint).
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        BBQ needs scores in [0, 1]; "auto" applies the logistic sigmoid to raw scores.
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
        The folded ensemble.
    n_total_ : float
        N, the total sample weight that sets the range of B.
    candidate_n_bins_ : ndarray of int
        Nominal B of every candidate model.
    scores_ : ndarray
        Score S = -2 log ML of every candidate (smaller is better).
    kept_ : ndarray of int
        Indices into the candidate arrays of the models kept by the elbow, best first.
    n_bins_ : ndarray of int
        Nominal B of each kept model.
    n_realised_bins_ : ndarray of int
        Bins actually realised by each kept model (fewer than B when ties merge boundaries).
    weights_ : ndarray
        Normalised weight of each kept model (sums to 1).
    models_ : list of StepMap
        Each kept model on its own; ``map_`` equals ``sum(w * m(s))`` over these (before any
        size cap).
    map_reduction_ : MapReduction
        Original map size, final size and measured sup-norm error of the size cap.

    Examples
    --------
    >>> import numpy as np
    >>> from mlcal.calibrators.bbq import BBQ
    >>> rng = np.random.default_rng(0)
    >>> s = rng.random(20000); y = (rng.random(20000) < s ** 2).astype(int)
    >>> cal = BBQ().fit(s, y)
    >>> cal.predict([0.2, 0.5, 0.8]).round(2).tolist()   # true probabilities 0.04, 0.25, 0.64
    [0.02, 0.24, 0.6]
    """

    requires_unit_interval = True

    map_kinds = ("step",)
    _parameter_constraints = {"alpha": [Real(0.0)], "bin_estimate": [Options(BIN_ESTIMATES)],
                              "max_map_size": MAX_MAP_SIZE_CONSTRAINTS,
        "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS}

    def __init__(self, alpha: float = 0.001, bin_estimate: str = "authors",
                 input_transform: str = "auto",
                 max_map_size: int | None = DEFAULT_MAX_MAP_SIZE,
                 bound_smoothing: float | None = None):
        self.alpha = alpha
        self.bin_estimate = bin_estimate
        self.input_transform = input_transform
        self.max_map_size = max_map_size
        self.bound_smoothing = bound_smoothing

    def _fit(self, scores, y, w):
        alpha = float(self.alpha)
        data = SortedCalibrationSet(*sort_and_collapse(scores, y, w))
        # never more nominal bins than unique scores (see the class docstring): this bounds the
        # cost by the number of distinct scores, whatever the total weight
        b_min, b_max = (min(b, data.n_points) for b in bbq_bin_range(data.n_total))
        candidates = np.arange(b_min, b_max + 1, dtype=np.int64)
        log_ml = data.log_marginal_likelihoods(candidates)

        scores = -2.0 * log_ml                     # S = -2 log ML
        kept = elbow(relative_likelihoods(scores), alpha)
        weights = relative_likelihood_weights(scores[kept])
        members = [data.model(int(candidates[k]), self.bin_estimate) for k in kept]
        thresholds, folded = fold_step_functions([m["cuts"] for m in members],
                                                 [m["prob"] for m in members], weights)

        self.n_total_ = data.n_total
        self.candidate_n_bins_ = candidates
        self.scores_ = scores
        self.kept_ = kept
        self.n_bins_ = candidates[kept]
        self.n_realised_bins_ = np.array([m["prob"].size for m in members], dtype=np.int64)
        self.weights_ = weights
        self.models_ = [StepMap(m["cuts"], m["prob"]) for m in members]
        return StepMap(thresholds, np.clip(folded, 0.0, 1.0))
