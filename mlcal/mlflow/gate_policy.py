"""The promotion policy: calibration AND sharpness, as a list of named criteria.

ECE alone rewards coarse maps (a calibrator that outputs two values can have a tiny ECE and be
useless), so a candidate must by default

(a) have ECE <= ``max_ece``;
(b) not be worse than the current alias holder on log loss and on Brier score by more than
    ``max_log_loss_increase`` / ``max_brier_increase`` (proper scores reward sharpness);
(c) not lose more than ``max_auc_decrease`` of ROC AUC against the holder.

Optionally (``max_ece_increase``) its ECE must not exceed the holder's by more than that.

Usefulness (always, holder or not; see docs/gate.md for the measured rates). ECE alone
promotes a constant predictor at the base rate, so on the evaluation rows the candidate must

(d) beat the constant base-rate predictor on log loss and on Brier score with confidence: the
    one-sided ``skill_confidence`` (default 95 %) paired t upper bound of the per-row
    differences (candidate - constant) must be <= ``-min_skill``. The constant predicts the
    base rate *of the evaluation rows themselves* (class frequencies for a multiclass model):
    it is the best constant in hindsight, favoured by about 1/(2n) nats, so no constant
    predictor, whatever rate it was trained at, can ever beat it (its mean difference is >= 0
    on any rows) and a constant candidate is refused regardless of the interval's accuracy;
    a leave-one-out rate would remove the favour but is beaten by a constant at the true
    rate in about 40 % of samples (its noise is shared by all rows, which a per-row interval
    cannot see);
(e) with no holder, not be worse than its own uncalibrated base model (when that model's
    scores are probabilities: ``predict_proba``, or a booster's log-odds margin read through
    the sigmoid/softmax; a ``decision_function`` is not a probability and the criterion is
    then not applicable): the mean of (candidate - base) must be <= ``max_log_loss_increase``
    / ``max_brier_increase``, decided like the holder comparisons: on the point estimate by
    default, on the one-sided upper bound when ``confidence`` is set (non-inferiority with
    confidence). Usefulness *with confidence* is always required of (d); requiring it of (e)
    too by default refused a calibrated model better than its base on every point estimate on
    the quickstart's 114 gate rows (Brier -0.011, upper bound +0.004).

Optionally (``max_mcb``, off by default) the candidate's CORP miscalibration on the evaluation
rows must be <= ``max_mcb``: the Brier score's MCB term of :func:`mlcal.metrics.corp_decomposition`
(score minus the score of the isotonic recalibration; a coarse map with a small binned ECE can
still have a large MCB); for a multiclass model the MCB of the top-label forecast
(:func:`mlcal.metrics.top_label_corp_decomposition`, like the top-label ECE). It needs the rows:
``log_calibration`` logs no MCB, so a policy with ``max_mcb`` refuses to decide on logged metrics.

Optionally (``max_segment_citl``, off by default; needs ``segment_columns`` and the rows) no
segment of the evaluation rows may be miscalibrated in the large beyond ``max_segment_citl``
*with confidence*: :func:`mlcal.metrics.segment_report` splits the rows by ``segment_columns``,
segments with fewer than ``min_segment_rows`` rows are not used, and each remaining segment
gets the score interval of its gap ``O - E`` (observed rate minus mean prediction; top-label
accuracy minus confidence for a multiclass model), Bonferroni-adjusted over the K segments so
that all K hold together at ``segment_confidence``. The criterion ``segment_citl`` fails when
the worst segment's lower confidence bound of ``|O - E|`` exceeds ``max_segment_citl``. Why a
bound and why this measure: a segment's binned ECE and its point gap are biased upwards on few
rows (a calibrated model's gap has standard deviation ``sqrt(E(1 - E) / n)``, 0.05 at 100 rows,
and the worst of K such segments is larger still), so a limit on either refuses calibrated
models with small segments; requiring the *upper* bound below the limit would refuse every
segment of fewer than about ``(1.96 * 0.5 / limit)^2`` rows. The lower bound refuses only on
evidence (a calibrated model is refused with probability <= 1 - ``segment_confidence``,
whatever K), and the gap has a score interval of tested coverage where the ECE has none.

With no holder the evaluation rows must number at least :func:`default_min_rows` (unless
``min_rows`` is given): the size at which the worst-case (p = 1/2) two-sided
``skill_confidence`` interval of one observed frequency is no wider than +- ``max_ece``;
below it the gate could not tell a calibration error of ``max_ece`` from sampling noise even
with a single bin (385 rows for ``max_ece`` = 0.05, 97 for 0.1).

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
:data:`mlcal.metrics.bootstrap.DEFAULT_RESAMPLES` = 1000).

This module is pure computation; :mod:`mlcal.mlflow.gate` applies it to an MLflow registry.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, NamedTuple

import numpy as np

from mlcal import metrics as M
from mlcal.metrics import multiclass as MM
from mlcal.metrics.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_ci, paired_bootstrap_diff
from mlcal.metrics.segments import DEFAULT_MIN_SEGMENT_ROWS, SegmentReport, segment_report

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
    skill_confidence : float, default=0.95
        One-sided level of the paired t upper bounds of the usefulness criteria (against the
        constant base-rate predictor and the candidate's own base model).
    min_skill : float, default=1e-6
        The candidate must beat the constant predictor by more than this (log loss in nats,
        Brier in its units) at the upper bound; also keeps the verdict off the last bit of a
        float when the candidate *is* the constant (difference exactly 0).
    max_mcb : float, optional
        When set, the candidate's CORP Brier miscalibration (top-label for multiclass) on the
        evaluation rows must be <= this (criterion ``mcb``; needs data).
    max_segment_citl : float, optional
        When set, the worst segment's lower confidence bound of ``|O - E|`` must be <= this
        (criterion ``segment_citl``; needs data and ``segment_columns``; module docstring).
    segment_columns : sequence of str, optional
        Columns of the evaluation data that define the segments (a composite key when
        several).
    min_segment_rows : int, default=100
        Segments with fewer rows are not used by ``segment_citl``.
    segment_confidence : float, default=0.95
        Simultaneous level of the segments' intervals (Bonferroni over the used segments).
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
    skill_confidence: float = 0.95
    min_skill: float = 1e-6
    max_mcb: float | None = None
    max_segment_citl: float | None = None
    segment_columns: tuple[str, ...] | None = None
    min_segment_rows: int = DEFAULT_MIN_SEGMENT_ROWS
    segment_confidence: float = 0.95

    def __post_init__(self):
        for name in ("max_ece", "max_log_loss_increase", "max_brier_increase",
                     "max_auc_decrease", "max_ece_increase", "min_skill", "max_mcb",
                     "max_segment_citl"):
            value = getattr(self, name)
            if value is None and name in ("max_ece_increase", "max_mcb", "max_segment_citl"):
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.confidence is not None and not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence!r}")
        if isinstance(self.skill_confidence, bool) or not (
                isinstance(self.skill_confidence, (int, float)) and 0.5 <= self.skill_confidence < 1.0):
            raise ValueError(f"skill_confidence must lie in [0.5, 1), got "
                             f"{self.skill_confidence!r}")
        if self.strategy not in M.BIN_STRATEGIES:
            raise ValueError(f"strategy must be one of {M.BIN_STRATEGIES}, "
                             f"got {self.strategy!r}")
        self._check_segments()

    def _check_segments(self) -> None:
        cols = self.segment_columns
        if isinstance(cols, str):
            cols = (cols,)
        if cols is not None:
            cols = tuple(cols)   # a JSON list (history) back to a hashable tuple
            if not cols or not all(isinstance(c, str) and c for c in cols):
                raise ValueError(f"segment_columns must be non-empty column names, got "
                                 f"{self.segment_columns!r}")
            object.__setattr__(self, "segment_columns", cols)
        if self.max_segment_citl is not None and not cols:
            raise ValueError("max_segment_citl needs segment_columns (the columns of the "
                             "evaluation data that define the segments)")
        rows = self.min_segment_rows
        if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
            raise ValueError(f"min_segment_rows must be a positive integer, got {rows!r}")
        conf = self.segment_confidence
        if isinstance(conf, bool) or not (isinstance(conf, (int, float)) and 0.0 < conf < 1.0):
            raise ValueError(f"segment_confidence must lie in (0, 1), got {conf!r}")

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
            if self.name not in ("ece", "mcb", "segment_citl") else f"{self.value:.5f}"
        interval = ("" if self.upper is None else f" (upper bound {self.upper:+.5f})"
                    if self.lower is None else f" [{self.lower:+.5f}, {self.upper:+.5f}]")
        op = ">=" if self.name == "auc_vs_holder" else "<="
        limit = f"{self.limit:+.5f}" if self.limit == 0 or abs(self.limit) >= 1e-4 \
            else f"{self.limit:+.0e}"      # min_skill's -1e-6 would print as -0.00000
        return (f"  {verdict:<4} {self.name:<20} {value}{interval} {op} {limit}"
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


def default_min_rows(policy: GatePolicy) -> int:
    """Fewest evaluation rows the gate accepts with no holder by default (module docstring):
    ``ceil((z * 0.5 / max_ece) ** 2)`` with ``z`` the two-sided ``skill_confidence`` normal
    quantile (1.96), so that the worst-case interval of one observed frequency is within
    +- ``max_ece``; ``max_ece`` below 0.001 counts as 0.001, and never fewer than 2 rows."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + policy.skill_confidence / 2.0))
    # rounded first: a square within 1e-6 of an integer is that integer, not the next one
    return max(2, math.ceil(round((z * 0.5 / max(policy.max_ece, 1e-3)) ** 2, 6)))


