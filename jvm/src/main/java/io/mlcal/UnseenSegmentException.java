package io.mlcal;

/**
 * A row's segment was not seen when the calibrator was fitted and its map's {@code unseen}
 * policy is {@code "raise"}: mlcal's Python {@code mlcal.UnseenSegmentError}.
 */
public class UnseenSegmentException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public UnseenSegmentException(String message) {
        super(message);
    }
}
