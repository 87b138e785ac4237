package io.mlcal;

/**
 * Scores cannot be calibrated: NaN or infinite values, an empty input, or a score matrix whose
 * shape does not match the map. mlcal's Python {@code predict} raises {@code ValueError} for
 * exactly the same inputs.
 */
public class InvalidScoresException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public InvalidScoresException(String message) {
        super(message);
    }
}
