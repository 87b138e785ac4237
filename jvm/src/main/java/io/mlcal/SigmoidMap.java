package io.mlcal;

import java.util.Map;

/**
 * Logistic map {@code 1 / (1 + exp(a * s + b))} (Platt's sign convention), evaluated as
 * mlcal does: {@code det_expit(-(a * s + b))}, then clipped to the optional output floor
 * {@code [floor, 1 - floor]}.
 */
public final class SigmoidMap extends BinaryMap {
    private final double a;
    private final double b;
    private final double floor;

    SigmoidMap(double a, double b, double floor, Maps.Common common) {
        super("sigmoid", common);
        this.a = a;
        this.b = b;
        this.floor = floor;
    }

    static SigmoidMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        return new SigmoidMap(Maps.floatScalar(doc, "a", where), Maps.floatScalar(doc, "b", where),
                Maps.outputFloor(doc, where), common);
    }

    @Override
    protected double evaluate(double s) {
        return Maps.applyFloor(DetMath.expit(-(a * s + b)), floor);
    }
}
