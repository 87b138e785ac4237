package io.mlcal;

import java.util.List;
import java.util.Map;

/**
 * Native multiclass map {@code softmax(W x / temperature + b)} ({@code "softmax-affine"}):
 * temperature, vector and matrix scaling. {@code x} is the score row ({@code input="logits"})
 * or the deterministic log of the probability row floored at {@code probability_floor}
 * (default 1e-300; {@code input="log-probabilities"}). Evaluated in mlcal's order: {@code z_k =
 * (sum_j W_kj x_j) * (1 / T) + b_k} left to right, {@code exp(z_k - max z)}, their sum left to
 * right, then one division per class; with {@code uniform_weight = eps > 0}, then
 * {@code p * (1 - eps) + eps / K}.
 */
public final class SoftmaxAffineMap extends MultiMap {
    /** mlcal's PROBABILITY_FLOOR: the default and smallest floor before the log */
    static final double PROBABILITY_FLOOR = 1e-300;
    private static final String KIND = "softmax-affine";
    private static final String[] INPUTS = {"logits", "log-probabilities"};

    private final double[][] weights;
    private final double[] bias;
    private final double temperature;
    private final boolean logProbabilities;
    private final double uniformWeight;
    private final double probabilityFloor;

    private SoftmaxAffineMap(double[][] weights, double[] bias, double temperature,
                             boolean logProbabilities, double uniformWeight,
                             double probabilityFloor) {
        super(KIND);
        this.weights = weights;
        this.bias = bias;
        this.temperature = temperature;
        this.logProbabilities = logProbabilities;
        this.uniformWeight = uniformWeight;
        this.probabilityFloor = probabilityFloor;
    }

    static SoftmaxAffineMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        Object raw = doc.get("weights");
        double[][] rows = null;
        double[] diagonal = null;
        if (raw instanceof List && !((List<?>) raw).isEmpty() && allLists((List<?>) raw)) {
            List<?> list = (List<?>) raw;
            rows = new double[list.size()][];
            for (int r = 0; r < rows.length; r++) {
                rows[r] = Maps.floatArray(Map.of("row", list.get(r)), "row", where);
                if (rows[r].length != rows[0].length) {
                    throw new MapFormatException(where + ": the rows of 'weights' differ in "
                            + "length");
                }
            }
        } else {
            diagonal = Maps.floatArray(doc, "weights", where);
        }
        String inp = Maps.choiceField(doc, "input", where, INPUTS);
        double[] bias = Maps.floatArray(doc, "bias", where);
        double temperature = Maps.floatScalar(doc, "temperature", where);
        common.requireUnset(KIND);
        int nk = bias.length;
        if (nk < 2) {
            throw new MapFormatException(where + ": needs at least 2 classes, got a bias of "
                    + "length " + nk);
        }
        double[][] full = new double[nk][nk];
        if (diagonal != null && diagonal.length == nk) {
            for (int k = 0; k < nk; k++) {
                full[k][k] = diagonal[k];
            }
        } else if (rows != null && rows.length == nk && rows[0].length == nk) {
            full = rows;
        } else {
            String shape = diagonal != null ? "(" + diagonal.length + ",)"
                    : "(" + rows.length + ", " + rows[0].length + ")";
            throw new MapFormatException(where + ": weights must have shape (" + nk + ",) or ("
                    + nk + ", " + nk + ") for " + nk + " classes, got " + shape);
        }
        if (!(temperature > 0.0)) {
            throw new MapFormatException(where + ": temperature must be a finite positive "
                    + "number");
        }
        Maps.checkChoice(inp, "input", where, INPUTS);
        double eps = doc.containsKey("uniform_weight")
                ? Maps.floatScalar(doc, "uniform_weight", where) : 0.0;
        if (!(eps >= 0.0 && eps < 1.0)) {
            throw new MapFormatException(where + ": uniform_weight must be in [0, 1), got "
                    + eps);
        }
        double floor = doc.containsKey("probability_floor")
                ? Maps.floatScalar(doc, "probability_floor", where) : PROBABILITY_FLOOR;
        if (!(floor >= PROBABILITY_FLOOR && floor <= 1.0)) {
            throw new MapFormatException(where + ": probability_floor must be in [1e-300, 1], "
                    + "got " + floor);
        }
        boolean logProbs = inp.equals("log-probabilities");
        if (!logProbs && floor != PROBABILITY_FLOOR) {
            throw new MapFormatException(where + ": probability_floor applies to input "
                    + "'log-probabilities' only");
        }
        return new SoftmaxAffineMap(full, bias, temperature, logProbs, eps, floor);
    }

    private static boolean allLists(List<?> list) {
        for (Object o : list) {
            if (!(o instanceof List)) {
                return false;
            }
        }
        return true;
    }

    @Override
    public int nClasses() {
        return bias.length;
    }

    @Override
    void predictRow(double[] s, int off, double[] out, int outOff, double[] scratch) {
        int nk = bias.length;
        double[] x = s;
        int xOff = off;
        if (logProbabilities) {
            for (int j = 0; j < nk; j++) {
                double v = s[off + j];
                scratch[nk + j] = DetMath.log(v > probabilityFloor ? v : probabilityFloor);
            }
            x = scratch;
            xOff = nk;
        }
        double invT = 1.0 / temperature;
        double[] z = scratch;   // z overwrites nothing still needed: x lives at scratch[nk..]
        for (int k = 0; k < nk; k++) {
            double[] w = weights[k];
            double acc = 0.0;
            for (int j = 0; j < nk; j++) {
                acc += w[j] * x[xOff + j];
            }
            z[k] = acc * invT + bias[k];
        }
        double m = z[0];
        for (int k = 1; k < nk; k++) {
            if (z[k] > m) {
                m = z[k];
            }
        }
        double sum = 0.0;
        for (int k = 0; k < nk; k++) {
            double e = DetMath.exp(z[k] - m);
            out[outOff + k] = e;
            sum += e;
        }
        for (int k = 0; k < nk; k++) {
            out[outOff + k] /= sum;
        }
        if (uniformWeight != 0.0) {
            double keep = 1.0 - uniformWeight;
            double part = uniformWeight / nk;
            for (int k = 0; k < nk; k++) {
                out[outOff + k] = out[outOff + k] * keep + part;
            }
        }
    }
}
