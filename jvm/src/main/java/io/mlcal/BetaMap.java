package io.mlcal;

import java.util.Map;

/**
 * Beta calibration map {@code expit(a * ln(s) - b * ln(1 - s) + c)}, evaluated as mlcal
 * does: the score is clamped to {@code [BETA_EPS, 1 - BETA_EPS]}, then
 * {@code det_expit((a * det_log(s) - b * det_log1p(-s)) + c)}, clipped to the optional output
 * floor {@code [floor, 1 - floor]}.
 */
public final class BetaMap extends BinaryMap {
    /** The clamp of the score, {@code 2^-40} (mlcal's {@code BETA_EPS}). */
    public static final double BETA_EPS = 0x1p-40;
    private static final double HI = 1.0 - BETA_EPS;   // exact: 1 - 2^-40 is a double

    private final double a;
    private final double b;
    private final double c;
    private final double floor;

    BetaMap(double a, double b, double c, double floor, Maps.Common common) {
        super("beta", common);
        this.a = a;
        this.b = b;
        this.c = c;
        this.floor = floor;
    }

    static BetaMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        return new BetaMap(Maps.floatScalar(doc, "a", where), Maps.floatScalar(doc, "b", where),
                Maps.floatScalar(doc, "c", where), Maps.outputFloor(doc, where), common);
    }

    @Override
    protected double evaluate(double s) {
        // np.clip on finite scores: -0.0 and everything below the clamp become BETA_EPS
        double sc = s < BETA_EPS ? BETA_EPS : (s > HI ? HI : s);
        return Maps.applyFloor(DetMath.expit((a * DetMath.log(sc) - b * DetMath.log1p(-sc)) + c),
                floor);
    }
}
