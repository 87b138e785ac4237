package io.mlcal;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The multicalibration map of mlcal's {@code Multicalibration} (docs/multicalibration.md): a
 * logit-affine start plus boosted regression trees over the score and segment features,
 * {@code p = expit(z)}, {@code z = slope * logit(s) + intercept + sum_t leaf_t(s, x)}, computed
 * as mlcal does: the score clamped to {@code [BETA_EPS, 1 - BETA_EPS]} for the logit only,
 * {@code logit = DetMath.log(s) - DetMath.log1p(-s)}, the leaf values added to the start one by
 * one in tree order, then {@code DetMath.expit}: bit-identical to Python.
 *
 * <p>Routing: a numeric node sends {@code x <= threshold} left (the score is feature 0, read as
 * given, not clamped); a categorical node sends the codes in its set left. A categorical value
 * is read as Python's {@code str(v)} writes it: a string as it is, an integer in decimal, a
 * boolean as {@code "True"}/{@code "False"}, a float as Python's {@code repr} (shortest
 * round-trip digits: {@code 3.0}, {@code 1e-05}, {@code 1e+16}); its code is its position in
 * the feature's category list, and any other value takes the "other" code
 * {@code len(categories)}. A numeric feature takes a number (a boolean is 1 or 0) that must be
 * finite; a missing categorical value (null, NaN) is an error, as in Python.
 *
 * <p>Not a score-only map: it is not in {@link Maps}' kind table (as in Python, where
 * {@code map_from_dict} refuses it); only a {@code "multicalibration"} calibrator document holds
 * one.
 */
public final class MulticalibrationMap implements ColumnMap {
    /** The map's kind. */
    public static final String KIND = "multicalibration";
    /** The kinds a feature may have; feature 0 is the score. */
    public static final List<String> FEATURE_KINDS = List.of("score", "numeric", "categorical");
    static final int MAX_TREES = 10_000;
    static final int MAX_NODES = 1 << 16;
    static final int MAX_FEATURES = 1_000;
    static final int MAX_CATEGORIES = 100_000;
    private static final int LEAF = -1;
    private static final List<String> FIELDS = List.of("type", "format_version", "slope",
            "intercept", "features", "trees");
    private static final List<String> TREE_FIELDS = List.of("feature", "threshold",
            "category_set", "left", "right", "value");
    private static final String WHERE = "multicalibration map";
    private static final double LO = BetaMap.BETA_EPS;
    private static final double HI = 1.0 - BetaMap.BETA_EPS;   // exact

    private final double slope;
    private final double intercept;
    private final String[] names;          // all features, index 0 the score
    private final boolean[] categorical;   // per feature
    private final List<Map<String, Integer>> codes;   // per feature (null unless categorical)
    private final int nTrees;
    // the trees' nodes concatenated, children as absolute indices (as mlcal's forest_sum)
    private final int[] roots;
    private final int[] feature;
    private final double[] threshold;
    private final int[] left;
    private final int[] right;
    private final double[] value;
    private final int[] catStart;
    private final int[] catEnd;
    private final int[] catCodes;

    private MulticalibrationMap(double slope, double intercept, String[] names,
                                boolean[] categorical, List<Map<String, Integer>> codes,
                                List<int[][]> treeInts, List<double[][]> treeFloats,
                                List<int[][]> treeSets) {
        this.slope = slope;
        this.intercept = intercept;
        this.names = names;
        this.categorical = categorical;
        this.codes = codes;
        this.nTrees = treeInts.size();
        int total = 0;
        int totalCodes = 0;
        for (int t = 0; t < nTrees; t++) {
            total += treeInts.get(t)[0].length;
            for (int[] s : treeSets.get(t)) {
                totalCodes += s.length;
            }
        }
        roots = new int[nTrees];
        feature = new int[total];
        threshold = new double[total];
        left = new int[total];
        right = new int[total];
        value = new double[total];
        catStart = new int[total];
        catEnd = new int[total];
        catCodes = new int[totalCodes];
        int offset = 0;
        int c = 0;
        for (int t = 0; t < nTrees; t++) {
            int[][] ints = treeInts.get(t);
            double[][] floats = treeFloats.get(t);
            int[][] sets = treeSets.get(t);
            int n = ints[0].length;
            roots[t] = offset;
            for (int k = 0; k < n; k++) {
                feature[offset + k] = ints[0][k];
                left[offset + k] = ints[1][k] >= 0 ? ints[1][k] + offset : LEAF;
                right[offset + k] = ints[2][k] >= 0 ? ints[2][k] + offset : LEAF;
                threshold[offset + k] = floats[0][k];
                value[offset + k] = floats[1][k];
                catStart[offset + k] = c;
                for (int code : sets[k]) {
                    catCodes[c++] = code;
                }
                catEnd[offset + k] = c;
            }
            offset += n;
        }
    }

