"""Feed a Spark DataFrame to a :class:`~mlcal.monitor.CalibrationMonitor`: the batch's
statistics are Spark aggregations, only a few hundred numbers reach the driver.

Everything the monitor takes from a batch is a sum over its rows given bets fixed before the
batch (:meth:`~mlcal.monitor.CalibrationMonitor.bet_plan`): the per-row log likelihood ratios
of every betting start and every offset of the confidence sequence, eight moments, the
logit-bin and ECE-bin sums and the log likelihood (:class:`~mlcal.monitor.BatchSums`). Two
Spark jobs compute them; :meth:`~mlcal.monitor.CalibrationMonitor.absorb` then does what the
in-memory ``update`` does after its own sums, by the same code.

How close the two routes are (tested): Spark adds doubles in its own order and uses Java's
``log``/``log1p``/``exp``, so the sums agree with the in-memory ones to rounding (relative
differences around 1e-15). The one discontinuous per-row quantity, a row's logit bin, is
decided without Spark's logarithm: for every bin edge the driver finds, by bisection over the
doubles, the smallest clipped probability whose logit (scipy's, as in memory) reaches it, and
Spark compares the probability with those thresholds. So every row lands in the bin the
in-memory route puts it in (the ECE bin ``floor(10 p)`` is a single correctly rounded product
in both).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from scipy.special import logit

from mlcal.monitor.sequential import (_BIN_EDGES, _CS_GRID, _N_BINS, EPS, BatchSums, BetPlan,
                           CalibrationMonitor, MonitorStep)
from mlcal.spark._expressions import _doubles
from mlcal.spark._stats import _count, _nonfinite, _numeric_column

__all__ = ["update_from_spark", "spark_batch_sums", "monitor_spark_table", "DEFAULT_SAMPLE_ROWS"]

#: rows of a Spark batch collected to the driver for the candidate window and the diagrams
DEFAULT_SAMPLE_ROWS = 100_000


@lru_cache(maxsize=1)
def logit_bin_thresholds() -> np.ndarray:
    """``t[j]`` (``j = 1..111``, stored at ``j - 1``): the smallest double ``p`` in
    ``[EPS, 1 - EPS]`` with ``logit(p) >= edge_j``, or ``+inf`` when no such ``p`` exists.

    A clipped probability's bin, ``searchsorted(edges, logit(p), "right") - 1`` in memory, is
    then the number of thresholds ``<= p`` (logit is non-decreasing on the doubles). Found by
    bisection on the bit patterns of positive doubles, which are ordered like the values."""
    edges = _BIN_EDGES[1:-1]
    lo = np.full(edges.size, np.float64(EPS)).view(np.int64)
    hi = np.full(edges.size, np.float64(1.0 - EPS)).view(np.int64)
    reachable = logit(hi.view(np.float64)) >= edges
    for _ in range(64):             # the smallest bit pattern in [lo, hi] whose logit reaches
        # the edge stays in [lo, hi]; 64 halvings of a < 2^63 range leave one candidate
        mid = lo + (hi - lo) // 2
        ok = logit(mid.view(np.float64)) >= edges
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
    return np.where(reachable, hi.view(np.float64), np.inf)


def _softplus(z: Column) -> Column:
    """``log(1 + e^z)`` as numpy's ``logaddexp(0, z)`` computes it (no overflow)."""
    return F.greatest(z, F.lit(0.0)) + F.log1p(F.exp(-F.abs(z)))


def _logit(p: Column) -> Column:
    """scipy's logit formula: ``log(p / (1 - p))``, and ``log1p(s) - log1p(-s)`` with
    ``s = 2 (p - 1/2)`` on [0.3, 0.65] where that is more accurate."""
    s = F.lit(2.0) * (p - F.lit(0.5))
    return F.when((p < 0.3) | (p > 0.65), F.log(p / (F.lit(1.0) - p))) \
        .otherwise(F.log1p(s) - F.log1p(-s))


