package io.mlcal;

/** A multiclass map: an (n, K) score matrix in, an (n, K) probability matrix out. */
public interface MultiMap extends CalibrationMap {
    /** Number of classes K. */
    int nClasses();

    /**
     * Calibrated probabilities, one row per score row; rows sum to 1.
     *
     * @throws InvalidScoresException if the matrix is empty, has rows of another length than
     *     K, or holds NaN or infinite scores
     */
    double[][] predictProba(double[][] scores);
}
