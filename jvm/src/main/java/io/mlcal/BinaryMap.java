package io.mlcal;

/**
 * A binary calibration map: a score in, a probability in [0, 1] out.
 *
 * <p>Like mlcal's {@code _BaseMap.__call__}: scores must be finite (NaN or infinite scores
 * raise, nothing is returned for the others), the input transform ({@code "identity"} or
 * {@code "sigmoid"}, mlcal's deterministic expit) is applied, then the map's own evaluation.
 * The recorded {@code domain} (the score range seen at fit time) is informational: scores
 * outside it are evaluated, as in Python.
 */
public abstract class BinaryMap implements CalibrationMap {
    private final String kind;
    private final boolean sigmoidInput;
    private final double[] domain;

    protected BinaryMap(String kind, Maps.Common common) {
        this.kind = kind;
        this.sigmoidInput = common.inputTransform.equals("sigmoid");
        this.domain = common.domain;
    }

    @Override
    public final String kind() {
        return kind;
    }

    /** {@code "identity"} or {@code "sigmoid"}. */
    public final String inputTransform() {
        return sigmoidInput ? "sigmoid" : "identity";
    }

    /** The fitted score range {@code [lo, hi]}, or null when the document has none. */
    public final double[] domain() {
        return domain == null ? null : domain.clone();
    }

    /** The map itself at an already transformed score. */
    protected abstract double evaluate(double s);

    /**
     * Calibrated probability of one score.
     *
     * @throws InvalidScoresException if the score is NaN or infinite
     */
    public final double predict(double score) {
        if (!Double.isFinite(score)) {
            Maps.checkFinite(new double[] {score}, "scores");
        }
        return transformAndEvaluate(score);
    }

    /**
     * Calibrated probabilities of a batch of scores (a new array).
     *
     * @throws InvalidScoresException if the batch is empty or holds NaN or infinite scores
     */
    public final double[] predict(double[] scores) {
        Maps.checkFinite(scores, "scores");
        double[] out = new double[scores.length];
        evaluateInto(scores, out);
        return out;
    }

    /** Transform and evaluate validated scores. */
    final void evaluateInto(double[] scores, double[] out) {
        for (int i = 0; i < scores.length; i++) {
            out[i] = transformAndEvaluate(scores[i]);
        }
    }

    /** Transform and evaluate one validated score. */
    final double transformAndEvaluate(double s) {
        return evaluate(sigmoidInput ? DetMath.expit(s) : s);
    }
}
