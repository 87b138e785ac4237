"""The canonical multicalibration map: a logit-affine start plus boosted trees on the score and
segment features, stored as plain JSON.

``p = expit(z)``, ``z = slope * logit(s) + intercept + sum_t leaf_t(s, features)``, where ``s``
is the base score clamped to ``[BETA_EPS, 1 - BETA_EPS]`` for the logit only (the trees split
on the score itself, so tree routing never depends on how a platform rounds a logarithm), the
logit is ``det_log(s) - det_log1p(-s)`` (mlcal's deterministic functions, the same bits on every
CPU) and the leaf values are added in tree order. A numeric node sends ``x <= threshold`` left
(thresholds are exact float64 data values); a categorical node sends the codes in its set left
(codes: :mod:`mlcal.multicalibration._features`).

Document (``"type": "multicalibration"``, ``"format_version": 1``)::

    {"type": "multicalibration", "format_version": 1, "slope": a, "intercept": b,
     "features": [{"name": "score", "kind": "score"},
                  {"name": "age", "kind": "numeric"},
                  {"name": "region", "kind": "categorical", "categories": ["east", "west"]}],
     "trees": [{"feature": [...], "threshold": [...], "category_set": [[...], ...],
                "left": [...], "right": [...], "value": [...]}, ...]}

Per tree, node 0 is the root; a leaf has ``feature = -1``, ``left = right = -1``, threshold 0
and an empty set; an internal node's children have larger indices than the node (so routing
always ends) and every node but the root has exactly one parent. Loading checks all of it,
plus finite numbers, codes in range, and size bounds (:data:`MAX_TREES`, :data:`MAX_NODES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlcal.maps._core import BETA_EPS, MAP_FORMAT_VERSION, MapFormatError, _short
from mlcal._solvers.detmath import det_expit_array, det_log1p_array, det_log_array
from mlcal._validation import as_scores
from mlcal.multicalibration._features import (SCORE_NAME, as_numeric, as_text,
                                              encode_categories, feature_columns)
from mlcal.multicalibration._trees import LEAF, forest_sum

KIND = "multicalibration"
FEATURE_KINDS = ("score", "numeric", "categorical")
#: bounds on a loaded document (a fit with the defaults stays far below them)
MAX_TREES = 10_000
MAX_NODES = 1 << 16
MAX_FEATURES = 1_000
MAX_CATEGORIES = 100_000
_TREE_FIELDS = ("feature", "threshold", "category_set", "left", "right", "value")


@dataclass(frozen=True)
class FeatureSpec:
    """One input of the trees: the base score, a numeric feature or a categorical feature
    (with its category list; any other value takes code ``len(categories)``)."""

    name: str
    kind: str
    categories: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "categorical":
            d["categories"] = list(self.categories)
        return d


@dataclass(frozen=True)
class Tree:
    """One regression tree as flat node arrays (see the module docstring)."""

    feature: np.ndarray
    threshold: np.ndarray
    category_set: tuple[tuple[int, ...], ...]
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.feature.size)

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature.tolist(), "threshold": self.threshold.tolist(),
                "category_set": [list(s) for s in self.category_set],
                "left": self.left.tolist(), "right": self.right.tolist(),
                "value": self.value.tolist()}


def logit_of_scores(s: np.ndarray) -> np.ndarray:
    """``ln s - ln(1 - s)`` of the scores clamped to ``[BETA_EPS, 1 - BETA_EPS]`` (detmath)."""
    sc = np.clip(np.ascontiguousarray(s, dtype=np.float64), BETA_EPS, 1.0 - BETA_EPS)
    return det_log_array(sc) - det_log1p_array(-sc)


def check_probability_scores(scores) -> np.ndarray:
    """Finite scores in [0, 1] (the base model's probabilities) or ``ValueError``."""
    s = as_scores(scores)
    if s.min() < 0.0 or s.max() > 1.0:
        raise ValueError(f"multicalibration takes the base model's probabilities in [0, 1]; "
                         f"got scores in [{s.min():.6g}, {s.max():.6g}]")
    return s


@dataclass(frozen=True, eq=False)
class MulticalibrationMap:
    """``expit(slope * logit(s) + intercept + sum of tree leaves)`` over the score and
    segment features (see the module docstring for the exact arithmetic).

    Parameters
    ----------
    slope, intercept : float
        The logit-affine start (a global Platt-on-logit fit, or 1 and 0).
    features : tuple of FeatureSpec
        The trees' inputs in index order; index 0 is the score.
    trees : tuple of Tree
        The boosted trees (leaf values include the learning rate).
    """

    slope: float
    intercept: float
    features: tuple[FeatureSpec, ...]
    trees: tuple[Tree, ...]

    kind = KIND
    #: the map reads the base model's probabilities as they are (recorded like a score map's)
    input_transform = "identity"

    def __post_init__(self) -> None:
        # the concatenated node arrays the scorer walks (absolute child indices)
        roots, feats, thr, lefts, rights, vals, starts, ends, codes = [], [], [], [], [], [], \
            [], [], []
        offset = n_codes = 0
        for tree in self.trees:
            roots.append(offset)
            feats.append(tree.feature)
            thr.append(tree.threshold)
            lefts.append(np.where(tree.left >= 0, tree.left + offset, LEAF))
            rights.append(np.where(tree.right >= 0, tree.right + offset, LEAF))
            vals.append(tree.value)
            for cat_set in tree.category_set:
                starts.append(n_codes)
                codes.extend(cat_set)
                n_codes += len(cat_set)
                ends.append(n_codes)
            offset += tree.n_nodes
        cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else \
            np.empty(0, dtype=dt)   # noqa: E731
        object.__setattr__(self, "_flat", (
            np.asarray(roots, dtype=np.int64), cat(feats, np.int64), cat(thr, np.float64),
            cat(lefts, np.int64), cat(rights, np.int64), cat(vals, np.float64),
            np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64),
            np.asarray(codes, dtype=np.float64),
            np.asarray([f.kind == "categorical" for f in self.features], dtype=np.bool_)))

    # -- scoring ----------------------------------------------------------------------------
    @property
    def feature_names(self) -> list[str]:
        """The segment features' names (without the score), in the order they are read."""
        return [f.name for f in self.features[1:]]

    @property
    def size(self) -> int:
        """Total number of tree nodes."""
        return int(sum(t.n_nodes for t in self.trees))

    def feature_matrix(self, scores, features) -> np.ndarray:
        """The (n, F) float64 matrix the trees read: the score, numeric features as they
        are, categorical features as codes. Columns are looked up by name."""
        s = check_probability_scores(scores)
        names, cols = feature_columns(features, s.size)
        by_name = dict(zip(names, cols))
        missing = [f.name for f in self.features[1:] if f.name not in by_name]
        if missing:
            raise ValueError(f"features: missing column(s) {missing} the map was fitted on "
                             f"(it reads {self.feature_names})")
        x = np.empty((s.size, len(self.features)))
        x[:, 0] = s
        for j, spec in enumerate(self.features[1:], start=1):
            col = by_name[spec.name]
            if spec.kind == "numeric":
                x[:, j] = as_numeric(col, spec.name)
            else:
                x[:, j] = encode_categories(as_text(col), list(spec.categories))
        return x

    def margin(self, scores, features=None) -> np.ndarray:
        """The log-odds ``z`` before the final sigmoid."""
        x = self.feature_matrix(scores, features)
        return self.margin_of_matrix(x)

    def margin_of_matrix(self, x: np.ndarray) -> np.ndarray:
        z0 = self.slope * logit_of_scores(x[:, 0]) + self.intercept
        return forest_sum(np.ascontiguousarray(x), z0, *self._flat)

    def __call__(self, scores, features=None) -> np.ndarray:
        """Calibrated probabilities for base scores and their segment features."""
        return det_expit_array(self.margin(scores, features))

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that :meth:`from_dict` turns back into an identical map."""
        return {"type": KIND, "format_version": MAP_FORMAT_VERSION, "slope": self.slope,
                "intercept": self.intercept, "features": [f.to_dict() for f in self.features],
                "trees": [t.to_dict() for t in self.trees]}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))

    @classmethod
    def from_dict(cls, doc: Any) -> MulticalibrationMap:
        """Rebuild and validate a map document (:class:`~mlcal.maps.MapFormatError` naming
        the first problem); no code runs."""
        where = f"{KIND} map"
        if not isinstance(doc, dict) or doc.get("type") != KIND:
            raise MapFormatError(f"a {where} document must be an object with type {KIND!r}")
        unknown = sorted(set(doc) - {"type", "format_version", "slope", "intercept",
                                     "features", "trees"})
        if unknown:
            raise MapFormatError(f"{where}: unknown field(s) {_short(unknown[0])}")
        version = doc.get("format_version")
        if type(version) is not int or version != MAP_FORMAT_VERSION:
            raise MapFormatError(f"{where}: unsupported format_version {_short(version)}")
        slope = _finite(doc.get("slope"), "slope", where)
        intercept = _finite(doc.get("intercept"), "intercept", where)
        features = _read_features(doc.get("features"), where)
        raw_trees = doc.get("trees")
        if not isinstance(raw_trees, list) or len(raw_trees) > MAX_TREES:
            raise MapFormatError(f"{where}: 'trees' must be a list of at most {MAX_TREES} trees")
        trees = tuple(_read_tree(t, features, f"{where}: tree {i}")
                      for i, t in enumerate(raw_trees))
        return cls(slope, intercept, features, trees)


def _finite(raw: Any, key: str, where: str) -> float:
    if not isinstance(raw, (int, float)) or isinstance(raw, bool) or \
            not np.isfinite(float(raw)):
        raise MapFormatError(f"{where}: {key!r} must be a finite number, got {_short(raw)}")
    return float(raw)


def _read_features(raw: Any, where: str) -> tuple[FeatureSpec, ...]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_FEATURES:
        raise MapFormatError(f"{where}: 'features' must be a list of 1 to {MAX_FEATURES} "
                             "feature objects")
    specs, seen = [], set()
    for j, f in enumerate(raw):
        at = f"{where}: feature {j}"
        if not isinstance(f, dict) or set(f) - {"name", "kind", "categories"}:
            raise MapFormatError(f"{at} must be an object with name, kind (and categories)")
        name, kind = f.get("name"), f.get("kind")
        if not isinstance(name, str) or not name or len(name) > 256 or name in seen:
            raise MapFormatError(f"{at}: name must be a new non-empty string, got "
                                 f"{_short(name)}")
        seen.add(name)
        if kind not in FEATURE_KINDS or (kind == "score") != (j == 0) or \
                (j == 0 and name != SCORE_NAME):
            raise MapFormatError(f"{at}: kind {_short(kind)} is not allowed here (feature 0 is "
                                 f"{{'name': 'score', 'kind': 'score'}}, the others 'numeric' "
                                 "or 'categorical')")
        categories: tuple[str, ...] = ()
        if kind == "categorical":
            cats = f.get("categories")
            if not isinstance(cats, list) or len(cats) > MAX_CATEGORIES or \
                    not all(isinstance(c, str) for c in cats) or len(set(cats)) != len(cats):
                raise MapFormatError(f"{at}: categories must be a list of distinct strings")
            categories = tuple(cats)
        elif "categories" in f:
            raise MapFormatError(f"{at}: a {kind} feature has no categories")
        specs.append(FeatureSpec(name, kind, categories))
    return tuple(specs)


def _int_list(raw: Any, key: str, at: str) -> np.ndarray:
    if not isinstance(raw, list) or not all(type(v) is int for v in raw):
        raise MapFormatError(f"{at}: {key!r} must be a list of integers")
    if any(abs(v) > MAX_NODES * 4 for v in raw):
        raise MapFormatError(f"{at}: {key!r} holds an out-of-range index")
    return np.asarray(raw, dtype=np.int64)


def _float_list(raw: Any, key: str, at: str) -> np.ndarray:
    if not isinstance(raw, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
        raise MapFormatError(f"{at}: {key!r} must be a list of numbers")
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except OverflowError:
        raise MapFormatError(f"{at}: {key!r} holds non-finite numbers") from None
    if not np.isfinite(arr).all():
        raise MapFormatError(f"{at}: {key!r} holds non-finite numbers")
    return arr


def _read_tree(raw: Any, features: tuple[FeatureSpec, ...], at: str) -> Tree:
    if not isinstance(raw, dict) or set(raw) != set(_TREE_FIELDS):
        raise MapFormatError(f"{at} must be an object with exactly the fields "
                             f"{', '.join(_TREE_FIELDS)}")
    n = len(raw["feature"]) if isinstance(raw["feature"], list) else -1
    if not 1 <= n <= MAX_NODES:
        raise MapFormatError(f"{at}: a tree has 1 to {MAX_NODES} nodes")
    feature = _int_list(raw["feature"], "feature", at)
    left = _int_list(raw["left"], "left", at)
    right = _int_list(raw["right"], "right", at)
    threshold = _float_list(raw["threshold"], "threshold", at)
    value = _float_list(raw["value"], "value", at)
    sets = raw["category_set"]
    if not isinstance(sets, list) or not all(isinstance(s, list) for s in sets):
        raise MapFormatError(f"{at}: 'category_set' must be a list of lists")
    if {left.size, right.size, threshold.size, value.size, len(sets)} != {n}:
        raise MapFormatError(f"{at}: the node arrays must all have {n} entries")
    parents = np.zeros(n, dtype=np.int64)
    category_set = []
    for k in range(n):
        f, lo, hi, s = int(feature[k]), int(left[k]), int(right[k]), sets[k]
        if f == LEAF:
            if lo != LEAF or hi != LEAF or threshold[k] != 0.0 or s:
                raise MapFormatError(f"{at}: leaf {k} must have left = right = -1, threshold 0 "
                                     "and an empty category set")
            category_set.append(())
            continue
        if not 0 <= f < len(features):
            raise MapFormatError(f"{at}: node {k} splits on feature {f}, not one of the "
                                 f"{len(features)} features")
        if not (k < lo < n and k < hi < n and lo != hi):
            raise MapFormatError(f"{at}: node {k} has children {lo}, {hi}; children must be "
                                 "two distinct nodes after their parent")
        parents[lo] += 1
        parents[hi] += 1
        if value[k] != 0.0:
            raise MapFormatError(f"{at}: internal node {k} must have value 0")
        if features[f].kind == "categorical":
            n_codes = len(features[f].categories) + 1
            if threshold[k] != 0.0 or not s or not all(type(c) is int for c in s) or \
                    s != sorted(set(s)) or s[0] < 0 or s[-1] >= n_codes:
                raise MapFormatError(f"{at}: categorical node {k} needs threshold 0 and a "
                                     f"non-empty increasing set of codes in [0, {n_codes})")
            category_set.append(tuple(s))
        else:
            if s:
                raise MapFormatError(f"{at}: numeric node {k} has a category set")
            category_set.append(())
    if parents[0] != 0 or (parents[1:] != 1).any():
        bad = int(np.flatnonzero(np.r_[parents[0] != 0, parents[1:] != 1])[0])
        raise MapFormatError(f"{at}: node {bad} must have exactly one parent (the root none)")
    for arr in (feature, threshold, left, right, value):
        arr.flags.writeable = False
    return Tree(feature, threshold, tuple(category_set), left, right, value)
