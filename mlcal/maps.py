"""The canonical calibration maps.

Every fitted calibrator reduces to exactly one of these, so prediction, JSON artifacts, ONNX
graphs and plots are written once:

* :class:`StepMap` -- ``values[searchsorted(thresholds, s, side="right")]``
* :class:`LinearMap` -- ``interp(s, knots, values)``, flat outside the first/last knot
* :class:`SigmoidMap` -- ``1 / (1 + exp(a * s + b))``
* :class:`BetaMap` -- ``expit(a * ln(s) - b * ln(1 - s) + c)`` on probability scores clamped to
  ``[BETA_EPS, 1 - BETA_EPS]`` (beta calibration, Platt on log-odds, temperature scaling)

A map also records its *input transform* (``"identity"`` or ``"sigmoid"``, the logistic function
applied to raw scores such as SVM margins before the map) and the score *domain* it was fitted
on. Outputs always lie in [0, 1].

Multiclass maps (:class:`MulticlassMap`, one-vs-rest binary maps plus a normalisation rule, and
:class:`SoftmaxAffineMap`, temperature/vector/matrix scaling) live in :mod:`mlcal.multiclass_maps`
and are re-exported here; they take an (n, K) score matrix.

The dict form (``to_dict`` / :func:`map_from_dict`) is plain JSON data with a format version;
loading validates every field and never executes code.

Fitted maps are capped in size (:data:`DEFAULT_MAX_MAP_SIZE` bins or knots unless a calibrator's
``max_map_size`` says otherwise) by :func:`reduce_map`, which reports the exact sup-norm error
of the reduction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import singledispatch
from typing import Any, ClassVar

import numpy as np

from mlcal._dispatch import registered_types
from mlcal._solvers.detmath import det_expit_array, det_log1p_array, det_log_array
from mlcal._solvers.map_reduction import reduce_linear, reduce_step
from mlcal._validation import as_scores

MAP_FORMAT_VERSION = 1
INPUT_TRANSFORMS = ("identity", "sigmoid")
#: BetaMap clamps its (transformed) scores to [BETA_EPS, 1 - BETA_EPS] before the logs: a power
#: of two, so both ends are exact in float64 and 1 - BETA_EPS is computed exactly; ~1e-12, so
#: |ln s| and |ln(1 - s)| stay below 40 ln 2 = 27.7 and a score of exactly 0 or 1 cannot get an
#: unbounded lever in the fit
BETA_EPS = 2.0 ** -40
#: default cap on a fitted map's size (bins of a StepMap, knots of a LinearMap); see reduce_map
DEFAULT_MAX_MAP_SIZE = 10_000


class MapFormatError(ValueError):
    """A serialised map is malformed, of an unknown type or of an unsupported version."""


def _short(value: Any) -> str:
    """A bounded repr for error messages about untrusted documents."""
    if isinstance(value, int) and abs(value) > 10 ** 60:
        return "<a huge integer>"
    text = repr(value) if isinstance(value, (str, int, float, type(None))) else \
        f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def apply_input_transform(scores: np.ndarray, transform: str) -> np.ndarray:
    """Apply a map's input transform to already-validated scores."""
    if transform == "identity":
        return scores
    if transform == "sigmoid":
        # mlcal's own expit: the transformed scores become the map's knots, and libm's exp
        # (behind scipy's expit) rounds differently on CPUs with and without FMA
        return det_expit_array(np.ascontiguousarray(scores, dtype=np.float64))
    raise ValueError(f"unknown input transform {transform!r}; expected one of {INPUT_TRANSFORMS}")


