"""Declarative constructor-parameter constraints, checked in one place.

Each calibrator class lists ``_parameter_constraints = {name: [constraint, ...]}``; a value is
valid when it satisfies at least one of its constraints. :meth:`BaseCalibrator.fit` and the JSON
loader both call :func:`validate_params`, so a parameter is checked the same way whether it was
typed by a user or read from an artifact.
"""

from __future__ import annotations

import math
import numbers
import reprlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = 6
_short.maxlevel = 3


def short_repr(value: Any) -> str:
    """``repr`` cut to a few dozen characters and three nesting levels (safe on any input)."""
    try:
        return _short.repr(value)
    except Exception:   # e.g. an integer too long for repr, or a broken __repr__
        return f"<{type(value).__name__}>"


class InvalidParameterError(ValueError):
    """A calibrator parameter has a value its class does not accept."""


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


#: the largest count an ``Integer`` parameter takes unless it says otherwise: a bin, knot,
#: fold or point count beyond 2**31 - 1 cannot be meant (a document saying ``n_bins`` is a
#: 301-digit number is corrupt), and the bound is exact in a double (the Java evaluator)
MAX_COUNT = 2 ** 31 - 1


class Constraint:
    """One acceptable kind of value; subclasses define ``accepts``, ``describe`` and ``spec``
    (the JSON form the Java evaluator interprets, see
    :mod:`mlcal.calibrators.document_rules`)."""

    def accepts(self, value: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class Options(Constraint):
    """One of the given strings."""

    options: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)

    def spec(self) -> dict[str, Any]:
        return {"kind": "options", "options": list(self.options)}


@dataclass(frozen=True)
class IsNone(Constraint):
    """``None``."""

    def accepts(self, value: Any) -> bool:
        return value is None

    def describe(self) -> str:
        return "None"

    def spec(self) -> dict[str, Any]:
        return {"kind": "none"}


@dataclass(frozen=True)
class Boolean(Constraint):
    """``True`` or ``False`` (not 0/1, not strings)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (bool, np.bool_))

    def describe(self) -> str:
        return "True or False"

    def spec(self) -> dict[str, Any]:
        return {"kind": "boolean"}


@dataclass(frozen=True)
class Integer(Constraint):
    """An integer (not a bool, not a float) with ``low <= value <= high``."""

    low: int
    high: int = MAX_COUNT

    def accepts(self, value: Any) -> bool:
        return (isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
                and self.low <= value <= self.high)

    def describe(self) -> str:
        return f"an integer in [{self.low}, {self.high}]"

    def spec(self) -> dict[str, Any]:
        return {"kind": "integer", "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Real(Constraint):
    """A finite real number in an interval; ``closed`` is "both", "left", "right" or "neither"."""

    low: float
    high: float = math.inf
    closed: str = "both"

    def accepts(self, value: Any) -> bool:
        if not _is_real(value):
            return False
        try:
            v = float(value)
        except OverflowError:   # a huge Python int
            return False
        if not math.isfinite(v):
            return False
        above = v >= self.low if self.closed in ("both", "left") else v > self.low
        below = v <= self.high if self.closed in ("both", "right") else v < self.high
        return above and below

    def describe(self) -> str:
        if self.high == math.inf:
            return f"a finite number {'>=' if self.closed in ('both', 'left') else '>'} {self.low:g}"
        lo = "[" if self.closed in ("both", "left") else "("
        hi = "]" if self.closed in ("both", "right") else ")"
        return f"a number in {lo}{self.low:g}, {self.high:g}{hi}"

    def spec(self) -> dict[str, Any]:
        return {"kind": "real", "low": self.low,
                "high": None if self.high == math.inf else self.high, "closed": self.closed}


@dataclass(frozen=True)
class ListOf(Constraint):
    """A non-empty list (or tuple / 1-D array) whose every item satisfies ``item``."""

    item: Constraint

    def accepts(self, value: Any) -> bool:
        if isinstance(value, np.ndarray):
            if value.ndim != 1:
                return False
            value = value.tolist()
        return (isinstance(value, (list, tuple)) and len(value) > 0
                and all(self.item.accepts(v) for v in value))

    def describe(self) -> str:
        return f"a non-empty list, each item {self.item.describe()}"

    def spec(self) -> dict[str, Any]:
        return {"kind": "list", "item": self.item.spec()}


def validate_params(owner: str, params: Mapping[str, Any],
                    constraints: Mapping[str, Sequence[Constraint]]) -> None:
    """Raise :class:`InvalidParameterError` naming the first parameter no constraint accepts.

    Parameters without an entry in ``constraints`` are not checked.
    """
    for name, allowed in constraints.items():
        if name not in params:
            continue
        value = params[name]
        if not any(c.accepts(value) for c in allowed):
            expected = " or ".join(c.describe() for c in allowed)
            raise InvalidParameterError(f"{owner}: parameter {name!r} must be {expected}; "
                                        f"got {short_repr(value)}")
