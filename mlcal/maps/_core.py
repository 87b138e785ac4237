"""What every calibration map shares: the document format (version, input transforms, the field
readers that validate untrusted JSON), the kind table :data:`MAP_TYPES`, the base class each map
type derives from, and :func:`map_from_dict`.

Kept apart so the binary maps (:mod:`mlcal.maps.binary`), the multiclass maps
(:mod:`mlcal.maps.multiclass`) and the offset stage (:mod:`mlcal.maps.offset`) all build on it
without importing each other (issue 27: no import cycles). The public names are re-exported from
:mod:`mlcal.maps`, their public home.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from mlcal._solvers.detmath import det_expit_array
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
