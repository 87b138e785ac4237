package io.mlcal;

import java.util.List;

/**
 * A map that reads named columns besides the score: the segmented map (segment key columns)
 * and the multicalibration map (segment features). The command line reads such a map's rows
 * from JSON lines or CSV by column name ({@link SegmentRows}).
 */
public interface ColumnMap extends CalibrationMap {
    /** The columns the map reads besides the score, in the order {@code predict} takes them. */
    List<String> columnNames();

    /**
     * The type of each column: {@code "string"}, {@code "integer"} or {@code "boolean"} for a
     * segment key column, {@code "numeric"} or {@code "categorical"} for a feature.
     */
    List<String> columnTypes();

    /**
     * Calibrated probabilities of a batch: {@code columns[j][i]} is row {@code i}'s value of
     * column {@code j} (column-major, {@link #columnNames()} order).
     */
    double[] predict(double[] scores, Object[]... columns);

    /** Calibrated probability of one score with one value per column. */
    double predict(double score, Object... values);

    /** The exception for a bad column value or a missing column, in the map's words. */
    RuntimeException columnError(String message);
}
