package io.mlcal;

import java.util.Map;

/**
 * Logistic map {@code 1 / (1 + exp(a * s + b))} (Platt's sign convention), evaluated as
 * mlcal does: {@code det_expit(-(a * s + b))}.
 */
public final class SigmoidMap extends BinaryMap {
    private final double a;
    private final double b;

    SigmoidMap(double a, double b, Maps.Common common) {
        super("sigmoid", common);
        this.a = a;
        this.b = b;
    }

    static SigmoidMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        return new SigmoidMap(Maps.floatScalar(doc, "a", where), Maps.floatScalar(doc, "b", where),
                common);
    }

    @Override
    protected double evaluate(double s) {
        return DetMath.expit(-(a * s + b));
    }
}
