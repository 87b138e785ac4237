package io.mlcal;

import java.util.List;
import java.util.Map;

/**
 * The re-offset stage: {@code expit(logit(inner(s)) + delta)} after a binary map, evaluated as
 * mlcal does: {@code det_expit((det_log(p) - det_log1p(-p)) + delta)}; a probability of exactly
 * 0 or 1 passes through unchanged. One level only: the inner map is a step, linear, sigmoid or
 * beta map (never another offset), and its input transform and domain are the offset map's.
 */
public final class OffsetMap extends BinaryMap {
    /** The map kinds an offset may wrap. */
    static final List<String> INNER_KINDS = List.of("beta", "linear", "quadratic", "sigmoid",
            "step");

    private final BinaryMap inner;
    private final double delta;

    OffsetMap(BinaryMap inner, double delta, Maps.Common common) {
        super("offset", common);
        this.inner = inner;
        this.delta = delta;
    }

    /** The wrapped map. */
    public BinaryMap inner() {
        return inner;
    }

    /** The offset added to the log-odds. */
    public double delta() {
        return delta;
    }

    static OffsetMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        Object raw = doc.get("inner");
        if (!(raw instanceof Map)) {
            throw new MapFormatException(where + ": field 'inner' must be a map object, got "
                    + Maps.typeName(raw));
        }
        Object kind = ((Map<?, ?>) raw).get("type");
        if ("offset".equals(kind)) {
            throw new MapFormatException(where + ": an offset map cannot wrap another offset "
                    + "map (one offset stage only)");
        }
        if (!INNER_KINDS.contains(kind)) {
            throw new MapFormatException(where + ": the inner map must be one of "
                    + "('beta', 'linear', 'quadratic', 'sigmoid', 'step'), got "
                    + Maps.shortRepr(kind));
        }
        BinaryMap inner = (BinaryMap) Maps.fromDoc(raw);
        double[] d = inner.domain();
        double[] outer = common.domain;
        boolean sameDomain = d == null ? outer == null
                : outer != null && d[0] == outer[0] && d[1] == outer[1];
        if (!inner.inputTransform().equals(common.inputTransform) || !sameDomain) {
            throw new MapFormatException(where + ": input_transform/domain differ from the "
                    + "inner map's");
        }
        return new OffsetMap(inner, Maps.floatScalar(doc, "delta", where), common);
    }

    @Override
    protected double evaluate(double s) {
        double p = inner.evaluate(s);
        if (!(p > 0.0 && p < 1.0)) {
            return p;
        }
        return DetMath.expit((DetMath.log(p) - DetMath.log1p(-p)) + delta);
    }
}