class PairedBound(NamedTuple):
    """Mean of paired per-row differences and its one-sided upper confidence bound."""

    mean: float
    upper: float


def paired_upper_bound(differences: np.ndarray, confidence: float) -> PairedBound:
    """One-sided Student t upper bound of the mean of paired per-row differences:
    ``mean + t_{confidence, n-1} * sd / sqrt(n)`` (``sd`` with n - 1 degrees of freedom).

    Log loss and Brier are means of per-row losses, so the difference of two predictors' scores
    on the same rows is exactly the mean of these differences; the t interval needs no
    resampling (cheap, deterministic) and is the standard paired test. All-equal differences
    (e.g. a candidate identical to the baseline) give ``upper == mean``."""
    from scipy.special import stdtrit   # the t quantile as a plain ufunc (fast)

    d = np.asarray(differences, dtype=np.float64)
    n = d.shape[0]
    if n < 2:
        raise ValueError(f"a paired interval needs at least 2 rows, got {n}")
    mean = float(np.mean(d))
    sd = float(np.std(d, ddof=1))
    return PairedBound(mean, mean + float(stdtrit(n - 1, confidence)) * sd / math.sqrt(n))


def _row_losses(multiclass: bool):
    """(name, per-row loss) of the usefulness criteria."""
    if multiclass:
        return (("log_loss", MM.multiclass_log_loss_per_row),
                ("brier", MM.multiclass_brier_per_row))
    return (("log_loss", M.log_loss_per_row), ("brier", M.brier_per_row))


