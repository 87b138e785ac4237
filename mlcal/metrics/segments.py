"""Calibration metrics per segment of the evaluation rows (region, product, plan, ...).

A model can be calibrated on average and miscalibrated in every segment (over-predicting in one
and under-predicting in another); :func:`segment_report` shows it, for any model's
probabilities and one or more segment columns.

Per segment it reports the rows (and weight), positives, mean prediction ``E``, observed rate
``O``, the calibration-in-the-large gap ``O - E`` with a confidence interval, the logit offset
with the same interval, the ECE (:func:`mlcal.metrics.ece`), log loss and Brier score.

The interval of the calibration-in-the-large gap. Fit one logit offset ``d`` to the segment,
``p_i(d) = expit(logit(p_i) + d)``. The score statistic of ``d`` is
``S(d) = sum w_i (y_i - p_i(d)) / sqrt(sum w_i p_i(d) (1 - p_i(d)))`` (observed minus expected
over its binomial standard deviation), and the score interval is ``{d : |S(d)| <= z}`` with
``z`` the two-sided normal quantile. ``S`` falls as ``d`` grows, so the interval is found by
two root searches; its maximum-likelihood centre solves ``sum w_i (y_i - p_i(d)) = 0``, where the
mean of ``p_i(d)`` equals the observed rate. The gap interval is the image of the offset
interval under the increasing map ``d -> mean(p_i(d)) - E``, so the point estimate is exactly
``O - E``. With equal predictions in a segment this is Wilson's score interval for a
proportion, shifted by ``E``; it stays inside ``[-E, 1 - E]`` and is one-sided at 0 or all
positives (no finite offset fits; the open end is the bound of the range). It covers a true
offset (``y ~ Bernoulli(expit(logit p + d))``) at about the nominal rate
(tests/test_segment_report.py simulates it).

The worst segment. Among segments with at least ``min_segment_rows`` rows (weight), by default
(``worst_by="citl_bound"``) the one whose gap interval lies furthest from zero:
``excess = max(lower, -upper, 0)``, the lower confidence bound of ``|O - E|``. A point estimate
would crown the smallest segment (a calibrated model's gap has standard deviation
``sqrt(E(1 - E) / n)``, 0.05 at 100 rows of rate 0.5); the bound asks for evidence. With
``simultaneous=True`` the intervals are Bonferroni-adjusted over the eligible segments
(level ``1 - (1 - confidence) / K``), so a calibrated model has *every* interval cover zero
with probability >= ``confidence``: the gate uses this. ``worst_by="ece"`` or ``"abs_citl"``
pick the largest ECE or ``|O - E|`` instead.

Sample weights are frequency weights (a weight of 2 is the row twice): the gap, its interval,
log loss and Brier score use them; the ECE, which :func:`mlcal.metrics.ece` computes unweighted,
expands integer weights into repeated rows and is NaN for fractional weights.

Multiclass probabilities ((n, K) matrices, labels ``0 .. K-1``) are reported top-label: the
"prediction" is the top-label confidence, the "observed rate" the accuracy, the ECE the
top-label ECE; log loss and Brier are the multiclass scores (Brier summed over classes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from mlcal.metrics import binary as M
from mlcal._validation import as_weights

WORST_BY = ("citl_bound", "ece", "abs_citl")
MISSING_POLICIES = ("error", "segment")
#: default fewest rows (weight) of a segment used for the worst segment
DEFAULT_MIN_SEGMENT_ROWS = 100
_OFFSET_BRACKET = 60.0   # logit offsets searched in [-60, 60]: beyond it every p(d) is 0 or 1
_EPS = 1e-12             # predictions clipped to [eps, 1 - eps] for the logit only


class SegmentReportError(ValueError):
    """Base class of the named input errors of :func:`segment_report`."""


class SegmentLengthError(SegmentReportError):
    """Labels, probabilities, segments or weights have different numbers of rows."""


class NaNProbabilityError(SegmentReportError):
    """The probabilities contain NaN (or infinite) values."""


class MissingSegmentKeyError(SegmentReportError):
    """A segment key is missing (NaN/None) and ``missing="error"``."""


class NoEligibleSegmentError(SegmentReportError):
    """No segment reaches ``min_segment_rows``, so there is no worst segment to report."""


@dataclass
class SegmentReport:
    """What :func:`segment_report` returns.

    Attributes
    ----------
    table : list of dict
        One dict per segment (in key order), see :data:`SEGMENT_FIELDS`.
    worst : dict
        The worst eligible segment's dict (see the module docstring for the criterion).
    overall : dict
        The same statistics over all rows.
    columns : list of str
        The segment column names.
    settings : dict
        The arguments that shaped the report (confidence, interval level, bins, ...).
    """

    table: list[dict[str, Any]]
    worst: dict[str, Any]
    overall: dict[str, Any]
    columns: list[str]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def eligible(self) -> list[dict[str, Any]]:
        """The segments with at least ``min_segment_rows`` rows (weight)."""
        return [s for s in self.table if s["eligible"]]

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (non-finite numbers as None)."""
        return _clean({"columns": list(self.columns), "settings": dict(self.settings),
                       "overall": self.overall, "worst": self.worst, "segments": self.table})

    def to_frame(self):
        """The table as a pandas DataFrame: one column per segment column (``segment.<name>``
        when the name is one of :data:`SEGMENT_FIELDS`), then the statistics."""
        import pandas as pd

        # a key column named like a statistic (e.g. "rows") is prefixed, never overwritten
        names = {c: f"segment.{c}" if c in SEGMENT_FIELDS else c for c in self.columns}
        rows = [{**{names[c]: s["key"][c] for c in self.columns},
                 **{k: v for k, v in s.items() if k != "key"}} for s in self.table]
        return pd.DataFrame(rows)

    def format(self) -> str:
        """A fixed-width text table (one line per segment; ``*`` marks the worst, ``-`` a
        segment below the minimum size)."""
        width = max(8, *(len(s["label"]) + 2 for s in self.table))
        lines = [f"{'segment':<{width}}{'rows':>8}{'pred':>8}{'obs':>8}{'O - E':>9}"
                 f"{'interval':>20}{'ECE':>8}{'logloss':>9}{'Brier':>8}"]
        for s in self.table:
            mark = "*" if s["label"] == self.worst["label"] else (" " if s["eligible"] else "-")
            lines.append(f"{mark}{s['label']:<{width - 1}}{s['weight']:>8.6g}"
                         f"{s['mean_prediction']:>8.4f}{s['observed_rate']:>8.4f}"
                         f"{s['citl']:>+9.4f}{_interval(s):>20}{s['ece']:>8.4f}"
                         f"{s['log_loss']:>9.4f}{s['brier']:>8.4f}")
        st = self.settings
        lines.append(f"(* worst by {st['worst_by']}; - fewer than {st['min_segment_rows']} rows, "
                     f"not used; intervals at {st['interval_confidence']:.4g}"
                     + (" (Bonferroni)" if st["simultaneous"] else "") + ")")
        return "\n".join(lines)

    def __repr__(self) -> str:
        w = self.worst
        return (f"SegmentReport({len(self.table)} segments by {', '.join(self.columns)}, "
                f"{len(self.eligible)} with >= {self.settings['min_segment_rows']} rows; worst "
                f"{w['label']}: O - E {w['citl']:+.4f} {_interval(w)}, ECE {w['ece']:.4f})")


