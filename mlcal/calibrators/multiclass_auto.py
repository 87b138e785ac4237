"""Multiclass ``auto``: choose a multiclass calibration method by cross-validated log loss and
Brier score.

The multiclass counterpart of :class:`~mlcal.calibrators.auto.AutoCalibrator`, with the same
fold dealing (:func:`~mlcal.calibrators.auto.assign_folds`) and a selection that prefers the
richer regularised map: the first listed candidate (by default matrix scaling, then SMS, SVS,
ts-mix, temperature, one-vs-rest ``auto``) whose K-fold CV log loss or CV Brier score is within
``se_rule`` (default 2) paired standard errors of the lowest (:func:`select_preferred`;
``criterion="log-loss"``: CV log loss only, the rule before issue 26's Brier ranking);
``prefer="simplest"`` is the binary ``auto``'s one-SE rule
(:func:`~mlcal.calibrators.auto.select_one_se`). The chosen method is refitted on all rows, so
the result is that method's own map; ``fit_info`` in the JSON records what was compared and why
the winner won.

Candidates are names: a key of :data:`~mlcal.calibrators.multiclass.MULTICLASS_METHODS`
(``"temperature"``, ``"ts-mix"``, ``"svs"``, ``"sms"``, ``"vector"``, ``"matrix"``, and any
method registered there later), or ``"one-vs-rest:<binary method>"``. Simplicity is the number
of free parameters of the fitted map
(:meth:`~mlcal.calibrators.multiclass.MulticlassCalibrator.complexity`): 1 for temperature and
ts-mix, 2K + 1 for SVS, K^2 + K + 1 for SMS.

The defaults are the regularised family (:data:`DEFAULT_CANDIDATES`), matrix scaling included
(since issue 26 the penalised SMS fit without the uniform mixture; it shares SMS's fold fits,
:func:`shared_fit`); the old unregularised fits overfitted small calibration sets. Vector
scaling stays available by name. Above :data:`MAX_OVR_CLASSES` classes one-vs-rest ``auto``
(a binary ``auto`` per class, each ``n_folds + 1`` times) and above :data:`MAX_SMS_CLASSES`
structured and plain matrix scaling are left out of the defaults for their fit time
(docs/multiclass-scaling.md, "Multiclass auto").

Why the richer map by default (docs/multiclass-scaling.md, "Selection rule"): on the multiclass
quality benchmark the lowest CV log loss (``se_rule=0``) lost to plain matrix scaling on mean
held-out log loss: on 200 to 1000 rows the candidates' CV log losses differ by less than their
noise, and the CV choice of SMS, SVS or temperature where matrix scaling was better held out
cost more than the rare right choice gained. Every structured candidate is penalised towards
temperature scaling, so the richer map is safe; a simpler one is chosen only when CV says so
by more than two standard errors.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Any

import numpy as np

from mlcal._solvers.detmath import det_log_array
from mlcal._solvers.softmax_affine import canonical_order
from mlcal.calibrators._params import (Constraint, Integer, IsNone, ListOf, Options, Real,
                                       short_repr)
from mlcal.calibrators.auto import (EPS, PREFERENCES, _check_fields, assign_folds,
                                   check_distinct_candidates, select_one_se, select_preferred)
from mlcal.calibrators.base import CalibratorFormatError
from mlcal.calibrators.catalog import available_calibrators
from mlcal.calibrators.multiclass import MulticlassCalibrator, OneVsRest
from mlcal.calibrators.multiclass_catalog import MULTICLASS_METHODS, register_multiclass_method
from mlcal.maps.multiclass import MulticlassMap, SoftmaxAffineMap
from mlcal.metrics.multiclass import multiclass_brier_per_row

#: The default candidates, in preference order: the richest regularised map first (matrix
#: scaling, then SMS, SVS, ts-mix, temperature; each is penalised towards temperature scaling,
#: so the richer map is the safe default), then one-vs-rest ``auto`` (per-class binary maps,
#: not regularised towards anything: chosen only when clearly better). With ``prefer="listed"``
#: the first candidate within ``se_rule`` standard errors of the lowest CV log loss (or, with
#: ``criterion="both"``, of the lowest CV Brier) wins; the first is also the fallback when no
#: cross-validation is possible.
DEFAULT_CANDIDATES = ("matrix", "sms", "svs", "ts-mix", "temperature", "one-vs-rest:auto")
#: the default ``se_rule``: paired standard errors of CV log loss (and Brier) that count as
#: noise
DEFAULT_SE_RULE = 2.0
#: ``criterion`` values: ``"both"`` (a candidate is passed over only when worse than the best
#: by more than ``se_rule`` SE on both CV log loss and CV Brier) and ``"log-loss"``
CRITERIA = ("both", "log-loss")
#: the defaults leave out ``"sms"`` and ``"matrix"`` above this many classes (K^2 + K + 1
#: parameters)
MAX_SMS_CLASSES = 100
#: the defaults leave out ``"one-vs-rest:auto"`` above this many classes: a binary auto per
#: class, by far the slowest candidate (measured: docs/multiclass-scaling.md)
MAX_OVR_CLASSES = 20
OVR_PREFIX = "one-vs-rest:"
DEFAULT_FOLDS = 5


def default_candidates(n_classes: int) -> tuple[str, ...]:
    """:data:`DEFAULT_CANDIDATES` for ``n_classes`` classes: without ``"sms"`` above
    :data:`MAX_SMS_CLASSES` and without ``"one-vs-rest:auto"`` above :data:`MAX_OVR_CLASSES`."""
    limits = {"sms": MAX_SMS_CLASSES, "matrix": MAX_SMS_CLASSES,
              OVR_PREFIX + "auto": MAX_OVR_CLASSES}
    return tuple(c for c in DEFAULT_CANDIDATES if n_classes <= limits.get(c, n_classes))
FIT_INFO_VERSION = 1


def candidate_calibrator(name: str, input_kind: str) -> MulticlassCalibrator:
    """A new, unfitted multiclass calibrator for candidate ``name`` (see the module notes)."""
    if name.startswith(OVR_PREFIX):
        return OneVsRest(name[len(OVR_PREFIX):], input_kind=input_kind)
    return MULTICLASS_METHODS[name](input_kind=input_kind)


class MulticlassCandidate(Constraint):
    """A multiclass method name (other than "auto") or ``one-vs-rest:<binary method>``,
    checked against the registries when validating."""

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        if value.startswith(OVR_PREFIX):
            return value[len(OVR_PREFIX):] in available_calibrators()
        return value != "auto" and value in MULTICLASS_METHODS

    def spec(self) -> dict[str, Any]:
        # the Java evaluator's form: one of these multiclass names, or the prefix followed by
        # a registered binary method
        return {"kind": "multiclass-candidate", "prefix": OVR_PREFIX,
                "multiclass": sorted(n for n in MULTICLASS_METHODS if n != "auto")}

    def describe(self) -> str:
        names = [n for n in MULTICLASS_METHODS if n != "auto"]
        return ("a multiclass method (" + ", ".join(names) + ") or 'one-vs-rest:<binary "
                "method>'")


class MulticlassAuto(MulticlassCalibrator):
    """Choose among multiclass calibrators by K-fold cross-validated log loss and Brier score:
    the first listed candidate (by default the richest regularised map) within ``se_rule``
    standard errors of the lowest CV log loss or of the lowest CV Brier.

    1. Rows are put in a canonical order (by class, then by score row and weight, so the
       input's row order cannot matter) and dealt to folds by
       :func:`~mlcal.calibrators.auto.assign_folds`: every run of ``n_folds`` consecutive
       rows of a class holds each fold once (stratified by class).
    2. Every candidate is fitted on K-1 folds and predicts the held-out fold; a row's loss is
       ``-log p[y]`` with ``p`` clipped at 1e-15 (for scoring only), its Brier score
       ``sum_k (p[k] - [y = k])^2``; both are weighted by the sample weights. A candidate that
       raises on a fold is recorded as failed.
    3. :func:`select_preferred` picks the first listed candidate within ``se_rule`` paired
       standard errors of the lowest CV log loss or of the lowest CV Brier (each candidate's
       paired SE against that metric's best; ``criterion="both"``, the default), or within
       ``se_rule`` SE of the lowest CV log loss alone (``criterion="log-loss"``);
       ``prefer="simplest"`` is :func:`~mlcal.calibrators.auto.select_one_se` on CV log loss
       (the one of fewest free parameters; ``criterion`` applies to ``prefer="listed"`` only).
       ``se_rule=0`` with ``criterion="log-loss"`` is the lowest CV log loss.
    4. The chosen candidate is refitted on all rows; its map is this calibrator's map. If that
       refit fails, the next candidate by CV log loss is refitted instead (the reason says so).

    With ``n_folds=None`` the folds are 5, or fewer on tiny sets: as many as the rarest class
    has rows (at least 2), so that every fold holds every class. When no cross-validation is
    possible (a class with fewer than 2 rows, or an explicit ``n_folds`` that leaves a training
    part without a class), the first candidate (by default matrix scaling) is used, with a
    ``UserWarning`` saying why (also recorded as the reason).

    Parameters
    ----------
    candidates : list of str or None, default=None
        Candidate names (see the module notes); ``None``: :func:`default_candidates`.
    n_folds : int or None, default=None
        Folds (>= 2); ``None``: 5, fewer when the rarest class has fewer than 5 rows.
    se_rule : float, default=2.0
        Paired standard errors of the CV log-loss (and CV Brier) difference that count as
        noise.
    criterion : {"both", "log-loss"}, default="both"
        With ``prefer="listed"``: ``"both"`` passes a candidate over only when it is worse than
        the best by more than ``se_rule`` SE on both CV log loss and CV Brier (on the 69-task
        multiclass benchmark this ranks first on held-out Brier at the same log-loss rank:
        docs/multiclass-scaling.md, "Adopted"); ``"log-loss"`` looks at CV log loss only (the
        rule before; a document without this parameter was chosen so).
    prefer : {"listed", "simplest"}, default="listed"
        Among the candidates within ``se_rule`` standard errors of the lowest CV log loss, the
        first listed (the defaults are listed richest regularised map first) or the one of
        fewest free parameters (the binary ``auto``'s one-SE rule).
    seed : int, default=0
        Seed of the fold dealing.
    input_kind : {"auto", "probabilities", "logits"}, default="auto"
        Resolved once on all rows and passed to every candidate.

    Attributes
    ----------
    map_ : SoftmaxAffineMap or MulticlassMap
        The chosen candidate's map.
    chosen_ : str
    calibrator_ : MulticlassCalibrator
        The chosen candidate, refitted on all rows.
    selection_ : dict
        What was compared and why the winner won (``"fit_info"`` in the JSON).
    """

    document_method = "multiclass-auto"
    document_extras = ("fit_info", "class_extras")
    map_type = (SoftmaxAffineMap, MulticlassMap)
    _parameter_constraints = {"candidates": [IsNone(), ListOf(MulticlassCandidate())],
                              "n_folds": [IsNone(), Integer(2)], "se_rule": [Real(0.0)],
                              "prefer": [Options(PREFERENCES)],
                              "criterion": [Options(CRITERIA)], "seed": [Integer(0)]}

    def __init__(self, candidates: list[str] | None = None, n_folds: int | None = None,
                 se_rule: float = DEFAULT_SE_RULE, prefer: str = "listed",
                 criterion: str = "both", seed: int = 0, input_kind: str = "auto"):
        self.candidates = candidates
        self.n_folds = n_folds
        self.se_rule = se_rule
        self.prefer = prefer
        self.criterion = criterion
        self.seed = seed
        self.input_kind = input_kind

    def _validate_params(self) -> None:
        super()._validate_params()
        check_distinct_candidates(self)

    def candidate_names(self, n_classes: int | None = None) -> list[str]:
        """The candidates compared on ``n_classes`` classes, in preference order (``None``:
        all of :data:`DEFAULT_CANDIDATES` when ``candidates`` is None)."""
        if self.candidates is not None:
            return [str(c) for c in self.candidates]
        return list(DEFAULT_CANDIDATES if n_classes is None else default_candidates(n_classes))

    def _fit(self, s, y, w, probabilities):
        kind = "probabilities" if probabilities else "logits"
        names = self.candidate_names(s.shape[1])
        k = int(self.n_folds if self.n_folds is not None else
                default_folds(y, w, s.shape[1]))
        # everything below runs on the rows in canonical order, so that sums (the CV log
        # losses in fit_info) cannot depend on the order the rows came in
        order = class_major_order(s, y, w)
        s, y, w = s[order], y[order], w[order]
        folds = stratified_folds(s, y, w, k, int(self.seed))
        n_classes = s.shape[1]
        both = self.prefer == "listed" and self.criterion == "both"
        rule = ("one-se" if self.prefer == "simplest" else
                "first-listed-within-se-log-loss-or-brier" if both else
                "first-listed-within-se")
        record: dict[str, Any] = {"version": FIT_INFO_VERSION, "rule": rule,
                                  "se_rule": float(self.se_rule), "n_folds": k,
                                  "seed": int(self.seed), "n_rows": int(s.shape[0]),
                                  "n_classes": int(n_classes), "input_kind": kind}
        problem = _no_cv_reason(y, w, folds, k, n_classes)
        if problem is not None:
            reason = f"{problem}; the first candidate, {names[0]}, is used"
            warnings.warn(f"multiclass auto: {reason}", UserWarning, stacklevel=4)
            record.update(candidates=[{"method": n, "status": "not cross-validated"}
                                      for n in names], best=None, chosen=names[0],
                          reason=reason)
        else:
            shared: dict = {}
            out = {n: self._out_of_fold(n, kind, s, y, w, folds, k, shared, brier=both)
                   for n in names}
            results = {n: o if isinstance(o, str) else o[:2] for n, o in out.items()}
            if self.prefer == "simplest":
                record.update(select_one_se(names, results, (w,), float(self.se_rule)))
            else:
                brier = ({n: o[2] for n, o in out.items() if not isinstance(o, str)}
                         if both else None)
                record.update(select_preferred(names, results, (w,), float(self.se_rule),
                                               brier=brier))
        self.calibrator_ = self._refit(record, names, kind, s, y, w)
        self.chosen_ = record["chosen"]
        self.selection_ = record
        return self.calibrator_.map_

    @staticmethod
    def _refit(record, names, kind, s, y, w):
        """The chosen candidate fitted on all rows. Should that fit fail (temperature on scores
        anti-correlated with the labels, say), the next candidates are tried, by CV log loss
        where there is one, else in listed order; ``record`` then says so. If every candidate
        fails, the ValueError names each one's error."""
        cv = {r["method"]: r.get("cv_log_loss", np.inf) for r in record["candidates"]}
        rest = sorted((n for n in names if n != record["chosen"]),
                      key=lambda n: (cv[n], names.index(n)))
        errors = []
        for name in [record["chosen"], *rest]:
            try:
                calibrator = candidate_calibrator(name, kind).fit(s, y, sample_weight=w)
            except (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError) as exc:
                errors.append(f"{name}: {type(exc).__name__}: {short_repr(str(exc))}")
                continue
            if errors:
                record["reason"] += ("; refitted on all rows, " + "; ".join(errors) +
                                     f", so {name} is used")
                record["chosen"] = name
            return calibrator
        raise ValueError("multiclass auto: no candidate could be fitted on all rows: " +
                         "; ".join(errors))

    @staticmethod
    def _out_of_fold(name, kind, s, y, w, folds, k, shared=None, brier=False):
        """``((per-row losses,), mean free parameters)``, with ``brier`` also
        ``(per-row Brier scores,)`` as a third item, or the error that stopped it. ``shared``
        (a dict kept across candidates) holds fold fits that another candidate differs from
        only by its uniform mixture (:func:`shared_fit`)."""
        p_true = np.empty(s.shape[0])
        row_brier = np.empty(s.shape[0]) if brier else None
        sizes = []
        key = shared_fit(name)
        for f in range(k):
            train, test = folds != f, folds == f
            try:
                base = shared.get((key, f)) if shared is not None and key else None
                if base is not None:
                    cal = candidate_calibrator(name, kind)
                    cal.map_ = dataclasses.replace(
                        base.map_, uniform_weight=cal._uniform_weight(w[train]))
                    cal.n_classes_ = base.n_classes_
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")   # the refit on all rows warns
                        cal = candidate_calibrator(name, kind).fit(s[train], y[train],
                                                                   sample_weight=w[train])
                    if shared is not None and key:
                        shared[(key, f)] = cal
                p = cal.predict_proba(s[test])
            except (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError) as exc:
                return f"{type(exc).__name__}: {short_repr(str(exc))}"
            p_true[test] = p[np.arange(p.shape[0]), y[test]]
            if brier:
                row_brier[test] = multiclass_brier_per_row(y[test], p)
            sizes.append(cal.complexity())
        out = (-det_log_array(np.clip(p_true, EPS, 1.0)),), float(np.mean(sizes))
        return out + ((row_brier,),) if brier else out

    def complexity(self) -> float:
        return self.calibrator_.complexity()

    # -- JSON ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The chosen map, plus ``"fit_info"`` (the selection record) and, when the chosen
        candidate is one-vs-rest, its ``"class_extras"``."""
        doc = super().to_dict()
        doc["fit_info"] = copy.deepcopy(self.selection_)
        extras = self.calibrator_.to_dict().get("class_extras")
        if extras is not None:
            doc["class_extras"] = extras
        return doc

    def _check_map(self, fitted) -> None:
        # checked against the chosen candidate once fit_info names it (_restore_extras)
        pass

    @classmethod
    def _params_from_document(cls, params: dict) -> dict:
        # a document written before ``criterion`` existed was chosen by CV log loss alone
        return params if "criterion" in params else {**params, "criterion": "log-loss"}

    def _restore_extras(self, doc: dict) -> None:
        info = check_multiclass_selection(doc.get("fit_info"))
        kind = info["input_kind"]
        chosen = candidate_calibrator(info["chosen"], kind)
        if not isinstance(self.map_, chosen.map_type):
            raise CalibratorFormatError(f"calibrator document: the map ({self.map_.kind}) is "
                                        f"not one that {info['chosen']!r} fits")
        chosen._check_map(self.map_)
        chosen._restore(self.map_)
        chosen._restore_extras({k: v for k, v in doc.items() if k != "fit_info"})
        chosen._check_class_maps()
        self.selection_, self.chosen_, self.calibrator_ = info, info["chosen"], chosen


def shared_fit(name: str) -> str | None:
    """The fit ``name`` shares with other candidates, or None: ts-mix is temperature scaling,
    SVS vector scaling and SMS matrix scaling, each with the uniform mixture of weight
    ``1 / (n + 1)`` added to the same fitted map (same parameters, same solver), so cross-
    validation fits each pair once per fold. Only for the built-in classes under their own
    names (a method registered in their place fits its own way)."""
    from mlcal.calibrators.multiclass import TemperatureScaling
    from mlcal.calibrators.structured_scaling import (MatrixScaling, StructuredMatrixScaling,
                                                      StructuredVectorScaling,
                                                      TemperatureMixScaling, VectorScaling)
    pairs = {"temperature": TemperatureScaling, "ts-mix": TemperatureMixScaling,
             "svs": StructuredVectorScaling, "vector": VectorScaling,
             "sms": StructuredMatrixScaling, "matrix": MatrixScaling}
    if pairs.get(name) is None or MULTICLASS_METHODS.get(name) is not pairs[name]:
        return None
    return {"ts-mix": "temperature", "vector": "svs", "matrix": "sms"}.get(name, name)


def class_major_order(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row permutation sorting by (class, score row, weight): identical rows are
    interchangeable, so nothing computed in this order depends on the input's row order."""
    order = canonical_order(s, y, w)
    return order[np.argsort(y[order], kind="stable")]


def stratified_folds(s: np.ndarray, y: np.ndarray, w: np.ndarray, n_folds: int,
                     seed: int) -> np.ndarray:
    """Fold of each row: in :func:`class_major_order`, each class's rows are dealt by
    :func:`~mlcal.calibrators.auto.assign_folds` (every run of ``n_folds`` consecutive rows of
    a class holds each fold once), independently of the input's row order."""
    order = class_major_order(s, y, w)
    folds = np.empty(s.shape[0], dtype=np.int64)
    start = 0
    for count in np.bincount(y[order]):
        rows = order[start:start + count]
        folds[rows] = assign_folds(int(count), n_folds, seed)
        start += count
    return folds


def default_folds(y: np.ndarray, w: np.ndarray, n_classes: int) -> int:
    """Folds of ``n_folds=None``: :data:`DEFAULT_FOLDS`, or as many as the rarest class has rows
    of positive weight when that is fewer (at least 2; below that no CV is possible)."""
    rarest = int(np.bincount(y[w > 0], minlength=n_classes).min())
    return max(2, min(DEFAULT_FOLDS, rarest))


def _no_cv_reason(y, w, folds, k, n_classes) -> str | None:
    """Why K-fold CV is impossible on these folds, or None."""
    for f in range(k):
        train = (folds != f) & (w > 0)
        present = np.bincount(y[train], minlength=n_classes) > 0
        if not (folds == f).any() or not present.all():
            counts = np.bincount(y[w > 0], minlength=n_classes).tolist()
            return (f"no {k}-fold cross-validation possible on {y.size} rows (rows per class "
                    f"{counts}): every training part needs every class and every fold rows")
    return None


_ROW_KEYS = {"method": str, "status": str, "complexity": float, "cv_log_loss": float,
             "se": float, "cv_brier": float, "brier_se": float}
_TOP_KEYS = {"version": int, "rule": str, "se_rule": float, "n_folds": int, "seed": int,
             "n_rows": int, "n_classes": int, "input_kind": str, "candidates": list,
             "best": (str, type(None)), "chosen": str, "reason": str}


def check_multiclass_selection(info: Any) -> dict[str, Any]:
    """Validate the ``"fit_info"`` of a multiclass auto document
    (:class:`~mlcal.calibrators.base.CalibratorFormatError`)."""
    if info is None:
        raise CalibratorFormatError("calibrator document: a multiclass auto document needs "
                                    "'fit_info'")
    _check_fields(info, _TOP_KEYS, "fit_info", tuple(_TOP_KEYS))
    if info["input_kind"] not in ("probabilities", "logits"):
        raise CalibratorFormatError("calibrator document: fit_info 'input_kind' must be "
                                    f"'probabilities' or 'logits', got "
                                    f"{short_repr(info['input_kind'])}")
    for row in info["candidates"]:
        _check_fields(row, _ROW_KEYS, "fit_info candidate", ("method", "status"))
        if not MulticlassCandidate().accepts(row["method"]):
            raise CalibratorFormatError(f"calibrator document: fit_info candidate "
                                        f"{short_repr(row['method'])} is not a multiclass "
                                        "method")
    if info["chosen"] not in [r["method"] for r in info["candidates"]]:
        raise CalibratorFormatError("calibrator document: fit_info 'chosen' is not a candidate")
    return info


register_multiclass_method("auto", MulticlassAuto)