def constant_predictor(y: np.ndarray, n_classes: int | None = None) -> np.ndarray:
    """The constant base-rate predictor of the evaluation rows: the positive rate of ``y``
    repeated (binary), or the class frequencies in every row (``n_classes`` given; ``y`` class
    indices). It is the best constant on these rows for log loss and Brier alike, so no other
    constant beats it (see the module docstring)."""
    y = np.asarray(y)
    if n_classes is None:
        return np.full(y.shape[0], float(np.mean(y)))
    freq = np.bincount(y.astype(np.int64), minlength=n_classes) / y.shape[0]
    return np.tile(freq, (y.shape[0], 1))


def usefulness_criteria(policy: GatePolicy, y: np.ndarray, p_candidate: np.ndarray,
                        p_base: np.ndarray | None = None, *, base_note: str = "",
                        check_base: bool = True) -> list[Criterion]:
    """Criteria (d) and (e) of the module docstring, on paired per-row scores.

    Parameters
    ----------
    policy : GatePolicy
    y : ndarray of shape (n,)
        0/1 labels, or class indices for an (n, K) multiclass ``p_candidate``.
    p_candidate : ndarray of shape (n,) or (n, K)
    p_base : ndarray, optional
        The candidate's own uncalibrated base model as probabilities; None when it has none
        (``base_note`` then says why and the base criteria do not apply).
    check_base : bool, default=True
        Include the base-model criteria (the gate does with no holder only).
    """
    multiclass = np.ndim(p_candidate) == 2
    const = constant_predictor(y, np.shape(p_candidate)[1] if multiclass else None)
    rate = ("class frequencies " + ", ".join(f"{v:.3f}" for v in const[0][:10])
            if multiclass else f"rate {const[0]:.4f}")
    level = f"one-sided {policy.skill_confidence:.0%} paired t upper bound"
    out = []
    for name, loss in _row_losses(multiclass):
        cand = loss(y, p_candidate)
        b = paired_upper_bound(cand - loss(y, const), policy.skill_confidence)
        out.append(Criterion(f"{name}_vs_constant", b.mean, -policy.min_skill,
                             bool(b.upper <= -policy.min_skill), upper=b.upper,
                             note=f"candidate - constant at the rows' {rate}; {level}"))
    if not check_base:
        return out
    limits = {"log_loss": policy.max_log_loss_increase, "brier": policy.max_brier_increase}
    for name, loss in _row_losses(multiclass):
        if p_base is None:
            out.append(Criterion(f"{name}_vs_base", None, limits[name], None,
                                 note=base_note or "no uncalibrated base model"))
            continue
        b = paired_upper_bound(loss(y, p_candidate) - loss(y, p_base), policy.skill_confidence)
        # like the holder comparisons: point estimate by default, upper bound with confidence
        decisive = b.mean if policy.confidence is None else b.upper
        out.append(Criterion(f"{name}_vs_base", b.mean, limits[name],
                             bool(decisive <= limits[name]), upper=b.upper,
                             note=f"candidate - its uncalibrated base model; {level}"))
    return out