#: the keys of each segment's dict in :attr:`SegmentReport.table`
SEGMENT_FIELDS = ("key", "label", "rows", "weight", "positives", "mean_prediction",
                  "observed_rate", "citl", "citl_lower", "citl_upper", "citl_excess",
                  "logit_offset", "logit_offset_lower", "logit_offset_upper", "ece",
                  "log_loss", "brier", "eligible")


def _interval(s: dict) -> str:
    return f"[{s['citl_lower']:+.4f}, {s['citl_upper']:+.4f}]"


def _clean(v):
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _python(v):
    """A segment key value as plain Python (numpy scalars unwrapped, missing as None)."""
    import pandas as pd

    if v is None or (not isinstance(v, (str, bytes)) and pd.isna(v)):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _segment_frame(segments, n: int):
    """The segment keys as a DataFrame of n rows (column names kept, else ``segment`` or
    ``segment_<j>``: :func:`mlcal.maps.segment_keys.segment_columns_of` reads them)."""
    import pandas as pd

    from mlcal.maps.segment_keys import SegmentKeyError, segment_columns_of

    if not isinstance(segments, (pd.DataFrame, pd.Series, np.ndarray)):
        segments = np.asarray(segments, dtype=object)   # (as before: a list as objects)
    try:
        names, cols = segment_columns_of(segments)
    except SegmentKeyError as exc:
        raise SegmentReportError(str(exc)) from None
    rows = {len(c) for c in cols}
    if rows != {n}:
        raise SegmentLengthError(f"length mismatch: {n} probabilities but {rows.pop()} "
                                 "segment rows")
    # a Series keeps its dtype (a categorical sorts by its categories); arrays as objects
    return pd.DataFrame({name: (c.reset_index(drop=True) if isinstance(c, pd.Series) else
                                np.asarray(c, dtype=object))
                         for name, c in zip(names, cols)})


