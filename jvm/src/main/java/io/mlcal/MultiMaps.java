package io.mlcal;

/** Helpers shared by the multiclass maps. */
final class MultiMaps {
    private MultiMaps() {
    }

    /** Raise unless {@code scores} is a non-empty finite (n, nk) matrix (as mlcal's
     * {@code as_score_matrix}). */
    static void checkMatrix(double[][] scores, int nk) {
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
            for (double s : row) {
                if (!Double.isFinite(s)) {
                    bad++;
                }
            }
        }
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
    static double rowSum(double[] q) {
        return pairwiseSum(q, 0, q.length);
    }

    private static double pairwiseSum(double[] a, int from, int n) {
        if (n < 8) {
            double res = 0.0;
            for (int i = 0; i < n; i++) {
                res += a[from + i];
            }
            return res;
        }
        if (n <= 128) {
            double[] r = new double[8];
            System.arraycopy(a, from, r, 0, 8);
            int i = 8;
            for (; i < n - (n % 8); i += 8) {
                for (int j = 0; j < 8; j++) {
                    r[j] += a[from + i + j];
                }
            }
            double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
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