def corp_terms(y: np.ndarray, p: np.ndarray) -> dict[str, dict[str, float]]:
    """CORP decompositions of Brier score and log loss of one forecast on the evaluation rows:
    ``{"brier": {...}, "log_loss": {...}}`` each with ``score``, ``mcb``, ``dsc``, ``unc``
    (:func:`mlcal.metrics.corp_decomposition`; for an (n, K) multiclass matrix the top-label
    forecast, :func:`mlcal.metrics.top_label_corp_decomposition`)."""
    decompose = M.top_label_corp_decomposition if np.ndim(p) == 2 else M.corp_decomposition
    out = {}
    for score in ("brier", "log_loss"):
        d = decompose(y, p, score=score)
        out[score] = {"score": d.score, "mcb": d.mcb, "dsc": d.dsc, "unc": d.unc}
    return out


def mcb_criterion(policy: GatePolicy, y: np.ndarray, p_candidate: np.ndarray) -> Criterion:
    """The optional ``mcb`` criterion: the candidate's CORP Brier MCB (top-label for an (n, K)
    matrix) must be <= ``policy.max_mcb``; the note carries MCB, DSC and UNC."""
    multiclass = np.ndim(p_candidate) == 2
    d = (M.top_label_corp_decomposition if multiclass else M.corp_decomposition)(
        y, p_candidate, score="brier")
    what = "top-label CORP Brier" if multiclass else "CORP Brier"
    return Criterion("mcb", d.mcb, policy.max_mcb, bool(d.mcb <= policy.max_mcb),
                     note=f"{what}: MCB {d.mcb:.5f}, DSC {d.dsc:.5f}, UNC {d.unc:.5f}, "
                          f"score {d.score:.5f}")


def segment_criterion(policy: GatePolicy, y: np.ndarray, p_candidate: np.ndarray,
                      segments) -> tuple[Criterion, SegmentReport]:
    """The optional ``segment_citl`` criterion (module docstring) and the segment report it
    was decided on. ``value`` is the worst segment's ``|O - E|``, ``lower``/``upper`` the
    bounds of ``|O - E|`` from its simultaneous interval; it passes when ``lower`` <=
    ``policy.max_segment_citl``. Raises :class:`mlcal.metrics.segments.NoEligibleSegmentError`
    when no segment has ``min_segment_rows`` rows."""
    rep = segment_report(y, p_candidate, segments, min_segment_rows=policy.min_segment_rows,
                         n_bins=policy.n_bins, strategy=policy.strategy,
                         confidence=policy.segment_confidence, simultaneous=True)
    w, st = rep.worst, rep.settings
    small = st["n_segments"] - st["n_eligible"]
    what = "top-label accuracy - confidence" if st["multiclass"] else "observed - predicted"
    note = (f"worst of {st['n_eligible']} segment(s) by {', '.join(rep.columns)} with >= "
            f"{policy.min_segment_rows} rows" + (f" ({small} smaller not used)" if small else "")
            + f": {w['label']} ({w['rows']} rows): {what} {w['observed_rate']:.4f} - "
            f"{w['mean_prediction']:.4f} = {w['citl']:+.4f} [{w['citl_lower']:+.4f}, "
            f"{w['citl_upper']:+.4f}], {st['interval_confidence']:.4g} each (Bonferroni: "
            f"{policy.segment_confidence:.0%} together); decided on the lower bound of |O - E|")
    upper = max(abs(w["citl_lower"]), abs(w["citl_upper"]))
    crit = Criterion("segment_citl", abs(w["citl"]), policy.max_segment_citl,
                     bool(w["citl_excess"] <= policy.max_segment_citl),
                     lower=w["citl_excess"], upper=upper, note=note)
    return crit, rep


