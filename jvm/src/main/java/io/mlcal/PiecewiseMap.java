package io.mlcal;

/**
 * A map given by strictly increasing breakpoints {@code xs} and values in [0, 1] (step and
 * linear maps): the checks they share, in mlcal's order (the lengths first, then the
 * breakpoints, then the values).
 */
abstract class PiecewiseMap extends BinaryMap {
    /** the breakpoints: a step map's thresholds or a linear map's knots */
    protected final double[] xs;
    protected final double[] values;

    /**
     * @param xName        the field name of {@code xs} in error messages
     * @param sizeProblem  what is wrong with the two lengths, or null when they fit
     */
    PiecewiseMap(String kind, String xName, double[] xs, double[] values, String sizeProblem,
                 Maps.Common common) {
        super(kind, common);
        String where = kind + " map";
        if (sizeProblem != null) {
            throw new MapFormatException(where + ": " + sizeProblem);
        }
        Maps.checkIncreasing(xs, xName, where);
        Maps.checkUnitValues(values, where);
        this.xs = xs;
        this.values = values;
    }
}
