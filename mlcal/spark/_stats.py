"""A Spark calibration set -> its sufficient statistics, exactly.

Every mlcal calibrator sees its data only through :func:`mlcal._solvers.ties.sort_and_collapse`:
per distinct score, the correctly rounded total weight and positive weight. So the aggregation
keeps, per distinct score and label, an exact total, and hands the local fit rows whose exact
sums are those totals:

* without a weight column: row counts (Spark sums integers exactly);
* with one: each weight ``w`` is written as ``m * 2^(c - 52)`` with ``c`` its binary exponent
  rounded down to a multiple of 10 (the class) and ``m < 2^62`` an integer, exact in a long;
  Spark sums ``m`` per (score, label, class) as two 31-bit halves, whose long sums cannot
  overflow below 2^32 rows per group; the driver combines the classes into one exact integer
  and writes it back as a few non-negative doubles (:mod:`mlcal._solvers.exact_sums`).

Spark's ``sum`` of doubles is not used anywhere: its result depends on the partitioning.

A frame of at most ``max_distinct`` rows skips all of this: its rows are collected as they are
(:func:`_driver_rows`), which is no more data than the aggregate and several times faster than
Spark's shuffle.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, NumericType, StructType

from mlcal._solvers.detmath import det_expit_array
from mlcal._solvers.exact_sums import combine, nonnegative_expansion
from mlcal.maps.binary import data_clamp
from mlcal.spark._expressions import pow2, step_lookup
from mlcal.spark._grid import GridInfo, make_grid

#: default limit on distinct scores collected to the driver before grid mode takes over
DEFAULT_MAX_DISTINCT = 1_000_000
_HALF_BITS = 31
_CLASS_WIDTH = 10          # exponents per class: m = w * 2^(52 - c) < 2^(53 + 9) fits a long
_ARROW_CONF = "spark.sql.execution.arrow.pyspark.enabled"
_ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


class ScoreGridWarning(UserWarning):
    """The scores were rounded to a grid before fitting (too many distinct scores)."""


@dataclass(frozen=True)
class SufficientStatistics:
    """What :func:`collect_statistics` brings back to the driver.

    Attributes
    ----------
    scores, labels, weights : ndarray
        Rows equivalent to the calibration set for every calibrator: per (rounded) score the
        same exact positive and total weight. A frame of at most ``max_distinct`` rows is
        collected as it is (``weights`` None when it has no weight column).
    n_rows : int
        Rows of the Spark DataFrame.
    n_distinct : int
        Distinct scores in it (before any grid). Without a grid it is counted from ``scores``
        on first access (a sort of the rows the fit does not need).
    n_aggregated : int
        Rows collected to the driver (the aggregate's, or the frame's own).
    grid : GridInfo or None
        The grid the scores were rounded to (``None``: exact).
    n_weighted_rows : int or None
        Rows with positive weight when ``scores`` are aggregated (the output floor counts them,
        as the in-memory fit does); ``None`` when the rows are the frame's own.
    clamps : dict or None
        With a grid: per input transform (``"identity"``, ``"sigmoid"``) the logit-family score
        clamp of the original rows, ``data_clamp`` of their exact extremes (the smallest
        transformed score above 0 and the largest below 1 among rows of positive weight,
        aggregated in the validation job), which the fit uses instead of the midpoints'
        (:func:`mlcal.maps.binary.rounded_scores_clamp`). ``None`` without a grid (the scores
        are exact).
    """

    scores: np.ndarray
    labels: np.ndarray
    weights: np.ndarray | None
    n_rows: int
    n_aggregated: int
    grid: GridInfo | None
    known_distinct: int | None = field(default=None, repr=False)
    n_weighted_rows: int | None = None
    clamps: dict[str, tuple[float, float]] | None = None

    @property
    def n_distinct(self) -> int:
        if self.known_distinct is None:
            if self.grid is not None:
                raise AssertionError("grid statistics always carry the distinct count")
            object.__setattr__(self, "known_distinct", int(np.unique(self.scores).size))
        return self.known_distinct


def _numeric_column(schema: StructType, name: str, what: str, allow_bool: bool = False):
    if not isinstance(name, str) or name not in schema.fieldNames():
        raise ValueError(f"{what} column {name!r} is not in the DataFrame (columns: "
                         f"{schema.fieldNames()})")
    dtype = schema[name].dataType
    if not (isinstance(dtype, NumericType) or (allow_bool and isinstance(dtype, BooleanType))):
        raise ValueError(f"{what} column {name!r} must be numeric, got {dtype.simpleString()}")
    return F.col(name).cast("double")


def _count(cond) -> F.Column:
    return F.sum(F.when(cond, 1).otherwise(0))


def _nonfinite(c) -> F.Column:
    return F.isnan(c) | (F.abs(c) == float("inf"))


def _last_double(pred, inside: float, outside: float) -> float:
    """The double nearest ``outside`` for which ``pred`` holds, between ``inside`` (where it
    holds) and ``outside`` (where it does not), by bisection (``pred`` monotone)."""
    while True:
        mid = inside + (outside - inside) / 2.0
        if mid == inside or mid == outside:
            return inside
        if pred(mid):
            inside = mid
        else:
            outside = mid


def _expit_at(v: float) -> float:
    return float(det_expit_array(np.array([v], dtype=np.float64))[0])


@functools.cache
def sigmoid_limits() -> tuple[float, float]:
    """The largest score whose (deterministic) sigmoid is 0 and the smallest whose sigmoid is
    1 (-745.13..., 37.43...): beyond them the sigmoid input transform has no positive value /
    no value below 1."""
    return (_last_double(lambda v: _expit_at(v) == 0.0, -1e4, 0.0),
            _last_double(lambda v: _expit_at(v) == 1.0, 1e4, 0.0))


def score_clamps(extremes: dict) -> dict[str, tuple[float, float]]:
    """The logit-family clamp per input transform from :func:`_validate`'s extremes: the
    smallest raw score of positive weight whose transform is above 0 and the largest whose
    transform is below 1 (``None``: no such score). The transforms are non-decreasing, so
    ``data_clamp`` of those two transformed scores is ``data_clamp`` of all the rows'."""
    def clamp(lo_key, hi_key, transform):
        kept = [v for v in (extremes[lo_key], extremes[hi_key]) if v is not None]
        x = np.asarray(kept, dtype=np.float64)
        return data_clamp(x if transform == "identity" else det_expit_array(x))
    return {"identity": clamp("clamp_lo", "clamp_hi", "identity"),
            "sigmoid": clamp("sigmoid_lo", "sigmoid_hi", "sigmoid")}


