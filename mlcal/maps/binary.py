"""The canonical binary calibration maps (step, linear, sigmoid, beta) and their size reduction.

Every fitted calibrator reduces to exactly one of these, so prediction, JSON artifacts, ONNX
graphs and plots are written once:

* :class:`StepMap` -- ``values[searchsorted(thresholds, s, side="right")]``
* :class:`LinearMap` -- ``interp(s, knots, values)``, flat outside the first/last knot
* :class:`SigmoidMap` -- ``1 / (1 + exp(a * s + b))``
* :class:`BetaMap` -- ``expit(a * ln(s) - b * ln(1 - s) + c)`` on probability scores clamped to
  ``[lo, hi]`` (default ``[BETA_EPS, 1 - BETA_EPS]``, wider where the calibration scores
  saturate; beta calibration, Platt on log-odds, temperature scaling)
* :class:`QuadraticMap` -- ``expit(a * z + b * z^2 + c)`` with ``z`` the log-odds of the clamped
  score (``on="logit"``) or the raw margin itself (``on="margin"``): quadratic scaling

The parametric maps take an optional output ``floor``: their probability is clipped to
``[floor, 1 - floor]`` (written to JSON only when positive; fitted calibrators set it from the
size of their calibration set, :mod:`mlcal.calibrators.output_floor`).

A map also records its *input transform* (``"identity"`` or ``"sigmoid"``, the logistic function
applied to raw scores such as SVM margins before the map) and the score *domain* it was fitted
on. Outputs always lie in [0, 1].

Multiclass maps (:class:`MulticlassMap`, one-vs-rest binary maps plus a normalisation rule, and
:class:`SoftmaxAffineMap`, temperature/vector/matrix scaling) live in :mod:`mlcal.maps.multiclass`
and take an (n, K) score matrix; :mod:`mlcal.maps` is the public home of every map name.

The dict form (``to_dict`` / :func:`map_from_dict`) is plain JSON data with a format version;
loading validates every field and never executes code.

Fitted maps are capped in size (:data:`DEFAULT_MAX_MAP_SIZE` bins or knots unless a calibrator's
``max_map_size`` says otherwise) by :func:`reduce_map`, which reports the exact sup-norm error
of the reduction.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import singledispatch
from typing import Any, ClassVar

import numpy as np

from mlcal._dispatch import registered_types
from mlcal._solvers.detmath import det_expit_array, det_log1p_array, det_log_array
from mlcal._solvers.map_reduction import reduce_linear, reduce_step
from mlcal.maps._core import (BETA_EPS, DEFAULT_MAX_MAP_SIZE, INPUT_TRANSFORMS,  # noqa: F401
                             MAP_FORMAT_VERSION, MAP_TYPES, CalibrationMap, MapFormatError,
                             _BaseMap, _check_increasing, _check_unit_values, _float_array,
                             _float_scalar, _short, apply_input_transform, map_from_dict)
from mlcal.maps.offset import OffsetMap


def _check_floor(floor: float, where: str) -> float:
    """A valid output floor: a finite number in ``[0, 1/2)``."""
    f = float(floor)
    if not (0.0 <= f < 0.5):
        raise MapFormatError(f"{where}: floor must be a number in [0, 0.5), got {f!r}")
    return f


def _read_floor(doc: dict, where: str) -> float:
    """The optional ``floor`` field of a parametric map document (0 when absent)."""
    return _check_floor(_float_scalar(doc, "floor", where), where) if "floor" in doc else 0.0


def apply_floor(p: np.ndarray, floor: float) -> np.ndarray:
    """``p`` clipped to ``[floor, 1 - floor]`` (``p`` itself when ``floor`` is 0); ``1 - floor``
    is rounded once in float64, as the ONNX graph, Spark and the Java evaluator do."""
    if floor == 0.0:
        return p
    return np.minimum(np.maximum(p, floor), 1.0 - floor)


#: the score clamp of a logit-family map (:class:`BetaMap`, :class:`QuadraticMap` with
#: ``on="logit"``) when its document has no ``clamp`` field: every map written before the
#: field existed reads its scores through it
DEFAULT_CLAMP = (BETA_EPS, 1.0 - BETA_EPS)
#: the lowest lower clamp end a map may hold: the smallest normal double (the deterministic
#: logs are exact there, and ``ln`` of it, about -708.4, keeps every product finite)
MIN_CLAMP_LO = 2.0 ** -1022


def _check_clamp(clamp: Any, where: str) -> tuple[float, float]:
    """A valid score clamp ``(lo, hi)``: finite, ``2**-1022 <= lo <= BETA_EPS`` and
    ``1 - BETA_EPS <= hi < 1``."""
    if isinstance(clamp, (str, bytes)) or not hasattr(clamp, "__len__") or len(clamp) != 2:
        raise MapFormatError(f"{where}: field 'clamp' must be a list of two numbers [lo, hi], "
                             f"got {_short(clamp)}")
    if not all(isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
               for v in clamp):
        raise MapFormatError(f"{where}: field 'clamp' must be a list of two numbers [lo, hi]")
    try:
        lo, hi = float(clamp[0]), float(clamp[1])
    except OverflowError:   # an integer beyond the float range
        raise MapFormatError(f"{where}: field 'clamp' must hold finite numbers") from None
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise MapFormatError(f"{where}: field 'clamp' must hold finite numbers, got "
                             f"[{lo!r}, {hi!r}]")
    if not (MIN_CLAMP_LO <= lo <= BETA_EPS):
        raise MapFormatError(f"{where}: field 'clamp': lo must lie in [2**-1022, BETA_EPS = "
                             f"2**-40], got {lo!r}")
    if not (DEFAULT_CLAMP[1] <= hi < 1.0):
        raise MapFormatError(f"{where}: field 'clamp': hi must lie in [1 - BETA_EPS, 1), got "
                             f"{hi!r}")
    return lo, hi


def _read_clamp(doc: dict, where: str) -> tuple[float, float]:
    """The optional ``clamp`` field of a logit-family map document (the default when absent)."""
    return _check_clamp(doc["clamp"], where) if "clamp" in doc else DEFAULT_CLAMP


#: the clamps :func:`data_clamp` returns instead of its scores' own, per input transform, within
#: :func:`rounded_scores_clamp` (None outside: the scores decide)
_ROUNDED_CLAMP: ContextVar[dict[str, tuple[float, float]] | None] = ContextVar(
    "mlcal_rounded_clamp", default=None)


@contextlib.contextmanager
def rounded_scores_clamp(clamps: dict[str, tuple[float, float]] | None):
    """Within the block, :func:`data_clamp` of scores under input transform ``t`` returns
    ``clamps[t]`` (when present) instead of the clamp of the scores it is given.

    For fits on rounded scores (``mlcal.spark``'s grid mode rounds every score to its cell's
    midpoint): ``clamps`` is then ``data_clamp`` of the original scores' extremes, so the
    fitted map keeps the order of saturated scores down to the most extreme one of the data,
    as the in-memory fit does, rather than stopping at the most extreme midpoint. Every fit in
    the block gets it (``auto``'s fold fits too). ``None`` changes nothing."""
    if clamps is not None:
        clamps = {t: _check_clamp(c, "rounded_scores_clamp") for t, c in clamps.items()}
    token = _ROUNDED_CLAMP.set(clamps)
    try:
        yield
    finally:
        _ROUNDED_CLAMP.reset(token)


def data_clamp(x: np.ndarray, transform: str = "identity") -> tuple[float, float]:
    """The score clamp a fit takes from its (input-transformed) calibration scores ``x``:
    ``lo = min(BETA_EPS, smallest positive score)``, never below ``2**-1022``, and
    ``hi = max(1 - BETA_EPS, largest score below 1)``.

    Scores within ``[BETA_EPS, 1 - BETA_EPS]`` give :data:`DEFAULT_CLAMP` (the map of
    before the field existed, bit for bit). Saturated scores (naive Bayes puts many far below
    ``2**-40``) keep their order down to the most extreme one seen; scores beyond it, and
    exact 0 and 1, are read as that one (the map is flat beyond the data, as the step and
    linear maps are). ``transform``: the input transform that gave ``x`` from the raw
    scores; it selects the clamp given by :func:`rounded_scores_clamp`, if any."""
    fixed = _ROUNDED_CLAMP.get()
    if fixed is not None and transform in fixed:
        return fixed[transform]
    x = np.asarray(x, dtype=np.float64)
    lo, hi = DEFAULT_CLAMP
    pos = x[x > 0.0]
    if pos.size:
        lo = max(min(lo, float(pos.min())), MIN_CLAMP_LO)
    below = x[x < 1.0]
    if below.size:
        hi = max(hi, float(below.max()))
    return lo, hi


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
    """Logistic map ``1 / (1 + exp(a * s + b))`` (Platt's sign convention), clipped to
    ``[floor, 1 - floor]``.

    Parameters
    ----------
    a, b : float
        Finite coefficients.
    floor : float, default=0.0
        Output floor in ``[0, 1/2)``; 0 leaves the logistic function's output as it is.
    """

    kind: ClassVar[str] = "sigmoid"
    a: float = 0.0
    b: float = 0.0
    floor: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        a, b = float(self.a), float(self.b)
        if not (np.isfinite(a) and np.isfinite(b)):
            raise MapFormatError("sigmoid map: a and b must be finite")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "floor", _check_floor(self.floor, "sigmoid map"))

    @property
    def size(self) -> int:
        """Number of parameters (a, b)."""
        return 2

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        p = det_expit_array(np.ascontiguousarray(-(self.a * s + self.b), dtype=np.float64))
        return apply_floor(p, self.floor)

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(a=self.a, b=self.b)
        if self.floor != 0.0:
            d["floor"] = self.floor
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> SigmoidMap:
        return cls(_float_scalar(doc, "a", where), _float_scalar(doc, "b", where),
                   _read_floor(doc, where), **common)


