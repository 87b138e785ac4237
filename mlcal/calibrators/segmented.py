"""``SegmentedCalibrator``: a shared calibration map plus per-segment logit offsets (and
optionally slopes), shrunk toward the shared map by empirical Bayes.

Model
-----
For a row of segment ``g`` with score ``s``, ``logit P(y = 1) = a_g * logit(f(s)) + d_g`` where
``f`` is a shared binary calibration map (any mlcal method, ``"auto"`` by default), ``d_g`` a
per-segment offset and ``a_g`` a per-segment slope (1 unless slopes are enabled). Unseen
segments get ``f(s)`` (``a = 1``, ``d = 0``) or an error (``unseen="raise"``).

Estimation
----------
1. **Shared map.** ``f`` is fitted on all rows with the chosen method; this is the map stored
   and served.
2. **Cross-fitted shared predictions.** The offsets are estimated against out-of-fold
   predictions of the shared method (``n_folds`` folds, stratified by segment and label): fold
   ``k``'s rows are predicted by a map fitted without them. Estimating offsets on the rows the
   shared map was fitted on is biased toward 0: a flexible map (isotonic, spline, ``auto``) has
   already bent toward the large segments' deviations on those rows, most of all where a
   segment dominates a score range, and its in-sample errors are smaller than on new rows, so
   in-sample offsets and their variances understate what the map will do on new data.
   Out-of-fold predictions behave like new rows for the map, which is what the offsets correct
   at predict time (the usual cross-fitting argument). ``n_folds=None`` estimates in-sample
   (faster; fine for two-parameter shared maps such as Platt). When the shared method chooses
   among methods (``auto``), each fold fits the method it chose on all rows
   (``fold_shared="chosen"``, the default), not ``auto`` again: a fold's own choice is often
   another method (a spline or temperature scaling where all rows chose Platt), and offsets
   estimated against that mixture of maps carry the choice's noise into the stored offsets,
   which correct the chosen map (measured: docs/segments.md, sixth round).
   ``fold_shared="repeat"`` repeats the whole shared method per fold (the earlier behaviour).
3. **Per-segment offsets.** With ``l_i = logit(f_oof(s_i))``, ``d_hat_g`` maximises the
   weighted Bernoulli log-likelihood ``sum_{i in g} w_i [y_i (l_i + d) - log(1 + e^{l_i + d})]``
   (safeguarded Newton, all segments at once), and ``v_g = 1 / sum w_i p_i (1 - p_i)`` is the
   inverse Fisher information at the optimum. A segment with one class only has no finite
   maximum: there the likelihood is penalised by a weak normal prior ``d ~ N(0,
   weak_prior_sd^2)`` (the posterior mode, with ``v_g = 1 / (information + weak_prior_sd^-2)``),
   so its estimate is finite and, having a large variance, is shrunk nearly all the way to the
   prior mean below. Rows whose shared probability is exactly 0 or 1 carry no information about
   an offset (no finite offset moves them) and are left out, as in
   :func:`mlcal.maps.reoffset.fit_delta`.
3b. **The shared map's slope within segments (``shared_slope="within"``, the default).** The
   shared map is fitted on all rows, ignoring the segments. Where the segments sit at
   different heights of the score and their miscalibration goes with it (segments high on the
   score also under-predicted), the map's slope absorbs part of that between-segment effect,
   and within each segment the predictions are over-confident; an offset cannot correct a
   slope. With ``"within"`` a common slope ``a`` on the shared logit is fitted with the
   segment intercepts: ``logit p = a l_i + d_g``, ``d_g ~ N(c_g, tau^2)`` with the centre and
   ``tau^2`` of the offsets' plug-in prior (step 4; REML's when averaging over ``tau``), at the
   mode of the penalised likelihood
   (:func:`mlcal.calibrators.segment_shrinkage.common_slope_fit`), alternating
   ``WITHIN_ROUNDS`` (3) times between the prior given ``a`` and ``a`` given the prior. Since
   every segment has its own intercept, ``a`` is the slope within the segments. Steps 3-6 then
   run on ``a l``, and ``a`` is stored as the slope of every segment with information (times
   its own slope where step 5 fits one): the map type and format are unchanged, and an unseen
   segment still gets the shared map, the best guess for a segment of unknown level. Where the
   offsets have no spread (``tau^2 = 0``, or ``heterogeneity_alpha`` finds no effect) ``a = 1``.
   Measured (docs/segments.md, ninth round): the held-out within-segment slope on the
   confounded scenario goes from 0.973 to 0.999 (truth 1.008), and the held-out log loss is
   lower on every simulated and real set with a segment effect.
4. **Empirical Bayes.** ``d_g ~ N(mu, tau^2)`` and ``d_hat_g | d_g ~ N(d_g, v_g)``, so
   marginally ``d_hat_g ~ N(mu, tau^2 + v_g)``. ``(mu, tau^2)`` are estimated by restricted
   maximum likelihood (REML; :func:`mlcal.calibrators.segment_shrinkage.reml_prior`) rather than the
   DerSimonian--Laird method of moments: REML uses the full normal marginal likelihood (it is
   efficient where the moment estimator is not, when the ``v_g`` differ by orders of
   magnitude, as they do between a segment of 50 rows and one of 50,000), and unlike plain
   maximum likelihood it corrects for ``mu`` being estimated from the same segments, which
   would otherwise bias ``tau^2`` down (over-shrinking) when there are few segments.
   The stored offset is the posterior mean ``d_g* = mu + tau^2 / (tau^2 + v_g) (d_hat_g - mu)``:
   a segment with little data (large ``v_g``) is pulled to ``mu``, close to the shared map
   (the shared map is fitted on all rows, so ``mu`` is near 0); a large segment keeps nearly its
   own estimate. With ``tau="integrated"`` (and by default, ``tau="auto"``, when fewer than
   ``INTEGRATE_BELOW`` segments are informative) the stored offset is instead the posterior mean
   averaged over ``tau``: ``E[mu(tau) + tau^2 / (tau^2 + v_g) (d_hat_g - mu(tau)) | data]``
   under a flat prior on ``mu`` and a half-Cauchy prior on ``tau`` (Gelman 2006), whose
   posterior is the REML likelihood times the prior; with two or three segments REML's
   ``tau^2`` is a poor point estimate (often exactly 0, or large from one extreme pair), and
   averaging over it is the standard remedy. ``offset_prior_`` stays REML's ``(mu, tau^2)``
   and ``offset_shrinkage_`` is the averaged factor.
   **The plug-in's prior (``shrinkage``).** By default (``shrinkage="moments"``) the plug-in
   uses the DerSimonian--Laird moment estimate of ``tau^2``
   (:func:`mlcal.calibrators.segment_shrinkage.moments_tau2`) and shrinks toward 0, the shared
   map itself (fitted on all rows, it is calibrated in the large), instead of REML's
   ``(mu, tau^2)`` (``shrinkage="reml"``, the behaviour before the parameter existed). REML's
   ``tau^2`` is the more accurate estimate of the spread, but on held-out data the worst
   segment was smaller with the moments and centre 0 on every simulated scenario, with
   unchanged log loss (docs/segments.md, seventh round): the moment estimate was the smaller
   in most draws, and with centre 0 no offset moves toward an ``mu`` estimated from noise.
   ``shrinkage="regression"`` keeps the moments but lets the centre move with the segment's
   mean out-of-fold shared logit ``x_g``: ``d_g ~ N(beta (x_g - x_bar), tau^2)`` with
   ``x_bar`` the ``1/v``-weighted mean and ``(beta, tau^2)`` by the moments of a
   meta-regression (:func:`mlcal.calibrators.segment_shrinkage.moments_regression_prior`).
   Where a segment's miscalibration goes with its scores (segments that sit high on the
   score scale also being under-predicted, as when the segment confounds the base model's
   features), a small segment is pulled toward what segments at its score level need rather
   than toward 0. Measured, it lowers the log loss there but not the worst segment (the
   segments large enough to be ranked keep most of their own estimate) and costs a little
   where offsets do not follow the scores, so it is opt-in (docs/segments.md, eighth round).
   **A test of the segment effect (``heterogeneity_alpha``, 0.05 by default).** The moment
   estimate of ``tau^2`` is positive whenever Cochran's ``Q`` exceeds its degrees of freedom,
   which with no segment effect at all happens in about half of the samples; the offsets then
   add variance and nothing else. With ``heterogeneity_alpha`` set, the plug-in first tests equal
   offsets by Cochran's chi-square test
   (:func:`mlcal.calibrators.segment_shrinkage.homogeneity_pvalue`) and, unless the p-value is
   below that level, stores the shared map alone (offsets 0, ``offset_prior_ == (0, 0)``,
   ``no_effect_detected_``). The average over ``tau`` (few segments) is not tested: there the
   posterior of ``tau`` already weighs how little a handful of offsets show. With no segment
   effect at all the moment spread was above 0 by chance in 15 of 40 draws, costing
   +0.00004 nats of held-out log loss against the shared map alone; at level 0.05 the test
   finds an effect in 1 of 40 (docs/segments.md, ninth round).
5. **Slopes (``min_rows_for_slope=2`` and ``slope_alpha=0.05`` by default).** For segments
   with total weight ``>= min_rows_for_slope`` and both classes, ``(a_hat_g, b_g)`` of
   ``logit p = a l + b`` are fitted by maximum likelihood, and ``a_hat_g`` (variance from the
   2x2 inverse Fisher information) is shrunk the same way
   toward its own REML prior mean, giving ``a_g*`` (at least ``MIN_SLOPE``). Given ``a_g*``,
   the offset of such a segment is re-estimated with the slope fixed (step 3 on ``a_g* l``) and
   shrunk with the offset prior of step 4. Segments below the threshold keep ``a = 1``.
   **A test of the slopes (``slope_alpha``).** With ``slope_alpha`` set, Cochran's test
   (:func:`mlcal.calibrators.segment_shrinkage.homogeneity_pvalue`) is run on the ``a_hat_g``
   and their variances first, and unless it rejects equal slopes at that level the slopes
   are dropped: the fit stored is exactly the fit without slopes (``slopes_tested_out_``).
   Slopes shrunk toward their REML mean still add a parameter per segment; where the slopes
   do not differ they only add variance (docs/segments.md, tenth and eleventh rounds).
   Measured at level 0.05 with a slope for every segment with both classes (the defaults
   since the eleventh round): the slopes scenario's held-out log loss -0.0046 nats, gapminder
   -0.0013, diabetes -0.0006 (noise), the sets whose segments share one slope unchanged but
   for one false positive in 40 draws.
6. **Choice (``select="cv"``, opt-in).** Shrinkage minimises the error averaged over segments, but
   any adjustment also costs variance: with few segments (two sexes, say) and a small effect
   the REML variance is unreliable and the offsets can lose to the shared map alone, and slopes
   cost a parameter per large segment. So the adjustment itself is chosen by cross-validation
   over the cross-fitting folds: for each fold, steps 3-5 are run on the other folds' rows
   (against the same out-of-fold shared logits) and the fold's rows are scored; the summed
   held-out log losses of the shared map alone, the offsets and the offsets with slopes are
   compared, and the richer adjustment must win by more than ``CV_MARGIN`` (``1e-6`` per unit
   of weight; the sums are sequential, so the choice is the same on every CPU). The stored
   adjustment is then refitted on all rows. Without cross-fitting (``n_folds=None``) there are
   no held-out rows and nothing is chosen.

Sample weights are frequency weights throughout (integer weights equal repeated rows; the
slope threshold compares the total weight).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from mlcal._safe_json import MAX_DOCUMENT_BYTES, dumps_safe
from mlcal._solvers.detmath import det_log1p_array, det_log_array
from mlcal._validation import check_fit_inputs
from mlcal.calibrators._params import (Constraint, Integer, InvalidParameterError, IsNone,
                                       Options, Real, short_repr, validate_params)
from mlcal.calibrators.base import (BaseCalibrator, CalibratorFormatError,
                                    calibrator_document, parse_document, read_document_header)
from mlcal.calibrators.catalog import available_calibrators, calibrator_class, get_calibrator
from mlcal.maps import MapFormatError
from mlcal.maps.segment_keys import SegmentKeyError, encode_rows, segment_columns_of
from mlcal.calibrators.segment_shrinkage import (common_slope_fit, homogeneity_pvalue,
                                                 logistic_loglik, moments_regression_prior,
                                                 moments_tau2, reml_prior, segment_offsets,
                                                 segment_slopes, shrink, shrink_integrated,
                                                 tau_posterior)
from mlcal.maps.segmented import UNSEEN_POLICIES, SegmentedMap

SEGMENTED_METHOD = "segmented"
#: the smallest slope stored (a slope must be positive; see mlcal.maps.segmented)
MIN_SLOPE = 2.0 ** -6
MAX_SEED = 2 ** 53 - 1
#: ``select="cv"``: a richer adjustment must lower the cross-validated log loss by more than
#: this per unit of weight
CV_MARGIN = 1e-6
#: what ``select`` means for a document written before the parameter existed
LEGACY_SELECT = "off"
SELECT_CHOICES = ("cv", "off")
#: what ``tau`` means for a document written before the parameter existed
LEGACY_TAU = "plugin"
TAU_CHOICES = ("auto", "integrated", "plugin")
#: ``tau="auto"`` integrates over tau when fewer segments than this carry information about
#: their offset (REML's tau^2 from a handful of offsets is a poor point estimate; with many
#: the two agree, and on 60 segments with no real effect the plug-in's exact 0 was measured
#: better: docs/segments.md, fifth round)
INTEGRATE_BELOW = 10
#: what ``fold_shared`` means for a document written before the parameter existed
LEGACY_FOLD_SHARED = "repeat"
FOLD_SHARED_CHOICES = ("chosen", "repeat")
#: what ``shrinkage`` means for a document written before the parameter existed
LEGACY_SHRINKAGE = "reml"
SHRINKAGE_CHOICES = ("moments", "reml", "regression")
#: what ``shared_slope`` means for a document written before the parameter existed
LEGACY_SHARED_SLOPE = "marginal"
SHARED_SLOPE_CHOICES = ("marginal", "within")
#: ``shared_slope="within"``: rounds of (prior given the slope, slope given the prior)
WITHIN_ROUNDS = 3


class SharedMethod(Constraint):
    """The name of a registered binary method (``"auto"`` included), checked against the
    catalog when validating."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in available_calibrators()

    def describe(self) -> str:
        return "a registered binary method name (" + ", ".join(available_calibrators()) + ")"

    def spec(self) -> dict[str, Any]:
        return Options(tuple(available_calibrators())).spec()


