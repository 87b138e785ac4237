"""The segmented map: a shared binary map followed by a per-segment logit slope and offset.

``SegmentedMap(inner, columns, keys, slopes, offsets, unseen)`` evaluates, for a row with score
``s`` in segment ``g``::

    q = inner(s)                                   # the shared map (input transform included)
    p = expit(slope_g * logit(q) + offset_g)       # 0 < q < 1
    p = q                                          # q exactly 0 or 1, or an unseen segment
                                                   # under unseen="shared"

Numerics (the same in Python, Spark SQL and the Java evaluator): ``logit(q) = det_log(q) -
det_log1p(-q)``, ``z = slope * logit(q) + offset`` (one product, one sum, in that order),
``p = det_expit(z)``, with mlcal's deterministic functions (:mod:`mlcal._solvers.detmath`). With
``slope == 1`` the product is exact, so a segment row gets the same bits as an
:class:`~mlcal.maps.offset.OffsetMap` with ``delta = offset``. Slopes are positive, so the map
keeps the inner map's order within a segment and inner values of exactly 0 or 1 stay 0 or 1.

Segment keys and their types are described in :mod:`mlcal.maps.segment_keys`. The JSON form is
documented in ``docs/segments.md`` (section "JSON format"); :meth:`SegmentedMap.from_dict`
validates every field and refuses unknown ones.

The map takes two inputs (scores and segments), so it is not one of the score-only kinds in
:data:`mlcal.maps.MAP_TYPES`: :func:`mlcal.maps.map_from_dict` refuses a ``"segmented"``
document, and only a ``"segmented"`` calibrator document
(:class:`mlcal.calibrators.segmented.SegmentedCalibrator`) holds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from mlcal.maps._core import (MAP_FORMAT_VERSION, MapFormatError, _BaseMap, _float_array,
                             _short, map_from_dict)
from mlcal._solvers.detmath import det_expit, det_log, det_log1p
from mlcal._validation import as_scores
from mlcal.maps.offset import OFFSET_INNER_KINDS
from mlcal.maps.segment_keys import (COLUMN_TYPES, INT64_MAX, INT64_MIN, MAX_KEY_CHARS,
                                MAX_SEGMENT_COLUMNS, SegmentKeyError, encode_rows,
                                segment_columns_of)

SEGMENTED_KIND = "segmented"
#: what a row of an unseen segment gets: the shared map's probability, or an error
UNSEEN_POLICIES = ("shared", "raise")
#: the most segments a map holds (a table of a million segments is ~40 MB of JSON)
MAX_SEGMENTS = 1_000_000
_FIELDS = ("type", "format_version", "input_transform", "domain", "inner", "columns", "keys",
           "slopes", "offsets", "unseen")


class UnseenSegmentError(KeyError):
    """A row's segment was not seen at fit time and the map's ``unseen`` policy is
    ``"raise"``."""

    def __str__(self) -> str:   # KeyError would print the repr of its message
        return str(self.args[0]) if self.args else ""


@njit(cache=True, nogil=True)
def segmented_probabilities(q: np.ndarray, index: np.ndarray, slopes: np.ndarray,
                            offsets: np.ndarray) -> np.ndarray:
    """Per row ``expit(slopes[k] * logit(q) + offsets[k])`` with ``k = index[i]``; rows with
    ``k < 0`` (unseen) or ``q`` outside (0, 1) keep ``q``."""
    out = np.empty(q.shape[0])
    for i in range(q.shape[0]):
        p = q[i]
        k = index[i]
        if k >= 0 and p > 0.0 and p < 1.0:
            p = det_expit(slopes[k] * (det_log(p) - det_log1p(-p)) + offsets[k])
        out[i] = p
    return out


def _check_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_KEY_CHARS:
        raise MapFormatError(f"{where}: a column name must be a non-empty string of at most "
                             f"{MAX_KEY_CHARS} characters, got {_short(name)}")
    return name


def _key_value(v: Any, column_type: str, where: str) -> Any:
    ok = {"string": isinstance(v, str) and len(v) <= MAX_KEY_CHARS,
          "integer": type(v) is int and INT64_MIN <= v <= INT64_MAX,
          "boolean": type(v) is bool}[column_type]
    if not ok:
        article = "an" if column_type == "integer" else "a"
        raise MapFormatError(f"{where}: a key of {article} {column_type} column must be "
                             f"{article} {column_type}"
                             + (f" of at most {MAX_KEY_CHARS} characters"
                                                 if column_type == "string" else "")
                             + (" in the signed 64-bit range" if column_type == "integer"
                                else "") + f", got {_short(v)}")
    return v


def _key_repr(key: tuple | None) -> str:
    from mlcal.calibrators._params import short_repr

    return "with a missing value" if key is None else short_repr(list(key))


def _column_ok(values: list, column_type: str) -> bool:
    """Whether every key value of a column has the column's type (and bounds)."""
    if column_type == "string":
        return all(isinstance(v, str) for v in values) and \
            max(map(len, values), default=0) <= MAX_KEY_CHARS
    if column_type == "integer":
        return all(type(v) is int for v in values) and \
            INT64_MIN <= min(values, default=0) and max(values, default=0) <= INT64_MAX
    return all(type(v) is bool for v in values)


