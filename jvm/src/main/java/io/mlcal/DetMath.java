package io.mlcal;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * The deterministic exp, log, log1p and expit of mlcal's {@code mlcal._solvers.detmath}, operation for
 * operation, so every result is bit-identical to the Python package.
 *
 * <p>Both use only IEEE-754 basic operations (each correctly rounded), exact scaling by powers
 * of two and integer arithmetic; Java evaluates {@code double} expressions in strict IEEE
 * double precision and never contracts a multiply-add into an FMA, so the same expression
 * gives the same bits. Methods: Tang's table-driven exp (ACM TOMS 15(2), 1989) with the Cody &amp;
 * Waite split of ln2/128, and Tang's table-driven log (ACM TOMS 16(4), 1990) with Dekker's exact
 * products (Veltkamp splitting, no FMA).
 *
 * <p>The constant tables (2^(j/128) and log(1 + j/128) as hi/lo pairs) are computed at class
 * initialisation the way the Python module computes them: in decimal arithmetic rounded to 60
 * significant digits, the "hi" parts of the log constants rounded onto a 2^-42 grid, every
 * double obtained by correct rounding of a decimal.
 */
public final class DetMath {
    private DetMath() {
    }

    private static final MathContext CTX = new MathContext(60, RoundingMode.HALF_EVEN);
    /** working precision of the series; their results are then rounded to CTX */
    private static final MathContext WORK = new MathContext(100, RoundingMode.HALF_EVEN);

    static final double[] EXP_HI = new double[128];
    static final double[] EXP_LO = new double[128];
    static final double[] LOG_HI = new double[129];
    static final double[] LOG_LO = new double[129];
    static final double[] INV_F = new double[129];
    static final double LN2_HI;
    static final double LN2_LO;
    static final double RED_HI;
    static final double RED_LO;
    static final double INV_STEP;

    private static final double SHIFTER = 6755399441055744.0; // 1.5 * 2^52
    private static final double SPLITTER = 134217729.0; // 2^27 + 1
    private static final double EXP_OVERFLOW = 709.79;
    private static final double EXP_UNDERFLOW = -745.2;
    private static final double TWO_52 = 4503599627370496.0;
    private static final double TWO_54 = 18014398509481984.0;
    private static final long MIN_NORMAL_BITS = 1L << 52;
    private static final long MANT_MASK = (1L << 52) - 1;
    private static final long ONE_BITS = 1023L << 52;

    static {
        BigDecimal ln2 = lnSeries(new BigDecimal(2)).round(CTX);
        for (int j = 0; j < 128; j++) {
            BigDecimal arg = ln2.multiply(new BigDecimal(j).divide(new BigDecimal(128)), CTX);
            BigDecimal d = expSeries(arg).round(CTX);
            EXP_HI[j] = toDouble(d);
            EXP_LO[j] = lowPart(d, EXP_HI[j]);
        }
        for (int j = 0; j < 129; j++) {
            BigDecimal d = lnSeries(new BigDecimal(128 + j).divide(new BigDecimal(128))).round(CTX);
            LOG_HI[j] = onGrid(d, 42);
            LOG_LO[j] = lowPart(d, LOG_HI[j]);
            INV_F[j] = 128.0 / (128.0 + j);
        }
        LN2_HI = onGrid(ln2, 42);
        LN2_LO = lowPart(ln2, LN2_HI);
        BigDecimal step = ln2.divide(new BigDecimal(128), CTX);
        RED_HI = onGrid(step, 42);
        RED_LO = lowPart(step, RED_HI);
        INV_STEP = toDouble(new BigDecimal(128).divide(ln2, CTX));
    }

    /** The correctly rounded double nearest a decimal (Java's decimal-to-double parsing is). */
    private static double toDouble(BigDecimal d) {
        return Double.parseDouble(d.toString());
    }

    private static double lowPart(BigDecimal d, double hi) {
        return toDouble(d.subtract(new BigDecimal(hi), CTX));
    }

    /** {@code d} rounded to a multiple of 2^-bits (ties to even). */
    private static double onGrid(BigDecimal d, int bits) {
        BigDecimal scaled = d.multiply(new BigDecimal(BigInteger.ONE.shiftLeft(bits)), CTX);
        long n = scaled.setScale(0, RoundingMode.HALF_EVEN).longValueExact();
        return (double) n / Math.scalb(1.0, bits);
    }