def _verdict(value: float, lower, upper, limit: float, higher_is_better: bool) -> bool:
    if higher_is_better:
        return bool((value if lower is None else lower) >= limit)
    return bool((value if upper is None else upper) <= limit)


def evaluate_on_data(policy: GatePolicy, y: np.ndarray, p_candidate: np.ndarray,
                     p_holder: np.ndarray | None = None, p_base: np.ndarray | None = None,
                     *, base_note: str = "", segments=None) -> list[Criterion]:
    """The gate's criteria for a candidate (and the holder) scored on the same rows.

    Parameters
    ----------
    policy : GatePolicy
    y : ndarray of shape (n,)
        0/1 labels (already validated); class indices ``0 .. K-1`` for a multiclass model.
    p_candidate, p_holder : ndarray of shape (n,) or (n, K)
        P(positive) of the candidate and of the current alias holder (None: no holder); the
        (n, K) probability matrices of a multiclass model (see the module docstring).
    p_base : ndarray, optional
        The candidate's uncalibrated base model's probabilities, compared with no holder only
        (``base_note``: why there are none).
    segments : array-like or DataFrame, optional
        The segment keys of the rows (``policy.segment_columns`` of the data); needed when
        ``policy.max_segment_citl`` is set.

    Returns
    -------
    list of Criterion
        ECE, the holder comparisons (not applicable with no holder), then the usefulness
        criteria (see :func:`usefulness_criteria`).
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
    if policy.max_mcb is not None:
        out.append(mcb_criterion(policy, y, p_candidate))
    if policy.max_segment_citl is not None:
        if segments is None:
            raise ValueError("max_segment_citl needs the segment keys of the rows: pass "
                             "segments")
        out.append(segment_criterion(policy, y, p_candidate, segments)[0])
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
    return out + usefulness_criteria(policy, y, p_candidate, p_base, base_note=base_note,
                                     check_base=p_holder is None)


def decide(policy: GatePolicy, y: np.ndarray, p_candidate: np.ndarray,
           p_holder: np.ndarray | None = None,
           p_base: np.ndarray | None = None, *,
           segments=None) -> tuple[bool, list[Criterion]]:
    """The gate's verdict on arrays alone (no MLflow): ``(passed, criteria)`` of
    :func:`evaluate_on_data` (``segments``: the rows' segment keys, for
    ``max_segment_citl``). The evaluation-size check (:func:`default_min_rows`) is the
    caller's (the registry gate refuses too few rows before deciding)."""
    crit = evaluate_on_data(policy, y, p_candidate, p_holder, p_base, segments=segments)
    return passed(crit), crit


def evaluate_logged(policy: GatePolicy, candidate: dict[str, float],
                    holder: dict[str, float] | None, *,
                    multiclass: bool = False) -> list[Criterion]:
    """The gate's criteria from metrics logged on each version's run (keys of
    :data:`LOGGED_KEYS`: ece, log_loss, brier, auc; :data:`LOGGED_KEYS_MULTICLASS` with
    ``multiclass``). No intervals: there are no rows to resample, and the two versions may
    have been evaluated on different data."""
    if policy.confidence is not None:
        raise ValueError("confidence intervals need the evaluation rows: pass data")
    if policy.max_mcb is not None:
        raise ValueError("the mcb criterion (max_mcb) needs the evaluation rows: "
                         "log_calibration logs no MCB; pass data")
    if policy.max_segment_citl is not None:
        raise ValueError("the segment_citl criterion (max_segment_citl) needs the evaluation "
                         "rows and their segment columns; pass data")
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
    # usefulness needs rows; the holder met it (with rows) when it was promoted
    return out + [Criterion(f"{m}_vs_constant", None, -policy.min_skill, None,
                            note="needs the evaluation rows (data)")
                  for m in ("log_loss", "brier")]


def passed(criteria: list[Criterion]) -> bool:
    """True when no criterion failed (criteria that do not apply count as passed)."""
    return all(c.passed is not False for c in criteria)