def _logit_bin(p: Column, x: Column) -> Column:
    """The row's logit bin, exactly as in memory: a guess from Spark's logit (within a few ulps
    of scipy's, so off by at most one bin) corrected by the thresholds of
    :func:`logit_bin_thresholds`."""
    table = _doubles(logit_bin_thresholds())           # t_1..t_111 at 1-based indices 1..111
    guess = F.least(F.greatest(F.floor(x * 4.0).cast("int") + (_N_BINS // 2), F.lit(0)),
                    F.lit(_N_BINS - 1))
    low = F.greatest(guess, F.lit(1))                  # indices that are always valid
    high = F.least(guess + 1, F.lit(_N_BINS - 1))
    return (F.when((guess >= 1) & (p < F.element_at(table, low)), guess - 1)
            .when((guess <= _N_BINS - 2) & (p >= F.element_at(table, high)), guess + 1)
            .otherwise(guess))


def _check(r: dict, weighted: bool) -> None:
    if r["n"] == 0:
        raise ValueError("the batch is empty")
    if r["p_null"] or r["p_bad"]:
        raise ValueError(f"p contains {r['p_null']} null and {r['p_bad']} non-finite value(s)")
    if r["p_out"]:
        raise ValueError(f"p must lie in [0, 1]; {r['p_out']} value(s) do not")
    if r["y_bad"]:
        raise ValueError(f"labels must be 0 or 1 (not null); {r['y_bad']} row(s) are not")
    if weighted and (r["w_null"] or r["w_bad"] or r["w_neg"]):
        raise ValueError(f"sample weights contain {r['w_null']} null, {r['w_bad']} non-finite "
                         f"and {r['w_neg']} negative value(s)")
    if not r["m0"] > 0:
        raise ValueError("sample_weight sums to zero")
    if not np.isfinite(r["m0"]):
        raise ValueError("sample_weight sums to more than the largest float64")


def spark_batch_sums(plan: BetPlan, df: DataFrame, score_col: str, label_col: str,
                     weight_col: str | None = None) -> BatchSums:
    """The :class:`~mlcal.monitor.BatchSums` of a Spark batch under ``plan`` (two jobs).

    Parameters
    ----------
    plan : BetPlan
        From the monitor's :meth:`~mlcal.monitor.CalibrationMonitor.bet_plan`.
    df : pyspark.sql.DataFrame
        The matured batch.
    score_col, label_col : str
        The probabilities the model served (in [0, 1]) and the 0/1 labels (numeric or
        boolean).
    weight_col : str, optional
        Nonnegative frequency weights.

    Returns
    -------
    BatchSums
    """
    schema = df.schema
    p0 = _numeric_column(schema, score_col, "score")
    y0 = _numeric_column(schema, label_col, "label", allow_bool=True)
    w0 = F.lit(1.0) if weight_col is None else _numeric_column(schema, weight_col, "weight")
    rows = df.select(p0.alias("p0"), y0.alias("y"), w0.alias("w"))
    p0, y, w = F.col("p0"), F.col("y"), F.col("w")
    p = F.least(F.greatest(p0, F.lit(EPS)), F.lit(1.0 - EPS))     # np.clip: exact
    rows = rows.select("p0", "y", "w", p.alias("p"), _logit(p).alias("x"))
    p, x = F.col("p"), F.col("x")
    sign = F.lit(2.0) * y - F.lit(1.0)
    r, v = y - p, p * (F.lit(1.0) - p)

    aggs = [F.count(F.lit(1)).alias("n"), _count(p0.isNull()).alias("p_null"),
            _count(_nonfinite(p0)).alias("p_bad"), _count((p0 < 0) | (p0 > 1)).alias("p_out"),
            _count(y.isNull() | ~y.isin(0.0, 1.0)).alias("y_bad"),
            _count(w.isNull()).alias("w_null"), _count(_nonfinite(w)).alias("w_bad"),
            _count(w < 0).alias("w_neg"),
            F.sum(w).alias("m0"), F.sum(w * y).alias("m1"), F.sum(w * p).alias("m2"),
            F.sum(w * r).alias("m3"), F.sum(w * (r * x)).alias("m4"), F.sum(w * v).alias("m5"),
            F.sum(w * (v * x)).alias("m6"), F.sum(w * (v * x * x)).alias("m7"),
            F.sum(w * (y * F.log(p) + (F.lit(1.0) - y) * F.log1p(-p))).alias("loglik")]
    res = rows.agg(*aggs).first().asDict()
    _check(res, weight_col is not None)

    # every bet is log Bernoulli(y; x + a + b (x - c)) - log Bernoulli(y; x + d) for one row
    # of the table below (offset starts: (a, 0, 0, 0); shape starts: (0, b, c, 0); the
    # confidence sequence: (a_cs, 0, 0, g) per grid offset g; adding 0 or 0 * (x - 0) is
    # exact, so each is the in-memory expression). Each row is paired with every bet by an
    # explode and the bets summed by index: one formula, however many bets.
    k = plan.offset.size
    with_cs = bool(np.isfinite(plan.cs_offset))
    zeros = np.zeros(k)
    table = [np.concatenate([plan.offset, zeros]), np.concatenate([zeros, plan.slope]),
             np.concatenate([zeros, plan.centre]), np.zeros(2 * k)]
    if with_cs:
        g = _CS_GRID.size
        table = [np.concatenate([table[0], np.full(g, plan.cs_offset)]),
                 np.concatenate([table[1], np.zeros(g)]), np.concatenate([table[2], np.zeros(g)]),
                 np.concatenate([table[3], _CS_GRID])]
    a_t, b_t, c_t, d_t = (_doubles(col) for col in table)
    bets = rows.select(w, x, sign.alias("sign"), F.posexplode(a_t).alias("i", "a"))
    i, sgn = F.col("i") + 1, F.col("sign")
    eta_alt = x + F.col("a") + F.element_at(b_t, i) * (x - F.element_at(c_t, i))
    eta_null = x + F.element_at(d_t, i)
    lr = w * (_softplus(-sgn * eta_null) - _softplus(-sgn * eta_alt))
    summed = np.zeros(table[0].size)
    for row in bets.groupBy("i").agg(F.sum(lr).alias("lr")).collect():
        summed[row["i"]] = row["lr"]

    binned = rows.select(_logit_bin(p, x).alias("b"),
                         F.least(F.floor(p * 10.0).cast("int"), F.lit(9)).alias("e"),
                         w, y, x, p)
    cells = binned.groupBy("b", "e").agg(F.sum(w).alias("sw"), F.sum(w * y).alias("swy"),
                                         F.sum(w * x).alias("swx"),
                                         F.sum(w * (y - p)).alias("gap")).collect()
    bins = np.zeros((3, _N_BINS))
    gaps = np.zeros(10)
    for c in cells:
        bins[:, c["b"]] += (c["sw"], c["swy"], c["swx"])
        gaps[c["e"]] += c["gap"]
    return BatchSums(
        n_rows=int(res["n"]), moments=np.array([float(res[f"m{i}"]) for i in range(8)]),
        bins=bins, ece_gaps=gaps, loglik=float(res["loglik"]),
        log_lr_offset=summed[:k], log_lr_shape=summed[k:2 * k],
        cs_log_lr=summed[2 * k:] if with_cs else None)


def update_from_spark(monitor: CalibrationMonitor, df: DataFrame, score_col: str,
                      label_col: str, weight_col: str | None = None) -> MonitorStep:
    """:meth:`CalibrationMonitor.update <mlcal.monitor.CalibrationMonitor.update>` for a Spark
    batch: the statistics are computed in Spark (:func:`spark_batch_sums`), the rest is the
    in-memory code path.

    Parameters
    ----------
    monitor : CalibrationMonitor
        Updated in place.
    df : pyspark.sql.DataFrame
        The matured batch, one row per prediction.
    score_col : str
        The probability the model served (e.g. the calibrated column of
        :func:`mlcal.spark.calibrated_column`).
    label_col : str
        0/1 outcomes (numeric or boolean).
    weight_col : str, optional
        Nonnegative frequency weights.

    Returns
    -------
    MonitorStep
    """
    plan = monitor.bet_plan()
    return monitor.absorb(plan, spark_batch_sums(plan, df, score_col, label_col, weight_col))


def _python_value(value):
    """A class label as a plain Python value for ``F.lit`` (numpy scalars unwrapped)."""
    return value.item() if hasattr(value, "item") else value


def monitor_spark_table(df: DataFrame, *, label_col: str, score_col: str,
                        weight_col: str | None = None,
                        sample_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0, what: str = "table"):
    """The Spark route of :func:`mlcal.monitor.loop.run_batch` (``mlcal monitor --spark-table``).

    The monitor's statistics are computed over every row of ``df`` in Spark
    (:func:`update_from_spark`); the labels are mapped to 0/1 against the monitored model's
    classes in Spark (a value that is neither class, or null, fails the job naming it). Only a
    uniform sample of at most ``sample_rows`` rows (seeded) reaches the driver: it is the batch
    the loop keeps in its candidate window and draws diagrams from, so a candidate built after an
    alarm is fitted and gated on sampled rows.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The matured batch: the model's feature columns, ``label_col`` and ``score_col`` (the
        probability the model served).
    label_col, score_col : str
        Label column (the model's class values) and served-probability column.
    weight_col : str, optional
        Frequency weights.
    sample_rows : int
        Most rows collected to the driver (default 100,000).
    seed : int
        Seed of the sample.
    what : str
        How errors name the input (e.g. the table name).

    Returns
    -------
    (pandas.DataFrame, callable)
        The sample, and the ``monitor_update(monitor, model)`` hook for ``run_batch``.
    """
    if sample_rows < 1:
        raise ValueError(f"sample_rows must be at least 1, got {sample_rows}")
    for col in (label_col, score_col, weight_col):
        if col is not None and col not in df.columns:
            raise ValueError(f"{what} has no column {col!r}; columns are {df.columns[:20]}")
    n = df.count()
    if n == 0:
        raise ValueError(f"{what} has no rows")
    sampled = df if n <= sample_rows else (
        df.sample(withReplacement=False, fraction=min(1.0, 1.1 * sample_rows / n), seed=seed)
          .limit(sample_rows))
    sample = sampled.toPandas()

    def update(monitor: CalibrationMonitor, model) -> MonitorStep:
        classes = [_python_value(c) for c in model.classes_]
        if len(classes) != 2:
            raise ValueError(f"the monitor loop watches binary models; this one has classes "
                             f"{classes}")
        label = F.col(label_col)
        y01 = (F.when(label == F.lit(classes[1]), F.lit(1))
               .when(label == F.lit(classes[0]), F.lit(0))
               .otherwise(F.raise_error(F.concat(
                   F.lit(f"{what}: label column {label_col!r} holds "),
                   F.coalesce(label.cast("string"), F.lit("null")),
                   F.lit(f", not one of the model's classes {classes}")))))
        batch = df.withColumn("__mlcal_y01", y01)
        return update_from_spark(monitor, batch, score_col, "__mlcal_y01", weight_col)

    return sample, update