    /** exp(x) for 0 <= x < 1 by its Taylor series, to WORK precision. */
    private static BigDecimal expSeries(BigDecimal x) {
        BigDecimal sum = BigDecimal.ONE;
        BigDecimal term = BigDecimal.ONE;
        BigDecimal eps = BigDecimal.ONE.movePointLeft(WORK.getPrecision() + 5);
        for (int k = 1; term.abs().compareTo(eps) > 0; k++) {
            term = term.multiply(x, WORK).divide(new BigDecimal(k), WORK);
            sum = sum.add(term, WORK);
        }
        return sum;
    }

    /** ln(y) for 1 <= y <= 2 as 2 atanh((y - 1) / (y + 1)), to WORK precision. */
    private static BigDecimal lnSeries(BigDecimal y) {
        BigDecimal z = y.subtract(BigDecimal.ONE).divide(y.add(BigDecimal.ONE), WORK);
        BigDecimal z2 = z.multiply(z, WORK);
        BigDecimal power = z;
        BigDecimal sum = BigDecimal.ZERO;
        BigDecimal eps = BigDecimal.ONE.movePointLeft(WORK.getPrecision() + 5);
        for (int k = 1; power.abs().compareTo(eps) > 0; k += 2) {
            sum = sum.add(power.divide(new BigDecimal(k), WORK), WORK);
            power = power.multiply(z2, WORK);
        }
        return sum.multiply(new BigDecimal(2), WORK);
    }

    private static double pow2(int k) {
        return Double.longBitsToDouble((long) (k + 1023) << 52); // exact for -1022 <= k <= 1023
    }

    private static double scale(double y, int m) {
        if (-1022 <= m && m <= 1023) {
            return y * pow2(m);
        }
        int half = Math.floorDiv(m, 2);
        return (y * pow2(half)) * pow2(m - half);
    }

    /** The multiple n of ln2/128 nearest x (ties to even), as a double. */
    private static double steps(double x) {
        return (x * INV_STEP + SHIFTER) - SHIFTER;
    }