@dataclass(frozen=True, eq=False)
class BetaMap(_BaseMap):
    """Beta calibration map (Kull, Silva Filho & Flach 2017):
    ``p = expit(a * ln(s) - b * ln(1 - s) + c)`` for probability scores ``s``.

    The score is first clamped to ``clamp = [lo, hi]``, by default ``[BETA_EPS, 1 - BETA_EPS]``
    (``BETA_EPS = 2**-40``), so the map is defined for every finite score: 0 and anything below
    ``lo`` are read as ``lo``, 1 and anything above ``hi`` as ``hi`` (the flat extension of the
    other maps). Fits take the clamp from their calibration scores (:func:`data_clamp`): it
    reaches beyond the default only where the data do (saturated scores, issue #26). The logs
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
    floor : float, default=0.0
        Output floor in ``[0, 1/2)``: the probability is clipped to ``[floor, 1 - floor]``.
    clamp : (float, float), default=(BETA_EPS, 1 - BETA_EPS)
        Score clamp ``(lo, hi)``, ``2**-1022 <= lo <= BETA_EPS`` and ``1 - BETA_EPS <= hi < 1``
        (written to JSON as ``"clamp": [lo, hi]`` only when it is not the default).
    """

    kind: ClassVar[str] = "beta"
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    floor: float = 0.0
    clamp: tuple[float, float] = DEFAULT_CLAMP

    def __post_init__(self) -> None:
        super().__post_init__()
        values = tuple(float(v) for v in (self.a, self.b, self.c))
        if not all(np.isfinite(v) for v in values):
            raise MapFormatError("beta map: a, b and c must be finite")
        for name, v in zip("abc", values):
            object.__setattr__(self, name, v)
        object.__setattr__(self, "floor", _check_floor(self.floor, "beta map"))
        object.__setattr__(self, "clamp", _check_clamp(self.clamp, "beta map"))

    @property
    def size(self) -> int:
        """Number of parameters (a, b, c)."""
        return 3

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        log_s, log_1ms = clamped_logs(s, self.clamp)
        z = (self.a * log_s - self.b * log_1ms) + self.c
        return apply_floor(det_expit_array(z), self.floor)

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(a=self.a, b=self.b, c=self.c)
        if self.floor != 0.0:
            d["floor"] = self.floor
        if self.clamp != DEFAULT_CLAMP:
            d["clamp"] = list(self.clamp)
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> BetaMap:
        return cls(*(_float_scalar(doc, k, where) for k in "abc"), _read_floor(doc, where),
                   _read_clamp(doc, where), **common)


