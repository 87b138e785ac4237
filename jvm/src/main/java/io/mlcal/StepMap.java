package io.mlcal;

import java.util.Map;

/**
 * Piecewise-constant map {@code values[searchsorted(thresholds, s, side="right")]}: a score
 * equal to a threshold takes the upper bin's value.
 */
public final class StepMap extends PiecewiseMap {
    StepMap(double[] thresholds, double[] values, Maps.Common common) {
        super("step", "thresholds", thresholds, values, sizeProblem(thresholds, values), common);
    }

    private static String sizeProblem(double[] thresholds, double[] values) {
        if (values.length == 0) {
            return "needs at least one value";
        }
        if (thresholds.length != values.length - 1) {
            return thresholds.length + " thresholds need " + (thresholds.length + 1)
                    + " values, got " + values.length;
        }
        return null;
    }

    static StepMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        return new StepMap(Maps.floatArray(doc, "thresholds", where),
                Maps.floatArray(doc, "values", where), common);
    }

    @Override
    protected double evaluate(double s) {
        // number of thresholds xs <= s (IEEE comparison: -0.0 == 0.0, as numpy's searchsorted)
        int lo = 0;
        int hi = xs.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (xs[mid] <= s) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return values[lo];
    }
}
