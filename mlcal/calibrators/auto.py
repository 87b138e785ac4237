"""``auto``: choose a calibration method by cross-validated log loss, preferring the maps
listed first (the smooth parametric ones) on near ties.

The choice is one of the registered methods (never a blend), refitted on all the data, so the
fitted calibrator is still one canonical map; what was compared and why the winner won is kept
in ``selection_`` and written to the JSON document under ``"fit_info"``.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Any

import numpy as np

from mlcal._solvers.detmath import clipped_neg_log_pair
from mlcal._solvers.ties import exact_group_sums, sort_and_collapse, stable_argsort
from mlcal._validation import check_fit_inputs
from mlcal.calibrators._params import (Constraint, Integer, InvalidParameterError, IsNone,
                                       ListOf, Options, Real, short_repr)
from mlcal.calibrators.base import (BOUND_SMOOTHING_CONSTRAINTS, BaseCalibrator,
                                    CalibratorFormatError)
from mlcal.calibrators.output_floor import data_floor, represented_rows
from mlcal._solvers.pava import pava_blocks
from mlcal.maps._core import apply_input_transform
from mlcal.maps.binary import DEFAULT_CLAMP, LinearMap, data_clamp, sharing_clamped_logs
from mlcal.calibrators.catalog import (available_calibrators, calibrator_class, get_calibrator,
                                       register_calibrator)

#: The default candidates, in preference order (``prefer="listed"``: the first within
#: ``se_rule`` paired standard errors of the lowest CV log loss is chosen): temperature scaling
#: and Platt scaling on the log-odds shrunk toward the identity map first (the parametric maps
#: nearest to "the base model is already calibrated"), then beta calibration, quadratic
#: scaling and Platt scaling, then the flexible maps (monotone spline, isotonic regression,
#: ELiTE), which win only when clearly better. ``candidates=None`` uses those registered when
#: ``fit`` runs. Measured against every method and the dev-only peers (probmetrics, netcal) on
#: the bench_quality binary suite (benchmarks/tune_auto_rule.py --peers-json, docs/auto.md,
#: "Ranks against the peers"). SBB, ABB, BBQ and KDE are left out: slower and not better on
#: log loss; ENIR had the lowest CV log loss in none of the benchmark's 55 tasks; Venn-Abers
#: changed ``auto``'s mean held-out log loss by at most 0.0002 per benchmark group.
#: Adding a method is one entry here, plus its map kind
#: in :data:`SMOOTH_MAP_KINDS` if it is a new few-parameter kind (for the cells' fold-fit speed),
#: then ``python -m mlcal.calibrators.document_rules`` to regenerate the JVM rules.
DEFAULT_CANDIDATES = ("temperature", "platt-logit", "beta", "quadratic", "platt", "spline",
                      "isotonic", "elite")
#: Parameters ``auto`` sets on its candidates besides ``bound_smoothing``. Temperature scaling
#: and Platt scaling on the log-odds fit the 0/1 labels (``smooth_targets=False``: Platt's
#: regularised targets pull a nearly calibrated tree model's probabilities toward 1/2, which
#: cost held-out log loss on every tree base of the benchmark), and Platt on the log-odds is
#: shrunk toward the identity map by a prior worth 100 rows (``identity_prior``; separable
#: labels keep a finite fit). For speed at no measured loss (docs/auto.md): ELiTE thins its
#: points on a 1e-3 grid instead of its default 1e-5 (its own ``thinningLocal`` step, coarser;
#: at 1e5 rows 2x isotonic regression's fit time instead of 12x); the spline picks its penalty
#: by 3-fold instead of 5-fold CV.
CANDIDATE_PARAMS = {"temperature": {"smooth_targets": False},
                    "platt-logit": {"smooth_targets": False, "identity_prior": 100.0},
                    "elite": {"thin_tol": 1e-3}, "spline": {"cv": 3}}
#: default ``quadratic_prior``: quadratic scaling, as auto's candidate, fits the 0/1 labels
#: shrunk toward the identity map by a prior worth this many rows (docs/auto.md, "The quadratic
#: candidate and the 'both' rule"); ``None`` is the candidate before that (Platt's smoothed
#: targets, no prior), which documents written without ``quadratic_prior`` load as
DEFAULT_QUADRATIC_PRIOR = 10.0
#: default ``beta_prior``: beta calibration, as auto's candidate, fits the 0/1 labels shrunk
#: toward the identity map by a prior worth this many rows, as Platt on the log-odds does
#: (docs/auto.md, "A regularised beta candidate"); ``None`` is the candidate before that
#: (Platt's smoothed targets, no prior), which documents written without ``beta_prior`` load as
DEFAULT_BETA_PRIOR = 100.0
#: the candidates whose identity prior is one of auto's parameters (None: the candidate on
#: Platt's smoothed targets without a prior, as documents without the parameter were fitted)
PRIOR_PARAMETERS = {"quadratic": "quadratic_prior", "beta": "beta_prior"}
#: the anchors (``anchor``): candidate name -> (the registered method, its parameters
#: besides ``identity_prior=anchor_prior``). ``"beta-temperature"``: beta calibration on the
#: 0/1 labels shrunk toward the temperature-scaling fit (``prior_center="temperature"``;
#: docs/auto.md, "The temperature anchor"). Its map is a plain ``BetaMap``.
ANCHORS = {"beta-temperature": ("beta", {"smooth_targets": False,
                                         "prior_center": "temperature"})}
#: default ``anchor`` (issue 26, docs/auto.md "The temperature anchor"); documents written
#: before the anchor existed load with ``anchor=None``, the rule they were fitted with
DEFAULT_ANCHOR = "beta-temperature"
#: default ``anchor_se``: the anchor is chosen when its CV log loss is within this many paired
#: standard errors of the lowest (the replayed rule first on 24 of 24 cells, docs/auto.md)
DEFAULT_ANCHOR_SE = 1.0
#: default ``anchor_prior``: rows of pseudo-data shrinking the anchor toward its centre
DEFAULT_ANCHOR_PRIOR = 300.0
#: default number of fold partitions of repeated K-fold CV on small data (``cv_repeats``)
DEFAULT_CV_REPEATS = 1
#: default multiplier of the paired standard error (``se_rule``)
DEFAULT_SE_RULE = 0.25
#: selection rules: the first listed candidate within ``se_rule`` SE of the lowest CV log loss
#: (:func:`select_preferred`), or the simplest (:func:`select_one_se`)
PREFERENCES = ("listed", "simplest")
#: predictions are clipped to this distance from 0 and 1 when scoring (only for scoring)
EPS = 1e-15
FIT_INFO_VERSION = 1
#: above this many unique scores the cross-validation runs on this many cells (:func:`coarsen`)
DEFAULT_CV_MAX_POINTS = 10_000
#: folds of ``n_folds=None``: on all the points, and on the cells of large data, where fold
#: models trained on 2/3 of the cells are nearly as good as on 4/5 and three folds halve the
#: cost of the comparison (measurements in docs/auto.md)
DEFAULT_FOLDS = 5
#: with fewer than 2 * n_folds distinct scores, folds split the rows (:func:`row_folds`) when
#: the weights are counts totalling at most this many rows
ROW_FOLDS_MAX_ROWS = 10_000_000
CELL_FOLDS = 3
#: map kinds of few-parameter smooth maps (Platt, Platt on the log-odds, temperature, beta,
#: quadratic scaling),
#: and smooth methods of another map kind (the penalised 20-knot spline): on cells, these
#: candidates' fold fits run on at most :data:`SMOOTH_FOLD_POINTS` training cells
#: (:meth:`AutoCalibrator.fold_fit_points`). A new parametric map kind joins by being listed
#: here.
SMOOTH_MAP_KINDS = ("sigmoid", "beta", "quadratic")
SMOOTH_METHODS = ("spline",)
SMOOTH_FOLD_POINTS = 2000
#: repeated K-fold CV (``cv_repeats``) runs only on at most this many points (unique scores):
#: there one partition's choice between near-equal candidates is noisy and the fold fits are
#: cheap; above it (and on cells or row folds) one partition is used, so large data cost the same
REPEAT_MAX_POINTS = 5000
#: allowed ``strict_order`` weights: from 1e-9 (the ramp's steps, ``eps / (knots + 1)``, stay
#: far above a double's resolution for any map size mlcal writes) to 0.1
STRICT_ORDER_RANGE = (1e-9, 0.1)


def strictly_increasing(m, eps: float, scores: np.ndarray | None = None,
                        weights: np.ndarray | None = None):
    """A piecewise-linear map made strictly increasing (``AutoCalibrator(strict_order=eps)``,
    docs/auto.md, "AUC on imbalanced data"); other maps are returned unchanged.

    Knot values ``v`` (``K`` knots) that decrease somewhere (ELiTE's trend filter) are first
    replaced by their weighted isotonic regression (the non-decreasing values nearest in
    squared error), each knot weighted by the calibration weight of the ``scores`` nearest
    to it (midpoint cells in the map's input space, plus ``1e-9`` of the mean so that an
    empty cell counts); without ``scores``, every knot weighs the same. A non-decreasing
    map (isotonic regression's, the monotone spline's) is kept as it is. The values are then
    mixed with the knot ranks, ``(1 - eps) * v + eps * (k + 1) / (K + 1)``, so the map
    increases strictly from its first knot to its last and orders the scores there as the
    scores do (the base model's AUC on them is kept; beyond the end knots it stays flat). The
    mixing moves each value by at most ``eps``, with ``p' >= (1 - eps) p`` and
    ``1 - p' >= (1 - eps) (1 - p)`` at every score: it adds at most ``-log(1 - eps)`` to
    each row's log loss.
    """
    if not isinstance(m, LinearMap) or m.size < 2:
        return m
    v = m.values
    if np.any(np.diff(v) < 0.0):
        mass = np.ones(m.size)
        if scores is not None:
            x = apply_input_transform(np.asarray(scores, dtype=np.float64), m.input_transform)
            w = np.ones(x.size) if weights is None else np.asarray(weights, dtype=np.float64)
            cell = np.searchsorted((m.knots[1:] + m.knots[:-1]) / 2.0, x)
            mass = np.bincount(cell, weights=w, minlength=m.size)
            mass = mass + 1e-9 * max(float(mass.mean()), np.finfo(float).tiny)
        starts, blocks = pava_blocks(v, mass)
        v = blocks[np.searchsorted(starts, np.arange(m.size), side="right") - 1]
    k = np.arange(1, m.size + 1, dtype=np.float64)
    values = (1.0 - eps) * np.clip(v, 0.0, 1.0) + eps * (k / (m.size + 1))
    return dataclasses.replace(m, values=values)


#: largest ``seed`` (exact in a double, so the Java evaluator compares it exactly too)
MAX_SEED = 2 ** 53 - 1


def _row_log_losses(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per point: positive-row loss ``-log p`` and negative-row loss ``-log(1 - p)``, with
    ``p`` clipped to ``[EPS, 1 - EPS]`` (for scoring only): ``-det_log_array`` of the clipped
    ``p`` and of ``1 - p``, in one compiled pass (:func:`clipped_neg_log_pair`; a step map's
    runs take their logs once)."""
    return clipped_neg_log_pair(np.ascontiguousarray(p, dtype=np.float64), EPS, 1.0 - EPS)


def assign_folds(n_points: int, n_folds: int, seed: int) -> np.ndarray:
    """Fold of each of ``n_points`` sorted unique scores: every run of ``n_folds`` consecutive
    points holds each fold once, in an order drawn from ``seed`` (so each fold spans the whole
    score range, and the folds depend only on the sorted unique scores, never on row order)."""
    n_blocks = -(-n_points // n_folds)
    rng = np.random.default_rng(seed)
    order = rng.permuted(np.tile(np.arange(n_folds), (n_blocks, 1)), axis=1)
    return order.reshape(-1)[:n_points]


def method_of(name: str) -> str:
    """The registered method of candidate ``name``: itself, or an anchor's (:data:`ANCHORS`)."""
    return ANCHORS[name][0] if name in ANCHORS else name


def anchor_guard(s: np.ndarray) -> str | None:
    """Why the anchor is not considered on calibration scores ``s``, or ``None``: margins
    (scores outside [0, 1]) or probabilities saturated beyond the default clamp (the
    data-taken clamp, :func:`~mlcal.maps.binary.data_clamp`, is wider: naive Bayes), where
    the anchor cost held-out log loss the CV could not see (docs/auto.md)."""
    if s.size and (float(np.min(s)) < 0.0 or float(np.max(s)) > 1.0):
        return "margins: scores outside [0, 1]"
    if data_clamp(s) != DEFAULT_CLAMP:
        return "saturated scores: the data-taken clamp is wider than the default"
    return None


def check_distinct_candidates(estimator) -> None:
    """Raise ``InvalidParameterError`` if ``estimator.candidates`` names a method twice."""
    candidates = estimator.candidates
    if candidates is not None and len(set(candidates)) != len(candidates):
        raise InvalidParameterError(f"{type(estimator).__name__}: parameter 'candidates' lists "
                                    f"a method twice: {short_repr(list(candidates))}")


class RegisteredMethod(Constraint):
    """The name of a registered method other than "auto" (checked against the catalog when
    validating, so methods registered later are accepted)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value != "auto" and value in available_calibrators()

    def describe(self) -> str:
        names = [n for n in available_calibrators() if n != "auto"]
        return "a registered method other than 'auto' (" + ", ".join(names) + ")"

    def spec(self) -> dict[str, Any]:
        return {"kind": "registered-method"}


@register_calibrator("auto")
class AutoCalibrator(BaseCalibrator):
    """Pick among registered methods by K-fold cross-validated log loss (the first listed
    candidate within a quarter of a paired standard error of the lowest; derivation in
    docs/auto.md).

    1. Tied scores are collapsed into weighted points (positive and negative weight at each
       unique score; above ``cv_max_points`` of them, consecutive points are merged into
       ``cv_max_points`` cells: :func:`coarsen`). Folds are assigned on the sorted points
       (:func:`assign_folds`), so ties are never split and row order cannot matter.
    2. Every candidate is fitted on K-1 folds (as weighted rows: the tie-collapsed points, which
       every registered method treats exactly as the original rows) and predicts the held-out
       fold. On cells, candidates with smooth few-parameter maps fit on the training cells
       merged into at most :data:`SMOOTH_FOLD_POINTS` (:meth:`fold_fit_points`).
       Out-of-fold predictions are clipped to ``[1e-15, 1 - 1e-15]`` for scoring only.
       A candidate that fails on a fold is dropped (recorded with its error).
    3. Each candidate's CV log loss is the weighted mean over all out-of-fold rows. Its noise is
       measured against the best candidate: ``se`` is the standard error of the mean of the
       per-row loss differences (paired, weights as frequency weights).
    4. Chosen (``prefer="listed"``): the first candidate, in the order of ``candidates``, with
       ``loss - best_loss <= se_rule * se``. ``prefer="simplest"``: the simplest such
       candidate, simplicity being the mean size of its fold maps
       (:attr:`~mlcal.maps.SigmoidMap.size` is 2 parameters; a step or linear map counts its
       bins or knots), ties broken by the order of ``candidates``.
    5. The chosen method is refitted on all the data (default parameters, plus
       ``bound_smoothing`` where it has one, :data:`CANDIDATE_PARAMS` and
       ``quadratic_prior`` / ``beta_prior`` for quadratic scaling and beta calibration: see
       :meth:`candidate_params`); its map is this calibrator's map. Should that fit fail
       (a maximum-likelihood fit on separable labels, say), the next candidate in the
       selection's order is refitted, and the reason says so.

    With fewer than ``2 * n_folds`` unique scores (a small tree's leaves, say) the folds split
    the rows of each score instead (:func:`row_folds`; integer weights up to
    :data:`ROW_FOLDS_MAX_ROWS` rows). Otherwise, or when a training fold lacks a class or a
    fold holds no rows (5 rows, say), no CV is possible and the first candidate is used, with a
    ``UserWarning`` saying why (also recorded as the reason). ``fit_info`` records the
    fold unit: ``"points"``, ``"cells"`` or ``"rows"``.

    Parameters
    ----------
    candidates : list of str or None, default=None
        Method names to choose from (any registered method except "auto"). ``None``: those of
        :data:`DEFAULT_CANDIDATES` registered when ``fit`` runs. The ``anchor`` is considered
        besides them (unless ``anchor=None``).
    n_folds : int or None, default=None
        Number of cross-validation folds (>= 2). ``None``: :data:`DEFAULT_FOLDS` (5), or
        :data:`CELL_FOLDS` (3) when the CV runs on cells (see ``cv_max_points``).
    se_rule : float, default=0.25
        How many standard errors of the loss difference count as noise; 0 picks the lowest CV
        log loss. With the default candidates and ``prefer="listed"``, 0.25 had the lowest mean
        log-loss and Brier ranks against every method and the dev-only peers on the benchmark's
        linear/NB/SVM and tree bases (docs/auto.md, "Ranks against the peers").
    prefer : {"listed", "simplest"}, default="listed"
        Which candidate within ``se_rule`` SE wins: the first in ``candidates`` order
        (:func:`select_preferred`), or the simplest map (:func:`select_one_se`, the rule
        before the peers' comparison, with ``se_rule=0.5`` and Platt scaling listed first).
    cv_max_points : int or None, default=10000
        Largest number of points cross-validated. With more unique scores, the CV runs on
        ``cv_max_points`` cells of consecutive sorted scores, each carrying the weight of all
        its rows at its middle score (:func:`coarsen`), which bounds the cost of the comparison
        while every fold fit still sees the weight of all the data; the chosen method is then
        refitted on every row. ``None``: always use every point.
    quadratic_prior : float or None, default=10.0
        How the ``quadratic`` candidate is fitted: on the 0/1 labels (``smooth_targets=False``)
        with ``identity_prior=quadratic_prior`` rows of pseudo-data labelled with the base
        model's own probabilities (which shrinks the fit toward the identity map and keeps it
        finite on separable labels), or, with ``None``, on Platt's smoothed targets without a
        prior (the candidate before; documents written without this parameter load with
        ``None``). Platt's smoothed targets pull the fit toward 1/2, which cost the quadratic
        candidate held-out log loss and Brier against probmetrics' quadratic scaling on the
        benchmark; with 10 prior rows ``auto`` was first on 18 of 24 (suite, fold seed, group,
        metric) cells against the peers instead of 16 (docs/auto.md).
    beta_prior : float or None, default=100.0
        How the ``beta`` candidate is fitted, as ``quadratic_prior`` for quadratic scaling: on
        the 0/1 labels with ``identity_prior=beta_prior`` rows of pseudo-data (the prior
        Platt on the log-odds has as ``auto``'s candidate), or, with ``None``, on Platt's
        smoothed targets without a prior (the candidate before; documents written without this
        parameter load with ``None``). With 100 prior rows ``auto`` was first on 20 of the 24
        cells instead of 18, with lower mean held-out log loss in both suites and both groups
        (docs/auto.md, "A regularised beta candidate").
    cv_repeats : int, default=1
        From 1 to 100. Repeated K-fold CV on small data: with at most
        :data:`REPEAT_MAX_POINTS` unique scores (points, not cells or row folds) the CV runs on
        ``cv_repeats`` fold partitions (seeds ``seed``, ``seed + 1``, ...), each candidate's
        out-of-fold losses per point are averaged over them and the paired SE is computed on
        those averages. 1: one partition.
        Measured against the peers (docs/auto.md, "Repeated cross-validation"), 3 and 5 were
        not better than 1 and cost 3x and 5x the CV's time.
    seed : int, default=0
        Seed of the fold assignment (of the first partition).
    anchor : {"beta-temperature"} or None, default="beta-temperature"
        The guarded anchor (docs/auto.md, "The temperature anchor"). ``None``: the rule above
        alone (``auto`` before issue 26's anchor, and documents written before it).
        ``"beta-temperature"``: beta calibration on the 0/1 labels shrunk by ``anchor_prior``
        rows toward the temperature-scaling fit (``Beta(smooth_targets=False,
        identity_prior=anchor_prior, prior_center="temperature")``) is cross-validated on
        the same folds, listed first, and chosen whenever its CV log loss is within
        ``anchor_se`` paired standard errors of the lowest (among it and the candidates);
        otherwise the rule above picks among the candidates. Not considered (the rule above
        alone) where the calibration scores are margins (outside [0, 1]) or saturated beyond
        the default clamp (see :func:`anchor_guard`), nor when no cross-validation is
        possible. Its candidate name (in ``selection_`` and ``chosen_``) is
        ``"beta-temperature"``; its map is a ``BetaMap``.
    anchor_se : float, default=1.0
        Paired standard errors of the anchor's CV log-loss margin (used with ``anchor``).
    anchor_prior : float, default=300.0
        Rows of pseudo-data shrinking the anchor toward the temperature fit (used with
        ``anchor``).
    strict_order : float or None, default=None
        Opt-in (docs/auto.md, "AUC on imbalanced data"). ``None``: the chosen map as fitted.
        A weight ``eps`` in [1e-9, 0.1] (1e-6, say): when the chosen candidate's map is
        piecewise linear (spline, isotonic regression, ELiTE), it is replaced by
        :func:`strictly_increasing`: where its knot values decrease (ELiTE), their isotonic
        regression weighted by the calibration rows nearest each knot; then mixed with
        weight ``eps`` with the knot ranks, so the map orders the scores between its end
        knots as the base model does (no ties from flat steps, no reversals), at a cost of at
        most ``-log(1 - eps)`` in log loss per row on top of the isotonic step. The
        selection is unchanged; the other map kinds (temperature, Platt, beta, quadratic) are
        kept as they are.

    Attributes
    ----------
    map_ : CalibrationMap
        The map of the chosen method refitted on all the data.
    chosen_ : str
        The chosen method.
    calibrator_ : BaseCalibrator
        The chosen method's calibrator fitted on all the data.
    selection_ : dict
        JSON-safe record of the selection: rule, folds, seed, per candidate its CV log loss,
        standard error of the difference to the best, complexity and status; the best and the
        chosen method, the parameters it was refitted with (``chosen_params``) and the reason;
        with ``anchor``, an ``"anchor"`` record: the anchor's candidate name, ``se_rule``
        (``anchor_se``), ``guard`` (why it was not considered, or ``None``), ``chosen`` and
        ``default_choice`` (the rule's pick among the candidates without it, or ``None``).
        Written to the JSON document as ``"fit_info"``.
    map_reduction_ : MapReduction
        The chosen calibrator's size-cap record.

    Examples
    --------
    >>> import numpy as np, mlcal
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=3000); y = (rng.random(3000) < 1 / (1 + np.exp(-2 * s))).astype(int)
    >>> cal = mlcal.get_calibrator("auto", candidates=["platt", "isotonic"]).fit(s, y)
    >>> cal.chosen_
    'platt'
    """

    document_extras = ("fit_info",)
    _parameter_constraints = {"candidates": [IsNone(), ListOf(RegisteredMethod())],
                              "n_folds": [IsNone(), Integer(2)],
                              "se_rule": [Real(0.0)],
                              "prefer": [Options(PREFERENCES)],
                              "cv_max_points": [IsNone(), Integer(2)],
                              "cv_repeats": [Integer(1, 100)],
                              "quadratic_prior": [IsNone(), Real(0.0)],
                              "beta_prior": [IsNone(), Real(0.0)],
                              "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS,
                              "seed": [Integer(0, MAX_SEED)],
                              "anchor": [IsNone(), Options(tuple(ANCHORS))],
                              "anchor_se": [Real(0.0)],
                              "anchor_prior": [Real(0.0)],
                              "strict_order": [IsNone(), Real(*STRICT_ORDER_RANGE)]}

    def __init__(self, candidates: list[str] | None = None, n_folds: int | None = None,
                 se_rule: float = DEFAULT_SE_RULE, prefer: str = "listed",
                 cv_max_points: int | None = DEFAULT_CV_MAX_POINTS,
                 cv_repeats: int = DEFAULT_CV_REPEATS,
                 bound_smoothing: float | None = 0.5, seed: int = 0,
                 quadratic_prior: float | None = DEFAULT_QUADRATIC_PRIOR,
                 beta_prior: float | None = DEFAULT_BETA_PRIOR,
                 anchor: str | None = DEFAULT_ANCHOR,
                 anchor_se: float = DEFAULT_ANCHOR_SE,
                 anchor_prior: float = DEFAULT_ANCHOR_PRIOR,
                 strict_order: float | None = None):
        self.candidates = candidates
        self.n_folds = n_folds
        self.se_rule = se_rule
        self.prefer = prefer
        self.cv_max_points = cv_max_points
        self.cv_repeats = cv_repeats
        self.bound_smoothing = bound_smoothing
        self.seed = seed
        self.quadratic_prior = quadratic_prior
        self.beta_prior = beta_prior
        self.anchor = anchor
        self.anchor_se = anchor_se
        self.anchor_prior = anchor_prior
        self.strict_order = strict_order

    # -- parameters ----------------------------------------------------------------------------
    def _validate_params(self) -> None:
        super()._validate_params()
        check_distinct_candidates(self)

    def candidate_names(self) -> list[str]:
        """The methods compared: ``candidates``, or the registered defaults."""
        if self.candidates is not None:
            return [str(c) for c in self.candidates]
        registered = set(available_calibrators())
        return [c for c in DEFAULT_CANDIDATES if c in registered]

    def candidate(self, name: str) -> BaseCalibrator:
        """A new, unfitted calibrator of method ``name`` (or of the anchor ``name``,
        :data:`ANCHORS`) as ``auto`` fits it (parameters: :meth:`candidate_params`)."""
        return get_calibrator(method_of(name), **self.candidate_params(name))

    def candidate_params(self, name: str) -> dict[str, Any]:
        """The parameters ``auto`` sets on method ``name``, all others at their defaults:
        :data:`CANDIDATE_PARAMS`, this calibrator's ``bound_smoothing`` if the method has
        the parameter, and for ``quadratic`` and ``beta`` 0/1 labels with ``identity_prior``
        unless ``quadratic_prior`` / ``beta_prior`` is None (:data:`PRIOR_PARAMETERS`); for an
        anchor (:data:`ANCHORS`) its parameters with ``identity_prior=anchor_prior``."""
        if name in ANCHORS:
            method, fixed = ANCHORS[name]
            params = {**fixed, "identity_prior": float(self.anchor_prior)}
            if self.bound_smoothing is not None and \
                    "bound_smoothing" in calibrator_class(method)._get_param_names():
                params["bound_smoothing"] = self.bound_smoothing
            return params
        params = dict(CANDIDATE_PARAMS.get(name, {}))
        prior = getattr(self, PRIOR_PARAMETERS[name]) if name in PRIOR_PARAMETERS else None
        if prior is not None:
            params.update(smooth_targets=False, identity_prior=float(prior))
        if self.bound_smoothing is not None and \
                "bound_smoothing" in calibrator_class(name)._get_param_names():
            params["bound_smoothing"] = self.bound_smoothing
        return params

    def fold_fit_points(self, name: str) -> int | None:
        """Most training cells a fold fit of method ``name`` sees when the CV runs on cells:
        :data:`SMOOTH_FOLD_POINTS` for :data:`SMOOTH_METHODS` and methods whose maps are all
        of :data:`SMOOTH_MAP_KINDS` (a fit of a few parameters on 2,000 cells of consecutive
        scores is the fit on all their rows to within the CV's noise; docs/auto.md), else
        ``None`` (every training cell)."""
        kinds = calibrator_class(method_of(name)).map_kinds
        if name in SMOOTH_METHODS or (kinds and all(kind in SMOOTH_MAP_KINDS
                                                    for kind in kinds)):
            return SMOOTH_FOLD_POINTS
        return None

    # -- fitting -------------------------------------------------------------------------------
    def fit(self, scores, y, sample_weight=None) -> "AutoCalibrator":
        """Cross-validate the candidates, choose one, refit it on all the data.

        Parameters
        ----------
        scores, y, sample_weight
            As for every calibrator (:meth:`BaseCalibrator.fit`).

        Returns
        -------
        self
        """
        self._validate_params()
        s, z, w = check_fit_inputs(scores, y, sample_weight)
        # sorted once, so that every candidate's own sort runs on sorted rows (several times
        # faster); each method collapses ties with exact sums, so the maps cannot change
        order = stable_argsort(s)   # np.argsort(s, kind="stable")'s permutation, faster
        s, z, w = s[order], z[order], w[order]
        names = self.candidate_names()
        anchor = None
        if self.anchor is not None:
            anchor = {"method": str(self.anchor), "se_rule": float(self.anchor_se),
                      "guard": anchor_guard(s), "chosen": False, "default_choice": None}
        points = sort_and_collapse(s, z, w)
        x, pos, neg, folds, k, unit, n_unique = self.cv_units(s, z, w, int(self.seed),
                                                              points=points)
        # sharing: the beta-family candidates' logs of each fold's cells; represented_rows:
        # a fold fit's floor is its own training cells' as in memory, never the whole data's
        # that a fit on aggregated rows gets for its refit
        with sharing_clamped_logs(), represented_rows(None):
            record = self._cross_validate(names, x, pos, neg, folds, k, unit,
                                          self.repeat_folds(x.size, k, unit, int(self.seed)),
                                          anchor)
        if anchor is not None:
            record["anchor"] = anchor
            if anchor["guard"] is not None:
                anchor["default_choice"] = record["chosen"]
            else:
                names = [anchor["method"]] + names   # the refit's fallbacks include it
        record["fold_unit"] = unit
        record["n_unique"] = n_unique
        record["chosen_params"] = self.candidate_params(record["chosen"])
        self.calibrator_ = self._refit(record, names, s, z, w, points)
        self.chosen_ = record["chosen"]
        self.selection_ = record
        if self.strict_order is not None:
            self.calibrator_.map_ = strictly_increasing(self.calibrator_.map_,
                                                        float(self.strict_order), s, w)
        self.map_ = self.calibrator_.map_
        self.map_reduction_ = self.calibrator_.map_reduction_
        return self

    def _refit(self, record: dict[str, Any], names: list[str], s: np.ndarray, z: np.ndarray,
               w: np.ndarray, points: tuple[np.ndarray, ...]) -> BaseCalibrator:
        """The chosen candidate fitted on all rows; should that fit raise (a maximum-likelihood
        fit on separable labels when no CV was possible), the next candidates are tried, by
        CV log loss when there was a CV, else in listed order, and ``record`` says so. Each is
        the method's own fit on the rows: its first step, ``sort_and_collapse`` of the same
        arrays, is ``points``, so that is handed over (same bits)."""
        chosen = record["chosen"]
        cv = {r["method"]: r["cv_log_loss"] for r in record["candidates"] if "cv_log_loss" in r}
        rest = [n for n in names if n != chosen and (n in cv or not cv)]
        if self.prefer == "simplest" and cv:
            rest.sort(key=lambda n: (cv[n], names.index(n)))
        errors = []
        for name in [chosen] + rest:
            try:
                calibrator = self.candidate(name)
                if not calibrator._fit_collapsed(*points, s, data_floor(w)):
                    calibrator.fit(s, z, w)
            except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
                errors.append(f"{name}: {type(exc).__name__}: {short_repr(str(exc))}")
                continue
            if name != chosen:
                record["reason"] += (f"; refitting {chosen} on all rows failed "
                                     f"({'; '.join(errors)}), so {name} is used")
                record["chosen"] = name
                record["chosen_params"] = self.candidate_params(name)
            return calibrator
        raise ValueError("auto: every candidate failed when refitted on all rows: " +
                         "; ".join(errors))

    def cv_units(self, s: np.ndarray, z: np.ndarray, w: np.ndarray, seed: int,
                 points: tuple[np.ndarray, ...] | None = None):
        """The units the cross-validation scores, from rows sorted by score: test units ``x``
        (points, cells or per-fold row groups) with positive and negative weights and a fold
        each (``folds=None`` when there are too few distinct scores and no row folds), the
        number of folds, the fold unit and the number of unique scores. ``points``: the rows'
        ``sort_and_collapse`` if the caller has it."""
        x, ybar, wsum = sort_and_collapse(s, z, w) if points is None else points
        pos = ybar * wsum
        neg = np.maximum(wsum - pos, 0.0)
        n_unique = int(x.size)
        cap = self.cv_max_points
        coarsened = cap is not None and x.size > cap
        if coarsened:
            x, pos, neg = coarsen(x, pos, neg, int(cap))
        k = int(self.n_folds if self.n_folds is not None else (
            CELL_FOLDS if coarsened else DEFAULT_FOLDS))
        unit, folds = ("cells" if coarsened else "points"), None
        if x.size >= 2 * k:
            folds = assign_folds(x.size, k, seed)
        elif np.all(w == np.floor(w)) and float(np.sum(w)) <= ROW_FOLDS_MAX_ROWS:
            # too few distinct scores to hold some out: split the rows of each score instead
            x, pos, neg, folds = row_folds(x, np.rint(pos), np.rint(neg), k, seed)
            unit = "rows"
        return x, pos, neg, folds, k, unit, n_unique

    def repeat_folds(self, n_points: int, k: int, unit: str, seed: int) -> list[np.ndarray]:
        """The fold assignments of the repeats after the first (seeds ``seed + 1``, ...,
        ``seed + cv_repeats - 1``, :func:`assign_folds` on the same sorted points): only when
        the CV runs on at most :data:`REPEAT_MAX_POINTS` points (an integer test); on cells,
        row folds or more points, none (one partition)."""
        if unit != "points" or n_points > REPEAT_MAX_POINTS or n_points < 2 * k:
            return []
        return [assign_folds(n_points, k, seed + r) for r in range(1, int(self.cv_repeats))]

    def _cross_validate(self, names: list[str], x: np.ndarray, pos: np.ndarray,
                        neg: np.ndarray, folds: np.ndarray | None, k: int,
                        unit: str = "points",
                        more_folds: list[np.ndarray] = (),
                        anchor: dict[str, Any] | None = None) -> dict[str, Any]:
        """CV of every candidate on test units ``x`` (points, cells or per-fold row groups)
        with positive and negative weights and a fold each; ``folds=None``: no CV possible.
        ``more_folds``: further partitions of the same units (repeated K-fold CV): each
        candidate's per-unit out-of-fold losses are averaged over the partitions (a partition
        whose training parts lack a class is left out), so its CV log loss is the mean of the
        partitions' CV log losses and the paired SE is that of the row-wise mean
        differences. ``anchor``: the record of ``fit``'s anchor (updated here): when its
        ``guard`` is ``None``, the anchor is cross-validated too and chosen if within its
        ``se_rule`` paired SE of the lowest CV log loss (:meth:`_select`)."""
        rule = "one-se" if self.prefer == "simplest" else "first-listed-within-se"
        record: dict[str, Any] = {"version": FIT_INFO_VERSION, "rule": rule,
                                  "se_rule": float(self.se_rule), "n_folds": k,
                                  "seed": int(self.seed), "n_points": _n_distinct(x)}

        def usable(assignment):
            # (row folds on a handful of rows can leave a fold with nothing to predict)
            return all(pos[assignment != f].any() and neg[assignment != f].any()
                       and (assignment == f).any() for f in range(k))

        if folds is not None and not usable(folds):
            folds = None
        if folds is None and anchor is not None and anchor["guard"] is None:
            anchor["guard"] = "no cross-validation possible"
        if folds is None:
            n_rows = float(np.sum(pos) + np.sum(neg))
            reason = (f"no {k}-fold cross-validation possible on {n_rows:g} rows (total "
                      f"weight) with {record['n_points']} unique scores: it needs every fold "
                      "to hold rows and every training part both classes (at least "
                      f"{2 * k} unique scores, or {2 * k}+ rows with integer weights up to "
                      f"{ROW_FOLDS_MAX_ROWS:.0e}); the first candidate, {names[0]}, is used")
            warnings.warn(f"auto: {reason}", UserWarning, stacklevel=3)
            record.update(candidates=[{"method": n, "status": "not cross-validated"}
                                      for n in names], best=None, chosen=names[0],
                          reason=reason)
            return record
        if anchor is not None and anchor["guard"] is None:
            names = [anchor["method"]] + names
        partitions = [folds] + [f for f in more_folds if usable(f)]
        record["cv_repeats"] = len(partitions)
        results, train_cells = {}, [{} for _ in partitions]
        for name in names:
            parts, sizes = [], []
            for assignment, cells in zip(partitions, train_cells):
                loss_pos, loss_neg, fold_sizes, error = self._out_of_fold(
                    name, x, pos, neg, assignment, k, unit == "cells", cells)
                if error is not None:
                    break
                parts.append((loss_pos, loss_neg))
                sizes += fold_sizes
            if error is not None:
                results[name] = error
            elif len(parts) == 1:
                results[name] = (parts[0], float(np.mean(sizes)))
            else:   # the mean over the partitions, summed in partition order
                results[name] = ((np.mean([p[0] for p in parts], axis=0),
                                  np.mean([p[1] for p in parts], axis=0)),
                                 float(np.mean(sizes)))
        record.update(self._select(names, results, (pos, neg), anchor))
        return record

    def _select(self, names: list[str], results: dict[str, Any],
                weights: tuple[np.ndarray, ...], anchor: dict[str, Any] | None
                ) -> dict[str, Any]:
        """The rule (``prefer``, ``se_rule``) on the cross-validated ``names``; with an
        unguarded ``anchor`` (then ``names[0]``), the anchor whenever its CV log loss is within
        ``anchor["se_rule"]`` paired SE of the lowest of all (:func:`select_preferred` with it
        listed first), else the rule on ``names[1:]`` alone (their own best and SEs, exactly
        the choice without the anchor). The record's rows, ``best`` and SEs are those of all
        the candidates, the anchor included."""
        select = select_one_se if self.prefer == "simplest" else select_preferred
        if anchor is None or anchor["guard"] is not None:
            return select(names, results, weights, float(self.se_rule))
        rest = names[1:]
        record = select_preferred(names, results, weights, float(anchor["se_rule"]))
        default = None
        if any(not isinstance(results[n], str) for n in rest):
            default = select(rest, {n: results[n] for n in rest}, weights,
                             float(self.se_rule))
            anchor["default_choice"] = default["chosen"]
        if record["chosen"] == names[0]:
            anchor["chosen"] = True
            record["reason"] = (f"anchor {names[0]}: CV log loss within "
                                f"{anchor['se_rule']:g} SE of the lowest ({record['best']})")
        else:
            record.update(chosen=default["chosen"],
                          reason=f"anchor {names[0]} not within {anchor['se_rule']:g} SE of "
                                 f"the lowest CV log loss ({record['best']}); among the "
                                 f"candidates: {default['reason']}")
        return record

    def _out_of_fold(self, name, x, pos, neg, folds, k, fit_cells=False, train_cells=None):
        """Out-of-fold per-point losses of one method (or the error that stopped it).
        ``train_cells``: a dict shared by the candidates of one CV, which then build each
        fold's test units, training part (and its merge into at most ``fold_fit_points``
        cells) and that part's collapsed points and data floor once."""
        p = np.empty(x.size)
        sizes = []
        cap = self.fold_fit_points(name) if fit_cells else None
        shared = {} if train_cells is None else train_cells
        for f in range(k):
            split = shared.get((f, "test"))
            if split is None:   # the held-out units as a mask and as indices (faster to use)
                test = folds == f
                test_at = np.flatnonzero(test)
                split = shared[(f, "test")] = (test, test_at, x[test_at])
            test, test_at, x_test = split
            cached = shared.get((f, cap))
            if cached is None:
                train = ~test
                xt, pt, nt = x[train], pos[train], neg[train]
                if cap is not None and xt.size > cap:
                    xt, pt, nt = coarsen(xt, pt, nt, cap)
                cached = shared[(f, cap)] = [xt, pt, nt, None]
            xt, pt, nt, prepared = cached
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")   # the refit on all data shows warnings
                    cal = self.candidate(name)
                    if cal._fits_points() and prepared is None:
                        prepared = cached[3] = _cell_points(xt, pt, nt)
                    if not _fit_cells(cal, xt, pt, nt, prepared):
                        cal.fit(*_rows(xt, pt, nt))
                p[test_at] = cal.predict(x_test)
            except (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError) as exc:
                return None, None, None, f"{type(exc).__name__}: {short_repr(str(exc))}"
            sizes.append(cal.map_.size)
        loss_pos, loss_neg = _row_log_losses(p)
        return loss_pos, loss_neg, sizes, None

    # -- JSON ----------------------------------------------------------------------------------
    @classmethod
    def _params_from_document(cls, params: dict) -> dict:
        # a document written before ``quadratic_prior`` / ``beta_prior`` existed fitted that
        # candidate on Platt's smoothed targets without a prior; one written before ``anchor``
        # existed chose without the anchor
        return {**{p: None for p in PRIOR_PARAMETERS.values()}, "anchor": None, **params}

    def _extra_to_dict(self) -> dict[str, Any]:
        info = getattr(self, "selection_", None)
        # documents never alias the fitted attribute
        return {} if info is None else {"fit_info": copy.deepcopy(info)}

    def _extra_from_dict(self, doc: dict) -> None:
        if "fit_info" in doc:
            self.selection_ = check_selection(doc["fit_info"])
            self.chosen_ = self.selection_["chosen"]

    def check_document_map(self, where: str = "") -> None:
        """The map must be one the chosen method (``fit_info``) produces with the parameters
        ``auto`` fits it with; without ``fit_info``, any binary map."""
        from mlcal.calibrators.document_rules import check_binary_map

        chosen = getattr(self, "chosen_", None)
        if chosen is None:
            super().check_document_map(where)
            return
        try:
            cls = calibrator_class(method_of(chosen))
        except ValueError as exc:
            raise CalibratorFormatError(f"calibrator document: fit_info 'chosen': {exc}") \
                from None
        check_binary_map(cls, self.candidate_params(chosen if chosen in ANCHORS
                                                     else cls.method_name), self.map_,
                         f"{where}auto chose {chosen!r}: ")


def select_one_se(names: list[str], results: dict[str, Any], weights: tuple[np.ndarray, ...],
                  se_rule: float) -> dict[str, Any]:
    """The one-standard-error choice among cross-validated candidates (shared by the binary
    and the multiclass ``auto``).

    Parameters
    ----------
    names : list of str
        Candidates in preference order (ties in complexity go to the earlier one).
    results : dict
        Per name: an error message (the candidate failed), or ``(losses, complexity)`` where
        ``losses`` is a tuple of per-unit out-of-fold loss arrays aligned with ``weights``
        (binary: losses of the positive and of the negative rows at each point; multiclass:
        one array of per-row losses).
    weights : tuple of ndarray
        Frequency weights of the units.
    se_rule : float
        Standard errors of the paired loss difference that count as noise.

    Returns
    -------
    dict
        ``candidates`` (one row per name: status, complexity, CV log loss, SE against the best),
        ``best``, ``chosen`` and ``reason``.
    """
    rows, losses = [], {}
    for name in names:
        outcome = results[name]
        if isinstance(outcome, str):
            rows.append({"method": name, "status": f"failed: {outcome}"})
            continue
        losses[name], complexity = outcome
        rows.append({"method": name, "status": "ok", "complexity": float(complexity)})
    if not losses:
        raise ValueError("auto: every candidate failed in cross-validation: " +
                         "; ".join(f"{r['method']}: {r['status']}" for r in rows))
    mean, se, best = cv_statistics(losses, weights, names)
    for row in rows:
        n = row["method"]
        if n in losses:
            row["cv_log_loss"] = mean[n]
            row["se"] = se[n]
    within = [r for r in rows
              if r["method"] in losses and r["cv_log_loss"] - mean[best] <= se_rule * r["se"]]
    chosen = min(within, key=lambda r: (r["complexity"], names.index(r["method"])))
    if chosen["method"] == best:
        reason = f"lowest CV log loss, and no simpler candidate within {se_rule:g} SE"
    else:
        reason = f"simplest candidate within {se_rule:g} SE of the lowest CV log loss ({best})"
    return {"candidates": rows, "best": best, "chosen": chosen["method"], "reason": reason}


def select_preferred(names: list[str], results: dict[str, Any], weights: tuple[np.ndarray, ...],
                     se_rule: float, brier: dict[str, tuple[np.ndarray, ...]] | None = None
                     ) -> dict[str, Any]:
    """The first of ``names`` whose CV log loss is within ``se_rule`` paired standard errors of
    the lowest; otherwise as :func:`~mlcal.calibrators.auto.select_one_se` (same arguments,
    same record: ``candidates``, ``best``, ``chosen``, ``reason``).

    With ``brier`` (per candidate that did not fail, per-unit CV Brier arrays aligned with
    ``weights``; the multiclass ``auto``'s ``criterion="both"``) a candidate is passed over only
    when it is worse than the best by more than ``se_rule`` paired SE on both CV log loss and CV
    Brier (:func:`cv_statistics` on each): the first listed within ``se_rule`` SE on either is
    chosen, and each row also records ``cv_brier`` and ``brier_se``.
    """
    record = select_one_se(names, results, weights, 0.0)
    rows = [r for r in record["candidates"] if "cv_log_loss" in r]
    low = {r["method"]: r for r in rows}[record["best"]]["cv_log_loss"]
    within = {r["method"] for r in rows if r["cv_log_loss"] - low <= se_rule * r["se"]}
    if brier is not None:
        mean, se, best = cv_statistics({r["method"]: brier[r["method"]] for r in rows},
                                       weights, names)
        for row in rows:
            row.update(cv_brier=mean[row["method"]], brier_se=se[row["method"]])
        within |= {n for n in mean if mean[n] - mean[best] <= se_rule * se[n]}
    chosen = next(r["method"] for r in rows if r["method"] in within)
    if brier is not None:
        reason = (f"first listed candidate within {se_rule:g} SE of the lowest CV log loss "
                  f"({record['best']}) or of the lowest CV Brier ({best})")
    elif chosen == record["best"]:
        reason = (f"lowest CV log loss, and no candidate listed before it within {se_rule:g} "
                  "SE")
    else:
        reason = (f"first listed candidate within {se_rule:g} SE of the lowest CV log loss "
                  f"({record['best']})")
    record.update(chosen=chosen, reason=reason)
    return record


def row_folds(x: np.ndarray, pos: np.ndarray, neg: np.ndarray, n_folds: int, seed: int):
    """Row-level folds for data with few distinct scores and integer weights (counts).

    The rows are put in a canonical order (by score, positives first) and each is dealt a fold
    uniformly at random from ``seed`` (integer draws only, so the same on every CPU and
    independent of the input's row order); as in a plain random K-fold, a score's held-out
    label mean varies around its training mean. Returns the test units: one per (score, fold)
    holding rows, with their positive and negative counts and fold, in score order.
    """
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_folds, size=int(np.sum(pos) + np.sum(neg)), dtype=np.int8)
    counts = np.empty((x.size, 2, n_folds))
    start = 0
    for i in range(x.size):
        for j, n in enumerate((int(pos[i]), int(neg[i]))):
            counts[i, j] = np.bincount(draws[start:start + n], minlength=n_folds)
            start += n
    keep = (counts[:, 0] + counts[:, 1] > 0).ravel()
    return (np.repeat(x, n_folds)[keep], counts[:, 0].ravel()[keep],
            counts[:, 1].ravel()[keep], np.tile(np.arange(n_folds), x.size)[keep])


def coarsen(x: np.ndarray, pos: np.ndarray, neg: np.ndarray,
            n_cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge ``x.size`` sorted unique points into ``n_cells`` cells of consecutive points.

    Cell ``j`` holds points ``floor(j M / n_cells)`` up to the next cell's start (sizes differ
    by at most one; integer arithmetic only), carries the correctly rounded sums of its positive
    and negative weights and sits at the score of its middle point. Every cell keeps the weight
    of all its rows, so a model fitted on cells has the statistical power of the whole data:
    unlike a subset, this does not handicap flexible methods (isotonic, ENIR, ELiTE) against
    parametric ones at large N.
    """
    starts = (np.arange(n_cells, dtype=np.int64) * x.size) // n_cells
    ends = np.append(starts[1:], x.size)
    return (x[(starts + ends - 1) // 2], exact_group_sums(pos, starts),
            exact_group_sums(neg, starts))


def _cell_points(x: np.ndarray, pos: np.ndarray, neg: np.ndarray):
    """The collapse of ``_rows(x, pos, neg)`` and its data floor, ``(x, ybar, wsum, floor)``
    (points of zero weight left out), or ``None`` when ``x`` is not strictly increasing (row
    folds repeat a score): the point fits' input, shared by the candidates of one fold."""
    if x.size > 1 and not bool(np.all(x[1:] > x[:-1])):
        return None
    floor = data_floor(np.concatenate((pos, neg)))
    wsum = pos + neg
    keep = wsum > 0
    if not keep.all():
        x, pos, wsum = x[keep], pos[keep], wsum[keep]
    return x, pos / wsum, wsum, floor


def _fit_cells(cal: BaseCalibrator, x: np.ndarray, pos: np.ndarray, neg: np.ndarray,
               prepared: tuple | None = None) -> bool:
    """Fit ``cal`` as ``cal.fit(*_rows(x, pos, neg))`` does, from the sorted points directly
    (:meth:`BaseCalibrator._fit_collapsed`: the collapse of those rows is ``x`` with weight
    ``pos + neg`` and mean label ``pos / (pos + neg)``, both rounded once as the collapse's
    exact sums are). ``prepared``: :func:`_cell_points` of the same cells, if the caller has
    it. False: not fitted (the caller fits on the rows): the method has no point fit, or ``x``
    is not strictly increasing (row folds repeat a score)."""
    if not cal._fits_points():
        return False
    if prepared is None:
        prepared = _cell_points(x, pos, neg)
        if prepared is None:
            return False
    xk, ybar, wsum, floor = prepared
    return cal._fit_collapsed(xk, ybar, wsum, xk, floor)


def _n_distinct(x: np.ndarray) -> int:
    """``np.unique(x).size`` for sorted test units ``x`` (points and cells are strictly
    increasing: their count, without a sort; row folds repeat scores: counted by ``unique``)."""
    if x.size < 2 or bool(np.all(x[1:] > x[:-1])):
        return int(x.size)
    return int(np.unique(x).size)


def _rows(x: np.ndarray, pos: np.ndarray, neg: np.ndarray):
    """Tie-collapsed points as weighted rows, in score order: a positive and a negative row
    per score (rows of zero weight left out)."""
    w = np.column_stack((pos, neg)).ravel()
    keep = w > 0
    return (np.repeat(x, 2)[keep], np.tile(np.array([1.0, 0.0]), x.size)[keep], w[keep])


def cv_statistics(losses: dict[str, tuple[np.ndarray, ...]], weights: tuple[np.ndarray, ...],
                  names: list[str]) -> tuple[dict, dict, str]:
    """Per candidate the weighted mean CV log loss and the standard error of its paired
    difference to the best, and the best's name (``losses[name]`` and ``weights`` are aligned
    tuples of per-unit loss and frequency-weight arrays).

    Computed on the weights scaled by an even power of two ``2**k``
    (:func:`weight_scale_exponent`; exact): the same bits as unscaled in the normal range,
    and no underflow of ``w * loss`` or overflow of ``var / total`` when the weights are tiny
    (subnormal weights gave ``se = inf``: a fit that could not be saved). The se is
    ``sqrt(var / total) * 2**(k/2)``, exactly ``sqrt(var / sum(w))``'s scaling.
    """
    k = weight_scale_exponent(np.concatenate(weights))
    scaled = tuple(np.ldexp(w, k) for w in weights)
    total = float(sum(np.sum(w) for w in scaled))
    mean = {n: float(sum(np.sum(w * loss) for w, loss in zip(scaled, parts)) / total)
            for n, parts in losses.items()}
    best = min(mean, key=lambda n: (mean[n], names.index(n)))
    se = {n: float(np.ldexp(_paired_se([a - b for a, b in zip(parts, losses[best])], scaled,
                                       total), k // 2))
          for n, parts in losses.items()}
    return mean, se, best


def weight_scale_exponent(w: np.ndarray) -> int:
    """An even ``k`` with ``max(w) * 2**k`` in [1/4, 1) when that needs scaling up (tiny
    weights), else 0 (weights are left as they are unless they are below 1/4)."""
    top = float(np.max(w))
    if not top > 0.0 or top >= 0.25:
        return 0
    k = -int(np.frexp(top)[1])   # top * 2**k in [1/2, 1)
    return k - (k % 2)


def _paired_se(diffs, weights, total: float) -> float:
    """Standard error of the weighted mean of per-row loss differences (frequency weights;
    ``diffs`` and ``weights`` are aligned tuples of arrays; ``total`` sums the weights)."""
    mean = sum(np.sum(w * d) for w, d in zip(weights, diffs)) / total
    var = sum(np.sum(w * (d - mean) ** 2) for w, d in zip(weights, diffs)) / total
    return float(np.sqrt(var / total))


_ROW_KEYS = {"method": str, "status": str, "complexity": float, "cv_log_loss": float,
             "se": float}
_TOP_KEYS = {"version": int, "rule": str, "se_rule": float, "n_folds": int, "seed": int,
             "n_points": int, "n_unique": int, "candidates": list, "best": (str, type(None)),
             "chosen": str, "chosen_params": dict, "fold_unit": str, "cv_repeats": int,
             "reason": str, "anchor": dict}
#: fields added after the first documents were written: optional on load
_NEWER_KEYS = ("chosen_params", "fold_unit", "cv_repeats", "anchor")
_ANCHOR_KEYS = {"method": str, "se_rule": float, "guard": (str, type(None)), "chosen": bool,
                "default_choice": (str, type(None))}


def _check_fields(obj: Any, spec: dict, where: str, required: tuple[str, ...]) -> None:
    if not isinstance(obj, dict):
        raise CalibratorFormatError(f"calibrator document: {where} must be an object")
    unknown = sorted(set(obj) - set(spec))
    missing = [key for key in required if key not in obj]
    if unknown or missing:
        raise CalibratorFormatError(f"calibrator document: {where} has unknown fields "
                                    f"{short_repr(unknown)} or lacks {short_repr(missing)}")
    for key, value in obj.items():
        kind = spec[key]
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and np.isfinite(value)) if kind is float else (
            isinstance(value, kind) and not (kind is int and isinstance(value, bool)))
        if not ok:
            raise CalibratorFormatError(f"calibrator document: {where} field {key!r} has a "
                                        f"wrong type: {short_repr(value)}")


def check_selection(info: Any) -> dict[str, Any]:
    """Validate the ``"fit_info"`` of an auto document (:class:`CalibratorFormatError`)."""
    _check_fields(info, _TOP_KEYS, "fit_info", tuple(k for k in _TOP_KEYS
                                                     if k not in _NEWER_KEYS))
    params = info.get("chosen_params", {})
    if not all(isinstance(k, str) and (v is None or isinstance(v, (str, int, float)))
               for k, v in params.items()):
        raise CalibratorFormatError("calibrator document: fit_info 'chosen_params' must map "
                                    f"names to numbers, strings or null: {short_repr(params)}")
    for row in info["candidates"]:
        _check_fields(row, _ROW_KEYS, "fit_info candidate", ("method", "status"))
    if "anchor" in info:
        _check_fields(info["anchor"], _ANCHOR_KEYS, "fit_info anchor", tuple(_ANCHOR_KEYS))
        if info["anchor"]["method"] not in ANCHORS:
            raise CalibratorFormatError("calibrator document: fit_info anchor 'method' is not "
                                        f"an anchor: {short_repr(info['anchor']['method'])}")
    if info["chosen"] not in [r["method"] for r in info["candidates"]]:
        raise CalibratorFormatError("calibrator document: fit_info 'chosen' is not a candidate")
    return info