def _validate(df: DataFrame, s, y, w, count_distinct: bool) -> dict:
    """One Spark job: size, range, every input error (reported like the in-memory checks,
    mlcal._validation), the extremes the score clamp is taken from (:func:`score_clamps`)
    and, if asked, the number of distinct scores (a shuffle: the costliest part, so only
    asked for when a decision or a report needs it)."""
    cols = df.select(s.alias("s"), y.alias("y"), *([] if w is None else [w.alias("w")]))
    s, y = F.col("s"), F.col("y")
    w = None if w is None else F.col("w")
    finite = ~_nonfinite(s)
    carries = F.lit(True) if w is None else w > 0
    sigmoid_zero, sigmoid_one = sigmoid_limits()
    aggs = [F.count(F.lit(1)).alias("n"), _count(s.isNull()).alias("s_null"),
            _count(_nonfinite(s)).alias("s_bad"),
            _count(y.isNull() | ~y.isin(0.0, 1.0)).alias("y_bad"),
            F.min(F.when(finite, s)).alias("s_min"), F.max(F.when(finite, s)).alias("s_max"),
            _count(carries & (y == 1.0)).alias("n_pos"),
            _count(carries & (y == 0.0)).alias("n_neg"),
            F.min(F.when(carries & (s > 0.0), s)).alias("clamp_lo"),
            F.max(F.when(carries & (s < 1.0), s)).alias("clamp_hi"),
            F.min(F.when(carries & (s > sigmoid_zero), s)).alias("sigmoid_lo"),
            F.max(F.when(carries & (s < sigmoid_one), s)).alias("sigmoid_hi")]
    if count_distinct:
        aggs.append(F.countDistinct(s).alias("n_distinct"))
    if w is not None:
        aggs += [_count(w.isNull()).alias("w_null"), _count(_nonfinite(w)).alias("w_bad"),
                 _count(w < 0).alias("w_neg")]
    r = cols.agg(*aggs).first().asDict()
    _check(r, w is not None)
    return r


