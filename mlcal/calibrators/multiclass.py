"""Multiclass calibrators: one-vs-rest over any binary method, and temperature scaling (vector
and matrix scaling, regularised towards it, are in :mod:`mlcal.calibrators.structured_scaling`).

Every multiclass calibrator takes an (n, K) score matrix (one column per class: probabilities
or logits) and class indices ``y`` in ``0 .. K-1``, and fits one multiclass map
(:class:`~mlcal.maps.MulticlassMap` or :class:`~mlcal.maps.SoftmaxAffineMap`) whose
``predict_proba`` rows sum to 1. They are not in the binary calibrator catalog
(:func:`mlcal.get_calibrator`), whose methods all take 1-D scores.

Input kind (``input_kind``): ``"probabilities"`` requires rows in [0, 1] that sum to 1 (within
:data:`ROW_SUM_TOLERANCE`); ``"logits"`` takes any finite scores; ``"auto"`` (default) reads
scores all in [0, 1] as probabilities (and so refuses rows that do not sum to 1) and anything
else as logits.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from mlcal._solvers.convex_newton import hessian_factor, newton, solve_factored
from mlcal._solvers.probability_floor import likelihood_floor
from mlcal._solvers.softmax_affine import (ROUNDING_DECREASE, canonical_order, coarse_rows,
                                          lbfgs)
from mlcal._solvers.softmax_derivatives import temperature_derivatives
from mlcal._validation import as_weights
from mlcal.calibrators._params import (Constraint, Options, Real, short_repr,
                                       validate_params)
from mlcal._safe_json import MAX_DOCUMENT_BYTES, dumps_safe
from mlcal.calibrators.base import (BaseCalibrator, CalibratorFormatError, build_from_params,
                                    calibrator_document, parse_document, read_document_header,
                                    read_document_map)
from mlcal.calibrators.catalog import calibrator_class, get_calibrator
from mlcal.maps.multiclass import MulticlassMap, SoftmaxAffineMap, as_score_matrix

INPUT_KINDS = ("auto", "probabilities", "logits")
#: largest |row sum - 1| accepted for probability rows
ROW_SUM_TOLERANCE = 1e-6


class NotProbabilitiesError(ValueError):
    """Score rows given (or read) as probabilities are outside [0, 1] or do not sum to 1."""


class MissingClassError(ValueError):
    """A class has no (positive-weight) row in the calibration labels."""


class TooFewClassesError(ValueError):
    """Multiclass calibration needs at least two classes."""


def check_probability_rows(s: np.ndarray, *, name: str = "scores") -> None:
    """Raise :class:`NotProbabilitiesError` unless every row of ``s`` is a distribution."""
    if s.min() < 0.0 or s.max() > 1.0:
        raise NotProbabilitiesError(f"{name}: probabilities must lie in [0, 1]; found values in "
                                    f"[{s.min():.6g}, {s.max():.6g}]")
    err = np.abs(np.sum(s, axis=1) - 1.0)
    bad = err > ROW_SUM_TOLERANCE
    if bad.any():
        i = int(np.argmax(err))
        raise NotProbabilitiesError(
            f"{name}: {int(bad.sum())} of {s.shape[0]} rows do not sum to 1 (e.g. row {i} sums "
            f"to {float(np.sum(s[i])):.9g}); pass class probabilities, or set "
            "input_kind='logits' for unnormalised scores")


def check_class_indices(y, n: int, n_classes: int, w: np.ndarray) -> np.ndarray:
    """Class indices as int64 in ``0 .. n_classes-1``, every class with positive weight."""
    if n_classes < 2:
        raise TooFewClassesError(f"multiclass calibration needs at least 2 classes (score "
                                 f"columns), got {n_classes}")
    raw = np.asarray(y).reshape(-1)
    if raw.shape[0] != n:
        raise ValueError(f"length mismatch: {n} score rows but {raw.shape[0]} labels in y")
    if raw.dtype.kind not in "iub" and not (raw.dtype.kind == "f"
                                             and np.all(raw == np.round(raw))):
        raise ValueError(f"y must hold class indices 0..{n_classes - 1}, got dtype {raw.dtype}")
    yi = raw.astype(np.int64)
    outside = (yi < 0) | (yi >= n_classes)
    if outside.any():
        bad = np.unique(yi[outside])[:5].tolist()
        raise ValueError(f"y holds class indices {bad} outside 0..{n_classes - 1} (one score "
                         "column per class)")
    present = np.zeros(n_classes, dtype=bool)
    present[yi[w > 0]] = True
    if not present.all():
        missing = np.flatnonzero(~present)[:10].tolist()
        raise MissingClassError(f"class(es) {missing} of {n_classes} never occur in the "
                                "calibration labels (with positive weight); every class needs "
                                "calibration rows")
    return yi


class MulticlassCalibrator(BaseEstimator):
    """Base class: ``fit(scores, y, sample_weight) -> self``, ``predict_proba(scores)``,
    ``map_``. Subclasses implement ``_fit(s, y, w, probabilities) -> map``."""

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {}
    #: the ``method`` of this class's JSON documents (distinct from every binary method name)
    document_method: ClassVar[str] = ""
    #: the map type this class fits (checked on load)
    map_type: ClassVar[type] = SoftmaxAffineMap
    #: the weights of the softmax-affine map it fits (checked on load): "ones" (a diagonal of
    #: ones and a zero bias: temperature scaling), "diagonal" or "matrix"; None for one-vs-rest
    weights_shape: ClassVar[str | None] = None
    #: extra top-level document fields this method writes (besides the envelope)
    document_extras: ClassVar[tuple[str, ...]] = ()

    def _validate_params(self) -> None:
        constraints = {"input_kind": [Options(INPUT_KINDS)], **self._parameter_constraints}
        validate_params(type(self).__name__, self.get_params(deep=False), constraints)

    def fit(self, scores, y, sample_weight=None) -> "MulticlassCalibrator":
        """Fit the multiclass map.

        Parameters
        ----------
        scores : array-like of shape (n, K)
            One column per class: probabilities (rows summing to 1) or logits.
        y : array-like of shape (n,)
            Class indices in ``0 .. K-1``; every class must occur.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights.

        Returns
        -------
        self

        Raises
        ------
        TooFewClassesError, MissingClassError, NotProbabilitiesError
            Named errors for K < 2, a class absent from ``y``, and probability rows that are
            not distributions.
        """
        self._validate_params()
        shape = np.shape(scores)
        if len(shape) != 2:
            raise ValueError(f"scores must be a 2-D array (n, K) with one column per class, "
                             f"got shape {shape}")
        n_classes = int(shape[1])
        if n_classes < 2:
            raise TooFewClassesError(f"multiclass calibration needs at least 2 classes (score "
                                     f"columns), got {n_classes}")
        s = as_score_matrix(scores, n_classes)
        w = as_weights(sample_weight, s.shape[0])
        yi = check_class_indices(y, s.shape[0], n_classes, w)
        probabilities = self.input_kind == "probabilities" or (
            self.input_kind == "auto" and s.min() >= 0.0 and s.max() <= 1.0)
        if probabilities:
            check_probability_rows(s)
        self.map_ = self._fit(s, yi, w, probabilities)
        self.n_classes_ = n_classes
        return self

    def _fit(self, s, y, w, probabilities):  # pragma: no cover - abstract
        raise NotImplementedError

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probabilities, shape (n, K); rows sum to 1."""
        if not hasattr(self, "map_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call "
                                 "fit(scores, y) first")
        return self.map_(scores)

    def predict(self, scores) -> np.ndarray:
        """Same as :meth:`predict_proba` (a calibrator's output is probabilities)."""
        return self.predict_proba(scores)

    # -- serialisation (the envelope of binary calibrators; ``method`` names the class) -------
    def _document_params(self) -> dict[str, Any]:
        return self.get_params(deep=False)

    def to_dict(self) -> dict[str, Any]:
        """The fitted calibrator as JSON-ready data: method, parameters and multiclass map."""
        if not hasattr(self, "map_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call "
                                 "fit(scores, y) first")
        return calibrator_document(self.document_method, self._document_params(), self.map_)

    def to_json(self, indent: int | None = None) -> str:
        """Serialise with :meth:`to_dict`; floats round-trip bit-exactly."""
        return dumps_safe(self.to_dict(), indent=indent, nonfinite="error")

    @classmethod
    def from_json(cls, text: str | bytes, *,
                  max_bytes: int = MAX_DOCUMENT_BYTES) -> "MulticlassCalibrator":
        """Rebuild a fitted multiclass calibrator from :meth:`to_json` output (validated; any
        malformed input raises :class:`~mlcal.calibrators.base.CalibratorFormatError`)."""
        return cls.from_dict(parse_document(text, max_bytes))

    @classmethod
    def from_dict(cls, doc: Any) -> "MulticlassCalibrator":
        """Rebuild a fitted multiclass calibrator from :meth:`to_dict` output. The fitted map
        is restored; diagnostics of the fit (``objective_``, ``n_iter_``) are not stored."""
        from mlcal.calibrators.multiclass_catalog import _DOCUMENT_CLASSES, multiclass_document_class

        method, params = read_document_header(doc)
        target = multiclass_document_class(method)
        if target is None:
            raise CalibratorFormatError(f"calibrator document: {short_repr(method)} is not a "
                                        f"multiclass method ({', '.join(_DOCUMENT_CLASSES)})")
        if cls is not MulticlassCalibrator and target is not cls:
            raise CalibratorFormatError(f"document holds a {target.__name__} calibrator, "
                                        f"not {cls.__name__}")
        from mlcal.calibrators.document_rules import ENVELOPE_FIELDS, check_fields

        # "class_extras" and "fit_info" are refused by name in _restore_extras by the methods
        # that do not write them
        check_fields(doc, ENVELOPE_FIELDS + ("class_extras", "fit_info"), method)
        obj = build_from_params(target, target._params_from_document(params))
        fitted = read_document_map(doc)
        if not isinstance(fitted, target.map_type):
            kinds = target.map_type if isinstance(target.map_type, tuple) else (target.map_type,)
            raise CalibratorFormatError(f"calibrator document: a {target.__name__} needs a "
                                        f"{' or '.join(repr(k.kind) for k in kinds)} map, got "
                                        f"{fitted.kind!r}")
        obj._check_map(fitted)
        obj._restore(fitted)
        obj._restore_extras(doc)
        obj._check_class_maps()
        return obj

    def _check_class_maps(self) -> None:
        """Hook: one-vs-rest checks each class map against its binary method."""

    def _check_map(self, fitted) -> None:
        """Refuse a map of the right type this method still cannot have fitted."""
        shape = self.weights_shape
        w = fitted.weights
        ok = (w.ndim == 2) if shape == "matrix" else (w.ndim == 1)
        if ok and shape == "ones":
            ok = bool(np.all(w == 1.0) and np.all(fitted.bias == 0.0))
        if not ok:
            what = {"matrix": "a full weight matrix", "diagonal": "diagonal weights",
                    "ones": "weights of ones and a zero bias"}[shape]
            raise CalibratorFormatError(f"calibrator document: a {type(self).__name__} map "
                                        f"has {what}")
        kind = self.input_kind
        expected = {"probabilities": "log-probabilities", "logits": "logits"}.get(kind)
        if expected is not None and fitted.input != expected:
            raise CalibratorFormatError(f"calibrator document: input_kind {kind!r} fits a map "
                                        f"on {expected!r}, not {fitted.input!r}")

    @classmethod
    def _params_from_document(cls, params: dict) -> dict:
        return params

    def _restore_extras(self, doc: dict) -> None:
        """Hook: restore the extra document fields of a method (:class:`OneVsRest`'s per-class
        ``"class_extras"``, multiclass ``auto``'s ``"fit_info"``); methods refuse those they
        do not write."""
        for key in ("class_extras", "fit_info"):
            if key in doc:
                raise CalibratorFormatError(f"calibrator document: {type(self).__name__} "
                                            f"documents have no {key!r}")

    def complexity(self) -> float:
        """Free parameters of the fitted map (what multiclass ``auto`` calls simpler); by
        default the map's size."""
        return float(self.map_.size)

    def _restore(self, fitted) -> None:
        self.map_ = fitted
        self.n_classes_ = fitted.n_classes


