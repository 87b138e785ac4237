"""Deterministic elementary functions (exp, log, log1p, expm1, expit, lgamma), compiled with numba.

Why
---
A fitted calibrator is stored as canonical JSON that must be bit-identical for the same data on any
x86-64 CPU. The usual sources of ``exp``/``log`` are not: numpy's ufuncs pick a SIMD kernel at run
time (AVX-512, AVX2, SSE) and those kernels differ in the last bits, and glibc's libm (behind
Python's ``math`` and numba's ``math.exp``/``math.log``/``math.lgamma``) selects FMA/AVX2 code
paths by CPU with different last bits too. The functions here use only IEEE-754 basic operations
(``+ - * /``, comparisons, exact scaling by powers of two, integer arithmetic), each correctly
rounded by the standard on every CPU, and are compiled without fast-math, so LLVM neither
re-associates nor contracts to FMA (the determinism test checks the host assembly). The result
is the same bit pattern for the same input on every x86-64 CPU.

Method
------
* ``exp`` follows Tang's table-driven scheme (Tang 1989): ``x = (128 m + j) ln2/128 + r`` with the
  Cody & Waite (1980) split of ``ln2/128`` into a short high part (so ``n * hi`` is exact) and a
  low part, ``|r| <= ln2/256``; ``exp(x) = 2^m * 2^(j/128) * exp(r)`` with ``2^(j/128)`` held as a
  double pair and ``exp(r) - 1`` a degree-6 Taylor polynomial (truncation below 2^-70 relative).
  The power of two is applied exactly (in two steps near overflow); results in the subnormal
  range are rounded once, directly to a multiple of 2^-1074.
* ``log`` follows Tang's table-driven logarithm (Tang 1990): ``x = 2^m * F * (1 + u)`` with
  ``F = 1 + j/128`` the mantissa rounded to 7 bits, ``log(x) = m ln2 + log F + log1p(u)``;
  ``u = f/F`` is carried as a double pair (Dekker 1971 exact products via Veltkamp splitting,
  no FMA needed), ``m ln2 + log F`` is exact on a 2^-42 grid and the leading terms are added with
  error-free transformations (Dekker's Fast2Sum, Knuth's TwoSum), so the final rounding
  dominates the error.
* ``log1p(x)`` is ``log`` of ``1 + x`` with the rounding error of ``1 + x`` (TwoSum) fed back as
  ``c / (1 + x)``; ``expm1`` uses a Taylor polynomial for ``|x| <= 1/4`` (``x^2/2`` exact) and the
  ``exp`` reduction otherwise, subtracting 1 with TwoSum (after the approach of Tang 1992).
* ``expit`` computes ``exp(-|x|)`` as a double pair and divides with one Newton correction.
* ``lgamma`` (``x >= 0``) uses the recurrence up to ``x >= 8`` and the Stirling series with
  Bernoulli-number terms up to ``x^-15`` (truncation below 1e-16 at ``x = 8``).

Constant tables (``2^(j/128)`` and ``log(1 + j/128)`` as hi/lo pairs) are computed at import with
Python's ``decimal`` module (software arithmetic, correctly rounded, CPU independent).

Accuracy (measured by ``tests/test_detmath.py`` against mpmath at 100 bits): exp, log, log1p,
expm1 and expit stay within about 0.52 ulp of the exact value (so within 1 ulp of the correctly
rounded result), over the whole range including subnormal inputs and results. ``lgamma`` is
within ``1e-14 * max(1, |lgamma(x)|)`` of mpmath and of ``scipy.special.gammaln``.

References
----------
P. T. P. Tang, "Table-driven implementation of the exponential function in IEEE floating-point
arithmetic", ACM TOMS 15(2), 1989. P. T. P. Tang, "Table-driven implementation of the logarithm
function in IEEE floating-point arithmetic", ACM TOMS 16(4), 1990. P. T. P. Tang, "Table-driven
implementation of the expm1 function in IEEE floating-point arithmetic", ACM TOMS 18(2), 1992.
W. J. Cody and W. Waite, "Software Manual for the Elementary Functions", Prentice-Hall, 1980.
T. J. Dekker, "A floating-point technique for extending the available precision", Numer. Math.
18, 1971. D. E. Knuth, TAOCP vol. 2, section 4.2.2. Abramowitz & Stegun 6.1.40 (Stirling series).
"""

from __future__ import annotations