    @Override
    public String kind() {
        return KIND;
    }

    /** The segment features' names (without the score), in the order they are read. */
    @Override
    public List<String> columnNames() {
        return List.of(Arrays.copyOfRange(names, 1, names.length));
    }

    /** Per segment feature {@code "numeric"} or {@code "categorical"}. */
    @Override
    public List<String> columnTypes() {
        List<String> out = new ArrayList<>();
        for (int j = 1; j < names.length; j++) {
            out.add(categorical[j] ? "categorical" : "numeric");
        }
        return out;
    }

    /** Number of trees. */
    public int treeCount() {
        return nTrees;
    }

    /** Total number of tree nodes. */
    public int size() {
        return feature.length;
    }

    @Override
    public RuntimeException columnError(String message) {
        return new InvalidFeaturesException(message);
    }

    // -- reading ------------------------------------------------------------------------------
    private static MapFormatException error(String message) {
        return new MapFormatException(WHERE + ": " + message);
    }

    /**
     * Build a multicalibration map from its document (the {@code "map"} of a
     * {@code "multicalibration"} calibrator document), validating every field as mlcal's
     * {@code MulticalibrationMap.from_dict}: unknown fields, the format version, finite
     * numbers, feature kinds and names, category lists, node arrays of one length, split
     * features in range, children after their parent, exactly one parent per node, leaves and
     * internal nodes well formed, category codes in range, the size bounds.
     *
     * @throws MapFormatException naming the first problem found
     */
    @SuppressWarnings("unchecked")
    public static MulticalibrationMap fromDoc(Object node) {
        if (!(node instanceof Map) || !KIND.equals(((Map<String, Object>) node).get("type"))) {
            throw new MapFormatException("a " + WHERE + " document must be an object with type "
                    + "'" + KIND + "'");
        }
        Map<String, Object> doc = (Map<String, Object>) node;
        List<String> unknown = new ArrayList<>();
        for (String k : doc.keySet()) {
            if (!FIELDS.contains(k)) {
                unknown.add(k);
            }
        }
        if (!unknown.isEmpty()) {
            unknown.sort(null);
            throw error("unknown field(s) " + Maps.shortRepr(unknown.get(0)));
        }
        Object version = doc.get("format_version");
        if (!Maps.isInteger(version, Maps.MAP_FORMAT_VERSION)) {
            throw error("unsupported format_version " + Maps.shortRepr(version));
        }
        double slope = finite(doc.get("slope"), "slope");
        double intercept = finite(doc.get("intercept"), "intercept");
        Object rawFeatures = doc.get("features");
        if (!(rawFeatures instanceof List) || ((List<?>) rawFeatures).isEmpty()
                || ((List<?>) rawFeatures).size() > MAX_FEATURES) {
            throw error("'features' must be a list of 1 to " + MAX_FEATURES
                    + " feature objects");
        }
        List<Object> features = (List<Object>) rawFeatures;
        int nf = features.size();
        String[] names = new String[nf];
        boolean[] categorical = new boolean[nf];
        int[] nCategories = new int[nf];
        List<Map<String, Integer>> codes = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        for (int j = 0; j < nf; j++) {
            String at = "feature " + j;
            Object f = features.get(j);
            if (!(f instanceof Map) || !Set.of("name", "kind", "categories")
                    .containsAll(((Map<String, Object>) f).keySet())) {
                throw error(at + " must be an object with name, kind (and categories)");
            }
            Map<String, Object> spec = (Map<String, Object>) f;
            Object name = spec.get("name");
            Object kind = spec.get("kind");
            if (!(name instanceof String) || ((String) name).isEmpty()
                    || codePoints((String) name) > 256 || seen.contains(name)) {
                throw error(at + ": name must be a new non-empty string, got "
                        + Maps.shortRepr(name));
            }
            seen.add((String) name);
            if (!FEATURE_KINDS.contains(kind) || "score".equals(kind) != (j == 0)
                    || (j == 0 && !"score".equals(name))) {
                throw error(at + ": kind " + Maps.shortRepr(kind) + " is not allowed here "
                        + "(feature 0 is {'name': 'score', 'kind': 'score'}, the others "
                        + "'numeric' or 'categorical')");
            }
            names[j] = (String) name;
            Map<String, Integer> lookup = null;
            if ("categorical".equals(kind)) {
                Object cats = spec.get("categories");
                lookup = new HashMap<>();
                boolean ok = cats instanceof List && ((List<?>) cats).size() <= MAX_CATEGORIES;
                if (ok) {
                    List<?> list = (List<?>) cats;
                    for (int c = 0; c < list.size() && ok; c++) {
                        ok = list.get(c) instanceof String
                                && lookup.put((String) list.get(c), c) == null;
                    }
                }
                if (!ok) {
                    throw error(at + ": categories must be a list of distinct strings");
                }
                categorical[j] = true;
                nCategories[j] = lookup.size();
            } else if (spec.containsKey("categories")) {
                throw error(at + ": a " + kind + " feature has no categories");
            }
            codes.add(lookup);
        }
        Object rawTrees = doc.get("trees");
        if (!(rawTrees instanceof List) || ((List<?>) rawTrees).size() > MAX_TREES) {
            throw error("'trees' must be a list of at most " + MAX_TREES + " trees");
        }
        List<int[][]> treeInts = new ArrayList<>();
        List<double[][]> treeFloats = new ArrayList<>();
        List<int[][]> treeSets = new ArrayList<>();
        List<Object> trees = (List<Object>) rawTrees;
        for (int t = 0; t < trees.size(); t++) {
            readTree(trees.get(t), "tree " + t, categorical, nCategories, treeInts, treeFloats,
                    treeSets);
        }
        return new MulticalibrationMap(slope, intercept, names, categorical, codes, treeInts,
                treeFloats, treeSets);
    }