    /**
     * exp(r) - 1 for the reduced argument r = x - n ln2/128 (Cody &amp; Waite: n * RED_HI is
     * exact), so exp(x) = 2^(n >> 7) (t + t p) with t = EXP_HI[n &amp; 127].
     */
    private static double reducedExpm1(double x, double n) {
        double r1 = x - n * RED_HI;
        double r2 = -n * RED_LO;
        double r = r1 + r2;
        double q = r * r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0
                + r * (1.0 / 720.0)))));
        return r1 + (r2 + q);
    }

    /**
     * Deterministic exp(x), bit-identical to mlcal's {@code det_exp}.
     *
     * @param x any double
     * @return exp(x) within 1 ulp; inf on overflow, 0 on underflow, NaN for NaN
     */
    public static double exp(double x) {
        if (x != x) {
            return x + x;
        }
        if (x > EXP_OVERFLOW) {
            return Double.POSITIVE_INFINITY;
        }
        if (x < EXP_UNDERFLOW) {
            return 0.0;
        }
        double n = steps(x);
        long k = (long) n;
        double t = EXP_HI[(int) (k & 127)];
        double lo = EXP_LO[(int) (k & 127)] + t * reducedExpm1(x, n);
        int m = (int) (k >> 7);
        if (m < -1022) {
            return subnormalExp(m, t, lo);
        }
        return scale(t + lo, m);
    }

    /** 2^m (t + lo) rounded once onto the subnormal grid (multiples of 2^-1074). */
    private static double subnormalExp(int m, double t, double lo) {
        double y = t + lo;
        double e = (t - y) + lo;
        double sc = pow2(m + 1074);
        double a = y * sc;
        double ea = e * sc;
        double r = (a + TWO_52) - TWO_52;
        double w = (a - r) + ea;
        if (w > 0.5) {
            r += 1.0;
        } else if (w < -0.5) {
            r -= 1.0;
        }
        return (r * pow2(-52)) * pow2(-1022);
    }

    /**
     * Deterministic logistic sigmoid 1 / (1 + exp(-x)), bit-identical to mlcal's
     * {@code det_expit}.
     *
     * @param x any double
     * @return expit(x) within 1 ulp; NaN for NaN
     */
    public static double expit(double x) {
        if (x != x) {
            return x + x;
        }
        if (x > 40.0) {
            return 1.0;
        }
        if (x < -40.0) {
            return exp(x);
        }
        double ax = -Math.abs(x); // exp(-|x|) = 2^m (t + lo), m >= -58
        double n = steps(ax);
        long k = (long) n;
        double t = EXP_HI[(int) (k & 127)];
        double lo = EXP_LO[(int) (k & 127)] + t * reducedExpm1(ax, n);
        double sc = pow2((int) (k >> 7));
        double h = t + lo;
        double eHi = h * sc;
        double eLo = ((t - h) + lo) * sc;
        double s = 1.0 + eHi;
        double sErr = ((1.0 - s) + eHi) + eLo;
        double q = x >= 0.0 ? 1.0 / s : eHi / s;
        // Dekker's exact product q * s = p + pe
        double p = q * s;
        double c = SPLITTER * q;
        double qh = c - (c - q);
        double ql = q - qh;
        c = SPLITTER * s;
        double sh = c - (c - s);
        double sl = s - sh;
        double pe = ((qh * sh - p) + qh * sl + ql * sh) + ql * sl;
        double r;
        if (x >= 0.0) {
            r = ((1.0 - p) - pe) - q * sErr;
        } else {
            r = (((eHi - p) - pe) + eLo) - q * sErr;
        }
        return q + r / s;
    }

    /**
     * Deterministic natural logarithm, bit-identical to mlcal's {@code det_log}.
     *
     * @param x any double
     * @return log(x) within 1 ulp; -inf for +-0, NaN for negative x and NaN, inf for inf
     */
    public static double log(double x) {
        if (x != x) {
            return x + x;
        }
        if (x <= 0.0) {
            return x == 0.0 ? Double.NEGATIVE_INFINITY : Double.NaN;
        }
        if (x == Double.POSITIVE_INFINITY) {
            return x;
        }
        return logParts(x, 0.0);
    }

    /**
     * Deterministic log(1 + x), accurate for small |x|, bit-identical to mlcal's
     * {@code det_log1p}.
     *
     * @param x any double
     * @return log1p(x) within 1 ulp; -inf at -1, NaN below -1 and for NaN, keeps the sign of 0
     */
    public static double log1p(double x) {
        if (x != x) {
            return x + x;
        }
        if (x <= -1.0) {
            return x == -1.0 ? Double.NEGATIVE_INFINITY : Double.NaN;
        }
        if (x == Double.POSITIVE_INFINITY) {
            return x;
        }
        if (Math.abs(x) < 0x1p-12) {
            return x + x * x * (-0.5 + x * (1.0 / 3.0 + x * (-0.25 + x * 0.2)));
        }
        double y = 1.0 + x; // Knuth's TwoSum: 1 + x = y + c exactly
        double bb = y - 1.0;
        double c = (1.0 - (y - bb)) + (x - bb);
        return logParts(y, c / y);
    }

    /**
     * log(x) + corr for positive finite x and |corr| much below 1 (Tang's table-driven log:
     * x = 2^m F (1 + u), F = 1 + j/128).
     */
    private static double logParts(double x, double corr) {
        long bits = Double.doubleToRawLongBits(x);
        long m = -1023;
        if (bits < MIN_NORMAL_BITS) {
            bits = Double.doubleToRawLongBits(x * TWO_54);
            m -= 54;
        }
        m += bits >> 52;
        double y = Double.longBitsToDouble((bits & MANT_MASK) | ONE_BITS);
        long j = (long) (((y - 1.0) * 128.0 + SHIFTER) - SHIFTER);
        double bigF = 1.0 + j * 0.0078125;
        double f = y - bigF;
        double invF = INV_F[(int) j];
        double u = f * invF;
        double c = SPLITTER * u;
        double uh = c - (c - u);
        double ul = u - uh;
        double uLo = ((f - uh * bigF) - ul * bigF) * invF;
        double poly = u * u * (-0.5 + u * (1.0 / 3.0 + u * (-0.25 + u * (0.2 + u * (
                -1.0 / 6.0 + u * (1.0 / 7.0))))));
        double a = m * LN2_HI + LOG_HI[(int) j];
        double s = a + u;
        double err = (a - s) + u;
        double tail = err + (((m * LN2_LO + LOG_LO[(int) j]) + corr) + (uLo + poly));
        return s + tail;
    }
}