class OneVsRest(MulticlassCalibrator):
    """One-vs-rest calibration with any binary method, renormalised.

    Class ``k``'s column is calibrated against ``y == k`` by a clone of ``calibrator``; the K
    calibrated columns are divided by their row sum (a row where every class maps to 0 gets
    ``1/K``; see :class:`~mlcal.maps.MulticlassMap`).

    Parameters
    ----------
    calibrator : str or BaseCalibrator, default="isotonic"
        A registered binary method name (:func:`mlcal.available_calibrators`) or an unfitted
        binary calibrator.
    input_kind : {"auto", "probabilities", "logits"}, default="auto"
        See :mod:`mlcal.calibrators.multiclass`. With logits, methods that need scores in
        [0, 1] squash each column with the logistic sigmoid (recorded on the class map).

    Attributes
    ----------
    map_ : MulticlassMap
    calibrators_ : list of BaseCalibrator
        The fitted per-class calibrators.
    """

    document_method = "multiclass-one-vs-rest"
    document_extras = ("class_extras",)
    map_type = MulticlassMap

    def __init__(self, calibrator="isotonic", input_kind: str = "auto"):
        self.calibrator = calibrator
        self.input_kind = input_kind

    def _document_params(self) -> dict[str, Any]:
        # an estimator parameter is stored as its method name and parameters
        cal = self.calibrator
        spec = cal if isinstance(cal, str) else {"method": cal.method_name,
                                                 "params": cal.get_params(deep=False)}
        return {"calibrator": spec, "input_kind": self.input_kind}

    @classmethod
    def _params_from_document(cls, params: dict) -> dict:
        spec = params.get("calibrator")
        if not isinstance(spec, dict):
            return params
        method, inner = spec.get("method"), spec.get("params")
        if not isinstance(method, str) or not isinstance(inner, dict) or len(spec) != 2:
            raise CalibratorFormatError("calibrator document: a one-vs-rest 'calibrator' must "
                                        "be a method name or {\"method\": ..., \"params\": {...}}")
        try:
            target = calibrator_class(method)
        except ValueError as exc:
            raise CalibratorFormatError(f"calibrator document: {exc}") from None
        return {**params, "calibrator": build_from_params(target, inner)}

    def _check_map(self, fitted) -> None:
        # the class maps are restored onto calibrators below and checked there
        pass

    def _restore(self, fitted) -> None:
        super()._restore(fitted)
        self.calibrators_ = []
        for class_map in fitted.maps:
            cal = (get_calibrator(self.calibrator) if isinstance(self.calibrator, str)
                   else clone(self.calibrator))
            cal.map_ = class_map
            self.calibrators_.append(cal)

    def _check_class_maps(self) -> None:
        # each class map must be one the binary method fits (after class_extras: auto's
        # choice is in its fit_info)
        for k, cal in enumerate(self.calibrators_):
            cal.check_document_map(f"class map {k}: ")

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`MulticlassCalibrator.to_dict`, plus ``"class_extras"`` when the binary
        method writes extra document fields (``auto``'s ``fit_info``: what it chose for each
        class and why; Venn--Abers' ``interval``): one object per class, in class order."""
        doc = super().to_dict()
        extras = [cal._extra_to_dict() for cal in self.calibrators_]
        if any(extras):
            doc["class_extras"] = extras
        return doc

    def _restore_extras(self, doc: dict) -> None:
        if "fit_info" in doc:
            raise CalibratorFormatError("calibrator document: OneVsRest documents have no "
                                        "'fit_info' (each class's is in 'class_extras')")
        extras = doc.get("class_extras")
        if extras is None:
            return
        if not isinstance(extras, list) or len(extras) != len(self.calibrators_) or \
                not all(isinstance(e, dict) for e in extras):
            raise CalibratorFormatError("calibrator document: 'class_extras' must be a list "
                                        f"of {len(self.calibrators_)} objects, one per class")
        for k, (cal, extra) in enumerate(zip(self.calibrators_, extras)):
            unknown = sorted(set(extra) - set(BaseCalibrator.EXTRA_DOCUMENT_FIELDS))
            if unknown:
                raise CalibratorFormatError(f"calibrator document: class_extras[{k}] has "
                                            f"unknown fields {short_repr(unknown)}")
            try:
                cal.restore_extras(extra)
            except CalibratorFormatError as exc:
                raise CalibratorFormatError(f"calibrator document: class_extras[{k}]: "
                                            f"{exc}") from None

    def _validate_params(self) -> None:
        super()._validate_params()
        if not isinstance(self.calibrator, (str, BaseCalibrator)):
            raise ValueError(f"OneVsRest: calibrator must be a binary method name or an "
                             f"mlcal calibrator, got {short_repr(self.calibrator)}")
        if isinstance(self.calibrator, str):
            calibrator_class(self.calibrator)   # ValueError naming the known methods

    def _fit(self, s, y, w, probabilities):
        fitted = []
        for k in range(s.shape[1]):
            cal = (get_calibrator(self.calibrator) if isinstance(self.calibrator, str)
                   else clone(self.calibrator))
            if (not probabilities and cal.requires_unit_interval
                    and cal.get_params().get("input_transform") == "auto"):
                cal.set_params(input_transform="sigmoid")
            fitted.append(cal.fit(s[:, k], (y == k).astype(np.float64), sample_weight=w))
        self.calibrators_ = fitted
        return MulticlassMap(tuple(c.map_ for c in fitted))


class _SoftmaxScaling(MulticlassCalibrator):
    """Shared fitting of ``softmax(W x + b)`` on the weighted mean negative log-likelihood by
    deterministic damped Newton with the exact Hessian (:mod:`mlcal._solvers.convex_newton`,
    kernels in :mod:`mlcal._solvers.softmax_derivatives`). Newton's method is affine
    invariant, so the scale and offset of the scores need no standardisation; it stops once
    the Newton decrement predicts a gap to the optimum below 1e-14 relative to the objective
    (then takes that last step). Above ``2 * COARSE_ROWS`` rows the fit starts on a subsample
    and its all-rows stage stops at a predicted gap of 1e-9 relative (:func:`coarse_to_fine`,
    :data:`FINE_DECREASE`). Subclasses return ``(evaluate, theta0, build, solver)``."""

    def _problem(self, x, y, w, K):  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit(self, s, y, w, probabilities):
        inp = "log-probabilities" if probabilities else "logits"
        K = s.shape[1]
        # probability inputs are floored at a level chosen on these rows (not 1e-300): an
        # exact or underflowed 0 from the base model reads as the probability the data favour
        fields = {"probability_floor": likelihood_floor(s, y, w)} if probabilities else {}
        x = SoftmaxAffineMap(np.ones(K), np.zeros(K), input=inp, **fields).transform_input(s)
        order = canonical_order(x, y, w)
        x, y, w = (np.ascontiguousarray(x[order]), np.ascontiguousarray(y[order]),
                   np.ascontiguousarray(w[order]))
        evaluate, theta0, build, solver = self._problem(x, y, w, K)
        last: list = [None, None]   # the solvers end at their last evaluation: reuse its value

        def remembered(theta, hessian):
            out = evaluate(theta, hessian)
            last[0], last[1] = theta.copy(), out[0]
            return out

        theta, self.n_iter_, converged = solver(remembered, theta0)
        if not converged:
            raise ValueError(f"{type(self).__name__}: the fit did not converge in "
                             f"{self.n_iter_} iterations (separable data?); the regularised "
                             "'svs' and 'sms' (StructuredVectorScaling, "
                             "StructuredMatrixScaling) always have a finite optimum")
        self.objective_ = float(last[1] if last[0] is not None and np.array_equal(last[0], theta)
                                else evaluate(theta, False)[0])
        fitted = build(theta, inp)
        eps = self._uniform_weight(w)
        if eps:
            fields["uniform_weight"] = eps
        return dataclasses.replace(fitted, **fields) if fields else fitted

    def _uniform_weight(self, w: np.ndarray) -> float:
        """Weight of the uniform distribution in the fitted map's output (none here)."""
        return 0.0


def _newton(evaluate, theta0):
    return newton(evaluate, theta0, max_iter=_NEWTON_MAX_ITER)


def _lbfgs(evaluate, theta0, scale=None, history=None, rel_decrease=ROUNDING_DECREASE):
    """L-BFGS on ``evaluate``; with ``scale`` (a positive vector, e.g. ``1 / sqrt`` of a
    Hessian diagonal), in the variables ``theta / scale`` (diagonal preconditioning: the same
    optimum, fewer iterations when the curvatures of the parameters differ by orders of
    magnitude, as penalised diagonal and off-diagonal entries do)."""
    if scale is None:
        return lbfgs(lambda t: evaluate(t, False)[:2], theta0, max_iter=_LBFGS_MAX_ITER,
                     history=history, rel_decrease=rel_decrease)

    def fun(u):
        f, g = evaluate(u * scale, False)[:2]
        return f, g * scale

    u, n_iter, converged = lbfgs(fun, np.asarray(theta0, dtype=np.float64) / scale,
                                 max_iter=_LBFGS_MAX_ITER, history=history,
                                 rel_decrease=rel_decrease)
    return u * scale, n_iter, converged


#: relative predicted decrease at which the subsample stage of :func:`coarse_to_fine` stops
#: (its optimum is only a starting point: the full rows' optimum differs at ~1/sqrt(rows))
COARSE_DECREASE = 1e-9
#: carry the subsample stage's L-BFGS curvature memory into the full-data stage
KEEP_HISTORY = False
#: relative predicted decrease at which the full-data L-BFGS stage of :func:`coarse_to_fine`
#: stops. Measured at N = 1e5, K = 100 (SMS): the relative gap of the objective to the tight
#: optimum after each full pass was 7.5e-4, 1.2e-4, 1.0e-6, 7.0e-8, 1.3e-10, 3.1e-11, 1e-13,
#: ...; the predicted decrease is about twice the gap, so this stops at a gap of at most
#: ~5e-10 (1.3e-10 there) instead of chasing the last four passes to 1e-14: far below the
#: statistical error of a calibration fit (~1/N) and within the 1e-9 of scipy's optimum the
#: tests ask for. Fits of at most ``2 * COARSE_ROWS`` rows keep the 1e-14 rule.
FINE_DECREASE = 1e-9
#: the temperature pre-step of SVS / SMS / vector / matrix scaling on more than
#: ``2 * COARSE_ROWS`` rows takes Newton's last step unevaluated once the predicted gap is
#: below this (relative): the gap after it is about the square, at the 1e-14 rounding level
#: of the default rule, one full pass fewer (:func:`~mlcal._solvers.convex_newton.newton`)
PRE_STEP_UNCHECKED = 1e-7


def coarse_to_fine(solver, evaluate_coarse, unchecked_last_step=None,
                   rel_decrease=None):
    """A solver that first minimises ``evaluate_coarse`` (the same objective, penalties
    included, on a deterministic subsample of the rows: :func:`coarse_rows`) and starts
    ``solver`` (:func:`_newton` or :func:`_lbfgs`, possibly a ``functools.partial`` of it) on
    all rows from its optimum. Each full-data pass costs as much as all the subsample's passes
    together, and from the subsample's optimum fewer are needed. The final stage stops at the
    relative predicted decrease ``rel_decrease`` (default :data:`FINE_DECREASE`: the objective
    within ~1e-10 relative of the tight optimum). With ``unchecked_last_step`` (Newton only: one parameter, whose exact
    Hessian costs no more than its gradient), the final stage is Newton on all rows whose last
    step is not evaluated (:func:`~mlcal._solvers.convex_newton.newton`). A subsample fit that
    fails to converge (unpenalised, separable subsample) is ignored."""

    fine_decrease = FINE_DECREASE if rel_decrease is None else rel_decrease

    def run(evaluate, theta0):
        start = np.array(theta0, dtype=np.float64)
        if getattr(solver, "func", solver) is _lbfgs:
            options = dict(getattr(solver, "keywords", {}))
            history: tuple[list, list] = ([], [])
            theta, _, ok = _lbfgs(evaluate_coarse, start, rel_decrease=COARSE_DECREASE,
                                  history=history, **options)
            if not (ok and np.all(np.isfinite(theta))):
                theta, history = start, ([], [])
            if not KEEP_HISTORY:
                history = ([], [])
            return _lbfgs(evaluate, theta, history=history, rel_decrease=fine_decrease,
                          **options)
        theta, _, ok = solver(evaluate_coarse, start)
        if not (ok and np.all(np.isfinite(theta))):
            return solver(evaluate, start)
        if unchecked_last_step is not None:
            return newton(evaluate, theta, max_iter=_NEWTON_MAX_ITER,
                          unchecked_last_step=unchecked_last_step)
        # on all rows, L-BFGS with the subsample's exact Hessian at its optimum as the initial
        # inverse Hessian: a few gradient passes instead of Newton's Hessian passes, each of
        # which costs (number of parameters)^2 / 2 per row
        factor = hessian_factor(evaluate_coarse(theta, True)[2])
        if factor is not None:
            fine = lbfgs(lambda t: evaluate(t, False)[:2], theta, max_iter=_LBFGS_MAX_ITER,
                         precondition=lambda q: -solve_factored(factor, q),
                         rel_decrease=fine_decrease)
            if fine[2]:
                return fine
        return solver(evaluate, theta)

    return run


#: Newton iterations allowed (a strictly convex fit needs about 5-15; a separable vector
#: scaling fit, whose likelihood has no finite maximiser, a few dozen)
_NEWTON_MAX_ITER = 500
#: L-BFGS iterations for matrix scaling above :data:`MAX_NEWTON_PARAMETERS`
_LBFGS_MAX_ITER = 10_000
#: matrix scaling with more parameters (K^2 + K; K > 22) uses L-BFGS: its Hessian costs
#: (K^2 + K)^2 / 2 per row and memory per row block
MAX_NEWTON_PARAMETERS = 506


def _fix_bias_shift(H: np.ndarray, start: int) -> None:
    """Add ``c 1 1^T`` on the bias block ``H[start:, start:]``: the NLL is flat along a common
    shift of all biases, and with the gradient orthogonal to that direction the Newton step
    solved with this term is the one within ``sum(b) = const`` (the optimum is unchanged)."""
    K = H.shape[0] - start
    H[start:, start:] += float(np.sum(np.diag(H)[start:])) / K


#: a row spread (max - min score) above which temperature scaling starts at 1 / spread, not 1
LARGE_SPREAD = 1e6


def _initial_inverse_temperature(x: np.ndarray) -> float:
    """Newton's start for ``1/T``: 1, unless some row spans more than :data:`LARGE_SPREAD`
    (naive-Bayes log-probabilities reach -1e16): from 1 the first Newton step there is so far
    off that no halving of it decreases the objective (issue 26); ``1 / spread`` puts the
    largest logit gap at 1. Normal logits and floored log-probabilities (spread below ~700)
    start at 1 as before, so their fits are unchanged."""
    spread = float(np.max(np.max(x, axis=1) - np.min(x, axis=1)))
    return 1.0 if spread <= LARGE_SPREAD else 1.0 / spread


class TemperatureScaling(_SoftmaxScaling):
    """Temperature scaling, ``softmax(x / T)`` with one parameter ``T > 0`` (Guo et al. 2017).

    ``x`` is the logit row, or the log of the probability row. ``T`` minimises the weighted
    negative log-likelihood; the fit is on ``1/T`` (the objective is convex in it).

    Parameters
    ----------
    input_kind : {"auto", "probabilities", "logits"}, default="auto"

    Attributes
    ----------
    map_ : SoftmaxAffineMap
        ``W = I`` (stored as a diagonal of ones), ``b = 0``, the fitted temperature.
    objective_ : float
        Weighted mean negative log-likelihood at the optimum.
    """

    document_method = "multiclass-temperature"
    weights_shape = "ones"

    def __init__(self, input_kind: str = "auto"):
        self.input_kind = input_kind

    def _problem(self, x, y, w, K, pre_step=False):
        """``pre_step``: the temperature of SVS / SMS (only its parameter is used): above
        ``2 * COARSE_ROWS`` rows Newton's last step is taken unevaluated."""
        zero = np.zeros(K)

        def evaluate(theta, hessian):
            f, d1, d2 = temperature_derivatives(x, y, w, float(theta[0]))
            return f, np.array([d1]), np.array([[d2]])

        def build(theta, inp):
            if not theta[0] > 0.0:
                raise ValueError("TemperatureScaling: the optimal inverse temperature is not "
                                 "positive (the scores are anti-correlated with the labels)")
            return SoftmaxAffineMap(np.ones(K), zero, 1.0 / float(theta[0]), inp)

        start = np.array([_initial_inverse_temperature(x)])
        rows = coarse_rows(x.shape[0])
        if rows is None:
            return evaluate, start, build, _newton
        xc, yc, wc = (np.ascontiguousarray(a[rows]) for a in (x, y, w))

        def evaluate_coarse(theta, hessian):
            f, d1, d2 = temperature_derivatives(xc, yc, wc, float(theta[0]))
            return f, np.array([d1]), np.array([[d2]])

        if pre_step:
            return evaluate, start, build, coarse_to_fine(
                _newton, evaluate_coarse, unchecked_last_step=PRE_STEP_UNCHECKED)
        # a temperature fit's own full-data stage stays at the rounding level (two or three
        # passes of one parameter: cheap), so its temperature is as before
        return evaluate, start, build, coarse_to_fine(_newton, evaluate_coarse,
                                                      rel_decrease=ROUNDING_DECREASE)

    def complexity(self) -> float:
        return 1.0


_CATALOG_NAMES = ("MULTICLASS_METHODS", "multiclass_calibrator", "multiclass_document_class",
                  "register_multiclass_method", "_DOCUMENT_CLASSES", "TemperatureMixScaling",
                  "StructuredVectorScaling", "StructuredMatrixScaling", "VectorScaling",
                  "MatrixScaling")


def __getattr__(name: str) -> Any:
    # the method table lives in mlcal.calibrators.multiclass_catalog, which imports this module
    # and the scalings built on it (importing it here at module level would be a cycle); its
    # names stay importable from here, where they were first published
    if name in _CATALOG_NAMES:
        from mlcal.calibrators import multiclass_catalog
        return getattr(multiclass_catalog, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
