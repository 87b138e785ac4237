package io.mlcal;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The map kind table and the field readers shared by the map classes: the Java counterpart of
 * {@code mlcal.maps.map_from_dict}, with the same validation.
 *
 * <p>Adding a map kind is one class with a static {@code fromDoc(doc, where, common)} reader
 * and one {@link #register} line in the static block below.
 *
 * <p>The maps that read named columns besides the score ({@link SegmentedMap},
 * {@link MulticalibrationMap}: {@link ColumnMap}s) are not kinds of this table, as they are not
 * in mlcal's {@code MAP_TYPES} ({@code map_from_dict} refuses them, so does {@link #fromDoc}):
 * {@link Calibrator} reads each from its own calibrator document ({@code "segmented"},
 * {@code "multicalibration"}).
 */
public final class Maps {
    private Maps() {
    }

    /** The map document format version this evaluator reads. */
    public static final int MAP_FORMAT_VERSION = 1;

    /** Builds a map from its document; the common fields are already validated. */
    @FunctionalInterface
    public interface Reader {
        CalibrationMap read(Map<String, Object> doc, String where, Common common);
    }

    /** The fields every map document has: input transform and domain (validated). */
    public static final class Common {
        public final String inputTransform;
        public final double[] domain;

        Common(String inputTransform, double[] domain) {
            this.inputTransform = inputTransform;
            this.domain = domain;
        }

        /** Multiclass maps leave these to their class maps (or their own input field). */
        void requireUnset(String kind) {
            if (!inputTransform.equals("identity") || domain != null) {
                throw new MapFormatException(kind + " map: input_transform must be 'identity' "
                        + "and domain null (each class map records its own)");
            }
        }
    }

    private static final Map<String, Reader> TYPES = new TreeMap<>();

    static {
        register("step", StepMap::fromDoc);
        register("linear", LinearMap::fromDoc);
        register("sigmoid", SigmoidMap::fromDoc);
        register("beta", BetaMap::fromDoc);
        register("quadratic", QuadraticMap::fromDoc);
        register("offset", OffsetMap::fromDoc);
        register("multiclass-ovr", OneVsRestMap::fromDoc);
        register("softmax-affine", SoftmaxAffineMap::fromDoc);
    }

    static void register(String kind, Reader reader) {
        if (TYPES.putIfAbsent(kind, reader) != null) {
            throw new IllegalStateException("map kind '" + kind + "' registered twice");
        }
    }

    /** The registered map kinds, sorted. */
    public static List<String> kinds() {
        return new ArrayList<>(TYPES.keySet());
    }

    /**
     * Build a map from its parsed document, validating every field.
     *
     * @throws MapFormatException for an unknown type, an unsupported format_version or any
     *     malformed field
     */
    public static CalibrationMap fromDoc(Object node) {
        if (!(node instanceof Map)) {
            throw new MapFormatException("a map document must be a JSON object, got "
                    + typeName(node));
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> doc = (Map<String, Object>) node;
        Object kind = doc.get("type");
        if (!(kind instanceof String) || !TYPES.containsKey(kind)) {
            throw new MapFormatException("unknown map type " + shortRepr(kind)
                    + "; expected one of " + pyList(kinds()));
        }
        String where = kind + " map";
        Object version = doc.get("format_version");
        if (!isInteger(version, MAP_FORMAT_VERSION)) {
            throw new MapFormatException(where + ": unsupported format_version "
                    + shortRepr(version) + " (this evaluator reads version "
                    + MAP_FORMAT_VERSION + ")");
        }
        Object transform = doc.containsKey("input_transform") ? doc.get("input_transform")
                : "identity";
        if (!"identity".equals(transform) && !"sigmoid".equals(transform)) {
            throw new MapFormatException(where + ": unknown input_transform "
                    + shortRepr(transform));
        }
        Object rawDomain = doc.get("domain");
        double[] domain = null;
        if (rawDomain != null && rawDomain != Json.NULL) {
            if (!(rawDomain instanceof List) || ((List<?>) rawDomain).size() != 2) {
                throw new MapFormatException(where + ": domain must be null or [lo, hi]");
            }
            domain = numbers((List<?>) rawDomain, "domain", where);
            if (!(domain[0] <= domain[1])) {
                throw new MapFormatException(kind + " map: domain must be two finite numbers "
                        + "lo <= hi");
            }
        }
        return TYPES.get(kind).read(doc, where, new Common((String) transform, domain));
    }

    /** Whether a JSON value is the integer literal {@code expected} (not 1.0, not true). */
    static boolean isInteger(Object value, long expected) {
        return value instanceof Json.Number && ((Json.Number) value).integer
                && ((Json.Number) value).value == expected;
    }

    /** A required field that is a list of finite numbers. */
    static double[] floatArray(Map<String, Object> doc, String key, String where) {
        if (!doc.containsKey(key)) {
            throw new MapFormatException(where + ": missing field '" + key + "'");
        }
        Object raw = doc.get(key);
        if (!(raw instanceof List)) {
            throw new MapFormatException(where + ": field '" + key
                    + "' must be a list of numbers");
        }
        return numbers((List<?>) raw, key, where);
    }

    private static double[] numbers(List<?> raw, String key, String where) {
        double[] out;
        if (raw instanceof Json.NumberArray) {
            out = ((Json.NumberArray) raw).toDoubleArray();
            for (double v : out) {
                if (!Double.isFinite(v)) {
                    throw new MapFormatException(where + ": field '" + key
                            + "' contains non-finite numbers");
                }
            }
            return out;
        }
        out = new double[raw.size()];
        for (int i = 0; i < out.length; i++) {
            if (!(raw.get(i) instanceof Json.Number)) {
                throw new MapFormatException(where + ": field '" + key
                        + "' must be a list of numbers");
            }
            out[i] = ((Json.Number) raw.get(i)).value;
        }
        for (double v : out) {
            if (!Double.isFinite(v)) {
                throw new MapFormatException(where + ": field '" + key
                        + "' contains non-finite numbers");
            }
        }
        return out;
    }

    /** A required field that is one finite number. */
    static double floatScalar(Map<String, Object> doc, String key, String where) {
        Object raw = doc.get(key);
        if (!(raw instanceof Json.Number) || !Double.isFinite(((Json.Number) raw).value)) {
            throw new MapFormatException(where + ": field '" + key
                    + "' must be a finite number");
        }
        return ((Json.Number) raw).value;
    }

    /**
     * The optional {@code floor} field of a parametric map: 0 when absent, else a finite number
     * in {@code [0, 0.5)} (mlcal's {@code _read_floor}).
     */
    static double outputFloor(Map<String, Object> doc, String where) {
        if (!doc.containsKey("floor")) {
            return 0.0;
        }
        double f = floatScalar(doc, "floor", where);
        if (!(f >= 0.0 && f < 0.5)) {
            throw new MapFormatException(where + ": floor must be a number in [0, 0.5), got "
                    + f);
        }
        return f;
    }

    /** {@code p} clipped to {@code [floor, 1 - floor]} (unchanged when the floor is 0). */
    static double applyFloor(double p, double floor) {
        if (floor == 0.0) {
            return p;
        }
        double hi = 1.0 - floor;
        return p < floor ? floor : (p > hi ? hi : p);
    }

    /**
     * A required string field that must be one of {@code options}; only its type is checked
     * here, {@link #checkChoice} checks the value later, in mlcal's order of validation.
     */
    static String choiceField(Map<String, Object> doc, String key, String where,
                              String... options) {
        Object raw = doc.get(key);
        if (!(raw instanceof String)) {
            throw new MapFormatException(where + ": field '" + key + "' must be one of "
                    + pyTuple(options));
        }
        return (String) raw;
    }

    /** Raise unless {@code value} (the field {@code key}) is one of {@code options}. */
    static void checkChoice(String value, String key, String where, String... options) {
        if (!Arrays.asList(options).contains(value)) {
            throw new MapFormatException(where + ": unknown " + key + " " + shortRepr(value)
                    + "; expected one of " + pyTuple(options));
        }
    }

    static void checkIncreasing(double[] a, String what, String where) {
        for (int i = 1; i < a.length; i++) {
            if (!(a[i] - a[i - 1] > 0)) {
                throw new MapFormatException(where + ": " + what + " must be strictly increasing");
            }
        }
    }

    static void checkUnitValues(double[] values, String where) {
        for (double v : values) {
            if (v < 0.0 || v > 1.0) {
                throw new MapFormatException(where + ": values must lie in [0, 1]");
            }
        }
    }

    /**
     * Raise unless {@code scores} is non-empty and finite (message as in mlcal's
     * {@code as_scores}).
     */
    static void checkFinite(double[] scores, String name) {
        if (scores.length == 0) {
            throw new InvalidScoresException(name + " is empty");
        }
        int bad = 0;
        boolean nan = false;
        for (double s : scores) {
            if (!Double.isFinite(s)) {
                bad++;
                nan |= Double.isNaN(s);
            }
        }
        if (bad > 0) {
            throw new InvalidScoresException(name + " contains " + bad + " non-finite value(s) ("
                    + (nan ? "NaN" : "infinite") + "); remove or impute them before calibrating");
        }
    }

    /** A bounded, Python-like repr of a JSON value for error messages. */
    static String shortRepr(Object value) {
        String text;
        if (value == null || value == Json.NULL) {
            text = "None";
        } else if (value instanceof String) {
            text = "'" + value + "'";
        } else if (value instanceof Json.Number) {
            text = value.toString();
        } else if (value instanceof Boolean) {
            text = (Boolean) value ? "True" : "False";
        } else {
            text = "<" + typeName(value) + ">";
        }
        return text.length() <= 60 ? text : text.substring(0, 57) + "...";
    }

    static String typeName(Object value) {
        if (value instanceof Map) {
            return "dict";
        }
        if (value instanceof List) {
            return "list";
        }
        if (value instanceof String) {
            return "str";
        }
        if (value instanceof Json.Number) {
            return ((Json.Number) value).integer ? "int" : "float";
        }
        if (value instanceof Boolean) {
            return "bool";
        }
        return "NoneType";
    }

    private static String pyTuple(String[] items) {
        StringBuilder sb = new StringBuilder("(");
        for (int i = 0; i < items.length; i++) {
            sb.append(i == 0 ? "'" : ", '").append(items[i]).append('\'');
        }
        return sb.append(items.length == 1 ? ",)" : ")").toString();
    }

    private static String pyList(List<String> items) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < items.size(); i++) {
            sb.append(i == 0 ? "'" : ", '").append(items.get(i)).append('\'');
        }
        return sb.append(']').toString();
    }
}
