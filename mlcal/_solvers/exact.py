"""Exact integer decisions derived from floating-point quantities.

A bin count such as ``round(N^(1/3))`` must not depend on how a CPU rounds a cube root: numpy's
``cbrt`` gives ``cbrt(27000.) = 29.999999999999996`` with one SIMD implementation and ``30.0``
with another, so ``floor``/``round`` of it differ by one between machines. Every integer that
mlcal derives from a root or a quotient of floats is computed here in exact rational arithmetic
instead: a float is a dyadic rational (:class:`fractions.Fraction` holds it exactly), and each
function returns the mathematically exact integer for the float it is given. Roots are integer
roots (:func:`icbrt`, Newton's iteration in integers), so no floating-point root is involved.

Rule for fractional total weights: the total sample weight ``N`` enters as the double that
mlcal's summation produced; the functions then return e.g. ``floor(cbrt(N))`` of *that* double
exactly. A total of ``26999.999999999996`` therefore gives 29, ``27000.0`` gives 30, whatever the
CPU.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real

import numpy as np
from numba import njit

__all__ = ["icbrt", "floor_cbrt_scaled", "ceil_cbrt_scaled", "round_cbrt", "floor_div", "ceil_div",
           "floor_divide_exact", "floor_divide_exact_array", "round_half_even_ratio"]


def _as_fraction(value: Real, what: str) -> Fraction:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a number, got {value!r}")
    if isinstance(value, int):
        q = Fraction(value)
    else:
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"{what} must be finite, got {value!r}")
        q = Fraction(v)
    if q < 0:
        raise ValueError(f"{what} must be non-negative, got {value!r}")
    return q


def icbrt(n: int) -> int:
    """Largest integer ``k >= 0`` with ``k^3 <= n``, for an integer ``n >= 0`` of any size.

    Integer Newton iteration ``x <- (2x + n // x^2) // 3`` from a power of two above the root:
    the iterates decrease monotonically to the floor of the root (the integer analogue of
    ``math.isqrt``), so no floating-point root is involved at all.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if n < 8:
        return 1 if n else 0
    x = 1 << -(-n.bit_length() // 3)          # 2^ceil(bits/3) > cbrt(n)
    while True:
        y = (2 * x + n // (x * x)) // 3
        if y >= x:
            return x
        x = y


def _floor_cbrt_fraction(q: Fraction) -> int:
    """Largest integer ``k >= 0`` with ``k^3 <= q`` (``q`` a non-negative rational), exactly:
    for integer k, ``k^3 <= q`` iff ``k^3 <= floor(q)``."""
    return icbrt(math.floor(q))


def floor_cbrt_scaled(value: Real, scale: Real = 1) -> int:
    """``floor(scale * cbrt(value))`` computed exactly.

    Parameters
    ----------
    value : float or int
        Non-negative finite number (e.g. a total sample weight).
    scale : float or int, default=1
        Positive finite factor; ``floor(cbrt(N) / 10)`` is ``floor_cbrt_scaled(N, 0.1)`` only if
        0.1 were exact, so pass exact rationals as ``Fraction(1, 10)``.

    Returns
    -------
    int
        The largest integer ``k`` with ``k^3 <= scale^3 * value``.
    """
    s = Fraction(scale)
    if s <= 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    return _floor_cbrt_fraction(_as_fraction(value, "value") * s ** 3)


def ceil_cbrt_scaled(value: Real, scale: Real = 1) -> int:
    """``ceil(scale * cbrt(value))`` computed exactly: the smallest integer ``k`` with
    ``k^3 >= scale^3 * value`` (see :func:`floor_cbrt_scaled`)."""
    s = Fraction(scale)
    if s <= 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    q = _as_fraction(value, "value") * s ** 3
    k = _floor_cbrt_fraction(q)
    return k if k ** 3 == q else k + 1


def round_cbrt(value: Real) -> int:
    """``cbrt(value)`` rounded to the nearest integer, halves rounded up, computed exactly.

    ``round(r) = floor(r + 1/2)`` is the largest ``k`` with ``(k - 1/2)^3 <= value``, i.e.
    ``(2k - 1)^3 <= 8 value``.
    """
    q = _as_fraction(value, "value")
    # largest odd m = 2k - 1 with m^3 <= 8q; k = (m + 1) / 2, and k = 0 when no odd m >= 1 fits
    m = _floor_cbrt_fraction(8 * q)
    if m % 2 == 0:
        m -= 1
    return max((m + 1) // 2, 0)


def floor_div(numerator: Real, denominator: Real) -> int:
    """``floor(numerator / denominator)`` of two non-negative finite numbers, exactly (no
    rounding of the quotient before the floor)."""
    d = _as_fraction(denominator, "denominator")
    if d == 0:
        raise ZeroDivisionError("denominator must be positive")
    return math.floor(_as_fraction(numerator, "numerator") / d)


def ceil_div(numerator: Real, denominator: Real) -> int:
    """``ceil(numerator / denominator)`` of two non-negative finite numbers, exactly."""
    d = _as_fraction(denominator, "denominator")
    if d == 0:
        raise ZeroDivisionError("denominator must be positive")
    return math.ceil(_as_fraction(numerator, "numerator") / d)


@njit(cache=True, nogil=True)
def floor_divide_exact(a: float, b: float) -> float:
    """``floor(a / b)`` of the exact quotient of two finite doubles (``b != 0``), as a double.

    ``math.floor(a / b)`` floors the *rounded* quotient, which can be one too high when the
    exact quotient lies just below an integer. Here the remainder comes from ``fmod`` (exact in
    IEEE arithmetic), so ``a - r`` is a multiple ``n * b`` and ``(a - r) / b`` is within a few ulp
    of the integer ``n``, which rounding to nearest recovers (exact while ``|n| < 2^52``). Only
    correctly rounded operations are used: the same answer on every CPU.
    """
    r = np.fmod(a, b)
    q = (a - r) / b
    if r != 0.0 and ((b < 0.0) != (r < 0.0)):
        q -= 1.0
    f = math.floor(q)
    if q - f > 0.5:
        f += 1.0
    return f


@njit(cache=True, nogil=True)
def floor_divide_exact_array(a: np.ndarray, b: float) -> np.ndarray:
    """:func:`floor_divide_exact` of every element of ``a`` by ``b``."""
    out = np.empty(a.shape[0])
    for i in range(a.shape[0]):
        out[i] = floor_divide_exact(a[i], b)
    return out


def round_half_even_ratio(numerators: np.ndarray, denominator: int) -> np.ndarray:
    """``round(n / d)`` with halves to even, in exact integer arithmetic, for int64 ``n >= 0``
    and a positive integer ``d`` (``n`` small enough that ``2 n`` fits in int64)."""
    n = np.asarray(numerators, dtype=np.int64)
    d = int(denominator)
    if d <= 0:
        raise ValueError(f"denominator must be positive, got {denominator!r}")
    q, r = np.divmod(n, d)
    up = (2 * r > d) | ((2 * r == d) & (q % 2 == 1))
    return q + up.astype(np.int64)
