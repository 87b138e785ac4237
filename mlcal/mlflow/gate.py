"""Model-registry promotion through the policy of :mod:`mlcal.mlflow.gate_policy` (MLflow 3
aliases, not stages).

:func:`promote` moves an alias (default ``champion``) to a model version only when it passes
the :class:`~mlcal.mlflow.gate_policy.GatePolicy` against the current alias holder.

Every decision is recorded twice: the latest one as flat ``mlcal.gate.*`` tags on the candidate
version (easy to read in the UI), and each one, never overwritten, as a JSON registered-model
tag ``mlcal.gate.history.<alias>.<UTC time>.v<version>.<nonce>`` that :func:`gate_history`
reads back. Before it moves the alias, the gate writes that entry as an *intent* (``result:
"pending"``) and overwrites it with the decision afterwards; a promotion killed in between is
reconciled from the alias by the next ``promote`` or ``gate_history``
(:mod:`mlcal.mlflow.gate_journal`).

Usefulness. The candidate must beat the constant base-rate predictor with confidence, and with
no holder must not be worse than its own uncalibrated base model (see
:mod:`mlcal.mlflow.gate_policy`); both need the evaluation rows, so with no holder the gate
needs ``data`` (:class:`UsefulnessNeedsDataError`). Logged metrics are used only when the run
says they were computed on held-out rows (run tag ``mlcal.metrics_source = held-out``);
in-sample or untagged metrics are refused (:class:`InSampleMetricsError`) unless
``allow_in_sample=True``.

Concurrency. MLflow has no transactions, so two promotes running at once could both decide
against the same old holder and both move the alias. :func:`promote` therefore

1. decides against the holder it read, then re-reads the holder just before writing and starts
   over if it changed (model predictions are cached, so a re-decision is cheap);
2. after moving the alias, waits ``settle_seconds`` and re-reads it twice; if another version
   took the alias meanwhile, it re-decides against that version with a strict preference (it
   must pass the gate against it and, if that version would also pass against it, have the
   lower log loss; equal log loss: the higher version wins), so two processes never undo each
   other forever;
3. gives up after ``max_rounds`` rounds, recording what it saw.

The remaining window is a competitor writing more than two settle periods after reading a
holder that has since changed, which step 1 narrows to the few milliseconds between its
re-read and its write.

Loading. Recomputing metrics on ``data`` loads the candidate and the holder. An ``mlcal``
model loads through the flavour, which never runs code from the artifact (its base model only
from code-free formats, see :mod:`mlcal.mlflow.base_loading`). Any other model (a plain
``mlflow.sklearn`` or pyfunc model) can only be loaded by MLflow's own flavour loaders, which
unpickle, so the gate refuses it (:class:`~mlcal.mlflow.integrity.UnsafeModelFormatError`;
nothing is changed or recorded) unless the caller trusts the registry and passes
``allow_pickle=True`` (``--allow-pickle``), which is also passed on to the mlcal flavour for
a pickled base model. Gating on logged metrics (no ``data``) loads no model.

Multiclass models (K >= 3 classes) are gated on the multiclass criteria of
:mod:`mlcal.mlflow.gate_policy` (top-label ECE, multiclass log loss and Brier; no AUC). The
candidate and the holder must have the same classes in the same order: a binary version
against a multiclass one, or different class sets, is refused (``ValueError``; nothing is
changed or recorded).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlcal._safe_json import dumps_safe
from mlcal.base_models.scores import classes_of, read_scores
from mlcal.base_models.scores import RAW_SOURCES, naive_probability, naive_probability_matrix
from mlcal.labels import binary_labels, multiclass_labels
from mlcal.mlflow import gate_journal
from mlcal.mlflow.gate_journal import HISTORY_TAG_PREFIX, history_key
from mlcal.mlflow.gate_journal import utc_now as _now
from mlcal.mlflow.integrity import UnsafeModelFormatError
from mlcal.mlflow.gate_policy import (LOGGED_KEYS, LOGGED_KEYS_MULTICLASS, Criterion,
                                      GatePolicy, corp_terms, default_min_rows,
                                      evaluate_logged, evaluate_on_data, passed,
                                      segment_criterion)
from mlcal.metrics.segments import DEFAULT_MIN_SEGMENT_ROWS

GATE_TAG_PREFIX = "mlcal.gate."
DEFAULT_METRIC_KEY = LOGGED_KEYS["ece"]
#: Run tag saying on which rows a run's logged metrics were computed: ``held-out`` or
#: ``in-sample`` (the calibration rows themselves).
METRICS_SOURCE_TAG = "mlcal.metrics_source"


class InSampleMetricsError(ValueError):
    """The gate was asked to decide on logged metrics computed on the calibration rows (or of
    unknown origin) without ``allow_in_sample=True``."""


class UsefulnessNeedsDataError(ValueError):
    """No alias holder and no evaluation data: usefulness (against the constant predictor and
    the base model) can only be judged on rows."""


class McbNeedsDataError(ValueError):
    """``max_mcb`` was set without evaluation rows: no run logs the CORP MCB, so the ``mcb``
    criterion can only be computed on data."""


class SegmentsNeedDataError(ValueError):
    """``max_segment_citl`` was set without evaluation rows: segments are read from the
    rows' segment columns."""


#: most segments kept in a decision's ``segments["table"]`` (worst first); the HTML report and
#: the history entry stay small whatever the number of segments
MAX_RECORDED_SEGMENTS = 50


