package io.mlcal;

/**
 * Segment values that cannot be keys of a segmented map: a value of another type than its
 * column's (the integer 1 in a string column, a non-integral number in an integer column), a
 * string longer than the key limit, or a wrong number of values or rows. mlcal's Python
 * counterpart is {@code mlcal.maps.segment_keys.SegmentKeyError} (a {@code ValueError}).
 */
public class SegmentKeyException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public SegmentKeyException(String message) {
        super(message);
    }
}