def _missing_at(col: Any, i: int) -> bool:
    import pandas as pd

    v = col.iloc[i] if isinstance(col, pd.Series) else col[i]
    return bool(pd.isna(v))


def _logits(q: np.ndarray) -> np.ndarray:
    return det_log_array(q) - det_log1p_array(-q)


class SegmentedCalibrator(BaseEstimator):
    """A shared calibration map plus per-segment logit offsets (and optional slopes), shrunk
    toward the shared map by empirical Bayes (estimation in the module notes and
    docs/segments.md).

    Parameters
    ----------
    method : str or BaseCalibrator, default="auto"
        How the shared map is fitted: a registered binary method name or an unfitted mlcal
        calibrator (cloned; the document records its method name only).
    unseen : {"shared", "raise"}, default="shared"
        A segment not seen in ``fit`` (or with a missing key value) gets the shared map, or
        raises :class:`~mlcal.maps.segmented.UnseenSegmentError`.
    n_folds : int or None, default=5
        Folds of the cross-fitted shared predictions the offsets are estimated against;
        ``None`` estimates them on in-sample predictions. Falls back to in-sample when a class
        has fewer rows than folds (``cross_fitted_`` says which was done).
    min_rows_for_slope : int or None, default=2
        Segments with at least this total weight (and both classes) also get a shrunk slope
        (kept only if ``slope_alpha``'s test finds the slopes unequal); ``None``: offsets only
        (the default before the eleventh round of docs/segments.md).
    weak_prior_sd : float, default=10.0
        Standard deviation of the weak normal prior on the offset of a segment with one class
        only (whose maximum-likelihood offset is infinite).
    seed : int, default=0
        Seed of the fold assignment.
    select : {"cv", "off"}, default="off"
        ``"cv"``: choose the adjustment by cross-validated log loss over the cross-fitting
        folds: the shared map alone (``adjustment_ == "none"``: slopes 1, offsets 0),
        offsets, or offsets and slopes (when ``min_rows_for_slope`` lets a segment have one);
        a richer adjustment is kept only if it lowers the held-out log loss (module notes,
        step 6). Needs cross-fitted predictions: with ``n_folds=None`` (or when
        cross-fitting falls back to in-sample) nothing is chosen. ``"off"``: always fit the
        offsets (and slopes), the behaviour before this parameter existed, which is what a
        document without it is read as.
    tau : {"auto", "plugin", "integrated"}, default="auto"
        How the offsets' prior spread enters their shrinkage. ``"plugin"``: REML's point
        estimate of ``tau^2`` (module notes, step 4), the behaviour before this parameter
        existed and what a document without it is read as. ``"integrated"``: the posterior
        means averaged over the posterior of ``tau`` (flat prior on ``mu``, half-Cauchy prior of
        scale 1 logit on ``tau``; deterministic quadrature,
        :func:`~mlcal.calibrators.segment_shrinkage.tau_posterior`), which accounts for how
        poorly a handful of offsets determine ``tau``. ``"auto"``: integrated when fewer than
        ``INTEGRATE_BELOW`` (10) segments carry information about their offset, the plug-in
        otherwise (with many segments the two nearly agree).
    fold_shared : {"chosen", "repeat"}, default="chosen"
        What each cross-fitting fold fits when the shared method chooses among methods
        (``"auto"``): ``"chosen"``, the method (with its parameters) that the shared calibrator
        chose on all rows, so the out-of-fold predictions the offsets are estimated against
        come from the kind of map that is stored; ``"repeat"``, the whole shared method again,
        ``auto`` choosing anew in each fold (the behaviour before this parameter existed, and
        what a document without it is read as). Methods that choose nothing fit the same either
        way. Module notes, step 2; docs/segments.md, sixth round.
    shrinkage : {"moments", "reml", "regression"}, default="moments"
        The prior of the offsets' plug-in shrinkage (``tau="plugin"``, or ``tau="auto"`` with
        at least ``INTEGRATE_BELOW`` informative segments; the averaging over ``tau`` is
        unchanged). ``"moments"``: ``tau^2`` by the DerSimonian--Laird method of moments
        (:func:`~mlcal.calibrators.segment_shrinkage.moments_tau2`) and the offsets shrunk
        toward 0, the shared map. ``"reml"``: REML's ``(mu, tau^2)``, shrunk toward ``mu``
        (the behaviour before this parameter existed, and what a document without it is read
        as). ``"regression"``: the moments of a meta-regression on the segment's mean shared
        logit, each offset shrunk toward that line (``offset_centre_``) instead of 0. Module
        notes, step 4; docs/segments.md, seventh and eighth rounds.
    shared_slope : {"marginal", "within"}, default="within"
        ``"marginal"``: the shared map as fitted on all rows (the behaviour before this
        parameter existed, and what a document without it is read as). ``"within"``: a common
        slope on the shared logit, fitted jointly with the segment intercepts, is stored as the
        segments' slopes, so that within each segment the slope is the within-segment one
        (module notes, step 3b; docs/segments.md, ninth round).
    heterogeneity_alpha : float in (0, 1) or None, default=0.05
        The level of Cochran's test of equal offsets before the plug-in shrinkage: when it
        does not reject, the shared map alone is stored (module notes, step 4). ``None`` (the
        behaviour before this parameter existed, and what a document without it is read as):
        no test.
    slope_alpha : float in (0, 1) or None, default=0.05
        With ``min_rows_for_slope``: the level of Cochran's test of equal slopes
        (:func:`~mlcal.calibrators.segment_shrinkage.homogeneity_pvalue` on the slope
        segments' maximum-likelihood slopes ``slope_mle_`` and variances ``slope_var_``).
        The slopes are stored only when the test rejects equal slopes at that level;
        otherwise the fit is exactly the fit without slopes (``min_rows_for_slope=None``),
        ``slopes_tested_out_`` is True and ``slope_mle_``/``slope_var_`` keep the tested
        estimates (module notes, step 5; docs/segments.md, eleventh round). With
        ``select="cv"`` each fold applies the same test. ``None`` (the behaviour before this
        parameter existed, and what a document without it is read as): no test, the slopes
        are always stored.

    Attributes
    ----------
    map_ : SegmentedMap
        The fitted map.
    shared_calibrator_ : BaseCalibrator
        The shared calibrator fitted on all rows (not restored by :meth:`from_dict`).
    segments_ : list of tuple
        Segment keys, in map order.
    segment_weight_, segment_positive_weight_ : ndarray
        Per segment total weight and positive weight.
    offset_mle_, offset_var_ : ndarray
        Per segment (penalised for one-class segments) maximum-likelihood offset and its
        variance (``inf``: no information).
    offset_shrinkage_ : ndarray
        ``tau^2 / (tau^2 + v_g)`` per segment.
    offset_prior_ : tuple of float
        ``(mu, tau^2)`` of the offsets' plug-in prior: ``(0, moments tau^2)`` with
        ``shrinkage="moments"`` (``tau^2`` about the regression line, and ``mu`` 0, with
        ``"regression"``), REML's with ``"reml"`` or when averaged over ``tau``.
    offset_centre_ : ndarray
        Per segment, the centre its offset is shrunk toward: ``beta (x_g - x_bar)`` with
        ``shrinkage="regression"`` in the plug-in, else ``mu`` (0 with ``"moments"``).
    offset_centre_slope_ : float
        ``beta`` of ``shrinkage="regression"`` (0 otherwise).
    slope_mle_, slope_var_ : ndarray
        Per segment slope estimate and variance (``nan`` where no slope was fitted).
    slope_prior_ : tuple of float or None
        REML ``(mu, tau^2)`` of the slopes, when any was fitted.
    cross_fitted_ : bool
        Whether the offsets were estimated on out-of-fold shared predictions.
    adjustment_ : {"none", "offsets", "slopes"}
        The adjustment stored in the map (chosen when ``select="cv"``).
    cv_log_loss_ : dict or None
        The summed held-out log loss of each candidate adjustment (``select="cv"``), or None
        when nothing was chosen.
    common_slope_ : float
        The common within-segment slope of ``shared_slope="within"`` (1 otherwise).
    no_effect_detected_ : bool
        Whether ``heterogeneity_alpha``'s test found no segment effect (the shared map alone
        stored).
    slope_pvalue_ : float or None
        The p-value of ``slope_alpha``'s test of equal slopes on all rows (None when no test
        ran: ``slope_alpha`` or ``min_rows_for_slope`` None, or no segment large enough).
    slopes_tested_out_ : bool
        Whether ``slope_alpha``'s test did not reject equal slopes, so that the fit without
        slopes was stored.
    """

    method_name: ClassVar[str] = SEGMENTED_METHOD
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "unseen": [Options(UNSEEN_POLICIES)],
        "n_folds": [IsNone(), Integer(2)],
        "min_rows_for_slope": [IsNone(), Integer(2)],
        "weak_prior_sd": [Real(0.0, closed="neither")],
        "seed": [Integer(0, MAX_SEED)],
        "select": [Options(SELECT_CHOICES)],
        "tau": [Options(TAU_CHOICES)],
        "fold_shared": [Options(FOLD_SHARED_CHOICES)],
        "shrinkage": [Options(SHRINKAGE_CHOICES)],
        "shared_slope": [Options(SHARED_SLOPE_CHOICES)],
        "heterogeneity_alpha": [IsNone(), Real(0.0, 1.0, closed="neither")],
        "slope_alpha": [IsNone(), Real(0.0, 1.0, closed="neither")],
    }

    def __init__(self, method="auto", *, unseen: str = "shared", n_folds: int | None = 5,
                 min_rows_for_slope: int | None = 2, weak_prior_sd: float = 10.0,
                 seed: int = 0, select: str = "off", tau: str = "auto",
                 fold_shared: str = "chosen", shrinkage: str = "moments",
                 shared_slope: str = "within", heterogeneity_alpha: float | None = 0.05,
                 slope_alpha: float | None = 0.05):
        self.method = method
        self.unseen = unseen
        self.n_folds = n_folds
        self.min_rows_for_slope = min_rows_for_slope
        self.weak_prior_sd = weak_prior_sd
        self.seed = seed
        self.select = select
        self.tau = tau
        self.fold_shared = fold_shared
        self.shrinkage = shrinkage
        self.shared_slope = shared_slope
        self.heterogeneity_alpha = heterogeneity_alpha
        self.slope_alpha = slope_alpha

    # -- parameters ------------------------------------------------------------------------
    @classmethod
    def document_constraints(cls) -> dict[str, list[Constraint]]:
        """The constraints of the document's ``params`` (``method`` as a name)."""
        return {"method": [SharedMethod()], **cls._parameter_constraints}

    def _validate_params(self) -> None:
        params = self.get_params(deep=False)
        validate_params(type(self).__name__, params, self._parameter_constraints)
        m = self.method
        if isinstance(m, str):
            validate_params(type(self).__name__, {"method": m}, {"method": [SharedMethod()]})
        elif not isinstance(m, BaseCalibrator):
            raise InvalidParameterError(f"{type(self).__name__}: parameter 'method' must be a "
                                        "registered binary method name or an mlcal binary "
                                        f"calibrator; got {short_repr(m)}")

    def _shared_prototype(self) -> BaseCalibrator:
        return get_calibrator(self.method) if isinstance(self.method, str) else \
            clone(self.method)

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, scores, y, segments, sample_weight=None) -> "SegmentedCalibrator":
        """Fit the shared map and the shrunk per-segment adjustments.

        Parameters
        ----------
        scores : array-like of shape (n,)
            Uncalibrated scores (finite).
        y : array-like of shape (n,)
            Binary labels in {0, 1}; both classes must occur.
        segments : DataFrame, Series, array-like of shape (n,) or (n, k)
            The segment of each row: one or more columns of strings, integers or booleans
            (see :mod:`mlcal.maps.segment_keys`); no missing values.
        sample_weight : array-like of shape (n,), optional
            Non-negative frequency weights.

        Returns
        -------
        self
        """
        self._validate_params()
        s, z, w = check_fit_inputs(scores, y, sample_weight)
        names, cols = segment_columns_of(segments)
        if len(cols[0]) != s.shape[0]:
            raise SegmentKeyError(f"{s.shape[0]} scores but {len(cols[0])} segment rows")
        group, found, types = encode_rows(names, cols)
        if (group < 0).any():
            i = int(np.flatnonzero(group < 0)[0])
            name = next(n for n, c in zip(names, cols) if _missing_at(c, i))
            raise SegmentKeyError(f"segment column {name!r} has a missing value at row {i}; "
                                  "fill it with a value of its own (e.g. '__missing__') to "
                                  "make missing a segment")
        order = sorted(range(len(found)), key=found.__getitem__)
        keys = [found[i] for i in order]
        rank = np.empty(len(found), dtype=np.int64)
        rank[order] = np.arange(len(found))
        codes = rank[group]
        n_seg = len(keys)
        yf = z.astype(np.float64)

        proto = self._shared_prototype()
        shared = clone(proto).fit(s, z, sample_weight=w)
        q = self._shared_predictions(proto, shared, s, z, w, codes)

        usable = (q > 0.0) & (q < 1.0) & (w > 0.0)
        l, yu, wu, cu = _logits(q[usable]), yf[usable], w[usable], codes[usable]
        weight = np.bincount(codes, weights=w, minlength=n_seg)
        positive = np.bincount(codes, weights=w * yf, minlength=n_seg)
        fit = self._adjust(l, yu, wu, cu, n_seg, slopes=True)
        self.adjustment_ = "slopes" if fit["big"].size else "offsets"
        self.cv_log_loss_ = None
        if self.select == "cv" and self.cross_fitted_:
            self.adjustment_, self.cv_log_loss_ = self._choose(
                l, yu, wu, cu, n_seg, self._folds[usable], bool(fit["big"].size))
        if self.adjustment_ == "none":
            slopes, offsets = np.ones(n_seg), np.zeros(n_seg)
        elif self.adjustment_ == "offsets" and fit["big"].size:
            fit_o = self._adjust(l, yu, wu, cu, n_seg, slopes=False)
            slopes, offsets = fit_o["slopes"], fit_o["offsets"]
        else:
            slopes, offsets = fit["slopes"], fit["offsets"]
        del self._folds
        self.map_ = SegmentedMap(shared.map_, tuple(zip(names, types)), tuple(keys),
                                 slopes, offsets, self.unseen)
        self.shared_calibrator_ = shared
        self.segments_ = list(keys)
        self.segment_weight_, self.segment_positive_weight_ = weight, positive
        self.offset_mle_, self.offset_var_ = fit["d_hat"], fit["v"]
        self.offset_shrinkage_ = fit["factor"]
        self.offset_prior_ = fit["prior"]
        self.offset_centre_, self.offset_centre_slope_ = fit["centre"], fit["centre_slope"]
        self.slope_mle_, self.slope_var_ = fit["a_hat"], fit["a_var"]
        self.slope_prior_ = fit["slope_prior"]
        self.common_slope_ = fit["common_slope"]
        self.no_effect_detected_ = fit["homogeneous"]
        self.slope_pvalue_ = fit["slope_pvalue"]
        self.slopes_tested_out_ = fit["slopes_tested_out"]
        return self

    def _adjust(self, l, y, w, codes, n_seg, *, slopes: bool) -> dict[str, Any]:
        """Steps 3-5 of the module notes on rows with logits ``l`` of the shared map: the
        shrunk offsets (and, with ``slopes`` and ``min_rows_for_slope``, the shrunk slopes of
        the large segments) with their diagnostics."""
        uw = np.bincount(codes, weights=w, minlength=n_seg)
        up = np.bincount(codes, weights=w * y, minlength=n_seg)
        one_class = (uw > 0) & ((up == 0) | (up == uw))
        prior_prec = np.where(one_class, 1.0 / float(self.weak_prior_sd) ** 2, 0.0)
        common, at_one = 1.0, None
        if self.shared_slope == "within":
            common, at_one = self._within_slope(l, y, w, codes, n_seg, prior_prec, uw)
            l = common * l
        if common == 1.0 and at_one is not None:
            # the offsets given the shared logit itself: the within slope's first round solved
            # exactly this (the same call on the same rows)
            d_hat, v = at_one
        else:
            # from 0, not from the last round's offsets: the stored estimates are the same bits
            # as a fit of the offsets given ``a l`` alone
            d_hat, v = segment_offsets(l, y, w, codes, n_seg, prior_prec)
        integrated = self._integrated(v)
        centre_slope = 0.0
        mu, tau2, centre_slope = self._plugin_prior(d_hat, v, l, w, codes, n_seg, uw,
                                                    integrated)
        tested_out = not integrated and self._homogeneous(d_hat, v)
        if tested_out:
            # no segment effect detectable: the shared map alone (module notes, step 4)
            mu, tau2, centre_slope = 0.0, 0.0, 0.0
        if integrated:
            posterior = tau_posterior(d_hat, v)
            offsets, factor = shrink_integrated(d_hat, v, posterior)
        else:
            offsets, factor = shrink(d_hat, v, mu, tau2)
        # a segment without any informative row keeps the shared map
        offsets = np.where(np.isfinite(v), offsets, 0.0)
        centre = np.where(np.isfinite(v), mu, 0.0) if np.ndim(mu) else np.full(n_seg, float(mu))
        out = {"d_hat": d_hat, "v": v, "factor": factor, "centre": centre,
               "centre_slope": float(centre_slope),
               "prior": (0.0 if np.ndim(mu) else float(mu), float(tau2)),
               "slopes": np.ones(n_seg), "offsets": offsets, "a_hat": np.full(n_seg, np.nan),
               "a_var": np.full(n_seg, np.nan), "slope_prior": None,
               "big": np.empty(0, dtype=np.int64), "slope_pvalue": None,
               "slopes_tested_out": False}
        if slopes and self.min_rows_for_slope is not None:
            big = np.flatnonzero((uw >= self.min_rows_for_slope) & ~one_class & (uw > 0))
            if big.size:
                a, _, va = segment_slopes(l, y, w, codes, big, d_hat)
                out["a_hat"][big], out["a_var"][big] = a, va
                if self.slope_alpha is not None:
                    # slope_alpha: the slopes only when Cochran's test finds them unequal;
                    # else the fit without slopes, left as it is (module notes, step 5)
                    p = self._slope_pvalue(out["a_hat"], out["a_var"])
                    out["slope_pvalue"] = p
                    if not p < float(self.slope_alpha):
                        out["slopes_tested_out"] = True
                        big = big[:0]
            if big.size:
                a_mu, a_tau2 = reml_prior(a, va)
                a_star, _ = shrink(a, va, a_mu, a_tau2)
                a_star = np.where(np.isfinite(va), a_star, 1.0)
                out["slopes"][big] = np.maximum(a_star, MIN_SLOPE)
                out["slope_prior"] = (float(a_mu), float(a_tau2))
                # offsets given the shrunk slopes, shrunk with the offset prior
                d2, v2 = segment_offsets(l * out["slopes"][codes], y, w, codes, n_seg,
                                         prior_prec)
                d2s, _ = shrink_integrated(d2, v2, posterior) if integrated \
                    else shrink(d2, v2, mu, tau2)
                out["offsets"][big] = d2s[big]
                out["big"] = big
        out["common_slope"] = common
        out["homogeneous"] = tested_out
        if common != 1.0:
            # the common within-segment slope, for the segments the adjustment applies to
            out["slopes"] = np.where(np.isfinite(v),
                                     np.maximum(out["slopes"] * common, MIN_SLOPE), 1.0)
        return out

    @staticmethod
    def _slope_pvalue(a_hat: np.ndarray, a_var: np.ndarray) -> float:
        """``slope_alpha``: the p-value of Cochran's test of equal slopes on the segments with
        a slope (``nan`` elsewhere; a slope without a finite variance is left out)."""
        var = np.where(np.isfinite(a_var), a_var, np.inf)
        return homogeneity_pvalue(np.nan_to_num(a_hat), var)

    def _integrated(self, v: np.ndarray) -> bool:
        """Whether the offsets are averaged over ``tau`` (``tau``, step 4)."""
        return self.tau == "integrated" or (
            self.tau == "auto" and int(np.isfinite(v).sum()) < INTEGRATE_BELOW)

    def _homogeneous(self, d_hat: np.ndarray, v: np.ndarray) -> bool:
        """``heterogeneity_alpha``: True when Cochran's test does not reject equal offsets at
        that level (step 4)."""
        a = self.heterogeneity_alpha
        return a is not None and not homogeneity_pvalue(d_hat, v) < float(a)

    def _plugin_prior(self, d_hat, v, l, w, codes, n_seg, uw, integrated):
        """``(centre, tau2, centre_slope)`` of the plug-in prior (``shrinkage``; REML's when
        averaging over ``tau``, whose centre and spread are then only diagnostics)."""
        if self.shrinkage == "regression" and not integrated:
            # the centre moves with the segment's mean shared logit (module notes, step 4)
            with np.errstate(invalid="ignore", divide="ignore"):
                x = np.bincount(codes, weights=w * l, minlength=n_seg) / uw
            return moments_regression_prior(d_hat, v, x)
        if self.shrinkage == "moments" and not integrated:
            return 0.0, moments_tau2(d_hat, v), 0.0
        mu, tau2 = reml_prior(d_hat, v)
        return mu, tau2, 0.0

    def _within_slope(self, l, y, w, codes, n_seg, prior_prec, uw
                      ) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
        """``shared_slope="within"``: the common slope on the shared logit fitted with the
        segment intercepts (module notes, step 3b). ``WITHIN_ROUNDS`` rounds of: the
        intercepts' prior (centre and ``tau^2`` as the offsets' plug-in prior, REML's when
        averaging over ``tau``) from the offsets given the slope, then the slope and the
        intercepts jointly at the posterior mode under that prior
        (:func:`~mlcal.calibrators.segment_shrinkage.common_slope_fit`). Where no spread of
        the offsets is found (``tau^2 = 0``, or ``heterogeneity_alpha`` finds no effect) the
        shared map's own slope is the within-segment one and 1 is returned.

        Each round's Newton solves start from the previous round's solutions (the slope moves
        little between rounds: the same optima to the solvers' tolerance, in fewer passes over
        the rows). Returns ``(a, at_one)``: the slope and the first round's offsets and
        variances (those given the shared logit itself, ``a = 1``, from a cold start)."""
        a = 1.0
        d_hat = at_one = joint = None
        for _ in range(WITHIN_ROUNDS):
            al = a * l
            d_hat, v = segment_offsets(al, y, w, codes, n_seg, prior_prec, start=d_hat)
            if at_one is None:
                at_one = (d_hat, v)
            integrated = self._integrated(v)
            mu, tau2, _ = self._plugin_prior(d_hat, v, al, w, codes, n_seg, uw, integrated)
            if not tau2 > 0.0 or (not integrated and self._homogeneous(d_hat, v)):
                return 1.0, at_one
            if joint is None:
                # the first round from a = 1 and the intercepts' posterior means given it (the
                # offsets shrunk toward the centre), near the mode
                c = np.broadcast_to(np.asarray(mu, dtype=np.float64), (n_seg,))
                with np.errstate(invalid="ignore"):
                    b = np.where(np.isfinite(v), tau2 / (tau2 + v), 0.0)
                joint = (1.0, c + b * (d_hat - c))
            joint = common_slope_fit(l, y, w, codes, n_seg, mu, tau2, start=joint)
            a = max(joint[0], MIN_SLOPE)
        return a, at_one

    def _choose(self, l, y, w, codes, n_seg, folds, with_slopes: bool
                ) -> tuple[str, dict[str, float]]:
        """The cross-validated choice of the adjustment (``select="cv"``): per fold, the
        offsets (and slopes) are estimated and shrunk on the other folds' rows (against the
        same out-of-fold shared logits) and scored on the fold's rows; the summed held-out
        log losses of ``"none"`` (the shared map alone), ``"offsets"`` and ``"slopes"`` are
        compared, and a richer adjustment is kept only when it lowers the loss by more than
        ``CV_MARGIN`` per unit of weight (so the choice never turns on rounding)."""
        names = ["none", "offsets"] + (["slopes"] if with_slopes else [])
        loss = dict.fromkeys(names, 0.0)
        for f in range(int(folds.max(initial=-1)) + 1):
            test, train = folds == f, folds != f
            if not test.any() or not train.any():
                continue
            lt, yt, wt, ct = l[test], y[test], w[test], codes[test]
            loss["none"] += -logistic_loglik(lt, yt, wt)
            for name in names[1:]:
                fit = self._adjust(l[train], y[train], w[train], codes[train], n_seg,
                                   slopes=name == "slopes")
                z = fit["slopes"][ct] * lt + fit["offsets"][ct]
                loss[name] += -logistic_loglik(z, yt, wt)
        margin = CV_MARGIN * float(np.bincount(np.zeros(w.size, dtype=np.int64), weights=w,
                                               minlength=1)[0])
        best = names[0]
        for name in names[1:]:
            if loss[name] < loss[best] - margin:
                best = name
        return best, {k: float(v) for k, v in loss.items()}

    def _fold_prototype(self, proto: BaseCalibrator, shared: BaseCalibrator) -> BaseCalibrator:
        """What each cross-fitting fold fits: the method ``shared`` chose on all rows (with
        ``fold_shared="chosen"``, for a shared method that chooses, such as ``auto``), else the
        shared prototype itself."""
        chosen = getattr(shared, "chosen_", None)
        if self.fold_shared == "chosen" and isinstance(chosen, str) and \
                callable(getattr(shared, "candidate", None)):
            return shared.candidate(chosen)
        return proto

    def _shared_predictions(self, proto, shared, s, z, w, codes) -> np.ndarray:
        """Out-of-fold shared probabilities (folds stratified by segment and label), or the
        in-sample ones when ``n_folds`` is None or a class is too rare to split. Each fold
        fits :meth:`_fold_prototype`; should the chosen method's fit fail on a fold (a
        maximum-likelihood fit on a separable fold, say), that fold fits the shared method
        itself, as the shared calibrator would have fallen back."""
        k = self.n_folds
        counts = np.bincount(z[w > 0].astype(np.int64), minlength=2)
        if k is None or counts.min() < k:
            self.cross_fitted_ = False
            self._folds = None
            return np.asarray(shared.predict(s), dtype=np.float64)
        rng = np.random.default_rng(self.seed)
        order = np.lexsort((rng.random(s.shape[0]), z, codes))
        fold = np.empty(s.shape[0], dtype=np.int64)
        fold[order] = np.arange(s.shape[0]) % k
        q = np.empty(s.shape[0])
        fold_proto = self._fold_prototype(proto, shared)
        for f in range(k):
            test = fold == f
            train = ~test
            if np.unique(z[train & (w > 0)]).size < 2:   # a class only in this fold
                self.cross_fitted_ = False
                self._folds = None
                return np.asarray(shared.predict(s), dtype=np.float64)
            try:
                m = clone(fold_proto).fit(s[train], z[train], sample_weight=w[train])
            except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                if fold_proto is proto:
                    raise
                m = clone(proto).fit(s[train], z[train], sample_weight=w[train])
            q[test] = m.predict(s[test])
        self.cross_fitted_ = True
        self._folds = fold
        return q

    # -- prediction ------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "map_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call "
                                 "fit(scores, y, segments) first")

    def predict(self, scores, segments) -> np.ndarray:
        """Calibrated probabilities of the positive class for ``scores`` in ``segments``."""
        self._check_fitted()
        return self.map_(scores, segments)

    def predict_proba(self, scores, segments) -> np.ndarray:
        """Probabilities of both classes as an (n, 2) array ``[1 - p, p]``."""
        p = self.predict(scores, segments)
        return np.column_stack([1.0 - p, p])

    # -- serialisation ---------------------------------------------------------------------
    def _document_params(self) -> dict[str, Any]:
        params = self.get_params(deep=False)
        m = params["method"]
        params["method"] = m if isinstance(m, str) else m.method_name
        return params

    def to_dict(self) -> dict[str, Any]:
        """The fitted calibrator as a JSON-ready calibrator document (docs/segments.md)."""
        self._check_fitted()
        return calibrator_document(SEGMENTED_METHOD, self._document_params(), self.map_)

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as strict JSON (floats round-trip bit-exactly)."""
        return dumps_safe(self.to_dict(), indent=indent, nonfinite="error")

    @classmethod
    def from_json(cls, text: str | bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES
                  ) -> "SegmentedCalibrator":
        """Rebuild from :meth:`to_json` output (validated; :class:`CalibratorFormatError`)."""
        return cls.from_dict(parse_document(text, max_bytes))

    @classmethod
    def from_dict(cls, doc: Any) -> "SegmentedCalibrator":
        """Rebuild from :meth:`to_dict` output, validating every field
        (:class:`~mlcal.calibrators.base.CalibratorFormatError` naming the problem)."""
        from mlcal.calibrators.document_rules import ENVELOPE_FIELDS, check_binary_map, \
            check_fields

        method, params = read_document_header(doc)
        if method != SEGMENTED_METHOD:
            raise CalibratorFormatError(f"document holds a {short_repr(method)} calibrator, "
                                        f"not a {SEGMENTED_METHOD!r} one")
        check_fields(doc, ENVELOPE_FIELDS, SEGMENTED_METHOD)
        expected = set(cls._get_param_names())
        # a document written before `select` existed: its offsets were always fitted; before
        # `tau` existed: they were shrunk with REML's plug-in spread; before `fold_shared`
        # existed: its folds repeated the shared method (auto choosing again in each fold);
        # before `shrinkage` existed: the plug-in prior was REML's (mu, tau^2)
        # before `shared_slope` existed: the shared map's own slope; before
        # `heterogeneity_alpha` existed: no test of the segment effect; before `slope_alpha`
        # existed: no test of the slopes
        legacy = {"select": LEGACY_SELECT, "tau": LEGACY_TAU, "fold_shared": LEGACY_FOLD_SHARED,
                  "shrinkage": LEGACY_SHRINKAGE, "shared_slope": LEGACY_SHARED_SLOPE,
                  "heterogeneity_alpha": None, "slope_alpha": None}
        params = {**{k: v for k, v in legacy.items() if k not in params}, **params} \
            if isinstance(params, dict) and set(params) >= expected - set(legacy) else params
        if set(params) != expected:
            raise CalibratorFormatError(
                f"calibrator document: 'segmented' params must be exactly {sorted(expected)}; "
                f"unknown {short_repr(sorted(set(params) - expected))}, missing "
                f"{short_repr(sorted(expected - set(params)))}")
        try:
            validate_params(cls.__name__, params, cls.document_constraints())
        except InvalidParameterError as exc:
            raise CalibratorFormatError(f"calibrator document: {exc}") from None
        obj = cls(params["method"], **{k: v for k, v in params.items() if k != "method"})
        try:
            m = SegmentedMap.from_dict(doc.get("map"))
        except MapFormatError as exc:
            raise CalibratorFormatError(f"calibrator document: {exc}") from None
        if m.unseen != obj.unseen:
            raise CalibratorFormatError(f"calibrator document: params say unseen="
                                        f"{obj.unseen!r} but the map says {m.unseen!r}")
        check_binary_map(calibrator_class(obj.method), {}, m.inner, "shared map: ")
        obj.map_ = m
        return obj
