package io.mlcal;

import java.util.Map;

/**
 * Piecewise-linear map through {@code (knots, values)}, constant outside the first/last knot:
 * numpy's {@code interp(s, knots, values)} with its exact formula, so results are
 * bit-identical. Between knots {@code x[j] <= s < x[j+1]} the value is
 * {@code slope * (s - x[j]) + y[j]} with {@code slope = (y[j+1] - y[j]) / (x[j+1] - x[j])};
 * a score equal to a knot takes the knot's value.
 */
public final class LinearMap extends PiecewiseMap {
    private final double[] slopes;

    LinearMap(double[] knots, double[] values, Maps.Common common) {
        super("linear", "knots", knots, values, sizeProblem(knots, values), common);
        slopes = new double[Math.max(knots.length - 1, 0)];
        for (int j = 0; j < slopes.length; j++) {
            // the same two roundings as numpy's slope: dy first, then divide by dx
            slopes[j] = (values[j + 1] - values[j]) / (knots[j + 1] - knots[j]);
            if (!Double.isFinite(slopes[j])) {
                throw new MapFormatException("linear map: knots are so close that a slope "
                        + "overflows");
            }
        }
    }

    private static String sizeProblem(double[] knots, double[] values) {
        if (knots.length == 0) {
            return "needs at least one knot";
        }
        if (knots.length != values.length) {
            return knots.length + " knots but " + values.length + " values";
        }
        return null;
    }

    static LinearMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        return new LinearMap(Maps.floatArray(doc, "knots", where),
                Maps.floatArray(doc, "values", where), common);
    }

    @Override
    protected double evaluate(double s) {
        int last = xs.length - 1;
        if (s < xs[0]) {
            return values[0];
        }
        if (s > xs[last]) {
            return values[last];
        }
        // j: last knot <= s
        int lo = 0;
        int hi = last;
        while (lo < hi) {
            int mid = (lo + hi + 1) >>> 1;
            if (xs[mid] <= s) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        int j = lo;
        if (j == last || xs[j] == s) {
            return values[j];
        }
        double slope = slopes[j];
        double r = slope * (s - xs[j]) + values[j];
        if (Double.isNaN(r)) {
            // numpy's fallback: 0 * inf when s - x[j] overflows; try the other end
            r = slope * (s - xs[j + 1]) + values[j + 1];
            if (Double.isNaN(r) && values[j] == values[j + 1]) {
                r = values[j];
            }
        }
        return r;
    }
}