import decimal
import math

import numpy as np
from numba import njit

__all__ = [
    "det_exp",
    "det_log",
    "det_log1p",
    "det_expm1",
    "det_expit",
    "det_lgamma",
    "det_exp_array",
    "det_log_array",
    "det_log1p_array",
    "det_expm1_array",
    "det_expit_array",
    "det_lgamma_array",
]


def _build_tables():
    """hi/lo constants, computed in decimal arithmetic (60 significant digits)."""
    ctx = decimal.Context(prec=60)
    ln2 = ctx.ln(decimal.Decimal(2))

    def on_grid(d, bits):
        # round d to a multiple of 2^-bits: the products/sums of these stay exact
        scaled = ctx.multiply(d, decimal.Decimal(2) ** bits)
        return float(int(scaled.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))) / 2.0**bits

    def pair(d, hi):
        return hi, float(ctx.subtract(d, decimal.Decimal(hi)))

    exp_hi = np.empty(128)
    exp_lo = np.empty(128)
    for j in range(128):
        d = ctx.exp(ctx.multiply(ln2, decimal.Decimal(j) / 128))
        exp_hi[j], exp_lo[j] = pair(d, float(d))
    log_hi = np.empty(129)
    log_lo = np.empty(129)
    for j in range(129):
        d = ctx.ln(decimal.Decimal(128 + j) / 128)
        log_hi[j], log_lo[j] = pair(d, on_grid(d, 42))
    ln2_hi, ln2_lo = pair(ln2, on_grid(ln2, 42))
    step = ctx.divide(ln2, 128)
    red_hi, red_lo = pair(step, on_grid(step, 42))
    inv_step = float(ctx.divide(128, ln2))
    return exp_hi, exp_lo, log_hi, log_lo, ln2_hi, ln2_lo, red_hi, red_lo, inv_step


(_EXP_HI, _EXP_LO, _LOG_HI, _LOG_LO, _LN2_HI, _LN2_LO, _RED_HI, _RED_LO,
 _INV_STEP) = _build_tables()
_INV_F = 128.0 / np.arange(128.0, 257.0)  # 1 / (1 + j/128), j = 0..128
# 2^k for k = -1022..1023 (exact, built by ldexp on normal numbers)
_POW2 = np.ldexp(1.0, np.arange(-1022, 1024))
_SHIFTER = 6755399441055744.0  # 1.5 * 2^52: (z + S) - S rounds z to an integer, ties to even
_SPLITTER = 134217729.0  # 2^27 + 1, Veltkamp splitting
# beyond these cut-offs the result is inf / 0; in between, the exact scaling rounds (or
# overflows) by itself, exactly at the C99 thresholds
_EXP_OVERFLOW = 709.79
_EXP_UNDERFLOW = -745.2
_TWO_M54 = 2.0**-54
_TWO_54 = 2.0**54
_TWO_52 = 2.0**52
_MIN_NORMAL_BITS = 1 << 52  # bit pattern of the smallest normal double
_MANT_MASK = (1 << 52) - 1
_ONE_BITS = 1023 << 52  # bit pattern of 1.0
_INF_BITS = 2047 << 52  # bit pattern of +inf (and above it: NaN)
# 1/k! correctly rounded (exact rational -> float), k = 0..15
_INV_FACT = np.array([1.0 / math.factorial(k) for k in range(16)])


@njit(cache=True, nogil=True)
def _pow2(k):
    return _POW2[k + 1022]


@njit(cache=True, nogil=True)
def _scale(y, m):
    """``y * 2^m`` for ``y`` in [0.5, 4) and normal or overflowing results; ``2^1024`` is not a
    double, so large ``m`` is applied in two exact steps (the second one rounds/overflows)."""
    if -1022 <= m <= 1023:
        return y * _pow2(m)
    half = m // 2
    return (y * _pow2(half)) * _pow2(m - half)


@njit(cache=True, nogil=True)
def _two_prod(a, b):
    """Exact product ``a*b = p + e`` (Dekker), using Veltkamp splitting instead of FMA."""
    p = a * b
    t = _SPLITTER * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLITTER * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@njit(cache=True, nogil=True)