def _segment_codes(frame, missing: str) -> tuple[np.ndarray, list[dict]]:
    """Segment index per row and each segment's key (column -> value), in key order."""
    import pandas as pd

    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    na = frame.isna()
    if missing == "error" and na.to_numpy().any():
        bad = {c: int(na[c].sum()) for c in frame.columns if na[c].any()}
        raise MissingSegmentKeyError(
            f"segment keys are missing (NaN/None) in {bad} row(s) per column; drop or fill "
            "those rows, or pass missing='segment' to report them as their own segment")
    codes, uniques = [], []
    for c in frame.columns:
        try:
            code, uniq = pd.factorize(frame[c], sort=True, use_na_sentinel=False)
        except TypeError:   # values of mixed types do not sort: keep first-seen order
            code, uniq = pd.factorize(frame[c], sort=False, use_na_sentinel=False)
        codes.append(code)
        uniques.append([_python(u) for u in uniq])
    combos, inverse = np.unique(np.column_stack(codes), axis=0, return_inverse=True)
    keys = [{c: uniques[j][combo[j]] for j, c in enumerate(frame.columns)} for combo in combos]
    return inverse.reshape(-1), keys


def _label(key: dict) -> str:
    def text(v):
        return "<missing>" if v is None else str(v)
    if len(key) == 1:
        return text(next(iter(key.values())))
    return ", ".join(f"{c}={text(v)}" for c, v in key.items())