def _float_array(doc: dict, key: str, where: str) -> np.ndarray:
    if key not in doc:
        raise MapFormatError(f"{where}: missing field {key!r}")
    raw = doc[key]
    if not isinstance(raw, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
        raise MapFormatError(f"{where}: field {key!r} must be a list of numbers")
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except OverflowError:   # an integer beyond the float range
        raise MapFormatError(f"{where}: field {key!r} contains non-finite numbers") from None
    if not np.isfinite(arr).all():
        raise MapFormatError(f"{where}: field {key!r} contains non-finite numbers")
    return arr


def _float_scalar(doc: dict, key: str, where: str) -> float:
    raw = doc.get(key)
    if not isinstance(raw, (int, float)) or isinstance(raw, bool):
        raise MapFormatError(f"{where}: field {key!r} must be a finite number")
    try:
        value = float(raw)
    except OverflowError:   # an integer beyond the float range
        value = float("inf")
    if not np.isfinite(value):
        raise MapFormatError(f"{where}: field {key!r} must be a finite number")
    return value


def _check_increasing(arr: np.ndarray, what: str, where: str) -> None:
    if arr.size > 1 and not (np.diff(arr) > 0).all():
        raise MapFormatError(f"{where}: {what} must be strictly increasing")


def _check_unit_values(values: np.ndarray, where: str) -> None:
    if values.size and (values.min() < 0.0 or values.max() > 1.0):
        raise MapFormatError(f"{where}: values must lie in [0, 1]")


#: The kind table: ``"type"`` field of a map document -> map class. Each concrete map class
#: enters itself on definition (``_BaseMap.__init_subclass__``), so :func:`map_from_dict` knows
#: every map type without a list to keep in step.
MAP_TYPES: dict[str, type] = {}


@dataclass(frozen=True, eq=False)
class _BaseMap:
    """Fields and behaviour shared by all maps.

    A new map type is a frozen dataclass subclass with its own unique ``kind`` that implements
    ``size``, ``_evaluate``, ``to_dict`` and ``_from_dict``; defining it enters it in
    :data:`MAP_TYPES`. The other consumers dispatch on the class, one registration each:
    ``mlcal.onnx._maps.map_subgraph`` (ONNX nodes), ``mlcal.onnx._bounds.map_error_bound``
    (export error bound) and ``mlcal.plotting.map_breaks`` (break points drawn sharply).
    """

    kind: ClassVar[str] = ""
    input_transform: str = field(default="identity", kw_only=True)
    domain: tuple[float, float] | None = field(default=None, kw_only=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if not isinstance(kind, str) or not kind:
            # an inherited kind would write documents that load back as the parent class
            raise TypeError(f"map class {cls.__name__} must define its own non-empty 'kind'")
        taken = MAP_TYPES.get(kind)
        if taken is not None and (taken.__module__, taken.__qualname__) != \
                (cls.__module__, cls.__qualname__):   # the same class again: a module reload
            raise TypeError(f"map kind {kind!r} of {cls.__name__} is already taken by "
                            f"{taken.__module__}.{taken.__qualname__}")
        MAP_TYPES[kind] = cls

    def __post_init__(self) -> None:
        if self.input_transform not in INPUT_TRANSFORMS:
            raise MapFormatError(f"{self.kind} map: unknown input_transform "
                                 f"{self.input_transform!r}; expected one of {INPUT_TRANSFORMS}")
        if self.domain is not None:
            lo, hi = (float(v) for v in self.domain)
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise MapFormatError(f"{self.kind} map: domain must be two finite numbers lo <= hi")
            object.__setattr__(self, "domain", (lo, hi))

    def __call__(self, scores) -> np.ndarray:
        """Calibrated probabilities for ``scores``; NaN or infinite scores raise ``ValueError``."""
        s = apply_input_transform(as_scores(scores), self.input_transform)
        return self._evaluate(s)

    def _evaluate(self, s: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _common_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "format_version": MAP_FORMAT_VERSION,
                "input_transform": self.input_transform,
                "domain": None if self.domain is None else list(self.domain)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that :func:`map_from_dict` turns back into an identical map."""
        raise NotImplementedError  # pragma: no cover

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> _BaseMap:
        """Build the map from its own fields of a document whose common fields
        (``common``: input_transform, domain) :func:`map_from_dict` has validated."""
        raise NotImplementedError  # pragma: no cover

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))


@dataclass(frozen=True, eq=False)
class StepMap(_BaseMap):
    """Piecewise-constant map: ``values[searchsorted(thresholds, s, side="right")]``.

    Parameters
    ----------
    thresholds : array of shape (K-1,)
        Strictly increasing cut points. A score equal to a cut takes the upper bin's value.
    values : array of shape (K,)
        Bin probabilities in [0, 1].
    """

    kind: ClassVar[str] = "step"
    thresholds: np.ndarray = field(default_factory=lambda: np.empty(0))
    values: np.ndarray = field(default_factory=lambda: np.empty(0))

    def __post_init__(self) -> None:
        super().__post_init__()
        t = np.array(self.thresholds, dtype=np.float64).reshape(-1)
        v = np.array(self.values, dtype=np.float64).reshape(-1)
        where = "step map"
        if v.size == 0:
            raise MapFormatError(f"{where}: needs at least one value")
        if t.size != v.size - 1:
            raise MapFormatError(f"{where}: {t.size} thresholds need {t.size + 1} values, "
                                 f"got {v.size}")
        if not (np.isfinite(t).all() and np.isfinite(v).all()):
            raise MapFormatError(f"{where}: thresholds and values must be finite")
        _check_increasing(t, "thresholds", where)
        _check_unit_values(v, where)
        t.flags.writeable = False
        v.flags.writeable = False
        object.__setattr__(self, "thresholds", t)
        object.__setattr__(self, "values", v)

    @property
    def size(self) -> int:
        """Number of bins (values)."""
        return int(self.values.size)

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        return self.values[np.searchsorted(self.thresholds, s, side="right")]

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(thresholds=self.thresholds.tolist(), values=self.values.tolist())
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> StepMap:
        return cls(_float_array(doc, "thresholds", where), _float_array(doc, "values", where),
                   **common)


@dataclass(frozen=True, eq=False)
class LinearMap(_BaseMap):
    """Piecewise-linear map through ``(knots, values)``, constant outside the first/last knot.

    Parameters
    ----------
    knots : array of shape (K,)
        Strictly increasing abscissae (K >= 1).
    values : array of shape (K,)
        Probabilities in [0, 1] at the knots.
    """

    kind: ClassVar[str] = "linear"
    knots: np.ndarray = field(default_factory=lambda: np.empty(0))
    values: np.ndarray = field(default_factory=lambda: np.empty(0))

    def __post_init__(self) -> None:
        super().__post_init__()
        x = np.array(self.knots, dtype=np.float64).reshape(-1)
        v = np.array(self.values, dtype=np.float64).reshape(-1)
        where = "linear map"
        if x.size == 0:
            raise MapFormatError(f"{where}: needs at least one knot")
        if x.size != v.size:
            raise MapFormatError(f"{where}: {x.size} knots but {v.size} values")
        if not (np.isfinite(x).all() and np.isfinite(v).all()):
            raise MapFormatError(f"{where}: knots and values must be finite")
        _check_increasing(x, "knots", where)
        _check_unit_values(v, where)
        with np.errstate(over="ignore", divide="ignore"):
            if x.size > 1 and not np.isfinite(np.diff(v) / np.diff(x)).all():
                raise MapFormatError(f"{where}: knots are so close that a slope overflows")
        x.flags.writeable = False
        v.flags.writeable = False
        object.__setattr__(self, "knots", x)
        object.__setattr__(self, "values", v)

    @property
    def size(self) -> int:
        """Number of knots."""
        return int(self.knots.size)

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        return np.interp(s, self.knots, self.values)

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(knots=self.knots.tolist(), values=self.values.tolist())
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> LinearMap:
        return cls(_float_array(doc, "knots", where), _float_array(doc, "values", where),
                   **common)


@dataclass(frozen=True, eq=False)
class SigmoidMap(_BaseMap):
    """Logistic map ``1 / (1 + exp(a * s + b))`` (Platt's sign convention)."""

    kind: ClassVar[str] = "sigmoid"
    a: float = 0.0
    b: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        a, b = float(self.a), float(self.b)
        if not (np.isfinite(a) and np.isfinite(b)):
            raise MapFormatError("sigmoid map: a and b must be finite")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    @property
    def size(self) -> int:
        """Number of parameters (a, b)."""
        return 2

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        return det_expit_array(np.ascontiguousarray(-(self.a * s + self.b), dtype=np.float64))

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(a=self.a, b=self.b)
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> SigmoidMap:
        return cls(_float_scalar(doc, "a", where), _float_scalar(doc, "b", where), **common)


@dataclass(frozen=True, eq=False)
class BetaMap(_BaseMap):
    """Beta calibration map (Kull, Silva Filho & Flach 2017):
    ``p = expit(a * ln(s) - b * ln(1 - s) + c)`` for probability scores ``s``.

    The score is first clamped to ``[BETA_EPS, 1 - BETA_EPS]`` (``BETA_EPS = 2**-40``), so the
    map is defined for every finite score: 0 and anything below it are read as ``BETA_EPS``,
    1 and anything above as ``1 - BETA_EPS`` (the flat extension of the other maps). The logs
    and the logistic function are mlcal's deterministic ones (``ln(1 - s)`` as ``log1p(-s)``),
    evaluated as ``((a * ln s) - (b * ln(1 - s))) + c``, so the output has the same bits on
    every CPU. With the ``"sigmoid"`` input transform the map takes raw margins.

    ``a = b`` is Platt scaling on the log-odds ``ln(s / (1 - s))``; ``a = b = 1 / T``, ``c = 0``
    is temperature scaling. ``a, b >= 0`` makes the map non-decreasing (what mlcal's fits
    produce), but any finite values are a valid map.

    Parameters
    ----------
    a, b, c : float
        Finite coefficients of ``ln s``, ``-ln(1 - s)`` and the intercept.
    """

    kind: ClassVar[str] = "beta"
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        values = tuple(float(v) for v in (self.a, self.b, self.c))
        if not all(np.isfinite(v) for v in values):
            raise MapFormatError("beta map: a, b and c must be finite")
        for name, v in zip("abc", values):
            object.__setattr__(self, name, v)

    @property
    def size(self) -> int:
        """Number of parameters (a, b, c)."""
        return 3

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        sc = np.clip(np.ascontiguousarray(s, dtype=np.float64), BETA_EPS, 1.0 - BETA_EPS)
        z = (self.a * det_log_array(sc) - self.b * det_log1p_array(-sc)) + self.c
        return det_expit_array(z)

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(a=self.a, b=self.b, c=self.c)
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> BetaMap:
        return cls(*(_float_scalar(doc, k, where) for k in "abc"), **common)


#: Any calibration map (the built-in ones are StepMap, LinearMap, SigmoidMap and BetaMap).
CalibrationMap = _BaseMap


def map_from_dict(doc: Any) -> CalibrationMap:
    """Rebuild a map from :meth:`to_dict` output, validating every field.

    Raises
    ------
    MapFormatError
        If the document is not a dict, names an unknown map type or format version, or holds
        malformed, non-finite, unsorted or mismatched arrays.
    """
    if not isinstance(doc, dict):
        raise MapFormatError(f"a map document must be a JSON object, got {type(doc).__name__}")
    kind = doc.get("type")
    if not isinstance(kind, str) or kind not in MAP_TYPES:
        raise MapFormatError(f"unknown map type {_short(kind)}; expected one of "
                             f"{sorted(MAP_TYPES)}")
    where = f"{kind} map"
    version = doc.get("format_version")
    if type(version) is not int or version != MAP_FORMAT_VERSION:   # True == 1 in Python
        raise MapFormatError(f"{where}: unsupported format_version {_short(version)} "
                             f"(this mlcal reads version {MAP_FORMAT_VERSION})")
    transform = doc.get("input_transform", "identity")
    if not isinstance(transform, str) or transform not in INPUT_TRANSFORMS:
        raise MapFormatError(f"{where}: unknown input_transform {_short(transform)}")
    domain = doc.get("domain")
    if domain is not None:
        if not isinstance(domain, list) or len(domain) != 2:
            raise MapFormatError(f"{where}: domain must be null or [lo, hi]")
        domain = tuple(_float_array({"domain": domain}, "domain", where).tolist())
    return MAP_TYPES[kind]._from_dict(doc, where, {"input_transform": transform,
                                                   "domain": domain})


@dataclass(frozen=True)
class MapReduction:
    """What :func:`reduce_map` did to a map.

    Attributes
    ----------
    original_size, size : int
        Map size (bins, knots or parameters) before and after.
    max_error : float
        Measured sup-norm distance ``max_s |original(s) - reduced(s)|`` (0.0 when not reduced).
    """

    original_size: int
    size: int
    max_error: float

    @property
    def reduced(self) -> bool:
        """Whether the map was changed."""
        return self.size < self.original_size


def reduce_map(m: CalibrationMap, max_size: int | None) -> tuple[CalibrationMap, MapReduction]:
    """Cap a map's size at ``max_size``, with a measured sup-norm error.

    * :class:`StepMap` with more than ``max_size`` bins: adjacent bins are merged into at most
      ``max_size`` runs, each run taking the midpoint of its lowest and highest value. The cuts
      kept are original cuts, chosen (greedy grouping plus bisection on the allowed spread) to
      make the largest change of any bin as small as a ``max_size``-bin map with original cuts
      allows, to within a relative 2^-12.
    * :class:`LinearMap` with more than ``max_size`` knots: interior knots are dropped (greedy
      segments inside a tolerance tube, bisection on the tube width); the kept knots keep their
      values, so a monotone map stays monotone and the outer knots, hence the flat extensions,
      are unchanged.
    * :class:`SigmoidMap` (two parameters), :class:`BetaMap` (three) and maps within the cap are
      returned unchanged.

    Both reduced maps cut where the original does, so ``|original - reduced|`` peaks at an
    original bin or knot; ``max_error`` is the maximum over all of them, i.e. the exact
    sup-norm distance between the two maps over the whole real line (up to the rounding of
    evaluating them). Input transform and domain are kept.

    Parameters
    ----------
    m : StepMap, LinearMap, SigmoidMap or BetaMap
    max_size : int or None
        Largest size kept (>= 2); ``None`` disables the cap.

    Returns
    -------
    map, MapReduction
    """
    size = m.size
    if max_size is None or size <= max_size:
        return m, MapReduction(size, size, 0.0)
    out, err = shrink_map(m, int(max_size))
    return out, MapReduction(size, out.size, float(err))


@singledispatch
def shrink_map(m: CalibrationMap, max_size: int) -> tuple[CalibrationMap, float]:
    """A map of at most ``max_size`` bins/knots and its measured sup-norm error (one
    registration per map type; see :func:`reduce_map`)."""
    raise ValueError(f"{type(m).__name__} has {m.size} parameters, more than max_size="
                     f"{max_size}, and no size reduction is registered for it "
                     f"(registered: {registered_types(shrink_map)})")


@shrink_map.register
def _(m: StepMap, max_size: int) -> tuple[CalibrationMap, float]:
    t, v, err = reduce_step(m.thresholds, m.values, max_size)
    return StepMap(t, v, input_transform=m.input_transform, domain=m.domain), err


@shrink_map.register
def _(m: LinearMap, max_size: int) -> tuple[CalibrationMap, float]:
    x, v, err = reduce_linear(m.knots, m.values, max_size)
    return LinearMap(x, v, input_transform=m.input_transform, domain=m.domain), err



@shrink_map.register
def _(m: BetaMap, max_size: int) -> tuple[CalibrationMap, float]:
    return m, 0.0   # three parameters, none of them a bin or knot: a cap never applies


# the multiclass map types live in their own module; importing it enters them in MAP_TYPES
from mlcal.multiclass_maps import MulticlassMap, SoftmaxAffineMap  # noqa: E402,F401

# the re-offset stage (a binary map composed with a logit offset); importing it enters it too
from mlcal.offset_map import OffsetMap  # noqa: E402,F401
