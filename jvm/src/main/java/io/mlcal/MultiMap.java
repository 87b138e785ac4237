package io.mlcal;

/** A multiclass map: an (n, K) score matrix in, an (n, K) probability matrix out. */
public abstract class MultiMap implements CalibrationMap {
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
     * A row's sum in the order of {@code np.sum(q, axis=1)} on a contiguous row: numpy's
     * pairwise summation (left to right below 8 terms; 8 running partial sums combined as
     * ((0+1)+(2+3))+((4+5)+(6+7)) plus the remainder up to 128 terms; halves split on a
     * multiple of 8 above). Measured bit-identical on numpy 2.x.
     */
    static double pairwiseSum(double[] a, int from, int n) {
        if (n < 8) {
            double res = 0.0;
            for (int i = 0; i < n; i++) {
                res += a[from + i];
            }
            return res;
        }
        if (n <= 128) {
            double r0 = a[from];
            double r1 = a[from + 1];
            double r2 = a[from + 2];
            double r3 = a[from + 3];
            double r4 = a[from + 4];
            double r5 = a[from + 5];
            double r6 = a[from + 6];
            double r7 = a[from + 7];
            int i = 8;
            for (; i < n - (n % 8); i += 8) {
                int b = from + i;
                r0 += a[b];
                r1 += a[b + 1];
                r2 += a[b + 2];
                r3 += a[b + 3];
                r4 += a[b + 4];
                r5 += a[b + 5];
                r6 += a[b + 6];
                r7 += a[b + 7];
            }
            double res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
            for (; i < n; i++) {
                res += a[from + i];
            }
            return res;
        }
        int n2 = n / 2;
        n2 -= n2 % 8;
        return pairwiseSum(a, from, n2) + pairwiseSum(a, from + n2, n - n2);
    }
}
