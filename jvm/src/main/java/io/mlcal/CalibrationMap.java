package io.mlcal;

/** A calibration map loaded from its JSON document: a {@link BinaryMap} or a {@link MultiMap}. */
public interface CalibrationMap {
    /** The map's {@code "type"} field, e.g. {@code "step"}. */
    String kind();
}