def _two_sum(a, b):
    """Exact sum ``a+b = s + e`` (Knuth), no ordering assumption."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@njit(cache=True, nogil=True)
def _exp_parts(x):
    """``exp(x) = 2^m * (t + lo)`` for finite ``x`` in about (-746, 710); ``t`` = 2^(j/128)."""
    n = (x * _INV_STEP + _SHIFTER) - _SHIFTER
    r1 = x - n * _RED_HI  # exact: n * _RED_HI is exact and close to x
    r2 = -n * _RED_LO
    r = r1 + r2
    q = r * r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0)))))
    p = r1 + (r2 + q)  # exp(r) - 1
    k = np.int64(n)
    j = k & 127
    m = k >> 7
    t = _EXP_HI[j]
    lo = _EXP_LO[j] + t * p
    return m, t, lo


@njit(cache=True, nogil=True)
def det_exp(x: float) -> float:
    """Deterministic ``exp(x)``.

    Parameters
    ----------
    x : float

    Returns
    -------
    float
        ``exp(x)`` within 1 ulp (about 0.5 ulp in practice); ``inf`` once the result
        overflows (``x > 709.782712893384``), ``0`` once it underflows
        (``x <= -745.1332191019412``), ``nan`` for ``nan``.
    """
    if x != x:
        return x + x
    if x > _EXP_OVERFLOW:
        return math.inf
    if x < _EXP_UNDERFLOW:
        return 0.0
    m, t, lo = _exp_parts(x)
    if m < -1022:
        return _subnormal_exp(m, t, lo)
    return _scale(t + lo, m)


@njit(cache=True, nogil=True)
def _subnormal_exp(m, t, lo):
    """``2^m (t + lo)`` rounded once onto the subnormal grid (multiples of 2^-1074).

    Rounding ``t + lo`` to a double first and scaling afterwards would round twice."""
    y = t + lo
    e = (t - y) + lo  # Fast2Sum: t + lo = y + e exactly
    scale = _pow2(m + 1074)  # m >= -1076, so scale >= 1/4 and a < 2^52
    a = y * scale  # exact: the result measured in units of 2^-1074
    ea = e * scale
    r = (a + _TWO_52) - _TWO_52  # a rounded to an integer (ties to even)
    w = (a - r) + ea  # what r misses; |a - r| <= 1/2 and |ea| is far below 1
    if w > 0.5:
        r += 1.0
    elif w < -0.5:
        r -= 1.0
    return (r * _pow2(-52)) * _pow2(-1022)  # r < 2^53 integer: both scalings exact


@njit(cache=True, nogil=True, inline="always")
def _parts_of_bits(bits, m, corr):
    """``log(x) + corr`` as ``(s, tail)`` for ``x = 2^m * y``, ``y`` in ``[1, 2)`` the mantissa
    of the bit pattern ``bits`` of a positive normal number (``m`` its unbiased exponent)."""
    y = np.int64((bits & _MANT_MASK) | _ONE_BITS).view(np.float64)  # [1, 2)
    j = np.int64(((y - 1.0) * 128.0 + _SHIFTER) - _SHIFTER)  # 0..128
    big_f = 1.0 + j * 0.0078125
    f = y - big_f  # exact, |f| <= 1/256
    inv_f = _INV_F[j]
    u = f * inv_f  # near f/F; the exact residual below makes up the difference
    # u_lo = (f - u*F)/F with u*F exact: F has 8 significant bits, so only u needs splitting
    t = _SPLITTER * u
    uh = t - (t - u)
    ul = u - uh
    u_lo = ((f - uh * big_f) - ul * big_f) * inv_f
    # log1p(u) - u, Taylor to u^7 (|u| <= 2^-8: truncation below 2^-59 relative)
    poly = u * u * (-0.5 + u * (1.0 / 3.0 + u * (-0.25 + u * (0.2 + u * (
        -1.0 / 6.0 + u * (1.0 / 7.0))))))
    a = m * _LN2_HI + _LOG_HI[j]  # exact on the 2^-42 grid
    s = a + u  # |a| >= |u| whenever a != 0, so Fast2Sum is exact
    err = (a - s) + u
    tail = err + (((m * _LN2_LO + _LOG_LO[j]) + corr) + (u_lo + poly))
    return s, tail


@njit(cache=True, nogil=True)
def _log_parts(x, corr):
    """``log(x) + corr`` as ``(s, tail)`` for positive finite ``x`` (``|corr| << 1``)."""
    bits = np.float64(x).view(np.int64)
    m = -1023
    if bits < _MIN_NORMAL_BITS:  # subnormal: normalise exactly
        bits = np.float64(x * _TWO_54).view(np.int64)
        m -= 54
    m += bits >> 52
    return _parts_of_bits(bits, m, corr)


@njit(cache=True, nogil=True, inline="always")
def _log_of_bits(bits, corr):
    """``log(x) + corr`` for a positive normal finite ``x`` given as its bit pattern: the
    operations of :func:`_log_parts` and the final sum of :func:`det_log` (``corr = 0.0``) and
    :func:`det_log1p`, without their tests (the callers screen the argument)."""
    s, tail = _parts_of_bits(bits, (bits >> 52) - 1023, corr)
    return s + tail


@njit(cache=True, nogil=True, inline="always")
def log_in_unit(p):
    """:func:`det_log` of ``p`` in ``[2**-1022, 1]`` (the same value), without its tests."""
    return _log_of_bits(np.float64(p).view(np.int64), 0.0)


@njit(cache=True, nogil=True, inline="always")
def log1p_in_unit(x):
    """:func:`det_log1p` of ``x`` in ``(-1, 1]`` (the same value), without its tests."""
    if abs(x) < 2.0**-12:
        return x + x * x * (-0.5 + x * (1.0 / 3.0 + x * (-0.25 + x * 0.2)))
    y, c = _two_sum(1.0, x)  # 1 + x = y + c exactly; y >= 2**-53 is normal
    return _log_of_bits(np.float64(y).view(np.int64), c / y)


@njit(cache=True, nogil=True)
def det_log(x: float) -> float:
    """Deterministic natural logarithm.

    Parameters
    ----------
    x : float

    Returns
    -------
    float
        ``log(x)`` within 1 ulp; ``-inf`` for ``+-0``, ``nan`` for ``x < 0`` and ``nan``,
        ``inf`` for ``inf``.
    """
    if x != x:
        return x + x
    if x <= 0.0:
        if x == 0.0:
            return -math.inf
        return math.nan
    if x == math.inf:
        return x
    s, tail = _log_parts(x, 0.0)
    return s + tail


@njit(cache=True, nogil=True)
def det_log1p(x: float) -> float:
    """Deterministic ``log(1 + x)``, accurate for small ``|x|``.

    Parameters
    ----------
    x : float

    Returns
    -------
    float
        ``log1p(x)`` within 1 ulp; ``-inf`` at ``-1``, ``nan`` below ``-1`` and for ``nan``,
        keeps the sign of zero.
    """
    if x != x:
        return x + x
    if x <= -1.0:
        if x == -1.0:
            return -math.inf
        return math.nan
    if x == math.inf:
        return x
    if abs(x) < 2.0**-12:
        # Taylor to x^5 (truncation below 2^-62 relative); also keeps x for tiny x and -0
        return x + x * x * (-0.5 + x * (1.0 / 3.0 + x * (-0.25 + x * 0.2)))
    y, c = _two_sum(1.0, x)  # 1 + x = y + c exactly
    s, tail = _log_parts(y, c / y)
    return s + tail


@njit(cache=True, nogil=True)
def det_expm1(x: float) -> float:
    """Deterministic ``exp(x) - 1``, accurate for small ``|x|``.

    Parameters
    ----------
    x : float

    Returns
    -------
    float
        ``expm1(x)`` within 1 ulp; ``-1`` for ``x < -38`` and ``-inf``, ``inf`` once the
        result overflows (``x > 709.782712893384``), ``x`` itself for ``|x| < 2^-54``.
    """
    if x != x:
        return x + x
    if x > _EXP_OVERFLOW:
        return math.inf
    if x < -38.0:
        return -1.0  # exp(x) < 2^-54: -1 + exp(x) rounds to -1
    ax = abs(x)
    if ax < _TWO_M54:
        return x
    if ax <= 0.25:
        # x + x^2/2 + x^3 (1/6 + x/24 + ...); x^2/2 exact, Taylor to x^15
        h, hl = _two_prod(x, x)
        h *= 0.5
        hl *= 0.5
        c = _INV_FACT[15]
        for k in range(14, 2, -1):
            c = _INV_FACT[k] + x * c  # 1/3! + x/4! + ... + x^12/15!
        s = x + h  # |x| >= h: Fast2Sum
        err = (x - s) + h
        return s + (err + (hl + x * x * x * c))
    m, t, lo = _exp_parts(x)
    if m > 60:
        return _scale(t + lo, m)  # the -1 is far below half an ulp
    scale = _pow2(m)
    s, err = _two_sum(t * scale, -1.0)  # t * 2^m is exact (normal range)
    return s + (err + lo * scale)


@njit(cache=True, nogil=True)
def det_expit(x: float) -> float:
    """Deterministic logistic sigmoid ``1 / (1 + exp(-x))``, stable for both signs.

    Parameters
    ----------
    x : float

    Returns
    -------
    float
        ``expit(x)`` within 1 ulp; ``1`` for ``x > 40`` (the true value rounds to 1),
        ``exp(x)`` for ``x < -40`` (``exp(x) (1 - exp(x))`` rounds the same within 1 ulp),
        ``nan`` for ``nan``.
    """
    if x != x:
        return x + x
    if x > 40.0:
        return 1.0
    if x < -40.0:
        return det_exp(x)
    m, t, lo = _exp_parts(-abs(x))  # exp(-|x|) = 2^m (t + lo), m >= -58
    scale = _pow2(m)
    h = t + lo  # |t| > |lo|: Fast2Sum renormalises the pair
    e_hi = h * scale
    e_lo = ((t - h) + lo) * scale
    s = 1.0 + e_hi  # e_hi <= 1: Fast2Sum
    s_err = ((1.0 - s) + e_hi) + e_lo  # 1 + exp(-|x|) = s + s_err
    q = 1.0 / s if x >= 0.0 else e_hi / s
    p, pe = _two_prod(q, s)
    if x >= 0.0:
        # 1 / (s + s_err): one Newton step on the residual of q
        r = ((1.0 - p) - pe) - q * s_err
    else:
        # (e_hi + e_lo) / (s + s_err)
        r = (((e_hi - p) - pe) + e_lo) - q * s_err
    return q + r / s


# Stirling-series coefficients B_2k / (2k (2k - 1)), k = 1..8 (Abramowitz & Stegun 6.1.40)
_ST1 = 1.0 / 12.0
_ST2 = -1.0 / 360.0
_ST3 = 1.0 / 1260.0
_ST4 = -1.0 / 1680.0
_ST5 = 1.0 / 1188.0
_ST6 = -691.0 / 360360.0
_ST7 = 1.0 / 156.0
_ST8 = -3617.0 / 122400.0
_HALF_LOG_2PI = float(decimal.Context(prec=40).ln(2 * decimal.Decimal(
    "3.14159265358979323846264338327950288419716939937510")) / 2)


@njit(cache=True, nogil=True)
def det_lgamma(x: float) -> float:
    """Deterministic ``log(Gamma(x))`` for ``x >= 0``.

    Parameters
    ----------
    x : float
        Must be ``>= 0`` (or ``nan``); ``lgamma(+-0) = inf`` (pole, as in C99).

    Returns
    -------
    float
        ``lgamma(x)`` with error at most ``1e-14 * max(1, |lgamma(x)|)`` (absolute near the
        zeros at 1 and 2, relative for large values); ``inf`` for ``x = inf`` and for
        ``x > 2.55e305`` (overflow).

    Raises
    ------
    ValueError
        If ``x < 0`` (the reflection formula would need a deterministic ``sin``; no fit path
        needs it).
    """
    if x != x:
        return x + x
    if x < 0.0:
        raise ValueError("det_lgamma: x must be >= 0 (negative arguments are not supported)")
    if x == 0.0:
        return math.inf
    if x == math.inf:
        return x
    # logs are kept as (value, tail) pairs so their rounding does not add up in the sums
    shift = 0.0
    shift_tail = 0.0
    if x < 8.0:
        # lgamma(x) = lgamma(z) - log(x (x+1) ... (z-1)); log(x) apart so tiny x stay exact
        prod = 1.0
        z = x + 1.0
        while z < 8.0:
            prod *= z
            z += 1.0
        s1, t1 = _log_parts(x, 0.0)
        s2, t2 = _log_parts(prod, 0.0)
        shift = s1 + s2
        shift_tail = t1 + t2
        x = z
    lx, lx_tail = _log_parts(x, 0.0)
    w = 1.0 / x
    w2 = w * w
    series = w * (_ST1 + w2 * (_ST2 + w2 * (_ST3 + w2 * (_ST4 + w2 * (_ST5 + w2 * (
        _ST6 + w2 * (_ST7 + w2 * _ST8)))))))
    # x (log x - 1) - log(x)/2 avoids overflowing x log x near the overflow threshold;
    # lx - 1 is exact for x >= 8
    main = (x * (lx - 1.0) - 0.5 * lx) + _HALF_LOG_2PI - shift
    return main + (((x - 0.5) * lx_tail - shift_tail) + series)


@njit(cache=True, nogil=True)
def det_exp_array(x: np.ndarray) -> np.ndarray:
    """:func:`det_exp` over a float64 1-D array (new array)."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = det_exp(x[i])
    return out


