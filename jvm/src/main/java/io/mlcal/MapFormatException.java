package io.mlcal;

/**
 * A calibrator or map document is malformed: not strict JSON, an unknown map type, an
 * unsupported format or format_version, or fields that are missing, non-finite, unsorted or
 * mismatched. The Java counterpart of mlcal's {@code MapFormatError} /
 * {@code CalibratorFormatError}.
 */
public class MapFormatException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public MapFormatException(String message) {
        super(message);
    }
}