def _check(r: dict, weighted: bool) -> None:
    """Raise the named error for the first problem the validation counts ``r`` show."""
    if r["n"] == 0:
        raise ValueError("the DataFrame is empty")
    if r["s_null"] or r["s_bad"]:
        raise ValueError(f"scores contain {r['s_null']} null and {r['s_bad']} non-finite "
                         "value(s); remove or impute them before calibrating")
    if r["y_bad"]:
        raise ValueError(f"labels must be 0 or 1 (not null); {r['y_bad']} row(s) are not")
    if weighted and (r["w_null"] or r["w_bad"] or r["w_neg"]):
        raise ValueError(f"sample weights contain {r['w_null']} null, {r['w_bad']} non-finite "
                         f"and {r['w_neg']} negative value(s)")
    if not (r["n_pos"] and r["n_neg"]):
        only = "0" if not r["n_pos"] else "1"
        raise ValueError(f"y contains a single class (only label {only}) among rows of positive "
                         "weight; calibration needs both positives and negatives")


def _local_counts(s: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> dict | None:
    """:func:`_validate`'s counts from collected rows, or None when a value is missing or not
    finite (Arrow turns a null into NaN, so only Spark can tell the two apart in the error
    message)."""
    if not (np.isfinite(s).all() and np.isin(y, (0.0, 1.0)).all()
            and (w is None or (np.isfinite(w).all() and (w >= 0).all()))):
        return None
    carries = slice(None) if w is None else w > 0
    pos = int(np.count_nonzero(y[carries] == 1.0))
    r = {"n": int(s.size), "s_null": 0, "s_bad": 0, "y_bad": 0,
         "s_min": float(s.min()) if s.size else None, "s_max": float(s.max()) if s.size else None,
         "n_pos": pos, "n_neg": int(y[carries].size) - pos}
    return r if w is None else {**r, "w_null": 0, "w_bad": 0, "w_neg": 0}


def _weight_exponent(w):
    """``e`` with ``w = m * 2^(e - 52)`` for an integer ``2^52 <= m < 2^53`` (``w > 0``; ``e``
    is clamped at -1022 for subnormals, whose ``m`` is then smaller). ``log2`` only guesses
    ``e``; comparisons with exact powers of two correct the guess."""
    guess = F.least(F.greatest(F.floor(F.log2(w)).cast("int"), F.lit(-1022)), F.lit(1023))
    return (F.when((guess > -1022) & (pow2(guess) > w), guess - 1)
            .when((guess < 1023) & (pow2(F.least(guess + 1, F.lit(1023))) <= w), guess + 1)
            .otherwise(guess))


def _grid_key(s, g: GridInfo, s_min: float, s_max: float):
    """Each score's cell midpoint: by arithmetic on a uniform grid (a guess off by at most one
    cell, corrected by comparing with the two edges computed exactly as numpy computes them),
    else by a binary search through the edge table (planning cost grows with the table). The
    binade cells refining a uniform grid's first and last cell are searched in their own
    tables (at most 1022 and 53 edges)."""
    n = g.uniform_cells
    if n is None or n < 3:
        return step_lookup(s, g.edges, g.representatives)
    key = _uniform_key(s, n, s_min, s_max)
    n_low, n_high = g.low_edges.size, g.high_edges.size
    if n_high:
        key = F.when(s >= F.lit(float(g.edges[-n_high - 1])), step_lookup(
            s, g.high_edges, g.representatives[-n_high - 1:])).otherwise(key)
    if n_low:
        key = F.when(s < F.lit(float(g.edges[n_low])), step_lookup(
            s, g.low_edges, g.representatives[:n_low + 1])).otherwise(key)
    return key


def _uniform_key(s, n: int, s_min: float, s_max: float):
    """The midpoint of ``s``'s cell among ``n >= 3`` equal cells over ``[s_min, s_max]``."""
    lo, span = F.lit(s_min), F.lit(s_max - s_min)

    def edge(i):                     # uniform_edges' arithmetic, i = 1..n-1
        return lo + span * (i.cast("double") / F.lit(float(n)))

    guess = F.least(F.greatest(F.floor((s - lo) / span * float(n)).cast("int"), F.lit(0)),
                    F.lit(n - 1))
    cell = (F.when((guess >= 1) & (s < edge(guess)), guess - 1)
            .when((guess <= n - 2) & (s >= edge(guess + 1)), guess + 1).otherwise(guess))
    lower = F.when(cell == 0, lo).otherwise(edge(cell))
    upper = F.when(cell == n - 1, F.lit(s_max)).otherwise(edge(cell + 1))
    return lower + F.lit(0.5) * (upper - lower)


def _aggregate(df: DataFrame, key, y, w) -> "pandas.DataFrame":  # noqa: F821
    base = df.select(key.alias("s"), y.alias("y"), *([] if w is None else [w.alias("w")]))
    if w is None:
        agg = base.groupBy("s", "y").agg(F.count(F.lit(1)).alias("n"))
    else:
        exponent = _weight_exponent(F.col("w"))
        parts = base.withColumn("e", F.when(
            F.col("w") > 0, (F.floor(exponent / _CLASS_WIDTH) * _CLASS_WIDTH).cast("int"))
            .otherwise(F.lit(0)))
        k = F.lit(52) - F.col("e")
        half = F.shiftright(k, 1)          # 2^k in two exact steps: 2^1074 is not a double
        m = ((F.col("w") * pow2(half)) * pow2(k - half)).cast("long")
        parts = parts.withColumn("m", F.when(F.col("w") > 0, m).otherwise(F.lit(0).cast("long")))
        agg = parts.groupBy("s", "y", "e").agg(
            F.sum(F.shiftright("m", _HALF_BITS)).alias("m_hi"),
            F.sum(F.col("m").bitwiseAND((1 << _HALF_BITS) - 1)).alias("m_lo"))
    return _to_pandas(agg)


def _to_pandas(frame: DataFrame) -> "pandas.DataFrame":  # noqa: F821
    """``frame.toPandas()`` through Arrow (columnar, several times faster than row pickling),
    in batches of up to 2^18 rows (Spark's default 10 000 makes a 1e6-row transfer take twice
    as long; a batch of three double columns is then 6 MB)."""
    spark = frame.sparkSession
    settings = {_ARROW_CONF: "true", _ARROW_BATCH_CONF: str(1 << 18)}
    previous = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        return frame.toPandas()
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _driver_rows(df: DataFrame, s, y, w) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The rows themselves, collected through Arrow (one transfer, no shuffle).

    Used for a frame of at most ``max_distinct`` rows: that is no more data than the
    aggregate could be, and fitting on the rows is by definition the in-memory fit of the same
    rows (every calibrator sees its data only through the exact, order-independent
    :func:`mlcal._solvers.ties.sort_and_collapse`), while Spark's groupBy would cost a
    shuffle that takes several times longer than the fit itself.

    (The transfer's cost is Spark's per-row conversion to Arrow, not its bytes: sending the
    label as one byte, with a ``when`` mapping bad labels to a flag, measured slower.)"""
    raw = _to_pandas(df.select(s.alias("s"), y.alias("y"),
                               *([] if w is None else [w.alias("w")])))
    weights = None if w is None else raw["w"].to_numpy(np.float64)
    return raw["s"].to_numpy(np.float64), raw["y"].to_numpy(np.float64), weights


def _known_row_bound(df: DataFrame) -> int | None:
    """An upper bound on the rows of ``df`` that Spark already knows, without running a job,
    or None.

    Trusted only where the optimizer's row count is a count rather than an estimate: a
    materialised cache (the cache builder counts the rows it stores; a recomputed partition
    can only make that larger) or ``spark.range``, under any stack of projections (the same
    rows) and filters (fewer). Anything else (files, catalog statistics that may be stale,
    Spark Connect, another Spark version's internals) gives None and the caller counts."""
    try:
        node = df._jdf.queryExecution().optimizedPlan()
        while node.getClass().getSimpleName() in ("Project", "Filter"):
            node = node.child()
        kind = node.getClass().getSimpleName()
        if kind == "InMemoryRelation" and not node.cacheBuilder().isCachedColumnBuffersLoaded():
            return None
        if kind not in ("InMemoryRelation", "Range"):
            return None
        rows = node.stats().rowCount()
        return int(str(rows.get())) if rows.isDefined() else None   # BigInt or int
    except Exception:           # noqa: BLE001 - private API: any failure means "count"
        return None


def _weighted_rows(pdf) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (score, label): the exact weight sum over its exponent classes, as rows (column
    ``e`` holds the class ``c``: the group's value is ``sum(m) * 2^(c - 52)``)."""
    pdf = pdf.sort_values(["s", "y", "e"], kind="stable").reset_index(drop=True)
    s, y = pdf["s"].to_numpy(np.float64), pdf["y"].to_numpy(np.float64)
    e = pdf["e"].to_numpy(np.int64)
    hi, lo = pdf["m_hi"].to_numpy(np.int64), pdf["m_lo"].to_numpy(np.int64)
    new = np.ones(s.size, dtype=bool)
    new[1:] = (s[1:] != s[:-1]) | (y[1:] != y[:-1])
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, s.size))
    # one class whose integer M = hi * 2^31 + lo is below 2^63 (no int64 overflow) and is a
    # double exactly (at most 53 significant bits, checked by the round trip): then the
    # group's value M * 2^(c - 52) is that double scaled by a power of two, exact (a sum of
    # multiples of 2^-1074 in the subnormal range is representable too). A single row always
    # qualifies: its M is its weight's 53-bit significand shifted by at most 9 bits.
    fast = (sizes == 1) & (hi[starts] < (1 << _HALF_BITS)) & (lo[starts] < (1 << 62))
    whole = (hi[starts] << _HALF_BITS) + lo[starts]
    fast[fast] = whole[fast].astype(np.float64).astype(np.int64) == whole[fast]
    fs = starts[fast]
    out_s, out_y = [s[fs]], [y[fs]]
    out_w = [np.ldexp(whole[fast].astype(np.float64), (e[fs] - 52).astype(np.int32))]
    slow_s, slow_y, slow_w = [], [], []
    for g in np.flatnonzero(~fast):
        a, b = starts[g], starts[g] + sizes[g]
        mant = [(int(h) << _HALF_BITS) + int(l) for h, l in zip(hi[a:b], lo[a:b])]
        terms = nonnegative_expansion(*combine(mant, e[a:b])) or [0.0]
        slow_s += [s[a]] * len(terms)
        slow_y += [y[a]] * len(terms)
        slow_w += terms
    return (np.concatenate(out_s + [np.asarray(slow_s, dtype=np.float64)]),
            np.concatenate(out_y + [np.asarray(slow_y, dtype=np.float64)]),
            np.concatenate(out_w + [np.asarray(slow_w, dtype=np.float64)]))


def collect_statistics(df: DataFrame, score_col: str, label_col: str,
                       weight_col: str | None = None, *, grid=None,
                       max_distinct: int | None = DEFAULT_MAX_DISTINCT,
                       driver_rows: int | None = None) -> SufficientStatistics:
    """Aggregate a Spark calibration set to rows with the same exact per-score statistics.

    See :func:`mlcal.spark.fit` for the parameters. ``driver_rows``: a frame of at most this
    many rows (default ``max_distinct``, or :data:`DEFAULT_MAX_DISTINCT` when that is None)
    and no ``grid`` is collected as it is (see :func:`_driver_rows`), a larger one aggregated
    in Spark; 0 always aggregates in Spark.
    """
    schema = df.schema          # read once: each read is a round trip to the JVM
    s = _numeric_column(schema, score_col, "score")
    y = _numeric_column(schema, label_col, "label", allow_bool=True)
    w = None if weight_col is None else _numeric_column(schema, weight_col, "weight")
    if driver_rows is None:
        driver_rows = DEFAULT_MAX_DISTINCT if max_distinct is None else max_distinct
    if grid is None and driver_rows > 0:
        # at most `cap` rows, so at most max_distinct distinct scores: no grid, and no
        # distinct count needed to decide it. A cached frame's plan knows its row count, so
        # usually no Spark job runs before the collection; else the cheapest one (a count).
        cap = driver_rows if max_distinct is None else min(driver_rows, max_distinct)
        bound = _known_row_bound(df)
        if bound is None:
            bound = df.count()
        if bound <= cap:
            scores, labels, weights = _driver_rows(df, s, y, w)
            if scores.size <= cap:       # else the frame changed since: aggregate in Spark
                counts = _local_counts(scores, labels, weights)
                if counts is None:
                    _validate(df, s, y, w, count_distinct=False)   # raises, naming the problem
                    raise ValueError("scores, labels or weights hold missing or non-finite "
                                     "values")
                _check(counts, w is not None)
                return SufficientStatistics(scores, labels, weights, n_rows=scores.size,
                                            n_aggregated=scores.size, grid=None)
    info = _validate(df, s, y, w, count_distinct=grid is not None)
    n = int(info["n"])
    if grid is None and max_distinct is not None and n > max_distinct:
        info["n_distinct"] = df.select(s.alias("s")).agg(F.countDistinct("s")).first()[0]
    n_distinct = None if info.get("n_distinct") is None else int(info["n_distinct"])
    grid_info = clamps = None
    s_min, s_max = float(info["s_min"]), float(info["s_max"])
    if grid is not None:
        clamps = score_clamps(info)
        grid_info = make_grid(grid, s_min, s_max)
    elif n_distinct is not None and n_distinct > max_distinct:
        clamps = score_clamps(info)
        # the default grid: equal cells, the first and last refined by binades where
        # probability scores saturate (docs/spark.md)
        probabilities = 0.0 <= s_min and s_max <= 1.0
        grid_info = make_grid(int(max_distinct), s_min, s_max,
                              refine=clamps["identity"] if probabilities else None)
        extra = grid_info.low_edges.size + grid_info.high_edges.size
        refined = (f" (and {extra} binade cells refining the first and last, where the scores "
                   "saturate)") if extra else ""
        warnings.warn(
            f"{n_distinct} distinct scores exceed max_distinct={max_distinct}: rounding them to "
            f"a grid of {max_distinct} equal cells{refined} over [{s_min:.6g}, {s_max:.6g}] "
            "before fitting (see docs/spark.md for the error bound); pass grid= to choose the "
            "grid, or raise max_distinct", ScoreGridWarning, stacklevel=3)
    key = s
    if grid_info is not None:
        key = _grid_key(s, grid_info, s_min, s_max)
    pdf = _aggregate(df, key, y, w)
    stats = _statistics(pdf, w is not None, n, grid_info, n_distinct)
    return dataclasses.replace(stats, n_weighted_rows=int(info["n_pos"]) + int(info["n_neg"]),
                               clamps=clamps)


def _statistics(pdf, weighted: bool, n_rows: int, grid_info: GridInfo | None,
                n_distinct: int | None = None) -> SufficientStatistics:
    """The aggregate's rows as :class:`SufficientStatistics` (without a grid the number of
    distinct scores is read from the aggregate itself, when asked for)."""
    if weighted:
        rows = _weighted_rows(pdf)
    else:
        rows = (pdf["s"].to_numpy(np.float64), pdf["y"].to_numpy(np.float64),
                pdf["n"].to_numpy(np.float64))
    return SufficientStatistics(*rows, n_rows=n_rows, n_aggregated=int(len(pdf)),
                                grid=grid_info, known_distinct=n_distinct)