    private static double finite(Object raw, String key) {
        if (!(raw instanceof Json.Number) || !Double.isFinite(((Json.Number) raw).value)) {
            throw error("'" + key + "' must be a finite number, got " + Maps.shortRepr(raw));
        }
        return ((Json.Number) raw).value;
    }

    private static int codePoints(String s) {
        return s.codePointCount(0, s.length());
    }

    /** mlcal's {@code _int_list}: JSON integer literals (not booleans, not 1.0), bounded. */
    private static int[] intList(Object raw, String key, String at) {
        if (!(raw instanceof List)) {
            throw error(at + ": '" + key + "' must be a list of integers");
        }
        List<?> list = (List<?>) raw;
        for (Object v : list) {
            if (!(v instanceof Json.Number) || !((Json.Number) v).integer) {
                throw error(at + ": '" + key + "' must be a list of integers");
            }
        }
        int[] out = new int[list.size()];
        for (int i = 0; i < out.length; i++) {
            double v = ((Json.Number) list.get(i)).value;   // exact below 2^53; larger is out
            if (Math.abs(v) > MAX_NODES * 4.0) {
                throw error(at + ": '" + key + "' holds an out-of-range index");
            }
            out[i] = (int) v;
        }
        return out;
    }

    /** mlcal's {@code _float_list}: numbers (integers or floats, not booleans), finite. */
    private static double[] floatList(Object raw, String key, String at) {
        if (!(raw instanceof List)) {
            throw error(at + ": '" + key + "' must be a list of numbers");
        }
        List<?> list = (List<?>) raw;
        double[] out = new double[list.size()];
        for (int i = 0; i < out.length; i++) {
            Object v = list.get(i);
            if (!(v instanceof Json.Number)) {
                throw error(at + ": '" + key + "' must be a list of numbers");
            }
            out[i] = ((Json.Number) v).value;
        }
        for (double v : out) {
            if (!Double.isFinite(v)) {
                throw error(at + ": '" + key + "' holds non-finite numbers");
            }
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    private static void readTree(Object node, String at, boolean[] categorical,
                                 int[] nCategories, List<int[][]> treeInts,
                                 List<double[][]> treeFloats, List<int[][]> treeSets) {
        if (!(node instanceof Map) || !((Map<String, Object>) node).keySet()
                .equals(new HashSet<>(TREE_FIELDS))) {
            throw error(at + " must be an object with exactly the fields "
                    + String.join(", ", TREE_FIELDS));
        }
        Map<String, Object> raw = (Map<String, Object>) node;
        int n = raw.get("feature") instanceof List ? ((List<?>) raw.get("feature")).size() : -1;
        if (n < 1 || n > MAX_NODES) {
            throw error(at + ": a tree has 1 to " + MAX_NODES + " nodes");
        }
        int[] feature = intList(raw.get("feature"), "feature", at);
        int[] left = intList(raw.get("left"), "left", at);
        int[] right = intList(raw.get("right"), "right", at);
        double[] threshold = floatList(raw.get("threshold"), "threshold", at);
        double[] value = floatList(raw.get("value"), "value", at);
        Object rawSets = raw.get("category_set");
        boolean listOfLists = rawSets instanceof List;
        if (listOfLists) {
            for (Object s : (List<Object>) rawSets) {
                listOfLists &= s instanceof List;
            }
        }
        if (!listOfLists) {
            throw error(at + ": 'category_set' must be a list of lists");
        }
        List<List<Object>> sets = (List<List<Object>>) rawSets;
        if (left.length != n || right.length != n || threshold.length != n || value.length != n
                || sets.size() != n) {
            throw error(at + ": the node arrays must all have " + n + " entries");
        }
        int[] parents = new int[n];
        int[][] codeSets = new int[n][];
        for (int k = 0; k < n; k++) {
            int f = feature[k];
            int lo = left[k];
            int hi = right[k];
            List<Object> s = sets.get(k);
            if (f == LEAF) {
                if (lo != LEAF || hi != LEAF || threshold[k] != 0.0 || !s.isEmpty()) {
                    throw error(at + ": leaf " + k + " must have left = right = -1, threshold 0 "
                            + "and an empty category set");
                }
                codeSets[k] = new int[0];
                continue;
            }
            if (f < 0 || f >= categorical.length) {
                throw error(at + ": node " + k + " splits on feature " + f + ", not one of the "
                        + categorical.length + " features");
            }
            if (!(k < lo && lo < n && k < hi && hi < n && lo != hi)) {
                throw error(at + ": node " + k + " has children " + lo + ", " + hi + "; children "
                        + "must be two distinct nodes after their parent");
            }
            parents[lo]++;
            parents[hi]++;
            if (value[k] != 0.0) {
                throw error(at + ": internal node " + k + " must have value 0");
            }
            if (categorical[f]) {
                int nCodes = nCategories[f] + 1;
                codeSets[k] = codeSet(s, threshold[k], nCodes);
                if (codeSets[k] == null) {
                    throw error(at + ": categorical node " + k + " needs threshold 0 and a "
                            + "non-empty increasing set of codes in [0, " + nCodes + ")");
                }
            } else {
                if (!s.isEmpty()) {
                    throw error(at + ": numeric node " + k + " has a category set");
                }
                codeSets[k] = new int[0];
            }
        }
        for (int k = 0; k < n; k++) {
            if (parents[k] != (k == 0 ? 0 : 1)) {
                throw error(at + ": node " + k + " must have exactly one parent (the root none)");
            }
        }
        treeInts.add(new int[][] {feature, left, right});
        treeFloats.add(new double[][] {threshold, value});
        treeSets.add(codeSets);
    }

    /** The codes of a categorical node, or null unless threshold is 0 and the set is a
     * non-empty strictly increasing list of integer literals in {@code [0, nCodes)}. */
    private static int[] codeSet(List<Object> s, double threshold, int nCodes) {
        if (threshold != 0.0 || s.isEmpty()) {
            return null;
        }
        double[] v = new double[s.size()];
        for (int i = 0; i < v.length; i++) {
            Object c = s.get(i);
            if (!(c instanceof Json.Number) || !((Json.Number) c).integer) {
                return null;
            }
            v[i] = ((Json.Number) c).value;
            if (i > 0 && !(v[i] > v[i - 1])) {
                return null;
            }
        }
        if (v[0] < 0 || v[v.length - 1] >= nCodes) {
            return null;
        }
        int[] out = new int[v.length];
        for (int i = 0; i < v.length; i++) {
            out[i] = (int) v[i];
        }
        return out;
    }

    // -- features of rows ---------------------------------------------------------------------
    private static boolean missing(Object v) {
        return v == null || v == Json.NULL || v instanceof Double && ((Double) v).isNaN()
                || v instanceof Float && ((Float) v).isNaN();
    }

    /** A numeric feature value as float64 (NaN for a missing one), as numpy's
     * {@code asarray(col, float64)} reads it; a string is refused. */
    private double numeric(Object v, int j) {
        if (missing(v)) {
            return Double.NaN;
        }
        if (v instanceof Json.Number) {
            return ((Json.Number) v).value;
        }
        if (v instanceof Boolean) {
            return (Boolean) v ? 1.0 : 0.0;
        }
        if (v instanceof java.lang.Number) {
            return ((java.lang.Number) v).doubleValue();   // correctly rounded, as numpy
        }
        throw new InvalidFeaturesException("numeric feature '" + names[j] + "' is not numeric: "
                + "got " + describe(v));
    }

    /** The code of a categorical feature value: its text as Python's {@code str} writes it,
     * looked up in the category list ("other" for any text not in it). */
    private int categoryCode(Object v, int j) {
        if (missing(v)) {
            throw new InvalidFeaturesException("categorical feature '" + names[j] + "' holds "
                    + "missing values (None/NaN); map them to a category of their own "
                    + "(e.g. 'missing') first");
        }
        Map<String, Integer> lookup = codes.get(j);
        Integer code = lookup.get(pythonText(v));
        return code == null ? lookup.size() : code;
    }

    /**
     * Python's {@code str(v)} of a JSON or Java value: a string as it is, a boolean as
     * {@code True}/{@code False}, an integer in decimal, a float as its shortest round-trip
     * repr ({@link #pythonRepr}).
     */
    static String pythonText(Object v) {
        if (v instanceof String) {
            return (String) v;
        }
        if (v instanceof Boolean) {
            return (Boolean) v ? "True" : "False";
        }
        if (v instanceof Json.Number) {
            Json.Number num = (Json.Number) v;
            return num.integer ? new BigInteger(num.literal).toString() : pythonRepr(num.value);
        }
        if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger) {
            return v.toString();
        }
        if (v instanceof Double || v instanceof Float) {
            return pythonRepr(((java.lang.Number) v).doubleValue());
        }
        if (v instanceof Character) {
            return v.toString();
        }
        throw new InvalidFeaturesException("a categorical feature value must be a string, "
                + "number or boolean, got " + describe(v));
    }

    /**
     * Python's {@code repr(float)}: the shortest decimal that reads back as {@code d} (the
     * nearest such if two), fixed notation for {@code 1e-4 <= |d| < 1e16} ({@code 3.0},
     * {@code 0.0001}), else {@code 1e-05}, {@code 1.5e+16}.
     */
    static String pythonRepr(double d) {
        if (Double.isNaN(d)) {
            return "nan";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "inf" : "-inf";
        }
        if (d == 0.0) {
            return 1.0 / d < 0 ? "-0.0" : "0.0";
        }
        BigDecimal exact = new BigDecimal(d);
        BigDecimal pick = exact;
        for (int p = 1; p <= 17; p++) {
            BigDecimal down = exact.round(new MathContext(p, RoundingMode.DOWN));
            BigDecimal up = exact.round(new MathContext(p, RoundingMode.UP));
            boolean okDown = Double.parseDouble(down.toString()) == d;
            boolean okUp = Double.parseDouble(up.toString()) == d;
            if (okDown && okUp) {
                int c = exact.subtract(down).abs().compareTo(up.subtract(exact).abs());
                pick = c < 0 ? down : c > 0 ? up
                        : down.unscaledValue().testBit(0) ? up : down;
                break;
            }
            if (okDown || okUp) {
                pick = okDown ? down : up;
                break;
            }
        }
        pick = pick.stripTrailingZeros();
        String digits = pick.unscaledValue().abs().toString();
        int decpt = digits.length() - pick.scale();   // d = 0.DIGITS * 10^decpt
        StringBuilder sb = new StringBuilder(d < 0 ? "-" : "");
        if (decpt <= -4 || decpt > 16) {
            sb.append(digits.charAt(0));
            if (digits.length() > 1) {
                sb.append('.').append(digits, 1, digits.length());
            }
            int e = decpt - 1;
            sb.append(e < 0 ? "e-" : "e+").append(Math.abs(e) < 10 ? "0" : "")
                    .append(Math.abs(e));
        } else if (decpt <= 0) {
            sb.append("0.").append("0".repeat(-decpt)).append(digits);
        } else if (decpt >= digits.length()) {
            sb.append(digits).append("0".repeat(decpt - digits.length())).append(".0");
        } else {
            sb.append(digits, 0, decpt).append('.').append(digits, decpt, digits.length());
        }
        return sb.toString();
    }

    private static String describe(Object v) {
        String type = v instanceof Json.Number ? Maps.typeName(v)
                : v instanceof Map ? "object" : v instanceof List ? "array"
                : v.getClass().getSimpleName();
        String text = v instanceof String ? "'" + v + "'" : v instanceof Map
                || v instanceof List ? "" : String.valueOf(v);
        text = text.length() <= 60 ? text : text.substring(0, 57) + "...";
        return text.isEmpty() ? type : type + " " + text;
    }

    // -- prediction ---------------------------------------------------------------------------
    /** Raise unless the scores are non-empty, finite and in [0, 1] (mlcal's
     * {@code check_probability_scores}). */
    private static void checkScores(double[] scores) {
        Maps.checkFinite(scores, "scores");
        double lo = Double.POSITIVE_INFINITY;
        double hi = Double.NEGATIVE_INFINITY;
        for (double s : scores) {
            lo = Math.min(lo, s);
            hi = Math.max(hi, s);
        }
        if (lo < 0.0 || hi > 1.0) {
            throw new InvalidScoresException("multicalibration takes the base model's "
                    + "probabilities in [0, 1]; got scores in [" + lo + ", " + hi + "]");
        }
    }

    /**
     * Calibrated probability of one score with one value per segment feature, in
     * {@link #columnNames()} order.
     *
     * @throws InvalidScoresException if the score is not a finite number in [0, 1]
     * @throws InvalidFeaturesException for a wrong number of values, a non-finite or
     *     non-numeric numeric feature, or a missing categorical value
     */
    @Override
    public double predict(double score, Object... values) {
        Object[][] columns = new Object[values.length][];
        for (int j = 0; j < values.length; j++) {
            columns[j] = new Object[] {values[j]};
        }
        return predict(new double[] {score}, columns)[0];
    }

    /**
     * Calibrated probabilities of a batch: {@code columns[j][i]} is row {@code i}'s value of
     * segment feature {@code j} (column-major, {@link #columnNames()} order).
     *
     * @throws InvalidScoresException if the scores are empty, not finite or outside [0, 1]
     * @throws InvalidFeaturesException for columns that are not one per feature with one value
     *     per score, non-finite or non-numeric numeric features, missing categorical values
     */
    @Override
    public double[] predict(double[] scores, Object[]... columns) {
        checkScores(scores);
        int nf = names.length;
        if (columns.length != nf - 1) {
            throw new InvalidFeaturesException("features has " + columns.length + " column(s); "
                    + "this map reads " + (nf - 1) + ": " + columnNames());
        }
        int n = scores.length;
        for (int j = 1; j < nf; j++) {
            if (columns[j - 1].length != n) {
                throw new InvalidFeaturesException("feature '" + names[j] + "' has "
                        + columns[j - 1].length + " values; expected " + n + " like the scores");
            }
        }
        double[] x = new double[n * nf];   // row-major, as the Python scorer's matrix
        for (int i = 0; i < n; i++) {
            x[i * nf] = scores[i];
        }
        for (int j = 1; j < nf; j++) {
            Object[] col = columns[j - 1];
            if (categorical[j]) {
                for (int i = 0; i < n; i++) {
                    x[i * nf + j] = categoryCode(col[i], j);
                }
            } else {
                int bad = 0;
                for (int i = 0; i < n; i++) {
                    double v = numeric(col[i], j);
                    bad += Double.isFinite(v) ? 0 : 1;
                    x[i * nf + j] = v;
                }
                if (bad > 0) {
                    throw new InvalidFeaturesException("numeric feature '" + names[j] + "' has "
                            + bad + " non-finite value(s); impute them (or pass the column as "
                            + "categorical) first");
                }
            }
        }
        double[] out = new double[n];
        for (int i = 0; i < n; i++) {
            out[i] = DetMath.expit(margin(x, i * nf));
        }
        return out;
    }

    /** The log-odds of the row starting at {@code x[base]}: the start, then each tree's leaf
     * added in tree order. */
    private double margin(double[] x, int base) {
        double s = x[base];
        double sc = s < LO ? LO : (s > HI ? HI : s);   // np.clip of a finite score
        double z = slope * (DetMath.log(sc) - DetMath.log1p(-sc)) + intercept;
        for (int t = 0; t < nTrees; t++) {
            int node = roots[t];
            while (feature[node] >= 0) {
                int f = feature[node];
                double v = x[base + f];
                boolean goLeft;
                if (categorical[f]) {
                    goLeft = false;
                    for (int c = catStart[node]; c < catEnd[node]; c++) {
                        if (catCodes[c] == v) {
                            goLeft = true;
                            break;
                        }
                    }
                } else {
                    goLeft = v <= threshold[node];
                }
                node = goLeft ? left[node] : right[node];
            }
            z += value[node];
        }
        return z;
    }
}