#: what a :class:`QuadraticMap`'s ``z`` is: the log-odds of a probability score, or the score
#: itself (a raw margin, already a log-odds)
QUADRATIC_ON = ("logit", "margin")
#: the fields a quadratic map document may hold (any other is refused: the kind is new, so no
#: older writer put anything else there)
QUADRATIC_FIELDS = ("type", "format_version", "input_transform", "domain", "on", "a", "b", "c",
                    "floor", "clamp")


#: within :func:`sharing_clamped_logs`: the clamped logs already computed, by array identity
_CLAMPED_LOGS: ContextVar[dict | None] = ContextVar("mlcal_clamped_logs", default=None)
#: at most this many arrays' logs are kept by one :func:`sharing_clamped_logs` block
_CLAMPED_LOGS_MAX = 64


@contextlib.contextmanager
def sharing_clamped_logs():
    """Within the block, :func:`clamped_logs` of the same array object with the same contents
    is computed once (``auto``'s cross-validation fits and evaluates several beta-family
    candidates on each fold's same cells). The results are the same bits either way."""
    token = _CLAMPED_LOGS.set({})
    try:
        yield
    finally:
        _CLAMPED_LOGS.reset(token)


def clamped_logs(s: np.ndarray, clamp: tuple[float, float] = DEFAULT_CLAMP
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(ln s, ln(1 - s))`` of the scores clamped to ``clamp = (lo, hi)`` (default
    ``[BETA_EPS, 1 - BETA_EPS]``; ``np.clip``'s semantics), with mlcal's deterministic logs
    (``ln(1 - s)`` as ``log1p(-s)``): the two terms of every beta-family map (:class:`BetaMap`,
    :func:`logit_clamped`). Read-only arrays (shared within :func:`sharing_clamped_logs`, per
    array and clamp)."""
    lo, hi = float(clamp[0]), float(clamp[1])
    memo = _CLAMPED_LOGS.get()
    key = (id(s), lo, hi)
    if memo is not None:
        hit = memo.get(key)
        # the entry holds the array itself (its id cannot be reused) and a copy of its
        # contents (an array changed in place is computed afresh)
        if hit is not None and hit[0] is s and np.array_equal(hit[1], s):
            return hit[2], hit[3]
    sc = np.clip(np.ascontiguousarray(s, dtype=np.float64), lo, hi)
    log_s, log_1ms = det_log_array(sc), det_log1p_array(-sc)
    log_s.flags.writeable = False
    log_1ms.flags.writeable = False
    if memo is not None and isinstance(s, np.ndarray) and len(memo) < _CLAMPED_LOGS_MAX:
        memo[key] = (s, s.copy(), log_s, log_1ms)
    return log_s, log_1ms


def logit_clamped(s: np.ndarray, clamp: tuple[float, float] = DEFAULT_CLAMP) -> np.ndarray:
    """``z = ln(s) - ln(1 - s)`` of scores clamped to ``clamp`` (default ``[BETA_EPS,
    1 - BETA_EPS]``, where ``|z| < 27.8``; down to ``2**-1022``, ``z >= -708.4``), with mlcal's
    deterministic logs (``ln(1 - s)`` as ``log1p(-s)``) and one rounded subtraction, so ``z``
    has the same bits on every CPU (and in the Java and Spark routes)."""
    log_s, log_1ms = clamped_logs(s, clamp)
    return log_s - log_1ms


@dataclass(frozen=True, eq=False)
class QuadraticMap(_BaseMap):
    """Quadratic scaling: ``p = expit(a * z + b * z^2 + c)``, clipped to ``[floor, 1 - floor]``.

    ``z`` is the log-odds of the score: with ``on="logit"`` (probability scores) the score is
    clamped to ``clamp`` (default ``[BETA_EPS, 1 - BETA_EPS]``) as :class:`BetaMap` does and
    ``z = ln(s) - ln(1 - s)`` (:func:`logit_clamped`); with ``on="margin"`` the score is a raw
    margin and ``z`` is the score itself (no clamp, no round trip through a probability; an
    input transform would turn margins into probabilities, so ``"margin"`` requires
    ``input_transform="identity"``). The log-odds ``eta`` is evaluated in the fixed order
    ``((a * z) + (b * (z * z))) + c`` (``(z * (b * z + a)) + c`` where that is NaN, see
    :meth:`log_odds`) and the logistic function is mlcal's deterministic one, so the output
    has the same bits on every CPU, in Spark SQL and in the Java evaluator.

    ``b = 0`` is Platt scaling on the log-odds (``a >= 0``: the ``platt-logit`` map). With
    ``b != 0`` the map is not monotone in general: it turns at ``z = -a / (2 b)`` when that
    lies in the range of ``z``.

    Parameters
    ----------
    a, b, c : float
        Finite coefficients of ``z``, ``z^2`` and the intercept.
    floor : float, default=0.0
        Output floor in ``[0, 1/2)``.
    on : {"logit", "margin"}, default="logit"
        What the (input-transformed) score is: a probability whose log-odds is taken, or a
        margin used as it is.
    clamp : (float, float), default=(BETA_EPS, 1 - BETA_EPS)
        Score clamp of ``on="logit"`` (as :class:`BetaMap`'s; written to JSON only when not
        the default). A margin map has no clamp: only the default is accepted there.
    """

    kind: ClassVar[str] = "quadratic"
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    floor: float = 0.0
    on: str = "logit"
    clamp: tuple[float, float] = DEFAULT_CLAMP

    def __post_init__(self) -> None:
        super().__post_init__()
        values = tuple(float(v) for v in (self.a, self.b, self.c))
        if not all(np.isfinite(v) for v in values):
            raise MapFormatError("quadratic map: a, b and c must be finite")
        for name, v in zip("abc", values):
            object.__setattr__(self, name, v)
        object.__setattr__(self, "floor", _check_floor(self.floor, "quadratic map"))
        if not isinstance(self.on, str) or self.on not in QUADRATIC_ON:
            raise MapFormatError(f"quadratic map: 'on' must be one of {QUADRATIC_ON}, got "
                                 f"{_short(self.on)}")
        if self.on == "margin" and self.input_transform != "identity":
            raise MapFormatError("quadratic map: on='margin' takes raw margins, so its "
                                 "input_transform must be 'identity' (use on='logit' for "
                                 "probabilities)")
        clamp = _check_clamp(self.clamp, "quadratic map")
        if self.on == "margin" and clamp != DEFAULT_CLAMP:
            raise MapFormatError("quadratic map: field 'clamp' applies to on='logit' only (a "
                                 "margin is used as it is)")
        object.__setattr__(self, "clamp", clamp)

    @property
    def size(self) -> int:
        """Number of parameters (a, b, c)."""
        return 3

    def log_odds(self, z: np.ndarray) -> np.ndarray:
        """``eta = ((a z) + (b (z z))) + c`` for log-odds ``z``, in the map's fixed order.

        Where the two terms overflow to infinities of opposite signs (huge coefficients or
        margins) that sum is NaN; there ``eta = (z (b z + a)) + c`` instead, which is never NaN
        for finite ``z`` and has the sign of the exact value, so the map stays in [0, 1]."""
        z = np.ascontiguousarray(z, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            eta = (self.a * z + self.b * (z * z)) + self.c
            bad = np.isnan(eta)
            if bad.any():
                eta[bad] = (z[bad] * (self.b * z[bad] + self.a)) + self.c
        return eta

    def _evaluate(self, s: np.ndarray) -> np.ndarray:
        z = logit_clamped(s, self.clamp) if self.on == "logit" \
            else np.ascontiguousarray(s, dtype=np.float64)
        return apply_floor(det_expit_array(self.log_odds(z)), self.floor)

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update(on=self.on, a=self.a, b=self.b, c=self.c)
        if self.floor != 0.0:
            d["floor"] = self.floor
        if self.clamp != DEFAULT_CLAMP:
            d["clamp"] = list(self.clamp)
        return d

    @classmethod
    def _from_dict(cls, doc: dict, where: str, common: dict[str, Any]) -> QuadraticMap:
        unknown = sorted(str(k)[:40] for k in doc if k not in QUADRATIC_FIELDS)
        if unknown:
            raise MapFormatError(f"{where}: unknown field(s) {', '.join(map(repr, unknown[:5]))}"
                                 f"; a quadratic map holds {', '.join(QUADRATIC_FIELDS)}")
        on = doc.get("on")
        if not isinstance(on, str) or on not in QUADRATIC_ON:
            raise MapFormatError(f"{where}: field 'on' must be one of {QUADRATIC_ON}, got "
                                 f"{_short(on)}")
        if on == "margin" and "clamp" in doc:
            raise MapFormatError(f"{where}: field 'clamp' applies to on='logit' only (a margin "
                                 "is used as it is)")
        return cls(*(_float_scalar(doc, k, where) for k in "abc"), _read_floor(doc, where),
                   on, _read_clamp(doc, where), **common)


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
    * :class:`SigmoidMap` (two parameters), :class:`BetaMap` and :class:`QuadraticMap` (three)
      and maps within the cap are returned unchanged.

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



@shrink_map.register
def _(m: QuadraticMap, max_size: int) -> tuple[CalibrationMap, float]:
    return m, 0.0   # three parameters: a cap never applies


@shrink_map.register
def _(m: OffsetMap, max_size: int) -> tuple[CalibrationMap, float]:
    inner, err = shrink_map(m.inner, max_size)
    # not measured but bounded: the offset multiplies a probability change by at most
    # exp(|delta|) (its largest slope in p); reduce_map only meets offsets passed to it by hand
    return OffsetMap(inner, m.delta), float(err) * float(np.exp(abs(m.delta)))
