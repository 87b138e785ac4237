package io.mlcal;

/**
 * Segment features a multicalibration map cannot read: a missing column, a non-finite or
 * non-numeric value of a numeric feature, a missing value (null, NaN) of a categorical
 * feature, or columns that are not one per feature with one value per score. mlcal's Python
 * {@code MulticalibrationMap.__call__} raises {@code ValueError} for the same inputs. A subclass
 * of {@link InvalidScoresException}: code catching invalid inputs catches both.
 */
public class InvalidFeaturesException extends InvalidScoresException {
    private static final long serialVersionUID = 1L;

    public InvalidFeaturesException(String message) {
        super(message);
    }
}