class TooFewRowsError(ValueError):
    """The evaluation data has fewer rows than the gate's minimum."""


@dataclass
class GateDecision:
    """Outcome of :func:`promote`; ``explain()`` gives the one-screen summary, ``as_dict()``
    the JSON form, ``tags()`` the latest-decision version tags."""

    model_name: str
    version: str
    alias: str
    promoted: bool
    criteria: list[Criterion]
    policy: GatePolicy
    source: str
    holder_version: str | None = None
    compared_to: str | None = None
    rounds: int = 1
    notes: list[str] = field(default_factory=list)
    decided_at: str = field(default_factory=_now)
    #: with data: ``{"candidate": corp_terms, "holder": corp_terms or None}``
    #: (:func:`~mlcal.mlflow.gate_policy.corp_terms`); None on logged metrics
    decomposition: dict | None = None
    #: with ``max_segment_citl``: the segment report the criterion was decided on
    #: (:func:`segment_summary`); None otherwise
    segments: dict | None = None

    def _criterion(self, name: str) -> Criterion | None:
        return next((c for c in self.criteria if c.name == name), None)

    @property
    def candidate_ece(self) -> float:
        """The candidate's ECE (point estimate)."""
        return self._criterion("ece").value

    def explain(self) -> str:
        """A short human-readable account of the decision, one line per criterion."""
        verdict = "PROMOTED" if self.promoted else "REFUSED"
        conf = self.policy.confidence
        lines = [f"gate for {self.model_name} version {self.version} -> alias "
                 f"'{self.alias}': {verdict}",
                 f"  metrics from        : {self.source}",
                 f"  decided on          : " + (
                     "point estimates" if conf is None else
                     f"{conf:.0%} paired bootstrap intervals ({self.policy.n_resamples} "
                     f"resamples, seed {self.policy.seed}); the whole interval must pass"),
                 f"  compared with       : "
                 + ("no current holder" if self.compared_to is None
                    else f"version {self.compared_to} (current '{self.alias}')")]
        lines += [c.line() for c in self.criteria]
        if self.decomposition:
            lines.append("  CORP (MCB/DSC/UNC)  : " + "; ".join(
                f"{who} Brier {_terms(d['brier'])}, log loss {_terms(d['log_loss'])}"
                for who, d in self.decomposition.items() if d))
        if self.segments:
            w, st = self.segments["worst"], self.segments
            lines.append(f"  worst segment       : {w['label']} ({w['rows']} rows): O - E "
                         f"{w['citl']:+.4f} [{w['citl_lower']:+.4f}, {w['citl_upper']:+.4f}], "
                         f"ECE {_fmt(w['ece'])}; {st['n_eligible']} of {st['n_segments']} "
                         f"segments by {', '.join(st['columns'])} have >= "
                         f"{st['min_segment_rows']} rows")
        lines += [f"  note: {n}" for n in self.notes]
        if self.promoted:
            lines.append(f"  alias '{self.alias}' now points to version {self.version}")
        else:
            holder = "unset" if self.holder_version is None else f"version {self.holder_version}"
            lines.append(f"  alias '{self.alias}' left on {holder}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form: the decision, every criterion and the policy."""
        return {"model_name": self.model_name, "version": self.version, "alias": self.alias,
                "result": "promoted" if self.promoted else "refused",
                "decided_at": self.decided_at, "source": self.source,
                "holder_version": self.holder_version, "compared_to": self.compared_to,
                "rounds": self.rounds, "notes": list(self.notes),
                "criteria": [c.as_dict() for c in self.criteria],
                "decomposition": self.decomposition,
                **({"segments": self.segments} if self.segments is not None else {}),
                "policy": self.policy.as_dict()}

    def tags(self) -> dict[str, str]:
        """The flat ``mlcal.gate.*`` tags of the latest decision on the candidate version."""
        t = {"result": "promoted" if self.promoted else "refused", "alias": self.alias,
             "source": self.source, "compared_to": self.compared_to or "none",
             "decided_at": self.decided_at,
             "reason": "; ".join(c.line().strip() for c in self.criteria if c.passed is False)}
        for c in self.criteria:
            t[f"{c.name}.value"] = "n/a" if c.value is None else repr(c.value)
            t[f"{c.name}.limit"] = repr(c.limit)
            t[f"{c.name}.verdict"] = {True: "pass", False: "fail", None: "n/a"}[c.passed]
            if c.lower is not None:
                t[f"{c.name}.interval"] = f"[{c.lower!r}, {c.upper!r}]"
            elif c.upper is not None:
                t[f"{c.name}.upper_bound"] = repr(c.upper)
        t["ece"] = t["ece.value"]
        if self.segments:
            t["segment_worst"] = self.segments["worst"]["label"]
        return {GATE_TAG_PREFIX + k: v for k, v in t.items()}


def _read_model(model_uri: str, X, *, base_out: dict | None = None,
                allow_pickle: bool = False) -> tuple[np.ndarray, list | None]:
    """P(positive class) and the class labels (None when unknown) of a registered model: mlcal
    models through the flavour, scikit-learn classifiers through ``predict_proba``, other pyfunc
    models from a single numeric output (their labels must then be 0/1). For a multiclass
    model (K >= 3 classes) the (n, K) probability matrix and its K classes.

    A model without the mlcal flavour is refused (:class:`UnsafeModelFormatError`) unless
    ``allow_pickle``: MLflow's sklearn and pyfunc loaders unpickle the artifact.

    ``base_out``, when given, receives the model's uncalibrated base probabilities under
    ``"p"`` (see :func:`_base_probabilities`), or under ``"note"`` why there are none."""
    import mlflow
    from mlflow.models import get_model_info

    from mlcal.mlflow.integrity import check_registered_version

    check_registered_version(model_uri)   # a version changed since registration is refused
    flavors = get_model_info(model_uri).flavors
    if "mlcal" in flavors:
        from mlcal.mlflow import load_model

        model = load_model(model_uri, allow_pickle=allow_pickle)
        p = model.predict_proba(X)
        if base_out is not None:
            base_out.update(_base_probabilities(model, X))
        return (p if len(model.classes_) > 2 else p[:, 1]), list(model.classes_)
    if not allow_pickle:
        raise UnsafeModelFormatError(
            f"{model_uri} is not an mlcal-flavour model (flavours: "
            f"{', '.join(sorted(flavors)) or 'none'}); loading it runs MLflow's own loader, "
            "which unpickles the artifact and so can run code from it. Register it through "
            "mlcal.mlflow.log_model, or pass allow_pickle=True (--allow-pickle) if you trust "
            "the registry")
    if "sklearn" in flavors:
        est = mlflow.sklearn.load_model(model_uri)
        if hasattr(est, "predict_proba"):
            if len(getattr(est, "classes_", ())) > 2:
                return np.asarray(est.predict_proba(X), dtype=np.float64), list(est.classes_)
            return read_scores(est, X, "predict_proba"), list(classes_of(est))
    if base_out is not None:
        base_out["note"] = "not an mlcal model: no uncalibrated base model to compare"
    out = mlflow.pyfunc.load_model(model_uri).predict(X)
    arr = np.asarray(out, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"cannot read a probability from {model_uri}: its output has shape "
                         f"{arr.shape}; register an mlcal or scikit-learn classifier")
    return arr, None


def _base_probabilities(model, X) -> dict:
    """An mlcal model's uncalibrated base model as probabilities: ``predict_proba`` as it is,
    a booster's log-odds margin through the sigmoid (softmax for K classes), which is that
    booster's own probability. A ``decision_function`` (e.g. an SVM) is a margin but not a
    log-odds, so it is no probability and the base comparison does not apply (``note``)."""
    source = model.score_source_
    if source == "decision_function":
        return {"note": "the base model outputs a decision_function (a margin, not a "
                        "probability): no base-model comparison"}
    raw = model.predict_uncalibrated(X)
    multiclass = len(model.classes_) > 2
    p = naive_probability_matrix(raw, source) if multiclass else naive_probability(raw, source)
    return {"p": p, "note": f"base model's {'log-odds margin' if source in RAW_SOURCES else source}"}


def positive_probability(model_uri: str, X, *, allow_pickle: bool = False) -> np.ndarray:
    """P(positive class) from a registered model (see :func:`_read_model`; a model without the
    mlcal flavour needs ``allow_pickle=True``)."""
    return _read_model(model_uri, X, allow_pickle=allow_pickle)[0]


def _load_data(data, label_column: str):
    import pandas as pd

    frame = pd.read_csv(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") \
        else data
    if not isinstance(frame, pd.DataFrame):
        raise ValueError("data must be a pandas DataFrame or the path of a CSV file")
    if label_column not in frame.columns:
        raise ValueError(f"data has no label column {label_column!r}; columns are "
                         f"{list(frame.columns)}")
    return frame.drop(columns=[label_column]), frame[label_column].to_numpy()


def _registered_classes(model_uri: str) -> list | None:
    """The classes an mlcal model records in its MLmodel file (None for other flavours)."""
    from mlflow.models import get_model_info

    return get_model_info(model_uri).flavors.get("mlcal", {}).get("classes")


def _logged_keys(metric_key: str, multiclass: bool) -> dict[str, str]:
    """Criterion metric -> logged run metric; the default ECE key means the top-label ECE for
    a multiclass model."""
    if multiclass:
        return {**LOGGED_KEYS_MULTICLASS,
                **({} if metric_key == DEFAULT_METRIC_KEY else {"ece": metric_key})}
    return {**LOGGED_KEYS, "ece": metric_key}


def _logged_metrics(client, mv, metric_key: str, multiclass: bool = False,
                    allow_in_sample: bool = False) -> dict[str, float]:
    keys = _logged_keys(metric_key, multiclass)
    who = f"version {mv.version}"
    if not mv.run_id:
        raise ValueError(f"{who} has no source run, so it has no logged metrics; pass data "
                         "to evaluate it")
    run = client.get_run(mv.run_id)
    origin = run.data.tags.get(METRICS_SOURCE_TAG)
    if origin != "held-out" and not allow_in_sample:
        found = ("computed in-sample (on the calibration rows)" if origin == "in-sample" else
                 f"of unknown origin (run tag {METRICS_SOURCE_TAG} is "
                 + ("missing" if origin is None else repr(origin)) + ")")
        raise InSampleMetricsError(
            f"{who}'s logged metrics (run {mv.run_id}) are {found}; in-sample metrics flatter "
            "a calibrator, so the gate does not decide on them: pass held-out data (--data), "
            "or allow_in_sample=True / --allow-in-sample to accept them anyway")
    logged = run.data.metrics
    missing = [k for k in keys.values() if k not in logged]
    if missing:
        raise ValueError(f"{who}'s run {mv.run_id} lacks the metric(s) {missing}; pass data "
                         "to evaluate it, or metric_key= for another logged ECE")
    return {name: float(logged[key]) for name, key in keys.items()}


def _resolve_version(client, model_name: str, version) -> Any:
    if version is not None:
        return client.get_model_version(model_name, str(version))
    versions = client.search_model_versions(f"name='{model_name}'")
    if not versions:
        raise ValueError(f"registered model {model_name!r} has no versions")
    latest = max(versions, key=lambda v: int(v.version))
    return client.get_model_version(model_name, latest.version)


def _holder_version(client, model_name: str, alias: str) -> str | None:
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_model_version_by_alias(model_name, alias).version)
    except MlflowException:
        return None  # the alias is not set yet


def _kind(classes: list | None) -> str:
    if classes is not None and len(classes) > 2:
        return f"multiclass with classes {list(classes)[:10]}"
    return "binary"


def _check_comparable(version: str, classes: list | None, other: str,
                      other_classes: list | None) -> None:
    """Refuse a binary version against a multiclass one, or two multiclass versions whose
    classes differ (in set or order)."""
    a, b = _kind(classes), _kind(other_classes)
    if a != b:
        raise ValueError(f"version {version} is {a} but version {other} is {b}; the gate "
                         "compares models with the same classes only")


def _fmt(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.4f}"


def segment_summary(report) -> dict:
    """The JSON form of a gate's :class:`~mlcal.metrics.segments.SegmentReport` kept in a
    decision: columns, sizes, the worst segment and at most :data:`MAX_RECORDED_SEGMENTS`
    segments (the worst first by the bound of ``|O - E|``)."""
    d = report.to_dict()
    ranked = sorted(d["segments"], key=lambda s: (not s["eligible"], -(s["citl_excess"] or 0)))
    st = d["settings"]
    return {"columns": d["columns"], "min_segment_rows": st["min_segment_rows"],
            "n_segments": st["n_segments"], "n_eligible": st["n_eligible"],
            "interval_confidence": st["interval_confidence"], "worst": d["worst"],
            "table": ranked[:MAX_RECORDED_SEGMENTS],
            "truncated": max(0, len(ranked) - MAX_RECORDED_SEGMENTS)}


def _terms(d: dict) -> str:
    return f"{d['mcb']:.4f}/{d['dsc']:.4f}/{d['unc']:.4f}"


class _Judge:
    """Scores versions once (cached) and applies the policy between two of them."""

    def __init__(self, client, model_name, policy, data, label_column, metric_key, min_rows,
                 allow_in_sample=False, allow_pickle=False):
        self.client, self.name, self.policy = client, model_name, policy
        self.metric_key = metric_key
        self.allow_in_sample = allow_in_sample
        self.allow_pickle = allow_pickle
        self.notes: list[str] = []
        self.multiclass = False
        self._classes: tuple[str, list | None] | None = None   # (version, classes) seen first
        self._cache: dict[str, Any] = {}
        self._base: dict[str, dict] = {}
        self.segment_keys = None
        if data is not None:
            self.X, self.raw_y = _load_data(data, label_column)
            self.min_rows = _check_size(len(self.raw_y), policy, min_rows)
            if policy.segment_columns:
                self.segment_keys = _check_segments(self.X, policy)
            self.y = None
            self.source = f"recomputed on {len(self.raw_y)} rows of the given data"
        else:
            self.X = None
            self.source = f"logged run metrics ({metric_key}, log_loss_after, brier_after, " \
                          "auc_after)"
            if allow_in_sample:
                self.source += "; in-sample metrics allowed (allow_in_sample)"

    def _same_kind(self, version: str, classes: list | None) -> None:
        """Refuse comparing versions of different kinds (binary vs multiclass) or classes."""
        multiclass = classes is not None and len(classes) > 2
        if self._classes is None:
            self._classes = (version, classes)
            self.multiclass = multiclass
            if multiclass:
                self.notes = [f"multiclass model ({len(classes)} classes): ECE is the top-label "
                              "ECE, Brier the multiclass Brier (summed over classes), no AUC"]
                if self.policy.confidence is not None:
                    raise ValueError("bootstrap confidence intervals are binary-only for now; "
                                     "gate a multiclass model without confidence")
            return
        _check_comparable(version, classes, *self._classes)

    def scores(self, version: str):
        if version not in self._cache:
            mv = self.client.get_model_version(self.name, version)
            uri = f"models:/{self.name}/{version}"
            if self.X is None:
                self._same_kind(version, _registered_classes(uri))
                self._cache[version] = _logged_metrics(self.client, mv, self.metric_key,
                                                       self.multiclass, self.allow_in_sample)
                if self.multiclass:
                    keys = _logged_keys(self.metric_key, True).values()
                    self.source = f"logged run metrics ({', '.join(keys)})" + (
                        "; in-sample metrics allowed (allow_in_sample)"
                        if self.allow_in_sample else "")
            else:
                base: dict = {}
                p, classes = _read_model(uri, self.input_for(uri), base_out=base,
                                         allow_pickle=self.allow_pickle)
                self._base[version] = base
                self._same_kind(version, classes)
                who = f"labels of the data (version {version})"
                if self.multiclass:
                    y = multiclass_labels(self.raw_y, classes, min_rows=self.min_rows, name=who)
                else:
                    y = binary_labels(self.raw_y, classes=classes, min_rows=self.min_rows,
                                      name=who)
                if self.y is not None and not np.array_equal(y, self.y):
                    raise ValueError(f"version {version} reads the labels differently from "
                                     "the other version (different classes); cannot compare")
                self.y = y
                self._cache[version] = p
        return self._cache[version]

    def criteria(self, candidate: str, rival: str | None) -> list[Criterion]:
        cand = self.scores(candidate)
        other = None if rival is None else self.scores(rival)
        if self.X is None:
            return evaluate_logged(self.policy, cand, other, multiclass=self.multiclass)
        base = self._base.get(candidate, {})
        return evaluate_on_data(self.policy, self.y, cand, other, base.get("p"),
                                base_note=base.get("note", ""), segments=self.segment_keys)

    def input_for(self, uri: str):
        """The model input of a version: the data without the label, and without the segment
        columns that the version's input signature does not name (all of them when it names
        no inputs), so that segment-only columns never reach a model."""
        if not self.policy.segment_columns:
            return self.X
        from mlflow.models import get_model_info

        sig = get_model_info(uri).signature
        names = (set(sig.inputs.input_names())
                 if sig is not None and sig.inputs.has_input_names() else set())
        drop = [c for c in self.policy.segment_columns if c in self.X.columns and c not in names]
        return self.X.drop(columns=drop)

    def segments(self, candidate: str) -> dict | None:
        """The candidate's segment report as kept in the decision (None without
        ``max_segment_citl`` or data)."""
        if self.X is None or self.policy.max_segment_citl is None:
            return None
        return segment_summary(segment_criterion(self.policy, self.y, self.scores(candidate),
                                                 self.segment_keys)[1])

    def decomposition(self, candidate: str, rival: str | None) -> dict | None:
        """CORP terms of the candidate and the rival on the rows (None on logged metrics)."""
        if self.X is None:
            return None
        return {"candidate": corp_terms(self.y, self.scores(candidate)),
                "holder": None if rival is None else corp_terms(self.y, self.scores(rival))}

    def log_loss(self, version: str) -> float:
        from mlcal.metrics import log_loss
        from mlcal.metrics.multiclass import multiclass_log_loss

        s = self.scores(version)
        if self.X is None:
            return s["log_loss"]
        return multiclass_log_loss(self.y, s) if self.multiclass else log_loss(self.y, s)

    def prefers(self, candidate: str, rival: str) -> tuple[bool, list[Criterion]]:
        """Strict preference used under contention (see the module docstring)."""
        crit = self.criteria(candidate, rival)
        if not passed(crit):
            return False, crit
        if not passed(self.criteria(rival, candidate)):
            return True, crit
        a, b = self.log_loss(candidate), self.log_loss(rival)
        return (a < b or (a == b and int(candidate) > int(rival))), crit


def _check_segments(X, policy: GatePolicy):
    """The segment keys of the data, validated before anything is written: the columns exist,
    no key is missing and at least one segment has ``min_segment_rows`` rows
    (:class:`~mlcal.metrics.segments.NoEligibleSegmentError` otherwise)."""
    from mlcal.metrics.segments import segment_keys, segment_report

    keys = segment_keys(X, policy.segment_columns, what="the evaluation data")
    n = len(keys)
    # the sizes and keys do not depend on the model: check them on a placeholder forecast
    segment_report(np.zeros(n), np.full(n, 0.5), keys, min_segment_rows=policy.min_segment_rows)
    return keys


def _check_size(n: int, policy: GatePolicy, min_rows: int | None) -> int:
    """The evaluation-size check (``min_rows`` None: :func:`default_min_rows` of the policy);
    returns the minimum used."""
    if min_rows is None:
        need, why = default_min_rows(policy), (
            f" (derived from max_ece={policy.max_ece}: below it the "
            f"{policy.skill_confidence:.0%} interval of one observed frequency is wider than "
            "+-max_ece)")
    else:
        need, why = min_rows, ""
    if isinstance(need, bool) or not isinstance(need, (int, np.integer)) or need < 1:
        raise ValueError(f"min_rows must be a positive integer, got {min_rows!r}")
    if n < need:
        raise TooFewRowsError(f"the evaluation data has only {n} rows, fewer than the minimum "
                              f"of {need}{why}; evaluate on more data or pass min_rows")
    return int(need)


def promote(model_name: str, version: int | str | None = None, *, max_ece: float | None = None,
            alias: str = "champion", data=None, label_column: str = "y",
            margin: float | None = None, max_log_loss_increase: float = 0.01,
            max_brier_increase: float = 0.0025, max_auc_decrease: float = 0.01,
            confidence: float | None = None, n_resamples: int | None = None,
            seed: int = 0, metric_key: str = DEFAULT_METRIC_KEY, n_bins: int = 10,
            strategy: str = "uniform", min_rows: int | None = None,
            skill_confidence: float = 0.95, min_skill: float = 1e-6,
            allow_in_sample: bool = False, allow_pickle: bool = False,
            max_mcb: float | None = None, max_segment_citl: float | None = None,
            segment_columns=None, min_segment_rows: int = DEFAULT_MIN_SEGMENT_ROWS,
            segment_confidence: float = 0.95, report: bool = True,
            policy: GatePolicy | None = None, settle_seconds: float = 0.5, max_rounds: int = 5,
            client=None) -> GateDecision:
    """Promote a model version to ``alias`` if it passes the gate (see
    :mod:`mlcal.mlflow.gate_policy`).

    Parameters
    ----------
    model_name : str
        Registered model name.
    version : int or str, optional
        Candidate version; default the newest.
    max_ece : float
        The candidate's ECE must be <= this (required unless ``policy`` is given).
    alias : str, default="champion"
        The alias to move. Its current holder is the comparison baseline.
    data : DataFrame or path to CSV, optional
        Hold-out data (features plus ``label_column``). When given, every metric is recomputed
        on it for the candidate and the holder (paired on the same rows), with the constant
        base-rate predictor and (no holder) the candidate's base model; labels are checked
        against each model's classes. Otherwise the metrics logged on each version's run
        (``metric_key``, ``log_loss_after``, ``brier_after``, ``auc_after``) are used, which
        needs a holder (:class:`UsefulnessNeedsDataError`) and held-out metrics
        (:class:`InSampleMetricsError`).
    label_column : str, default="y"
    margin : float, optional
        When given, the candidate's ECE may exceed the holder's by at most this much (an extra
        criterion, off by default).
    max_log_loss_increase, max_brier_increase, max_auc_decrease : float
        Allowed loss against the holder on each score
        (:class:`~mlcal.mlflow.gate_policy.GatePolicy`).
    confidence : float, optional
        Decide on paired bootstrap intervals at this confidence (needs ``data``).
    n_resamples : int, optional
        Bootstrap resamples (default :data:`mlcal.metrics.bootstrap.DEFAULT_RESAMPLES`).
    seed : int, default=0
        Bootstrap seed.
    metric_key : str, default="ece_after"
        Logged ECE metric read when ``data`` is None.
    n_bins, strategy
        ECE binning (see :func:`mlcal.metrics.ece`).
    min_rows : int, optional
        Fewest rows of ``data`` accepted; default
        :func:`~mlcal.mlflow.gate_policy.default_min_rows` (385 for ``max_ece=0.05``).
    skill_confidence : float, default=0.95
        One-sided level of the usefulness criteria's paired t upper bounds.
    min_skill : float, default=1e-6
        Least gain over the constant predictor (at the upper bound).
    allow_in_sample : bool, default=False
        Accept logged metrics that are in-sample or of unknown origin (no ``data``).
    allow_pickle : bool, default=False
        With ``data``, load a candidate or holder that is not an mlcal-flavour model (MLflow's
        sklearn/pyfunc loaders, which unpickle), and an mlcal model with a pickled base model.
        Only for a registry you trust; by default such a version is refused
        (:class:`~mlcal.mlflow.integrity.UnsafeModelFormatError`).
    max_mcb : float, optional
        Also require the candidate's CORP Brier miscalibration (top-label for multiclass) on
        ``data`` to be <= this (criterion ``mcb``; off by default; without ``data``
        :class:`McbNeedsDataError`).
    max_segment_citl : float, optional
        Also require that no segment of ``data`` by ``segment_columns`` is miscalibrated in the
        large beyond this with confidence (criterion ``segment_citl``: the worst segment's
        lower bound of ``|observed - predicted|``, simultaneous over the segments with at
        least ``min_segment_rows`` rows; see :mod:`mlcal.mlflow.gate_policy`). Off by
        default; without ``data`` :class:`SegmentsNeedDataError`. Segment columns that a
        version's input signature does not name are not passed to it.
    segment_columns : list of str, optional
        Columns of ``data`` that define the segments (with ``max_segment_citl``).
    min_segment_rows : int, default=100
        Smaller segments are reported but not used.
    segment_confidence : float, default=0.95
        Simultaneous level of the segments' intervals.
    report : bool, default=True
        With ``data`` and an mlcal-flavour candidate, log the HTML calibration report with
        the gate section (:func:`mlcal.report.report_for_model`) to the candidate version's
        run as ``gate/gate_report_<alias>_<time>.html``, after the decision is recorded; a
        failure to write it is a warning (and a note on the returned decision), never a
        change of the decision.
    policy : GatePolicy, optional
        A complete policy; replaces the threshold arguments above.
    settle_seconds : float, default=0.5
        Wait before re-reading the alias after moving it (race safety, see the module
        docstring).
    max_rounds : int, default=5
        Bound on re-decisions when other promotes move the alias concurrently.
    client : mlflow.MlflowClient, optional
        Defaults to a client on the current tracking/registry URI.

    Returns
    -------
    GateDecision
        Also recorded as ``mlcal.gate.*`` tags on the candidate version and as one history
        entry on the registered model.

    Raises
    ------
    ValueError
        Bad arguments, unknown version, missing metric or unusable data or labels; nothing is
        changed and nothing is recorded. Named subclasses: :class:`TooFewRowsError`,
        :class:`InSampleMetricsError`, :class:`UsefulnessNeedsDataError`,
        :class:`~mlcal.mlflow.integrity.UnsafeModelFormatError` (a model that only loads by
        unpickling, without ``allow_pickle``), :class:`SegmentsNeedDataError` and, for the
        segment columns of ``data``, the :class:`~mlcal.metrics.segments.SegmentReportError`
        subclasses (a missing column or key, no segment of ``min_segment_rows`` rows).
    """
    from mlflow import MlflowClient

    if policy is None:
        if max_ece is None:
            raise ValueError("max_ece is required (or pass a GatePolicy as policy=)")
        policy = GatePolicy(max_ece=max_ece, max_log_loss_increase=max_log_loss_increase,
                            max_brier_increase=max_brier_increase,
                            max_auc_decrease=max_auc_decrease, max_ece_increase=margin,
                            confidence=confidence, seed=seed, n_bins=n_bins, strategy=strategy,
                            skill_confidence=skill_confidence, min_skill=min_skill,
                            max_mcb=max_mcb, max_segment_citl=max_segment_citl,
                            segment_columns=segment_columns, min_segment_rows=min_segment_rows,
                            segment_confidence=segment_confidence,
                            **({} if n_resamples is None else {"n_resamples": n_resamples}))
    if policy.confidence is not None and data is None:
        raise ValueError("confidence needs the evaluation rows: pass data")
    if policy.max_mcb is not None and data is None:
        raise McbNeedsDataError("max_mcb needs the evaluation rows: log_calibration logs no "
                                "CORP MCB, so the mcb criterion cannot be read from a run; "
                                "pass held-out data (--data)")
    if policy.max_segment_citl is not None and data is None:
        raise SegmentsNeedDataError("max_segment_citl needs the evaluation rows with their "
                                    "segment columns; no run logs per-segment rows: pass "
                                    "held-out data (--data)")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    client = client or MlflowClient()
    cand = str(_resolve_version(client, model_name, version).version)
    _reconcile(client, model_name)
    judge = _Judge(client, model_name, policy, data, label_column, metric_key, min_rows,
                   allow_in_sample, allow_pickle)
    holder = _holder_version(client, model_name, alias)
    if holder is None and data is None:
        raise UsefulnessNeedsDataError(
            f"alias '{alias}' of {model_name!r} has no holder, so version {cand} would be "
            "judged on its own; usefulness (beating the constant base-rate predictor and its "
            "own base model, paired on the same rows) needs evaluation rows: pass held-out "
            "data (--data)")
    if holder is not None and holder != cand:
        # a holder of other classes is refused before anything is written, by name
        cand_classes = _registered_classes(f"models:/{model_name}/{cand}")
        holder_classes = _registered_classes(f"models:/{model_name}/{holder}")
        if cand_classes is not None and holder_classes is not None:
            _check_comparable(cand, cand_classes, holder, holder_classes)
    judge.scores(cand)  # validate the data and labels before anything is written
    if holder is not None and holder != cand:
        judge.scores(holder)
    notes: list[str] = list(judge.notes)
    started = _now()
    key = history_key(alias, started, cand)
    promoted = False
    contended = False
    criteria: list[Criterion] = []
    rounds = 0
    rival = None
    while rounds < max_rounds:
        rounds += 1
        rival = holder if holder != cand else None
        if rival is None:  # no holder, or the candidate already holds the alias
            criteria = criteria or judge.criteria(cand, None)
            ok = passed(criteria)
        elif contended:
            ok, criteria = judge.prefers(cand, rival)
            if not ok:
                notes.append(f"version {rival} took '{alias}' concurrently and is preferred")
        else:
            criteria = judge.criteria(cand, rival)
            ok = passed(criteria)
        if not ok:
            break
        if holder == cand:
            if rounds == 1:
                notes.append(f"version {cand} already holds '{alias}'")
            promoted = True
            break
        now = _holder_version(client, model_name, alias)
        if now != holder:  # moved while we were deciding: decide again against the new holder
            holder, contended = now, True
            continue
        # the intent first: a kill after the move still leaves an entry to reconcile
        intent = GateDecision(model_name, cand, alias, False, criteria, policy, judge.source,
                              holder_version=holder, compared_to=rival, rounds=rounds,
                              notes=list(notes), decided_at=started).as_dict()
        intent.update(result="pending", from_version=holder, owner=gate_journal.owner())
        _write_entry(client, model_name, key, intent)
        _retry_write(client.set_registered_model_alias, model_name, alias, cand)
        holder = cand
        for _ in range(2):  # two reads one settle period apart: late writers show up
            time.sleep(settle_seconds * (1.0 + 0.5 * random.random()))
            now = _holder_version(client, model_name, alias)
            if now != cand:
                break
        if now == cand:
            promoted = True
            break
        holder, contended = now, True
    else:
        notes.append(f"gave up after {max_rounds} rounds of concurrent alias moves")
        promoted = _holder_version(client, model_name, alias) == cand
    if contended:
        notes.append(f"the alias moved during this promotion; {rounds} round(s)")
    final_holder = _holder_version(client, model_name, alias)
    decision = GateDecision(model_name, cand, alias, promoted, criteria, policy, judge.source,
                            holder_version=final_holder, compared_to=rival, rounds=rounds,
                            notes=notes, decomposition=judge.decomposition(cand, rival),
                            segments=judge.segments(cand))
    _record(client, decision, key)
    if report and data is not None:
        # after the decision and the alias move: the report can never change either
        _log_gate_report(client, decision, judge, allow_pickle)
    return decision


def _log_gate_report(client, decision: GateDecision, judge: "_Judge",
                     allow_pickle: bool) -> str | None:
    """Log the candidate's HTML report with the gate section to its version's run; returns the
    artifact path, or None (with a note on ``decision`` and a warning) when it cannot."""
    import warnings

    mv = client.get_model_version(decision.model_name, decision.version)
    if not mv.run_id:
        decision.notes.append("no gate report: the candidate version has no run")
        return None
    from mlflow.models import get_model_info

    uri = f"models:/{decision.model_name}/{decision.version}"
    try:
        if "mlcal" not in get_model_info(uri).flavors:
            decision.notes.append("no gate report: the candidate is not an mlcal-flavour model "
                                  "(the report needs its base model and calibrator)")
            return None
        from mlcal.mlflow import load_model
        from mlcal.mlflow.integrity import check_registered_version
        from mlcal.report import render_html, report_for_model

        check_registered_version(uri)
        model = load_model(uri, allow_pickle=allow_pickle)
        html = render_html(report_for_model(
            model, judge.input_for(uri), judge.raw_y, gate=decision.as_dict(),
            title=f"Gate report: {decision.model_name} version {decision.version}",
            source={"registered model": decision.model_name, "version": decision.version,
                    "MLflow run": mv.run_id}))
        stamp = decision.decided_at.replace("+00:00", "Z").replace(":", "").replace("-", "")
        path = f"gate/gate_report_{decision.alias}_{stamp}.html"
        _retry_write(client.log_text, mv.run_id, html, path)
    except Exception as exc:   # the decision stands whatever happens to its report
        msg = f"no gate report: {type(exc).__name__}: {exc}"
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        decision.notes.append(msg)
        return None
    decision.notes.append(f"gate report logged to run {mv.run_id} as {path}")
    return path


def _write_entry(client, model_name: str, key: str, entry: dict) -> None:
    _retry_write(client.set_registered_model_tag, model_name, key, dumps_safe(entry))


def _record(client, decision: GateDecision, key: str) -> None:
    """Latest decision as flat version tags; every decision as one history entry (under
    ``key``, replacing this promotion's intent if it wrote one)."""
    for tag, value in decision.tags().items():
        _retry_write(client.set_model_version_tag, decision.model_name, decision.version, tag,
                     value)
    _write_entry(client, decision.model_name, key, decision.as_dict())


def _decision_from_entry(entry: dict) -> GateDecision:
    """A recorded history entry back as a :class:`GateDecision`."""
    def number(v):
        return math.nan if v is None else v

    criteria = [Criterion(**{**c, "limit": number(c["limit"])}) for c in entry["criteria"]]
    return GateDecision(entry["model_name"], entry["version"], entry["alias"],
                        entry["result"] == "promoted", criteria, GatePolicy(**entry["policy"]),
                        entry["source"], holder_version=entry["holder_version"],
                        compared_to=entry["compared_to"], rounds=entry["rounds"],
                        notes=entry["notes"], decided_at=entry["decided_at"],
                        decomposition=entry.get("decomposition"),
                        segments=entry.get("segments"))


def _reconcile(client, model_name: str) -> list[dict]:
    """Rewrite the abandoned intents of ``model_name`` with what the alias says happened
    (:func:`mlcal.mlflow.gate_journal.reconcile`)."""
    def version_tags(entry: dict) -> None:
        tags = _decision_from_entry(entry).tags()
        tags[GATE_TAG_PREFIX + "result"] = entry["result"]
        tags[GATE_TAG_PREFIX + "reconciled"] = entry["reconciled"]["outcome"]
        for tag, value in tags.items():
            _retry_write(client.set_model_version_tag, model_name, entry["version"], tag, value)

    return gate_journal.reconcile(
        client, model_name, holder_of=lambda alias: _holder_version(client, model_name, alias),
        write_entry=lambda key, entry: _write_entry(client, model_name, key, entry),
        write_version_tags=version_tags)


# sqlite stores answer concurrent writers of the same row with these errors; the write is
# repeated (it is idempotent: the last writer wins, and the promotion loop re-reads the holder)
_TRANSIENT_WRITE_ERRORS = ("UNIQUE constraint failed", "database is locked")


def _retry_write(write, *args, attempts: int = 6):
    """Call an MLflow client write, retrying a bounded number of times on transient store
    conflicts between concurrent processes (jittered back-off), then re-raising."""
    from mlflow.exceptions import MlflowException

    for attempt in range(attempts):
        try:
            return write(*args)
        except MlflowException as exc:
            if attempt == attempts - 1 or not any(e in str(exc) for e in _TRANSIENT_WRITE_ERRORS):
                raise
            time.sleep(0.05 * (attempt + 1) * (1.0 + random.random()))


def gate_history(model_name: str, *, alias: str | None = None, client=None,
                 reconcile: bool = True) -> list[dict]:
    """Every recorded gate decision of a registered model, oldest first.

    Parameters
    ----------
    model_name : str
    alias : str, optional
        Only the decisions about this alias.
    client : mlflow.MlflowClient, optional
    reconcile : bool, default=True
        First rewrite the intents of killed promotions with their real outcome (see
        :mod:`mlcal.mlflow.gate_journal`); entries still ``pending`` afterwards belong to
        promotions running now.

    Returns
    -------
    list of dict
        The :meth:`GateDecision.as_dict` of each decision.
    """
    from mlflow import MlflowClient

    client = client or MlflowClient()
    if reconcile:
        _reconcile(client, model_name)
    tags = client.get_registered_model(model_name).tags
    out = [json.loads(v) for k, v in tags.items() if k.startswith(HISTORY_TAG_PREFIX)]
    if alias is not None:
        out = [d for d in out if d["alias"] == alias]
    return sorted(out, key=lambda d: (d["decided_at"], d["version"]))


def format_history(entries: list[dict]) -> str:
    """A fixed-width table of :func:`gate_history` entries."""
    lines = [f"{'decided at (UTC)':<33}{'alias':<12}{'version':>8}  {'result':<9}"
             f"{'vs':>5}  failed criteria"]
    for d in entries:
        failed = [c["name"] for c in d["criteria"] if c["passed"] is False]
        lines.append(f"{d['decided_at']:<33}{d['alias']:<12}{d['version']:>8}  "
                     f"{d['result']:<9}{d['compared_to'] or '-':>5}  {', '.join(failed) or '-'}")
    if not entries:
        lines.append("(no gate decisions recorded)")
    return "\n".join(lines)
