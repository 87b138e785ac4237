"""The re-offset stage: an exact logit shift composed after a binary calibration map.

``OffsetMap(inner, delta)`` evaluates ``p' = expit(logit(inner(s)) + delta)``: the odds of the
inner map's probability multiplied by ``exp(delta)``. It is the exact correction of a prevalence
(prior) change (Saerens, Latinne & Decaestecker 2002; Elkan 2001): a model whose probabilities
were right at a positive rate ``pi`` is right at rate ``pi'`` after an offset of
``logit(pi') - logit(pi)`` (see :func:`mlcal.maps.reoffset.prior_shift_delta`), and it is what a
monitor recommends when a calibrator has drifted by a constant on the log-odds scale.

Numerics (identical in Python, Spark SQL, the Java evaluator):
``logit(p) = det_log(p) - det_log1p(-p)``, ``z = logit(p) + delta``, ``p' = det_expit(z)``, with
mlcal's deterministic functions (:mod:`mlcal._solvers.detmath`), so the same bits come out on
every CPU. Inner values of exactly 0 or 1 stay exactly 0 or 1 under any finite offset (odds of
0 or infinity times ``exp(delta)``); they are passed through unchanged rather than computed as
``expit(-inf)``. An offset of 0 is not an identity bit for bit: the logit rounds at about
``u |logit p|`` (``u = 2**-53``), so the result is within about ``2 + 2 |logit p|`` ulps of ``p``.

Only one level: the inner map is a binary map of any other kind (step, linear, sigmoid, beta,
quadratic); an offset of an offset is refused on load, and
:func:`mlcal.maps.reoffset.reoffset` collapses a second offset into the first
(``delta1 + delta2``, exact in real arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_expit, det_log, det_log1p
from mlcal.maps._core import _BaseMap, MapFormatError, _float_scalar, _short, map_from_dict

#: the map kinds an offset may wrap (binary maps; never another offset)
OFFSET_INNER_KINDS = ("beta", "linear", "quadratic", "sigmoid", "step")


@njit(cache=True, nogil=True)
def offset_probability(p: float, delta: float) -> float:
    """``expit(logit(p) + delta)`` with detmath; 0 and 1 (and NaN) are returned unchanged."""
    if not (p > 0.0 and p < 1.0):
        return p
    return det_expit((det_log(p) - det_log1p(-p)) + delta)


@njit(cache=True, nogil=True)
def offset_probabilities(p: np.ndarray, delta: float) -> np.ndarray:
    """:func:`offset_probability` over a float64 1-D array (new array)."""
    out = np.empty(p.shape[0])
    for i in range(p.shape[0]):
        out[i] = offset_probability(p[i], delta)
    return out


@dataclass(frozen=True, eq=False)
class OffsetMap(_BaseMap):
    """``expit(logit(inner(s)) + delta)``: a binary map followed by a logit offset.

    The input transform and domain are the inner map's (set from it; a document whose outer
    fields disagree with the inner map's is refused). The map is non-decreasing whenever the
    inner map is (the offset is strictly increasing on (0, 1)).

    Parameters
    ----------
    inner : StepMap, LinearMap, SigmoidMap or BetaMap
        The map whose probabilities are shifted (not an :class:`OffsetMap`, not multiclass).
    delta : float
        Finite offset added to the log-odds; ``delta > 0`` raises every probability in (0, 1).
    """

    kind: ClassVar[str] = "offset"
    inner: Any = None
    delta: float = 0.0

    def __post_init__(self) -> None:
        inner = self.inner
        if not isinstance(inner, _BaseMap) or inner.kind not in OFFSET_INNER_KINDS:
            what = getattr(inner, "kind", type(inner).__name__)
            raise MapFormatError(f"offset map: the inner map must be one of "
                                 f"{OFFSET_INNER_KINDS}, got {_short(what)}"
                                 + (" (offsets do not nest; add the deltas instead)"
                                    if what == "offset" else ""))
        delta = self.delta
        if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating,
                                                             np.integer)):
            raise MapFormatError(f"offset map: delta must be a finite number, got "
                                 f"{_short(delta)}")
        delta = float(delta)
        if not np.isfinite(delta):
            raise MapFormatError(f"offset map: delta must be finite, got {delta!r}")
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "input_transform", inner.input_transform)
        object.__setattr__(self, "domain", inner.domain)
        super().__post_init__()

    @property
    def size(self) -> int:
        """The inner map's size plus one (the offset)."""
        return int(self.inner.size) + 1

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        p = np.ascontiguousarray(self.inner._evaluate(s), dtype=np.float64)
        return offset_probabilities(p, self.delta)

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(inner=self.inner.to_dict(), delta=self.delta)
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> OffsetMap:
        raw = doc.get("inner")
        if not isinstance(raw, dict):
            raise MapFormatError(f"{where}: field 'inner' must be a map object, got "
                                 f"{_short(raw)}")
        if raw.get("type") == "offset":
            raise MapFormatError(f"{where}: an offset map cannot wrap another offset map "
                                 "(one offset stage only)")
        if raw.get("type") not in OFFSET_INNER_KINDS:
            raise MapFormatError(f"{where}: the inner map must be one of "
                                 f"{OFFSET_INNER_KINDS}, got {_short(raw.get('type'))}")
        inner = map_from_dict(raw)
        outer = (common["input_transform"], common["domain"])
        if outer != (inner.input_transform, inner.domain):
            raise MapFormatError(f"{where}: input_transform/domain ({outer[0]!r}, {outer[1]!r}) "
                                 f"differ from the inner map's ({inner.input_transform!r}, "
                                 f"{inner.domain!r})")
        return cls(inner, _float_scalar(doc, "delta", where))
