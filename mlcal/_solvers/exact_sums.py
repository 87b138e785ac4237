"""Exact sums of non-negative doubles carried as integers, and their expansion back to doubles.

A double ``w > 0`` is ``m * 2^(e - 52)`` with an integer ``m < 2^53``; an aggregation engine can
sum the integers ``m`` of each exponent class exactly (as wide decimals) where a sum of doubles
would depend on the order of the terms. :func:`combine` turns those per-class integer sums into
one exact value ``n * 2^k``; :func:`nonnegative_expansion` writes that value as a few
non-negative doubles whose exact sum it is. :func:`mlcal._solvers.ties.sort_and_collapse` adds
such doubles exactly and rounds once, so it returns the same statistics from the expansion as
from the original rows.
"""

from __future__ import annotations

import math

#: smallest exponent of a unit in the last place of any double (subnormals are k * 2^-1074)
MIN_UNIT_EXPONENT = -1074
_MANT_BITS = 53


def combine(mantissa_sums, exponents) -> tuple[int, int]:
    """``sum(M_i * 2^(e_i - 52))`` exactly, as ``(n, k)`` with value ``n * 2^k``.

    Parameters
    ----------
    mantissa_sums : iterable of int
        Non-negative integer sums ``M_i`` of the mantissas of one exponent class each.
    exponents : iterable of int
        The class exponents ``e_i``. Each ``M_i * 2^(e_i - 52)`` must be a sum of doubles
        (a multiple of ``2^-1074``), so ``k >= -1074`` in the result.
    """
    pairs = [(int(m), int(e)) for m, e in zip(mantissa_sums, exponents) if int(m) != 0]
    if not pairs:
        return 0, 0
    low = min(e for _, e in pairs)
    n, k = sum(m << (e - low) for m, e in pairs), low - (_MANT_BITS - 1)
    if k < MIN_UNIT_EXPONENT:                  # a class below the subnormal unit: drop zeros
        shift = MIN_UNIT_EXPONENT - k
        if n & ((1 << shift) - 1):
            raise ValueError("the mantissa sums are not a sum of doubles")
        n, k = n >> shift, MIN_UNIT_EXPONENT
    return n, k


def nonnegative_expansion(n: int, k: int) -> list[float]:
    """Non-negative doubles, largest first, whose exact sum is ``n * 2^k`` (``n >= 0``,
    ``k >= -1074``): each term is the largest double not above what is left.

    Raises ``OverflowError`` when the value exceeds the largest double.
    """
    if n < 0 or k < MIN_UNIT_EXPONENT:
        raise ValueError("nonnegative_expansion needs n >= 0 and k >= -1074")
    terms = []
    while n:
        shift = max(n.bit_length() - _MANT_BITS, 0)
        top = n >> shift
        terms.append(math.ldexp(top, k + shift))   # exact: top < 2^53, k + shift >= -1074
        n -= top << shift
    return terms
