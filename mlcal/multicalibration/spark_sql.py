"""A multicalibration map as a Spark SQL column (built-in functions only, no Python UDF).

Each tree becomes a nested ``CASE WHEN`` whose leaves are the leaf values; the column is
``expit(((z0 + tree_1) + tree_2) + ...)`` with ``z0 = slope * (log s - log1p(-s)) +
intercept`` on the clamped score, using mlcal's deterministic log, log1p and expit written in
SQL arithmetic (:mod:`mlcal.spark._expressions`), and the trees added in Python's order, so the
column equals :meth:`MulticalibrationMap.__call__` bit for bit with ``exact=True``
(``exact=False``: the final expit uses Spark's ``exp``, within a few ulps).

Inputs: the score column (double, a probability) and one column per segment feature, by the
feature's name: numeric features are cast to double and compared with ``<=`` against the
exact double thresholds; categorical features are compared as strings with the stored
categories (a value outside them is the "other" category). Cast a categorical column to a
string as Python's ``str`` writes it (integers are the same; Spark writes booleans as
``true``/``false`` where Python writes ``True``/``False``). Unlike Python, SQL does not reject
NaN or out-of-range scores: check them upstream.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from mlcal.maps import BETA_EPS
from mlcal.multicalibration.map import FeatureSpec, MulticalibrationMap, Tree
from mlcal.spark._expressions import _expit, _let, log1p_column, log_column


def _membership(col: Column, spec: FeatureSpec, codes: tuple[int, ...]) -> Column:
    """``code(col) in codes`` on the string value."""
    other = len(spec.categories)
    known = [spec.categories[c] for c in codes if c < other]
    cond = col.isin(known) if known else F.lit(False)
    if other in codes:   # the "other" code: any value not among the categories
        cond = cond | ~col.isin(list(spec.categories))
    return cond


def _tree_column(tree: Tree, columns: list[Column], features: tuple[FeatureSpec, ...],
                 k: int = 0) -> Column:
    f = int(tree.feature[k])
    if f < 0:
        return F.lit(float(tree.value[k]))
    if features[f].kind == "categorical":
        cond = _membership(columns[f], features[f], tree.category_set[k])
    else:
        cond = columns[f] <= F.lit(float(tree.threshold[k]))
    return F.when(cond, _tree_column(tree, columns, features, int(tree.left[k]))).otherwise(
        _tree_column(tree, columns, features, int(tree.right[k])))


def multicalibration_column(m, score: Column | str, *, exact: bool = True) -> Column:
    """The calibrated probability of a fitted
    :class:`~mlcal.multicalibration.Multicalibration` (or its map) as a Spark column.

    Parameters
    ----------
    m : Multicalibration or MulticalibrationMap
    score : Column or str
        The base model's probability column.
    exact : bool, default=True
        Bit-identical to Python (mlcal's SQL expit) or the faster native-``exp`` expit.
    """
    m = getattr(m, "map_", m)
    if not isinstance(m, MulticalibrationMap):
        raise ValueError(f"expected a fitted Multicalibration or a MulticalibrationMap, got "
                         f"{type(m).__name__}")
    u = F.col(score) if isinstance(score, str) else score
    columns = [u.cast("double")]
    for spec in m.features[1:]:
        c = F.col(f"`{spec.name}`")
        columns.append(c.cast("double") if spec.kind == "numeric" else c.cast("string"))

    def start(s):
        return F.lit(m.slope) * (log_column(s) - log1p_column(-s)) + F.lit(m.intercept)
    # the trees stay outside the lambdas (plain expressions Spark code-generates), added to the
    # start one by one in Python's order
    z = _let(start, s=F.least(F.greatest(columns[0], F.lit(BETA_EPS)), F.lit(1.0 - BETA_EPS)))
    for tree in m.trees:
        z = z + _tree_column(tree, columns, m.features)
    return _expit(z, exact, bind=True)