@njit(cache=True, nogil=True)
def det_log_array(x: np.ndarray) -> np.ndarray:
    """:func:`det_log` over a float64 1-D array (new array).

    Positive normal finite entries (the usual case) take :func:`det_log`'s operations for
    them, read from the bits directly (no special-case tests per entry): the same values; the
    others (zeros, subnormals, negatives, infinities, NaN) call :func:`det_log`."""
    n = x.shape[0]
    out = np.empty(n)
    xb = np.ascontiguousarray(x).view(np.int64)
    for i in range(n):
        bits = xb[i]
        if bits < _MIN_NORMAL_BITS or bits >= _INF_BITS:   # (negatives: sign bit set)
            out[i] = det_log(x[i])
        else:
            out[i] = _log_of_bits(bits, 0.0)
    return out


@njit(cache=True, nogil=True)
def clipped_neg_log_pair(p: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """``(-det_log_array(q), -det_log_array(1.0 - q))`` for ``q = np.clip(p, lo, hi)``, in one
    pass without temporaries: the same values (each entry takes :func:`det_log_array`'s
    operations for it; ``q`` is ``p`` clipped as ``np.clip`` does, NaN kept). An entry whose
    ``q`` equals the previous entry's (a step map's run) copies its logs: the same values."""
    n = p.shape[0]
    out_p = np.empty(n)
    out_q = np.empty(n)
    prev = np.nan
    for i in range(n):
        q = p[i]
        if q < lo:
            q = lo
        if q > hi:
            q = hi
        if i > 0 and q == prev:
            out_p[i] = out_p[i - 1]
            out_q[i] = out_q[i - 1]
            continue
        prev = q
        out_p[i] = -_det_log_entry(q)
        out_q[i] = -_det_log_entry(1.0 - q)
    return out_p, out_q


@njit(cache=True, nogil=True)
def _det_log_entry(v: float) -> float:
    """One entry of :func:`det_log_array`: a positive normal finite ``v`` from its bits, the
    others by :func:`det_log` (the same value as ``det_log(v)``)."""
    bits = np.float64(v).view(np.int64)
    if bits < _MIN_NORMAL_BITS or bits >= _INF_BITS:
        return det_log(v)
    return _log_of_bits(bits, 0.0)


@njit(cache=True, nogil=True)
def det_log1p_array(x: np.ndarray) -> np.ndarray:
    """:func:`det_log1p` over a float64 1-D array (new array).

    Finite entries ``-1 < x`` with ``|x| >= 2**-12`` (``1 + x`` then is a normal number) take
    :func:`det_log1p`'s operations for them without its special-case tests: the same values;
    the others call :func:`det_log1p`."""
    n = x.shape[0]
    out = np.empty(n)
    for i in range(n):
        xi = x[i]
        if not (-1.0 < xi < math.inf and abs(xi) >= 2.0**-12):   # (also NaN)
            out[i] = det_log1p(xi)
            continue
        y, c = _two_sum(1.0, xi)  # 1 + x = y + c exactly; y >= 2**-53 is normal
        out[i] = _log_of_bits(np.float64(y).view(np.int64), c / y)
    return out


@njit(cache=True, nogil=True)
def det_expm1_array(x: np.ndarray) -> np.ndarray:
    """:func:`det_expm1` over a float64 1-D array (new array)."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = det_expm1(x[i])
    return out


@njit(cache=True, nogil=True)
def det_expit_array(x: np.ndarray) -> np.ndarray:
    """:func:`det_expit` over a float64 1-D array (new array)."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = det_expit(x[i])
    return out


@njit(cache=True, nogil=True)
def det_lgamma_array(x: np.ndarray) -> np.ndarray:
    """:func:`det_lgamma` over a float64 1-D array (new array); raises on negative entries."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = det_lgamma(x[i])
    return out
