"""The promotion policy: calibration AND sharpness, as a list of named criteria.

ECE alone rewards coarse maps (a calibrator that outputs two values can have a tiny ECE and be
useless), so a candidate must by default

(a) have ECE <= ``max_ece``;
(b) not be worse than the current alias holder on log loss and on Brier score by more than
    ``max_log_loss_increase`` / ``max_brier_increase`` (proper scores reward sharpness);
(c) not lose more than ``max_auc_decrease`` of ROC AUC against the holder.

Optionally (``max_ece_increase``) its ECE must not exceed the holder's by more than that.

Multiclass models (K >= 3 classes; probabilities as (n, K) matrices): "ECE" is the top-label
(confidence) ECE, log loss the multiclass log loss, Brier the multiclass Brier score (summed
over the K classes, so in [0, 2]: ``max_brier_increase`` is on that scale), and there is no
AUC criterion (a one-vs-rest AUC would need a choice of averaging that the calibrator cannot
change much; ranking is left to log loss and Brier). Bootstrap intervals (``confidence``) are
binary-only for now and are refused for multiclass data.

Comparisons with the holder are paired on the same rows when predictions are given. With
``confidence`` each criterion is decided on a paired percentile bootstrap interval instead of
the point value: the whole two-sided interval must lie on the passing side (for ECE its upper
end must be <= ``max_ece``), i.e. a one-sided test at level (1 + confidence) / 2. The bootstrap
is seeded (``seed``) and uses ``n_resamples`` resamples (default
:data:`mlcal.bootstrap.DEFAULT_RESAMPLES` = 1000).

This module is pure computation; :mod:`mlcal.mlflow.gate` applies it to an MLflow registry.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from mlcal import metrics as M
from mlcal import multiclass_metrics as MM
from mlcal.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_ci, paired_bootstrap_diff

#: The run metrics read when the gate has no data (what ``log_calibration`` logs).
LOGGED_KEYS = {"ece": "ece_after", "log_loss": "log_loss_after", "brier": "brier_after",
               "auc": "auc_after"}
#: The same for a multiclass model (no AUC criterion; see the module docstring).
LOGGED_KEYS_MULTICLASS = {"ece": "top_label_ece_after", "log_loss": "log_loss_after",
                          "brier": "multiclass_brier_after"}


@dataclass(frozen=True)
class GatePolicy:
    """Thresholds of the promotion gate; see the module docstring.

    Parameters
    ----------
    max_ece : float
        The candidate's ECE must be <= this.
    max_log_loss_increase, max_brier_increase : float, defaults 0.01 and 0.0025
        Allowed excess of the candidate's log loss / Brier score over the holder's.
    max_auc_decrease : float, default=0.01
        Allowed drop of ROC AUC against the holder.
    max_ece_increase : float, optional
        When set, the candidate's ECE may exceed the holder's by at most this much.
    confidence : float, optional
        Decide each criterion on a bootstrap interval at this confidence (needs data).
    n_resamples, seed : int
        Bootstrap resamples and seed.
    n_bins, strategy
        ECE binning (see :func:`mlcal.metrics.ece`).
    """

    max_ece: float
    max_log_loss_increase: float = 0.01
    max_brier_increase: float = 0.0025
    max_auc_decrease: float = 0.01
    max_ece_increase: float | None = None
    confidence: float | None = None
    n_resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    n_bins: int = 10
    strategy: str = "uniform"

    def __post_init__(self):
        for name in ("max_ece", "max_log_loss_increase", "max_brier_increase",
                     "max_auc_decrease", "max_ece_increase"):
            value = getattr(self, name)
            if value is None and name == "max_ece_increase":
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.confidence is not None and not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence!r}")
        if self.strategy not in M.BIN_STRATEGIES:
            raise ValueError(f"strategy must be one of {M.BIN_STRATEGIES}, "
                             f"got {self.strategy!r}")

    def as_dict(self) -> dict:
        """Plain-JSON form."""
        return asdict(self)


@dataclass
class Criterion:
    """One gate criterion: what was measured, its limit, interval and verdict.

    ``value`` is the candidate's ECE for ``ece`` and the candidate-minus-holder difference for
    the comparisons. ``passed`` is None when the criterion does not apply (no holder).
    """

    name: str
    value: float | None
    limit: float
    passed: bool | None
    lower: float | None = None
    upper: float | None = None
    note: str = ""

    def as_dict(self) -> dict:
        """Plain-JSON form (non-finite numbers become None)."""
        def clean(v):
            return None if isinstance(v, float) and not math.isfinite(v) else v
        return {k: clean(v) for k, v in asdict(self).items()}

    def line(self) -> str:
        """One line of :meth:`GateDecision.explain`."""
        verdict = {True: "pass", False: "FAIL", None: "n/a"}[self.passed]
        value = "n/a" if self.value is None else f"{self.value:+.5f}" \
            if self.name != "ece" else f"{self.value:.5f}"
        interval = "" if self.lower is None else f" [{self.lower:+.5f}, {self.upper:+.5f}]"
        op = ">=" if self.name == "auc_vs_holder" else "<="
        return (f"  {verdict:<4} {self.name:<20} {value}{interval} {op} {self.limit:+.5f}"
                + (f"  ({self.note})" if self.note else ""))


def _ece_fn(policy: GatePolicy,
            multiclass: bool = False) -> Callable[[np.ndarray, np.ndarray], float]:
    if multiclass:
        return lambda y, p: MM.top_label_ece(y, p, policy.n_bins, policy.strategy)
    return lambda y, p: M.ece(y, p, policy.n_bins, policy.strategy)


# (criterion name, metric, limit from the policy, higher is better)
def _comparisons(policy: GatePolicy, multiclass: bool = False):
    if multiclass:
        rows = [("log_loss_vs_holder", MM.multiclass_log_loss, policy.max_log_loss_increase,
                 False),
                ("brier_vs_holder", MM.multiclass_brier, policy.max_brier_increase, False)]
    else:
        rows = [("log_loss_vs_holder", M.log_loss, policy.max_log_loss_increase, False),
                ("brier_vs_holder", M.brier, policy.max_brier_increase, False),
                ("auc_vs_holder", M.auc, -policy.max_auc_decrease, True)]
    if policy.max_ece_increase is not None:
        rows.append(("ece_vs_holder", _ece_fn(policy, multiclass), policy.max_ece_increase,
                     False))
    return rows


def _verdict(value: float, lower, upper, limit: float, higher_is_better: bool) -> bool:
    if higher_is_better:
        return bool((value if lower is None else lower) >= limit)
    return bool((value if upper is None else upper) <= limit)


def evaluate_on_data(policy: GatePolicy, y: np.ndarray, p_candidate: np.ndarray,
                     p_holder: np.ndarray | None = None) -> list[Criterion]:
    """The gate's criteria for a candidate (and the holder) scored on the same rows.

    Parameters
    ----------
    policy : GatePolicy
    y : ndarray of shape (n,)
        0/1 labels (already validated); class indices ``0 .. K-1`` for a multiclass model.
    p_candidate, p_holder : ndarray of shape (n,) or (n, K)
        P(positive) of the candidate and of the current alias holder (None: no holder); the
        (n, K) probability matrices of a multiclass model (see the module docstring).
    """
    conf = policy.confidence
    multiclass = np.ndim(p_candidate) == 2
    if multiclass and conf is not None:
        raise ValueError("bootstrap confidence intervals are binary-only for now; decide a "
                         "multiclass model on point estimates (no confidence)")
    boot = {"confidence": conf, "n_resamples": policy.n_resamples, "seed": policy.seed}
    ece_fn = _ece_fn(policy, multiclass)
    if conf is None:
        value, lower, upper = ece_fn(y, p_candidate), None, None
    else:
        iv = bootstrap_ci(ece_fn, y, p_candidate, **boot)
        value, lower, upper = iv.estimate, iv.lower, iv.upper
    out = [Criterion("ece", value, policy.max_ece,
                     _verdict(value, lower, upper, policy.max_ece, False), lower, upper,
                     note="top-label ECE" if multiclass else "")]
    for name, fn, limit, higher in _comparisons(policy, multiclass):
        if p_holder is None:
            out.append(Criterion(name, None, limit, None, note="no current holder"))
            continue
        if conf is None:
            value, lower, upper = fn(y, p_candidate) - fn(y, p_holder), None, None
        else:
            iv = paired_bootstrap_diff(fn, y, p_candidate, p_holder, **boot)
            value, lower, upper = iv.estimate, iv.lower, iv.upper
        out.append(Criterion(name, value, limit, _verdict(value, lower, upper, limit, higher),
                             lower, upper, note="candidate - holder, paired"))
    return out


def evaluate_logged(policy: GatePolicy, candidate: dict[str, float],
                    holder: dict[str, float] | None, *,
                    multiclass: bool = False) -> list[Criterion]:
    """The gate's criteria from metrics logged on each version's run (keys of
    :data:`LOGGED_KEYS`: ece, log_loss, brier, auc; :data:`LOGGED_KEYS_MULTICLASS` with
    ``multiclass``). No intervals: there are no rows to resample, and the two versions may
    have been evaluated on different data."""
    if policy.confidence is not None:
        raise ValueError("confidence intervals need the evaluation rows: pass data")
    out = [Criterion("ece", candidate["ece"], policy.max_ece,
                     candidate["ece"] <= policy.max_ece,
                     note="logged top-label ECE" if multiclass else "logged")]
    for name, _, limit, higher in _comparisons(policy, multiclass):
        metric = name.removesuffix("_vs_holder")
        if holder is None:
            out.append(Criterion(name, None, limit, None, note="no current holder"))
            continue
        value = candidate[metric] - holder[metric]
        out.append(Criterion(name, value, limit, _verdict(value, None, None, limit, higher),
                             note="candidate - holder, logged on possibly different data"))
    return out


def passed(criteria: list[Criterion]) -> bool:
    """True when no criterion failed (criteria that do not apply count as passed)."""
    return all(c.passed is not False for c in criteria)
