package io.mlcal;

import java.util.List;
import java.util.Map;

/**
 * Quadratic scaling map {@code expit(a * z + b * z^2 + c)}, evaluated as mlcal does: with
 * {@code on = "logit"} the score is clamped to the map's {@code clamp = [lo, hi]} (default
 * {@code [BETA_EPS, 1 - BETA_EPS]}, as {@link BetaMap}) and
 * {@code z = det_log(s) - det_log1p(-s)}; with {@code on = "margin"} {@code z} is the score
 * itself. Then {@code det_expit(((a * z) + (b * (z * z))) + c)}, clipped to the optional output
 * floor {@code [floor, 1 - floor]}; the same operations in the same order as mlcal's
 * {@code QuadraticMap}, so the result has the same bits.
 */
public final class QuadraticMap extends BinaryMap {
    /** The fields a quadratic map document may hold (any other is refused, as mlcal does). */
    static final List<String> FIELDS = List.of("type", "format_version", "input_transform",
            "domain", "on", "a", "b", "c", "floor", "clamp");

    private final double a;
    private final double b;
    private final double c;
    private final double floor;
    private final boolean onMargin;
    private final double lo;
    private final double hi;

    QuadraticMap(double a, double b, double c, double floor, boolean onMargin, double[] clamp,
                 Maps.Common common) {
        super("quadratic", common);
        this.a = a;
        this.b = b;
        this.c = c;
        this.floor = floor;
        this.onMargin = onMargin;
        this.lo = clamp[0];
        this.hi = clamp[1];
    }

    static QuadraticMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        for (String key : doc.keySet()) {
            if (!FIELDS.contains(key)) {
                throw new MapFormatException(where + ": unknown field " + Maps.shortRepr(key)
                        + "; a quadratic map holds " + String.join(", ", FIELDS));
            }
        }
        Object on = doc.get("on");
        if (!"logit".equals(on) && !"margin".equals(on)) {
            throw new MapFormatException(where + ": field 'on' must be one of ('logit', "
                    + "'margin'), got " + Maps.shortRepr(on));
        }
        if ("margin".equals(on) && doc.containsKey("clamp")) {   // even the default, as mlcal
            throw new MapFormatException(where + ": field 'clamp' applies to on='logit' only "
                    + "(a margin is used as it is)");
        }
        double a = Maps.floatScalar(doc, "a", where);
        double b = Maps.floatScalar(doc, "b", where);
        double c = Maps.floatScalar(doc, "c", where);
        double floor = Maps.outputFloor(doc, where);
        boolean margin = "margin".equals(on);
        if (margin && !common.inputTransform.equals("identity")) {
            throw new MapFormatException("quadratic map: on='margin' takes raw margins, so its "
                    + "input_transform must be 'identity' (use on='logit' for probabilities)");
        }
        return new QuadraticMap(a, b, c, floor, margin, BetaMap.scoreClamp(doc, where), common);
    }

    @Override
    protected double evaluate(double s) {
        double z;
        if (onMargin) {
            z = s;
        } else {
            // np.clip on finite scores: -0.0 and everything below the clamp become lo
            double sc = s < lo ? lo : (s > hi ? hi : s);
            z = DetMath.log(sc) - DetMath.log1p(-sc);
        }
        double eta = (a * z + b * (z * z)) + c;
        if (Double.isNaN(eta)) {   // inf - inf: mlcal's fallback, never NaN for finite z
            eta = (z * (b * z + a)) + c;
        }
        return Maps.applyFloor(DetMath.expit(eta), floor);
    }
}