def _forecasts(y_true, y_prob):
    """(binary labels or correctness, prediction or top-label confidence, labels, probs,
    multiclass) after the named checks."""
    try:
        p = np.asarray(y_prob, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SegmentReportError(f"probabilities must be numeric: {exc}") from None
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if np.isnan(p).any() or np.isinf(p).any():
        bad = int(np.count_nonzero(~np.isfinite(p).all(axis=-1) if p.ndim == 2 else
                                   ~np.isfinite(p)))
        raise NaNProbabilityError(f"the probabilities contain non-finite values (NaN or "
                                  f"infinite) in {bad} row(s); remove or impute them first")
    n_labels = np.shape(np.asarray(y_true, dtype=object).reshape(-1))[0]
    if p.shape[0] != n_labels:
        raise SegmentLengthError(f"length mismatch: {p.shape[0]} probabilities but "
                                 f"{n_labels} labels")
    if p.ndim == 2:
        from mlcal.metrics.multiclass import _check

        yi, prob = _check(y_true, p)
        top = np.argmax(prob, axis=1)
        return ((top == yi).astype(np.float64), prob[np.arange(prob.shape[0]), top], yi, prob,
                True)
    y, q = M.check_binary_forecasts(y_true, p)
    return y, q, y, q, False


def offset_score_interval(y, p, w, z: float) -> dict[str, float]:
    """Calibration-in-the-large of one group of rows with its score interval (module
    docstring): ``citl`` = O - E and its ``citl_lower``/``citl_upper``, the maximum-likelihood
    ``logit_offset`` and its bounds (infinite when no finite offset fits), at the two-sided
    normal quantile ``z``.

    Parameters
    ----------
    y : ndarray of shape (n,)
        0/1 outcomes.
    p : ndarray of shape (n,)
        Predicted probabilities.
    w : ndarray of shape (n,)
        Frequency weights (total > 0).
    z : float
        Two-sided normal quantile (1.96 for 95 %).
    """
    from scipy.optimize import brentq
    from scipy.special import expit, logit

    total = float(np.sum(w))
    observed = float(np.sum(w * y)) / total
    expected = float(np.sum(w * p)) / total
    eta = logit(np.clip(p, _EPS, 1.0 - _EPS))
    positive = w > 0
    eta, ys, ws = eta[positive], y[positive], w[positive]

    def mean_p(d):
        return float(np.sum(ws * expit(eta + d))) / total

    def score(d):
        q = expit(eta + d)
        info = float(np.sum(ws * q * (1.0 - q)))
        u = float(np.sum(ws * (ys - q)))
        if info > 0:
            return u / math.sqrt(info)
        # every p(d) saturated at 0 or 1: S tends to 0 unless outcomes contradict it
        return 0.0 if u == 0 else math.copysign(math.inf, u)

    lo_d, hi_d = -_OFFSET_BRACKET, _OFFSET_BRACKET

    def root(f, default):
        a, b = f(lo_d), f(hi_d)
        if a > 0 and b < 0:
            return brentq(f, lo_d, hi_d, xtol=1e-12, rtol=1e-12)
        return default

    # score falls with d: the lower bound solves S = z, the upper S = -z
    d_lower = root(lambda d: score(d) - z, -math.inf)
    d_upper = root(lambda d: score(d) + z, math.inf)
    d_hat = root(lambda d: float(np.sum(ws * (ys - expit(eta + d)))),
                 -math.inf if observed <= expected else math.inf)
    # the gap at the offset bounds; no finite bound: the end of the possible range
    lower = mean_p(d_lower) - expected if math.isfinite(d_lower) else -expected
    upper = mean_p(d_upper) - expected if math.isfinite(d_upper) else 1.0 - expected
    citl = observed - expected
    return {"citl": citl, "citl_lower": min(lower, citl), "citl_upper": max(upper, citl),
            "logit_offset": d_hat, "logit_offset_lower": d_lower,
            "logit_offset_upper": d_upper}


def _ece_weighted(y, p, w, n_bins: int, strategy: str) -> float:
    """:func:`mlcal.metrics.ece` of frequency-weighted rows: integer weights expand into
    repeated rows; fractional weights give NaN (the ECE has no weighted form in mlcal)."""
    if np.all(w == 1.0):
        return M.ece(y, p, n_bins, strategy)
    if not np.all(w == np.round(w)):
        return math.nan
    reps = w.astype(np.int64)
    if reps.sum() == 0:
        return math.nan
    return M.ece(np.repeat(y, reps), np.repeat(p, reps), n_bins, strategy)


def _scores(labels, probs, w, multiclass: bool) -> tuple[float, float]:
    """Weighted mean log loss and Brier score of one group (the existing per-row losses)."""
    if multiclass:
        from mlcal.metrics.multiclass import (multiclass_brier_per_row,
                                              multiclass_log_loss_per_row)

        ll, br = multiclass_log_loss_per_row(labels, probs), multiclass_brier_per_row(labels,
                                                                                      probs)
    else:
        ll, br = M.log_loss_per_row(labels, probs), M.brier_per_row(labels, probs)
    return float(np.average(ll, weights=w)), float(np.average(br, weights=w))


def _group_stats(y, p, labels, probs, w, z, n_bins, strategy, multiclass) -> dict[str, Any]:
    weight = float(np.sum(w))
    out = {"rows": int(y.shape[0]), "weight": weight, "positives": float(np.sum(w * y))}
    if weight <= 0:
        nan = math.nan
        out.update(mean_prediction=nan, observed_rate=nan, citl=nan, citl_lower=nan,
                   citl_upper=nan, citl_excess=nan, logit_offset=nan, logit_offset_lower=nan,
                   logit_offset_upper=nan, ece=nan, log_loss=nan, brier=nan)
        return out
    out["mean_prediction"] = float(np.sum(w * p)) / weight
    out["observed_rate"] = out["positives"] / weight
    off = offset_score_interval(y, p, w, z)
    out.update(off)
    out["citl_excess"] = max(off["citl_lower"], -off["citl_upper"], 0.0)
    out["ece"] = _ece_weighted(y, p, w, n_bins, strategy)
    out["log_loss"], out["brier"] = _scores(labels, probs, w, multiclass)
    return out


def _worst_key(s: dict, worst_by: str):
    def num(v):
        return -math.inf if v is None or not math.isfinite(v) else v
    if worst_by == "citl_bound":
        return (num(s["citl_excess"]), num(abs(s["citl"])))
    if worst_by == "ece":
        return (num(s["ece"]), num(s["citl_excess"]))
    return (num(abs(s["citl"])), num(s["citl_excess"]))


def segment_report(y_true, y_prob, segments, *, sample_weight=None,
                   min_segment_rows: float = DEFAULT_MIN_SEGMENT_ROWS, n_bins: int = 10,
                   strategy: str = "uniform", confidence: float = 0.95,
                   simultaneous: bool = False, worst_by: str = "citl_bound",
                   missing: str = "error") -> SegmentReport:
    """Calibration metrics per segment and the worst segment (see the module docstring).

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Labels in {0, 1}; class indices ``0 .. K-1`` with an (n, K) ``y_prob``.
    y_prob : array-like of shape (n,) or (n, K)
        Predicted probabilities of the positive class, or of every class (then every
        statistic is top-label: confidence vs accuracy).
    segments : array-like of shape (n,) or (n, m), pandas Series or DataFrame
        The segment key of each row; several columns form a composite key.
    sample_weight : array-like of shape (n,), optional
        Frequency weights (see the module docstring).
    min_segment_rows : float, default=100
        Segments with fewer rows (weight sum with ``sample_weight``) are reported, flagged
        ``eligible=False`` and never chosen as the worst.
    n_bins, strategy
        ECE binning, as in :func:`mlcal.metrics.ece`.
    confidence : float, default=0.95
        Level of the intervals (two-sided).
    simultaneous : bool, default=False
        Bonferroni-adjust the intervals over the eligible segments (level
        ``1 - (1 - confidence) / K``), so all of them hold together.
    worst_by : {"citl_bound", "ece", "abs_citl"}, default="citl_bound"
        Criterion of the worst segment: the largest lower confidence bound of ``|O - E|``,
        the largest ECE, or the largest ``|O - E|`` point estimate.
    missing : {"error", "segment"}, default="error"
        Missing keys raise :class:`MissingSegmentKeyError`, or form their own segment (key
        value None, shown as ``<missing>``).

    Returns
    -------
    SegmentReport

    Raises
    ------
    SegmentLengthError, NaNProbabilityError, MissingSegmentKeyError, NoEligibleSegmentError
        (all :class:`SegmentReportError`, a ``ValueError``), and ``ValueError`` for labels
        outside {0, 1}, probabilities outside [0, 1] or bad arguments.
    """
    from scipy.stats import norm

    if worst_by not in WORST_BY:
        raise ValueError(f"worst_by must be one of {WORST_BY}, got {worst_by!r}")
    if isinstance(confidence, bool) or not (isinstance(confidence, (int, float))
                                            and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if isinstance(min_segment_rows, bool) or not isinstance(min_segment_rows, (int, float)) \
            or not min_segment_rows >= 0:
        raise ValueError(f"min_segment_rows must be a number >= 0, got {min_segment_rows!r}")
    if strategy not in M.BIN_STRATEGIES:
        raise ValueError(f"strategy must be one of {M.BIN_STRATEGIES}, got {strategy!r}")
    y, p, labels, probs, multiclass = _forecasts(y_true, y_prob)
    n = y.shape[0]
    frame = _segment_frame(segments, n)
    if sample_weight is not None and np.asarray(sample_weight).reshape(-1).shape[0] != n:
        raise SegmentLengthError(f"length mismatch: {n} probabilities but "
                                 f"{np.asarray(sample_weight).reshape(-1).shape[0]} weights")
    w = as_weights(sample_weight, n)
    codes, keys = _segment_codes(frame, missing)
    members = [np.flatnonzero(codes == k) for k in range(len(keys))]
    sizes = [float(np.sum(w[rows])) for rows in members]
    eligible = [s >= min_segment_rows and s > 0 for s in sizes]
    n_eligible = sum(eligible)
    if n_eligible == 0:
        raise NoEligibleSegmentError(
            f"no segment reaches min_segment_rows={min_segment_rows:g}: the {len(keys)} "
            f"segment(s) by {list(frame.columns)} hold at most {max(sizes):g} rows (weight); "
            "lower min_segment_rows or use coarser segments")
    level = 1.0 - (1.0 - confidence) / n_eligible if simultaneous else confidence
    z = float(norm.ppf(0.5 + level / 2.0))
    stats = (n_bins, strategy, multiclass)
    table = []
    for key, rows, ok in zip(keys, members, eligible):
        s = {"key": key, "label": _label(key),
             **_group_stats(y[rows], p[rows], labels[rows], probs[rows], w[rows], z, *stats),
             "eligible": bool(ok)}
        table.append(s)
    worst = max((s for s in table if s["eligible"]), key=lambda s: _worst_key(s, worst_by))
    overall = {"key": None, "label": "(all rows)",
               **_group_stats(y, p, labels, probs, w, float(norm.ppf(0.5 + confidence / 2.0)),
                              *stats), "eligible": True}
    settings = {"min_segment_rows": min_segment_rows, "n_bins": n_bins, "strategy": strategy,
                "confidence": confidence, "simultaneous": bool(simultaneous),
                "interval_confidence": level, "worst_by": worst_by, "missing": missing,
                "multiclass": multiclass, "weighted": sample_weight is not None,
                "n_segments": len(table), "n_eligible": n_eligible,
                "interval": "logit-offset score interval (Wilson for equal predictions)"}
    return SegmentReport(table, worst, overall, list(frame.columns), settings)


def worst_segment_metrics(report: SegmentReport, prefix: str = "") -> dict[str, float]:
    """The run metrics logged for a report (finite values only):
    ``{prefix}segment_worst_citl`` (O - E of the worst segment), ``_citl_lower``,
    ``_citl_upper``, ``_citl_excess`` (its lower bound of ``|O - E|``), ``_ece``, ``_log_loss``,
    ``_brier``, ``_rows``; ``{prefix}segment_max_ece`` (largest ECE of any eligible segment),
    ``{prefix}segment_count`` and ``{prefix}segment_eligible_count``."""
    w = report.worst
    out = {f"{prefix}segment_worst_{k}": w[k] for k in
           ("citl", "citl_lower", "citl_upper", "citl_excess", "ece", "log_loss", "brier")}
    out[f"{prefix}segment_worst_rows"] = w["weight"]
    eces = [s["ece"] for s in report.eligible if math.isfinite(s["ece"])]
    if eces:
        out[f"{prefix}segment_max_ece"] = max(eces)
    out[f"{prefix}segment_count"] = len(report.table)
    out[f"{prefix}segment_eligible_count"] = len(report.eligible)
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def write_segment_artifacts(report: SegmentReport, folder: str,
                            stem: str = "segment_report") -> list[str]:
    """Write ``<stem>.json`` (:meth:`SegmentReport.to_dict`) and ``<stem>.csv`` (the table)
    into ``folder`` atomically; returns the two paths."""
    import os

    from mlcal._atomic import write_json

    paths = [os.path.join(folder, f"{stem}.json"), os.path.join(folder, f"{stem}.csv")]
    write_json(paths[0], report.to_dict(), indent=1)
    report.to_frame().to_csv(paths[1], index=False)
    return paths


def segment_keys(frame, columns: Sequence[str], *, what: str = "data"):
    """The columns ``columns`` of a DataFrame, or a ``SegmentReportError`` naming the missing
    ones (:func:`mlcal.maps.segment_keys.select_segment_columns`)."""
    from mlcal.maps.segment_keys import select_segment_columns

    return select_segment_columns(frame, columns, what=what, error=SegmentReportError)
