"""Multiclass calibration maps: input an (n, K) score matrix, output (n, K) probabilities.

* :class:`MulticlassMap` -- K per-class binary maps (one-vs-rest), then a normalisation rule.
* :class:`SoftmaxAffineMap` -- ``softmax(W x / temperature + b)`` on logits or
  log-probabilities (temperature, vector and matrix scaling).

Both enter :data:`mlcal.maps.MAP_TYPES`, so :func:`mlcal.maps.map_from_dict` loads them with the
same validation as the binary maps. They are re-exported from :mod:`mlcal.maps`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from mlcal._solvers.softmax_affine import floored_log, softmax_affine
from mlcal.maps._core import (_BaseMap, MapFormatError, _float_array, _float_scalar, _short,
                        map_from_dict)

NORMALISATIONS = ("sum",)
SOFTMAX_INPUTS = ("logits", "log-probabilities")
#: the default (and smallest allowed) floor of probabilities before the log of a
#: "log-probabilities" map, so a class predicted with probability 0 gives a finite input
#: (log(1e-300) ~ -690.8). Fitted calibrators store a floor measured on their calibration data
#: instead (:func:`mlcal._solvers.probability_floor.probability_floor`).
PROBABILITY_FLOOR = 1e-300


def as_score_matrix(scores, n_classes: int, *, name: str = "scores") -> np.ndarray:
    """``scores`` as a finite float64 (n, n_classes) array, else ``ValueError`` naming why."""
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if arr.ndim != 2 or arr.shape[1] != n_classes:
        raise ValueError(f"{name} must be a 2-D array with one column per class "
                         f"({n_classes}), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains {int(np.count_nonzero(~np.isfinite(arr)))} "
                         "non-finite value(s); remove or impute them before calibrating")
    return np.ascontiguousarray(arr)


def row_sum(q: np.ndarray) -> np.ndarray:
    """Row sums added column by column, left to right: a fixed order (``np.sum`` switches to
    pairwise summation from 8 columns on) that an exported ONNX graph repeats bit for bit."""
    total = q[:, 0].copy()
    for k in range(1, q.shape[1]):
        total += q[:, k]
    return total


def _check_no_common_fields(m: _BaseMap) -> None:
    # the per-class maps (or the input field) carry the transform; the outer fields stay unset
    if m.input_transform != "identity" or m.domain is not None:
        raise MapFormatError(f"{m.kind} map: input_transform must be 'identity' and domain "
                             "null (each class map records its own)")


@dataclass(frozen=True, eq=False)
class MulticlassMap(_BaseMap):
    """One-vs-rest multiclass map: column ``k`` of the scores goes through ``maps[k]`` (any
    binary map type, each with its own input transform), then each row is normalised.

    Normalisation ``"sum"``: every row is divided by its sum. A row where every class maps to
    0 has no information to normalise, and gets the uniform distribution ``1/K``.

    Parameters
    ----------
    maps : sequence of K >= 2 binary maps
    normalisation : {"sum"}, default="sum"
    """

    kind: ClassVar[str] = "multiclass-ovr"
    maps: tuple = ()
    normalisation: str = "sum"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_no_common_fields(self)
        maps = tuple(self.maps)
        if len(maps) < 2:
            raise MapFormatError(f"{self.kind} map: needs at least 2 class maps, got {len(maps)}")
        for k, m in enumerate(maps):
            if not isinstance(m, _BaseMap) or isinstance(m, (MulticlassMap, SoftmaxAffineMap)):
                raise MapFormatError(f"{self.kind} map: class map {k} is not a binary map "
                                     f"({type(m).__name__})")
        if self.normalisation not in NORMALISATIONS:
            raise MapFormatError(f"{self.kind} map: unknown normalisation "
                                 f"{_short(self.normalisation)}; expected one of {NORMALISATIONS}")
        object.__setattr__(self, "maps", maps)

    @property
    def n_classes(self) -> int:
        """Number of classes K."""
        return len(self.maps)

    @property
    def size(self) -> int:
        """Total size of the class maps."""
        return sum(m.size for m in self.maps)

    def __call__(self, scores) -> np.ndarray:
        """Calibrated probabilities, shape (n, K); rows sum to 1."""
        s = as_score_matrix(scores, self.n_classes)
        q = np.column_stack([m(s[:, k]) for k, m in enumerate(self.maps)])
        total = row_sum(q)
        out = np.full_like(q, 1.0 / q.shape[1])
        nz = total > 0.0
        out[nz] = q[nz] / total[nz, None]
        return out

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(normalisation=self.normalisation, maps=[m.to_dict() for m in self.maps])
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> MulticlassMap:
        raw = doc.get("maps")
        if not isinstance(raw, list):
            raise MapFormatError(f"{where}: field 'maps' must be a list of map documents")
        maps = []
        for k, sub in enumerate(raw):
            if isinstance(sub, dict) and sub.get("type") in (cls.kind, SoftmaxAffineMap.kind):
                raise MapFormatError(f"{where}: class map {k} must be a binary map")
            try:
                maps.append(map_from_dict(sub))
            except MapFormatError as exc:
                raise MapFormatError(f"{where}: class map {k}: {exc}") from None
        norm = doc.get("normalisation")
        if not isinstance(norm, str):
            raise MapFormatError(f"{where}: field 'normalisation' must be one of "
                                 f"{NORMALISATIONS}")
        return cls(tuple(maps), norm, **common)


@dataclass(frozen=True, eq=False)
class SoftmaxAffineMap(_BaseMap):
    """Native multiclass map ``p = softmax(W x / temperature + b)``.

    ``x`` is the score row itself (``input="logits"``) or the log of the probability row
    (``input="log-probabilities"``, probabilities floored at ``probability_floor``).
    Temperature scaling is ``W = I, b = 0``; vector scaling a diagonal ``W``; matrix scaling a
    full ``W``. With ``uniform_weight = eps > 0`` the output is mixed with the uniform
    distribution, ``(1 - eps) p + eps / K`` (computed as ``p * (1 - eps) + eps / K``), so no
    probability is below ``eps / K``.

    Parameters
    ----------
    weights : array of shape (K, K) or (K,)
        A full matrix, or the diagonal of a diagonal one (stored as given).
    bias : array of shape (K,)
    temperature : float, default=1.0
        Positive.
    input : {"logits", "log-probabilities"}, default="logits"
    uniform_weight : float, default=0.0
        Weight of the uniform distribution in the output, in [0, 1).
    probability_floor : float, default=PROBABILITY_FLOOR
        Floor of the probabilities before the log (``input="log-probabilities"`` only), in
        [:data:`PROBABILITY_FLOOR`, 1].
    """

    kind: ClassVar[str] = "softmax-affine"
    weights: np.ndarray = field(default_factory=lambda: np.empty(0))
    bias: np.ndarray = field(default_factory=lambda: np.empty(0))
    temperature: float = 1.0
    input: str = "logits"
    uniform_weight: float = 0.0
    probability_floor: float = PROBABILITY_FLOOR

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_no_common_fields(self)
        where = f"{self.kind} map"
        W = np.array(self.weights, dtype=np.float64)
        b = np.array(self.bias, dtype=np.float64).reshape(-1)
        K = b.size
        if K < 2:
            raise MapFormatError(f"{where}: needs at least 2 classes, got a bias of length {K}")
        if W.shape not in ((K,), (K, K)):
            raise MapFormatError(f"{where}: weights must have shape ({K},) or ({K}, {K}) for "
                                 f"{K} classes, got {W.shape}")
        if not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise MapFormatError(f"{where}: weights and bias must be finite")
        t = float(self.temperature)
        if not (np.isfinite(t) and t > 0.0):
            raise MapFormatError(f"{where}: temperature must be a finite positive number")
        if self.input not in SOFTMAX_INPUTS:
            raise MapFormatError(f"{where}: unknown input {_short(self.input)}; expected one "
                                 f"of {SOFTMAX_INPUTS}")
        eps = float(self.uniform_weight)
        if not (0.0 <= eps < 1.0):
            raise MapFormatError(f"{where}: uniform_weight must be in [0, 1), got {eps!r}")
        floor = float(self.probability_floor)
        if not (PROBABILITY_FLOOR <= floor <= 1.0):
            raise MapFormatError(f"{where}: probability_floor must be in [{PROBABILITY_FLOOR}, "
                                 f"1], got {floor!r}")
        if self.input == "logits" and floor != PROBABILITY_FLOOR:
            raise MapFormatError(f"{where}: probability_floor applies to input "
                                 "'log-probabilities' only")
        W.flags.writeable = False
        b.flags.writeable = False
        object.__setattr__(self, "weights", W)
        object.__setattr__(self, "bias", b)
        object.__setattr__(self, "temperature", t)
        object.__setattr__(self, "uniform_weight", eps)
        object.__setattr__(self, "probability_floor", floor)

    @property
    def n_classes(self) -> int:
        """Number of classes K."""
        return int(self.bias.size)

    @property
    def size(self) -> int:
        """Number of parameters."""
        return int(self.weights.size + self.bias.size + 1)

    def full_weights(self) -> np.ndarray:
        """``W`` as a (K, K) matrix."""
        return np.diag(self.weights) if self.weights.ndim == 1 else self.weights.copy()

    def transform_input(self, s: np.ndarray) -> np.ndarray:
        """The map's ``x`` for validated scores ``s`` (log of floored probabilities or ``s``)."""
        if self.input == "logits":
            return s
        return floored_log(np.ascontiguousarray(s, dtype=np.float64), self.probability_floor)

    def mix_uniform(self, p: np.ndarray) -> np.ndarray:
        """``p * (1 - eps) + eps / K`` (``p`` itself when ``uniform_weight`` is 0)."""
        eps = self.uniform_weight
        if eps == 0.0:
            return p
        return p * (1.0 - eps) + eps / self.n_classes

    def __call__(self, scores) -> np.ndarray:
        """Calibrated probabilities, shape (n, K); rows sum to 1."""
        s = as_score_matrix(scores, self.n_classes)
        x = np.ascontiguousarray(self.transform_input(s))
        return self.mix_uniform(softmax_affine(x, np.ascontiguousarray(self.full_weights()),
                                               self.bias, self.temperature))

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(input=self.input, temperature=self.temperature, weights=self.weights.tolist(),
                 bias=self.bias.tolist())
        # written only when not the default, so documents of maps without them are unchanged
        if self.uniform_weight != 0.0:
            d["uniform_weight"] = self.uniform_weight
        if self.probability_floor != PROBABILITY_FLOOR:
            d["probability_floor"] = self.probability_floor
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> SoftmaxAffineMap:
        raw = doc.get("weights")
        if isinstance(raw, list) and raw and all(isinstance(r, list) for r in raw):
            rows = [_float_array({"row": r}, "row", where) for r in raw]
            if len({r.size for r in rows}) != 1:
                raise MapFormatError(f"{where}: the rows of 'weights' differ in length")
            weights = np.vstack(rows)
        else:
            weights = _float_array(doc, "weights", where)
        inp = doc.get("input")
        if not isinstance(inp, str):
            raise MapFormatError(f"{where}: field 'input' must be one of {SOFTMAX_INPUTS}")
        optional = {key: _float_scalar(doc, key, where)
                    for key in ("uniform_weight", "probability_floor") if key in doc}
        return cls(weights, _float_array(doc, "bias", where),
                   _float_scalar(doc, "temperature", where), inp, **optional, **common)
