package io.mlcal;

/** A multiclass map: an (n, K) score matrix in, an (n, K) probability matrix out. */
public abstract class MultiMap implements CalibrationMap {
    private final String kind;

    protected MultiMap(String kind) {
        this.kind = kind;
    }

    @Override
    public final String kind() {
        return kind;
    }

    /** Number of classes K. */
    public abstract int nClasses();

    /**
     * The map on one validated row: {@code K} scores from {@code s[off..]} to
     * {@code out[outOff..]}; {@code scratch} holds {@code 2 K} doubles.
     */
    abstract void predictRow(double[] s, int off, double[] out, int outOff, double[] scratch);

    /**
     * Calibrated probabilities, one row per score row; rows sum to 1.
     *
     * @throws InvalidScoresException if the matrix is empty, has rows of another length than
     *     K, or holds NaN or infinite scores
     */
    public final double[][] predictProba(double[][] scores) {
        int nk = nClasses();
        for (double[] row : scores) {
            if (row.length != nk) {
                throw new InvalidScoresException("scores must be a 2-D array with one column "
                        + "per class (" + nk + "), got a row of length " + row.length);
            }
        }
        if (scores.length == 0) {
            throw new InvalidScoresException("scores is empty");
        }
        int bad = 0;
        for (double[] row : scores) {
            bad += countNonFinite(row);
        }
        checkFinite(bad);
        double[][] out = new double[scores.length][nk];
        double[] scratch = new double[2 * nk];
        for (int i = 0; i < scores.length; i++) {
            predictRow(scores[i], 0, out[i], 0, scratch);
        }
        return out;
    }

    /**
     * {@link #predictProba(double[][])} on a row-major matrix ({@code K} scores per row, rows
     * one after another), with the row-major result: no per-row arrays, for large batches.
     *
     * @throws InvalidScoresException if the length is 0 or not a multiple of K, or for NaN or
     *     infinite scores
     */
    public final double[] predictProbaRowMajor(double[] scores) {
        int nk = nClasses();
        if (scores.length % nk != 0) {
            throw new InvalidScoresException("scores must hold whole rows of " + nk
                    + " values (one per class), got " + scores.length + " values");
        }
        if (scores.length == 0) {
            throw new InvalidScoresException("scores is empty");
        }
        checkFinite(countNonFinite(scores));
        double[] out = new double[scores.length];
        double[] scratch = new double[2 * nk];
        for (int off = 0; off < scores.length; off += nk) {
            predictRow(scores, off, out, off, scratch);
        }
        return out;
    }

    private static int countNonFinite(double[] values) {
        int bad = 0;
        for (double v : values) {
            if (!Double.isFinite(v)) {
                bad++;
            }
        }
        return bad;
    }

    /** Raise for non-finite scores (message as mlcal's {@code as_score_matrix}). */
    private static void checkFinite(int bad) {
        if (bad > 0) {
            throw new InvalidScoresException("scores contains " + bad + " non-finite value(s); "
                    + "remove or impute them before calibrating");
        }
    }

    /**
     * A row's sum added left to right, {@code q[0] + q[1] + ...}: the fixed order of mlcal's
     * {@code row_sum} (which an exported ONNX graph repeats too).
     */
    static double rowSum(double[] a, int from, int n) {
        double total = a[from];
        for (int i = 1; i < n; i++) {
            total += a[from + i];
        }
        return total;
    }
}
