package io.mlcal;

import java.util.List;
import java.util.Map;

/**
 * Beta calibration map {@code expit(a * ln(s) - b * ln(1 - s) + c)}, evaluated as mlcal
 * does: the score is clamped to the map's {@code clamp = [lo, hi]} (default
 * {@code [BETA_EPS, 1 - BETA_EPS]}), then
 * {@code det_expit((a * det_log(s) - b * det_log1p(-s)) + c)}, clipped to the optional output
 * floor {@code [floor, 1 - floor]}.
 */
public final class BetaMap extends BinaryMap {
    /** The default clamp of the score, {@code 2^-40} (mlcal's {@code BETA_EPS}). */
    public static final double BETA_EPS = 0x1p-40;
    /** The lowest clamp end a document may set: the smallest normal double, {@code 2^-1022}. */
    public static final double MIN_CLAMP = Double.MIN_NORMAL;
    private static final double HI = 1.0 - BETA_EPS;   // exact: 1 - 2^-40 is a double

    private final double a;
    private final double b;
    private final double c;
    private final double floor;
    private final double lo;
    private final double hi;

    BetaMap(double a, double b, double c, double floor, double[] clamp, Maps.Common common) {
        super("beta", common);
        this.a = a;
        this.b = b;
        this.c = c;
        this.floor = floor;
        this.lo = clamp[0];
        this.hi = clamp[1];
    }

    static BetaMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        return new BetaMap(Maps.floatScalar(doc, "a", where), Maps.floatScalar(doc, "b", where),
                Maps.floatScalar(doc, "c", where), Maps.outputFloor(doc, where),
                scoreClamp(doc, where), common);
    }

    /**
     * The optional {@code clamp} field of a beta or quadratic (logit) map: {@code [BETA_EPS,
     * 1 - BETA_EPS]} when absent, else two finite numbers {@code [lo, hi]} with
     * {@code 2^-1022 <= lo <= BETA_EPS} and {@code 1 - BETA_EPS <= hi < 1} (mlcal's rule).
     */
    static double[] scoreClamp(Map<String, Object> doc, String where) {
        if (!doc.containsKey("clamp")) {
            return new double[] {BETA_EPS, HI};
        }
        Object raw = doc.get("clamp");
        if (!(raw instanceof List) || ((List<?>) raw).size() != 2) {
            throw new MapFormatException(where + ": field 'clamp' must be a list of two numbers "
                    + "[lo, hi], got " + Maps.shortRepr(raw));
        }
        double[] c = Maps.floatArray(doc, "clamp", where);
        if (!(c[0] >= MIN_CLAMP && c[0] <= BETA_EPS)) {
            throw new MapFormatException(where + ": field 'clamp': lo must lie in [2**-1022, "
                    + "BETA_EPS = 2**-40], got " + c[0]);
        }
        if (!(c[1] >= HI && c[1] < 1.0)) {
            throw new MapFormatException(where + ": field 'clamp': hi must lie in "
                    + "[1 - BETA_EPS, 1), got " + c[1]);
        }
        return c;
    }

    /** The score clamp {@code [lo, hi]}. */
    public double[] clamp() {
        return new double[] {lo, hi};
    }

    @Override
    protected double evaluate(double s) {
        // np.clip on finite scores: -0.0 and everything below the clamp become lo
        double sc = s < lo ? lo : (s > hi ? hi : s);
        return Maps.applyFloor(DetMath.expit((a * DetMath.log(sc) - b * DetMath.log1p(-sc)) + c),
                floor);
    }
}