@dataclass(frozen=True, eq=False)
class SegmentedMap:
    """A shared binary map followed by a per-segment logit slope and offset.

    Parameters
    ----------
    inner : StepMap, LinearMap, SigmoidMap or BetaMap
        The shared map (its input transform and domain are the segmented map's).
    columns : sequence of (name, type) pairs
        Segment column names (unique, non-empty) and types (``"string"``, ``"integer"`` or
        ``"boolean"``).
    keys : sequence of tuples
        One key per segment (one value per column, of the column's type); unique.
    slopes, offsets : array of shape (n_segments,)
        Finite per-segment slopes (> 0) and offsets on the log-odds.
    unseen : {"shared", "raise"}, default="shared"
        A row whose segment is not in ``keys`` (or has a missing key value) gets the shared
        map's probability, or raises :class:`UnseenSegmentError`.
    """

    inner: Any
    columns: tuple = ()
    keys: tuple = ()
    slopes: np.ndarray = field(default_factory=lambda: np.empty(0))
    offsets: np.ndarray = field(default_factory=lambda: np.empty(0))
    unseen: str = "shared"

    kind = SEGMENTED_KIND

    def __post_init__(self) -> None:
        where = "segmented map"
        inner = self.inner
        if not isinstance(inner, _BaseMap) or inner.kind not in OFFSET_INNER_KINDS:
            raise MapFormatError(f"{where}: the shared (inner) map must be one of "
                                 f"{OFFSET_INNER_KINDS}, got "
                                 f"{_short(getattr(inner, 'kind', type(inner).__name__))}")
        cols = tuple((_check_name(n, where), t) for n, t in self.columns)
        if not 1 <= len(cols) <= MAX_SEGMENT_COLUMNS:
            raise MapFormatError(f"{where}: needs 1 to {MAX_SEGMENT_COLUMNS} segment columns, "
                                 f"got {len(cols)}")
        if len({n for n, _ in cols}) != len(cols):
            raise MapFormatError(f"{where}: segment column names repeat")
        for n, t in cols:
            if t not in COLUMN_TYPES:
                raise MapFormatError(f"{where}: column {n!r} has type {_short(t)}; expected one "
                                     f"of {COLUMN_TYPES}")
        keys = tuple(tuple(k) for k in self.keys)
        if not 1 <= len(keys) <= MAX_SEGMENTS:
            raise MapFormatError(f"{where}: needs 1 to {MAX_SEGMENTS} segments, got "
                                 f"{len(keys)}")
        bad_width = next((k for k in keys if len(k) != len(cols)), None)
        if bad_width is not None:
            raise MapFormatError(f"{where}: a key has {len(bad_width)} values for {len(cols)} "
                                 "columns")
        for j, (_, t) in enumerate(cols):   # a whole column per pass: builtins, no calls
            values = [k[j] for k in keys]
            if not _column_ok(values, t):
                bad = next(v for v in values if not _column_ok([v], t))
                _key_value(bad, t, where)   # raises, naming the value
        index = {k: i for i, k in enumerate(keys)}
        if len(index) != len(keys):   # column types are fixed, so True and 1 never meet
            seen: set = set()
            dup = next(k for k in keys if k in seen or seen.add(k))
            raise MapFormatError(f"{where}: segment key {_key_repr(dup)} appears twice")
        slopes = np.array(self.slopes, dtype=np.float64).reshape(-1)
        offsets = np.array(self.offsets, dtype=np.float64).reshape(-1)
        if slopes.size != len(keys) or offsets.size != len(keys):
            raise MapFormatError(f"{where}: {len(keys)} segments need as many slopes and "
                                 f"offsets, got {slopes.size} and {offsets.size}")
        if not (np.isfinite(slopes).all() and np.isfinite(offsets).all()):
            raise MapFormatError(f"{where}: slopes and offsets must be finite")
        if slopes.size and not (slopes > 0.0).all():
            i = int(np.flatnonzero(~(slopes > 0.0))[0])
            raise MapFormatError(f"{where}: slopes must be > 0 (the map keeps the shared "
                                 f"map's order), slopes[{i}] = {slopes[i]!r}")
        if self.unseen not in UNSEEN_POLICIES:
            raise MapFormatError(f"{where}: unseen must be one of {UNSEEN_POLICIES}, got "
                                 f"{_short(self.unseen)}")
        slopes.flags.writeable = False
        offsets.flags.writeable = False
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "slopes", slopes)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "_index", index)

    # -- shape -----------------------------------------------------------------------------
    @property
    def input_transform(self) -> str:
        """The shared map's input transform."""
        return self.inner.input_transform

    @property
    def domain(self) -> tuple[float, float] | None:
        """The shared map's score domain."""
        return self.inner.domain

    @property
    def column_names(self) -> list[str]:
        """Segment column names, in key order."""
        return [n for n, _ in self.columns]

    @property
    def column_types(self) -> list[str]:
        """Segment column types, in key order."""
        return [t for _, t in self.columns]

    @property
    def size(self) -> int:
        """The shared map's size plus two parameters per segment."""
        return int(self.inner.size) + 2 * len(self.keys)

    # -- evaluation ------------------------------------------------------------------------
    def segment_index(self, segments: Any) -> np.ndarray:
        """Row index into :attr:`keys` of each row's segment, ``-1`` for an unseen one (or one
        with a missing value); raises :class:`UnseenSegmentError` under ``unseen="raise"``.

        ``segments`` is a DataFrame holding the segment columns (by name; other columns are
        ignored), a Series or 1-D array-like (one segment column), or a 2-D array with one
        column per segment column, in :attr:`column_names` order.
        """
        names, cols = self._select(segments)
        group, keys, _ = encode_rows(names, cols, self.column_types)
        index = self._index
        lut = np.fromiter((index.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
        out = np.where(group >= 0, lut[np.maximum(group, 0)] if keys else -1, -1)
        if self.unseen == "raise" and (out < 0).any():
            i = int(np.flatnonzero(out < 0)[0])
            key = keys[group[i]] if group[i] >= 0 else None
            raise UnseenSegmentError(f"row {i}: segment {_key_repr(key)} "
                                     f"(columns {self.column_names}) was not seen when the "
                                     "calibrator was fitted (unseen='raise')")
        return out

    def _select(self, segments: Any) -> tuple[list[str], list[np.ndarray]]:
        import pandas as pd

        want = self.column_names
        if isinstance(segments, pd.DataFrame):
            missing = [c for c in want if c not in segments.columns]
            if missing:
                raise SegmentKeyError(f"segment column(s) {missing} are missing from the input "
                                      f"(columns: {_short([str(c) for c in segments.columns])})")
            return want, [segments[c].to_numpy(dtype=object) for c in want]
        names, cols = segment_columns_of(segments)
        if len(cols) != len(want):
            raise SegmentKeyError(f"segments has {len(cols)} column(s); this map keys on "
                                  f"{len(want)}: {want}")
        return want, cols

    def __call__(self, scores: Any, segments: Any) -> np.ndarray:
        """Calibrated probabilities for ``scores`` in ``segments`` (see the module notes)."""
        s = as_scores(scores)
        index = self.segment_index(segments)
        if index.shape[0] != s.shape[0]:
            raise SegmentKeyError(f"{s.shape[0]} scores but {index.shape[0]} segment rows")
        q = np.ascontiguousarray(self.inner(s), dtype=np.float64)
        return segmented_probabilities(q, index, self.slopes, self.offsets)

    # -- JSON ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready document (see ``docs/segments.md``); :meth:`from_dict` reads it back
        into an identical map."""
        return {"type": SEGMENTED_KIND, "format_version": MAP_FORMAT_VERSION,
                "input_transform": self.input_transform,
                "domain": None if self.domain is None else list(self.domain),
                "inner": self.inner.to_dict(),
                "columns": [{"name": n, "type": t} for n, t in self.columns],
                "keys": [[k[j] for k in self.keys] for j in range(len(self.columns))],
                "slopes": self.slopes.tolist(), "offsets": self.offsets.tolist(),
                "unseen": self.unseen}

    @classmethod
    def from_dict(cls, doc: Any) -> SegmentedMap:
        """Rebuild and validate a map from :meth:`to_dict` output (:class:`MapFormatError`
        naming the first problem; no code runs)."""
        where = "segmented map"
        if not isinstance(doc, dict):
            raise MapFormatError(f"{where}: must be a JSON object, got {type(doc).__name__}")
        if doc.get("type") != SEGMENTED_KIND:
            raise MapFormatError(f"expected a {SEGMENTED_KIND!r} map, got type "
                                 f"{_short(doc.get('type'))}")
        unknown = sorted(k for k in doc if k not in _FIELDS)
        if unknown:
            raise MapFormatError(f"{where}: unknown field(s) "
                                 f"{', '.join(repr(k[:40]) for k in unknown[:5])}")
        missing = [k for k in _FIELDS if k not in doc]
        if missing:
            raise MapFormatError(f"{where}: missing field(s) {missing}")
        version = doc["format_version"]
        if type(version) is not int or version != MAP_FORMAT_VERSION:
            raise MapFormatError(f"{where}: unsupported format_version {_short(version)} "
                                 f"(this mlcal reads version {MAP_FORMAT_VERSION})")
        raw_inner = doc["inner"]
        inner_kind = raw_inner.get("type") if isinstance(raw_inner, dict) else raw_inner
        if not isinstance(raw_inner, dict) or inner_kind not in OFFSET_INNER_KINDS:
            raise MapFormatError(f"{where}: field 'inner' must be a map of type "
                                 f"{OFFSET_INNER_KINDS}, got {_short(inner_kind)}")
        inner = map_from_dict(raw_inner)
        domain = doc["domain"]
        if doc["input_transform"] != inner.input_transform or \
                domain != (None if inner.domain is None else list(inner.domain)):
            raise MapFormatError(f"{where}: input_transform/domain "
                                 f"({_short(doc['input_transform'])}, {_short(domain)}) "
                                 "differ from the inner map's "
                                 f"({inner.input_transform!r}, {inner.domain!r})")
        raw_cols = doc["columns"]
        if not isinstance(raw_cols, list) or not raw_cols or \
                len(raw_cols) > MAX_SEGMENT_COLUMNS:
            raise MapFormatError(f"{where}: 'columns' must be a list of 1 to "
                                 f"{MAX_SEGMENT_COLUMNS} objects")
        cols = []
        for c in raw_cols:
            if not isinstance(c, dict) or sorted(c) != ["name", "type"]:
                raise MapFormatError(f"{where}: each of 'columns' must be an object with "
                                     "exactly the fields 'name' and 'type'")
            cols.append((c["name"], c["type"]))
        raw_keys = doc["keys"]
        if not isinstance(raw_keys, list) or len(raw_keys) != len(cols) or \
                not all(isinstance(k, list) for k in raw_keys):
            raise MapFormatError(f"{where}: 'keys' must be a list of {len(cols)} lists (one "
                                 "per column)")
        n = len(raw_keys[0])
        if any(len(k) != n for k in raw_keys):
            raise MapFormatError(f"{where}: the key lists of the columns differ in length: "
                                 f"{[len(k) for k in raw_keys][:MAX_SEGMENT_COLUMNS]}")
        if not 1 <= n <= MAX_SEGMENTS:
            raise MapFormatError(f"{where}: needs 1 to {MAX_SEGMENTS} segments, got {n}")
        slopes = _float_array(doc, "slopes", where)
        offsets = _float_array(doc, "offsets", where)
        if not isinstance(doc["unseen"], str):
            raise MapFormatError(f"{where}: unseen must be one of {UNSEEN_POLICIES}, got "
                                 f"{_short(doc['unseen'])}")
        return cls(inner, tuple(cols), tuple(zip(*raw_keys)), slopes, offsets, doc["unseen"])

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))


@dataclass(frozen=True)
class LookupStep:
    """One column of the exact key lookup that ONNX and Spark SQL build (see
    :func:`lookup_plan`): the column's sorted distinct key values ``uniques`` map to ``codes``;
    from the second column on, the previous index ``i`` and this column's code ``c`` are combined
    as ``i * len(uniques) + c`` and looked up in ``combined`` -> ``target`` (absent: unseen)."""

    uniques: list
    codes: list
    combined: list | None = None
    target: list | None = None


def lookup_plan(m: "SegmentedMap") -> list[LookupStep]:
    """The integer lookups that take a row's typed segment values to its index into
    ``m.keys`` (the ONNX and Spark SQL routes build their ops from it; no hashing, no float
    keys). One column: the value's code is the segment's index. Several: each column's value
    becomes its position among the column's distinct values; positions are combined one column
    at a time (mixed radix) and looked up among the key prefixes that exist, the last lookup
    giving the index. Every intermediate number is below (prefixes x distinct values), so it
    stays well inside int64."""
    types = m.column_types
    steps: list[LookupStep] = []
    prefixes: dict[tuple, int] = {}
    for j in range(len(types)):
        uniques = sorted({k[j] for k in m.keys})
        # one column: straight to the segment index; else the value's position in uniques
        codes = ([m.keys.index((v,)) for v in uniques] if len(types) == 1
                 else list(range(len(uniques))))
        if j == 0:
            prefixes = {(v,): i for i, v in enumerate(uniques)}
            steps.append(LookupStep(uniques, codes))
            continue
        position = {v: i for i, v in enumerate(uniques)}
        last = j == len(types) - 1
        new: dict[tuple, int] = {}
        combined, target = [], []
        for key_index, k in enumerate(m.keys):
            prefix = k[:j + 1]
            if prefix in new and not last:
                continue
            new[prefix] = key_index if last else len(new)
            combined.append(prefixes[k[:j]] * len(uniques) + position[k[j]])
            target.append(new[prefix])
        steps.append(LookupStep(uniques, codes, combined, target))
        prefixes = new
    return steps
