package io.mlcal;

import java.util.Map;

/**
 * Piecewise-constant map {@code values[searchsorted(thresholds, s, side="right")]}: a score
 * equal to a threshold takes the upper bin's value.
 */
public final class StepMap extends BinaryMap {
    private final double[] thresholds;
    private final double[] values;

    StepMap(double[] thresholds, double[] values, Maps.Common common) {
        super(common);
        String where = "step map";
        if (values.length == 0) {
            throw new MapFormatException(where + ": needs at least one value");
        }
        if (thresholds.length != values.length - 1) {
            throw new MapFormatException(where + ": " + thresholds.length + " thresholds need "
                    + (thresholds.length + 1) + " values, got " + values.length);
        }
        Maps.checkIncreasing(thresholds, "thresholds", where);
        Maps.checkUnitValues(values, where);
        this.thresholds = thresholds;
        this.values = values;
    }

    static StepMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        return new StepMap(Maps.floatArray(doc, "thresholds", where),
                Maps.floatArray(doc, "values", where), common);
    }

    @Override
    public String kind() {
        return "step";
    }

    @Override
    protected double evaluate(double s) {
        // number of thresholds <= s (IEEE comparison: -0.0 == 0.0, as numpy's searchsorted)
        int lo = 0;
        int hi = thresholds.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (thresholds[mid] <= s) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return values[lo];
    }
}
