package io.mlcal;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The segmented map of mlcal's {@code SegmentedCalibrator} (docs/segments.md): a shared binary
 * map {@code q = inner(s)} followed by a per-segment logit slope and offset,
 * {@code p = expit(slope_g * logit(q) + offset_g)}, computed as mlcal does:
 * {@code det_expit(slope * (det_log(q) - det_log1p(-q)) + offset)}; {@code q} of exactly 0 or 1
 * passes through, and a row whose segment is not in the table gets {@code q} (policy
 * {@code "shared"}) or an {@link UnseenSegmentException} (policy {@code "raise"}).
 *
 * <p>A segment is one value per segment column. Each column has a type fixed in the document:
 * {@code "string"} ({@link String}), {@code "integer"} ({@link Long}, {@link Integer},
 * {@link Short}, {@link Byte}, a {@link BigInteger} in the signed 64-bit range, or a
 * {@link Double}/{@link Float} holding a whole number of magnitude at most 2^53) or
 * {@code "boolean"} ({@link Boolean}). Values are compared by type and value, so the integer
 * 1, the string "1" and {@code true} are different keys; a value of another type than its
 * column's is a {@link SegmentKeyException}, never a silent miss. {@code null} or NaN is a
 * missing value: the row is unseen.
 *
 * <p>Not a score-only map: it is not in {@link Maps}' kind table (as in Python, where
 * {@code map_from_dict} refuses it); only a {@code "segmented"} calibrator document holds one.
 */
public final class SegmentedMap implements ColumnMap {
    /** The map's kind. */
    public static final String KIND = "segmented";
    /** The types a segment column may have. */
    public static final List<String> COLUMN_TYPES = List.of("string", "integer", "boolean");
    /** What an unseen segment gets. */
    public static final List<String> UNSEEN_POLICIES = List.of("shared", "raise");
    static final int MAX_SEGMENT_COLUMNS = 16;
    static final int MAX_KEY_CHARS = 1000;
    static final int MAX_SEGMENTS = 1_000_000;
    private static final double MAX_EXACT_FLOAT_INT = 9007199254740992.0;
    private static final BigInteger INT64_MIN = BigInteger.valueOf(Long.MIN_VALUE);
    private static final BigInteger INT64_MAX = BigInteger.valueOf(Long.MAX_VALUE);
    private static final List<String> FIELDS = List.of("type", "format_version",
            "input_transform", "domain", "inner", "columns", "keys", "slopes", "offsets",
            "unseen");
    private static final String WHERE = "segmented map";

    private final BinaryMap inner;
    private final String[] names;
    private final String[] types;
    private final Map<List<Object>, Integer> index;
    private final double[] slopes;
    private final double[] offsets;
    private final boolean raiseUnseen;

    private SegmentedMap(BinaryMap inner, String[] names, String[] types,
                         Map<List<Object>, Integer> index, double[] slopes, double[] offsets,
                         boolean raiseUnseen) {
        this.inner = inner;
        this.names = names;
        this.types = types;
        this.index = index;
        this.slopes = slopes;
        this.offsets = offsets;
        this.raiseUnseen = raiseUnseen;
    }

    @Override
    public String kind() {
        return KIND;
    }

    /** The shared map. */
    public BinaryMap inner() {
        return inner;
    }

    /** The segment column names, in key order. */
    @Override
    public List<String> columnNames() {
        return List.of(names);
    }

    /** The segment column types ({@code "string"}, {@code "integer"}, {@code "boolean"}). */
    @Override
    public List<String> columnTypes() {
        return List.of(types);
    }

    @Override
    public RuntimeException columnError(String message) {
        return new SegmentKeyException(message);
    }

    /** Number of segments in the table. */
    public int segmentCount() {
        return slopes.length;
    }

    /** {@code "shared"} or {@code "raise"}. */
    public String unseen() {
        return raiseUnseen ? "raise" : "shared";
    }

    // -- reading ------------------------------------------------------------------------------
    private static MapFormatException error(String message) {
        return new MapFormatException(WHERE + ": " + message);
    }

    /**
     * Build a segmented map from its document (the {@code "map"} of a {@code "segmented"}
     * calibrator document), validating every field as mlcal's {@code SegmentedMap.from_dict}.
     *
     * @throws MapFormatException naming the first problem found
     */
    @SuppressWarnings("unchecked")
    public static SegmentedMap fromDoc(Object node) {
        if (!(node instanceof Map)) {
            throw error("must be a JSON object, got " + Maps.typeName(node));
        }
        Map<String, Object> doc = (Map<String, Object>) node;
        if (!KIND.equals(doc.get("type"))) {
            throw new MapFormatException("expected a 'segmented' map, got type "
                    + Maps.shortRepr(doc.get("type")));
        }
        List<String> unknown = new ArrayList<>();
        for (String k : doc.keySet()) {
            if (!FIELDS.contains(k)) {
                unknown.add(k);
            }
        }
        if (!unknown.isEmpty()) {
            unknown.sort(null);
            throw error("unknown field(s) " + Maps.shortRepr(unknown.get(0))
                    + (unknown.size() > 1 ? " (and " + (unknown.size() - 1) + " more)" : ""));
        }
        for (String k : FIELDS) {
            if (!doc.containsKey(k)) {
                throw error("missing field '" + k + "'");
            }
        }
        if (!Maps.isInteger(doc.get("format_version"), Maps.MAP_FORMAT_VERSION)) {
            throw error("unsupported format_version " + Maps.shortRepr(doc.get("format_version"))
                    + " (this evaluator reads version " + Maps.MAP_FORMAT_VERSION + ")");
        }
        Object rawInner = doc.get("inner");
        Object innerKind = rawInner instanceof Map ? ((Map<?, ?>) rawInner).get("type") : null;
        if (!OffsetMap.INNER_KINDS.contains(innerKind)) {
            throw error("field 'inner' must be a map of type ('beta', 'linear', 'quadratic', "
                    + "'sigmoid', 'step'), got " + Maps.shortRepr(innerKind));
        }
        BinaryMap inner = (BinaryMap) Maps.fromDoc(rawInner);
        checkSameShape(doc, inner);
        String[][] columns = readColumns(doc.get("columns"));
        String[] names = columns[0];
        String[] types = columns[1];
        Object rawKeys = doc.get("keys");
        if (!(rawKeys instanceof List) || ((List<?>) rawKeys).size() != names.length) {
            throw error("'keys' must be a list of " + names.length + " lists (one per column)");
        }
        List<List<Object>> keyLists = new ArrayList<>();
        for (Object k : (List<Object>) rawKeys) {
            if (!(k instanceof List)) {
                throw error("'keys' must be a list of " + names.length
                        + " lists (one per column)");
            }
            keyLists.add((List<Object>) k);
        }
        int n = keyLists.get(0).size();
        for (List<Object> k : keyLists) {
            if (k.size() != n) {
                throw error("the key lists of the columns differ in length");
            }
        }
        if (n < 1 || n > MAX_SEGMENTS) {
            throw error("needs 1 to " + MAX_SEGMENTS + " segments, got " + n);
        }
        double[] slopes = Maps.floatArray(doc, "slopes", WHERE);
        double[] offsets = Maps.floatArray(doc, "offsets", WHERE);
        Object unseen = doc.get("unseen");
        if (!UNSEEN_POLICIES.contains(unseen)) {
            throw error("unseen must be one of ('shared', 'raise'), got "
                    + Maps.shortRepr(unseen));
        }
        Map<List<Object>, Integer> index = new HashMap<>(2 * n);
        for (int i = 0; i < n; i++) {
            Object[] key = new Object[names.length];
            for (int j = 0; j < names.length; j++) {
                key[j] = documentKeyValue(keyLists.get(j).get(i), types[j]);
            }
            if (index.put(List.of(key), i) != null) {
                throw error("segment key " + keyRepr(key) + " appears twice");
            }
        }
        if (slopes.length != n || offsets.length != n) {
            throw error(n + " segments need as many slopes and offsets, got " + slopes.length
                    + " and " + offsets.length);
        }
        for (int i = 0; i < n; i++) {
            if (!(slopes[i] > 0.0)) {
                throw error("slopes must be > 0 (the map keeps the shared map's order), slopes["
                        + i + "] = " + slopes[i]);
            }
        }
        return new SegmentedMap(inner, names, types, index, slopes, offsets,
                "raise".equals(unseen));
    }

    /** The document's input_transform and domain must be copies of the inner map's. */
    private static void checkSameShape(Map<String, Object> doc, BinaryMap inner) {
        Object transform = doc.get("input_transform");
        Object rawDomain = doc.get("domain");
        double[] d = inner.domain();
        boolean same = inner.inputTransform().equals(transform);
        if (d == null) {
            same &= rawDomain == Json.NULL;
        } else if (rawDomain instanceof List && ((List<?>) rawDomain).size() == 2) {
            for (int j = 0; j < 2; j++) {
                Object v = ((List<?>) rawDomain).get(j);
                same &= v instanceof Json.Number && ((Json.Number) v).value == d[j];
            }
        } else {
            same = false;
        }
        if (!same) {
            throw error("input_transform/domain differ from the inner map's");
        }
    }

    @SuppressWarnings("unchecked")
    private static String[][] readColumns(Object raw) {
        if (!(raw instanceof List) || ((List<?>) raw).isEmpty()
                || ((List<?>) raw).size() > MAX_SEGMENT_COLUMNS) {
            throw error("'columns' must be a list of 1 to " + MAX_SEGMENT_COLUMNS + " objects");
        }
        List<Object> cols = (List<Object>) raw;
        String[] names = new String[cols.size()];
        String[] types = new String[cols.size()];
        Set<String> seen = new HashSet<>();
        for (int j = 0; j < names.length; j++) {
            Object c = cols.get(j);
            if (!(c instanceof Map) || !((Map<String, Object>) c).keySet()
                    .equals(Set.of("name", "type"))) {
                throw error("each of 'columns' must be an object with exactly the fields "
                        + "'name' and 'type'");
            }
            Object name = ((Map<String, Object>) c).get("name");
            Object type = ((Map<String, Object>) c).get("type");
            if (!(name instanceof String) || ((String) name).isEmpty()
                    || codePoints((String) name) > MAX_KEY_CHARS) {
                throw error("a column name must be a non-empty string of at most "
                        + MAX_KEY_CHARS + " characters, got " + Maps.shortRepr(name));
            }
            if (!seen.add((String) name)) {
                throw error("segment column names repeat");
            }
            if (!COLUMN_TYPES.contains(type)) {
                throw error("column '" + name + "' has type " + Maps.shortRepr(type)
                        + "; expected one of ('string', 'integer', 'boolean')");
            }
            names[j] = (String) name;
            types[j] = (String) type;
        }
        return new String[][] {names, types};
    }

    private static int codePoints(String s) {
        return s.codePointCount(0, s.length());
    }

    /** A key value as the document must write it: a JSON string, integer literal or boolean. */
    private static Object documentKeyValue(Object v, String type) {
        switch (type) {
            case "string":
                if (v instanceof String && codePoints((String) v) <= MAX_KEY_CHARS) {
                    return v;
                }
                break;
            case "integer":
                if (v instanceof Json.Number && ((Json.Number) v).integer) {
                    Long exact = int64(new BigInteger(((Json.Number) v).literal));
                    if (exact != null) {
                        return exact;
                    }
                }
                break;
            default:
                if (v instanceof Boolean) {
                    return v;
                }
        }
        throw error("a key of a " + type + " column must be a " + type
                + ("string".equals(type) ? " of at most " + MAX_KEY_CHARS + " characters" : "")
                + ("integer".equals(type) ? " in the signed 64-bit range" : "") + ", got "
                + Maps.shortRepr(v));
    }

    private static Long int64(BigInteger v) {
        return v.compareTo(INT64_MIN) >= 0 && v.compareTo(INT64_MAX) <= 0 ? v.longValue() : null;
    }

    // -- keys of rows -------------------------------------------------------------------------
    /**
     * The canonical key value of {@code v} in column {@code j} ({@link String}, {@link Long} or
     * {@link Boolean}), or null when it is missing.
     *
     * @throws SegmentKeyException when {@code v} has another type than the column's
     */
    Object canonical(Object v, int j) {
        if (v == null || v == Json.NULL || v instanceof Double && ((Double) v).isNaN()
                || v instanceof Float && ((Float) v).isNaN()) {
            return null;
        }
        String type = types[j];
        switch (type) {
            case "string":
                if (v instanceof String) {
                    if (codePoints((String) v) > MAX_KEY_CHARS) {
                        throw new SegmentKeyException("segment column '" + names[j]
                                + "': a segment key string has more than " + MAX_KEY_CHARS
                                + " characters");
                    }
                    return v;
                }
                break;
            case "integer": {
                Long i = integerValue(v);
                if (i != null) {
                    return i;
                }
                break;
            }
            default:
                if (v instanceof Boolean) {
                    return v;
                }
        }
        throw new SegmentKeyException("segment column '" + names[j] + "': a " + type
                + " segment column got " + describe(v));
    }

    /** An integer key from a Java or JSON number, or null when it is none (a non-integral or
     * too large float, a boolean, a string). */
    private static Long integerValue(Object v) {
        if (v instanceof Long || v instanceof Integer || v instanceof Short
                || v instanceof Byte) {
            return ((java.lang.Number) v).longValue();
        }
        if (v instanceof BigInteger) {
            return int64((BigInteger) v);
        }
        if (v instanceof Json.Number && ((Json.Number) v).integer) {
            return int64(new BigInteger(((Json.Number) v).literal));
        }
        double d;
        if (v instanceof Double || v instanceof Float) {
            d = ((java.lang.Number) v).doubleValue();
        } else if (v instanceof Json.Number) {
            d = ((Json.Number) v).value;
        } else {
            return null;
        }
        // an integral float is read as that integer where every integer is exact in a double
        return Double.isFinite(d) && Math.floor(d) == d && Math.abs(d) <= MAX_EXACT_FLOAT_INT
                ? (long) d : null;
    }

    private static String describe(Object v) {
        String type = v instanceof Json.Number ? Maps.typeName(v) : v.getClass().getSimpleName();
        String text = v instanceof String ? "'" + v + "'" : String.valueOf(v);
        return type + " " + (text.length() <= 60 ? text : text.substring(0, 57) + "...");
    }

    private static String keyRepr(Object[] key) {
        if (key == null) {
            return "with a missing value";
        }
        StringBuilder sb = new StringBuilder("[");
        for (int j = 0; j < key.length; j++) {
            Object v = key[j];
            sb.append(j == 0 ? "" : ", ").append(v instanceof String ? "'" + v + "'"
                    : v instanceof Boolean ? ((Boolean) v ? "True" : "False") : v);
        }
        String text = sb.append(']').toString();
        return text.length() <= 200 ? text : text.substring(0, 197) + "...";
    }

    /** Index of the row's segment in the table, or -1 when unseen (raising under "raise"). */
    private int lookup(Object[] values, int row) {
        if (values.length != names.length) {
            throw new SegmentKeyException(values.length + " segment value(s) given; this map "
                    + "keys on " + names.length + ": " + Arrays.toString(names));
        }
        Object[] key = new Object[values.length];
        boolean complete = true;
        for (int j = 0; j < values.length; j++) {
            key[j] = canonical(values[j], j);
            complete &= key[j] != null;
        }
        Integer k = complete ? index.get(List.of(key)) : null;
        if (k == null && raiseUnseen) {
            throw new UnseenSegmentException("row " + row + ": segment "
                    + keyRepr(complete ? key : null) + " (columns " + Arrays.toString(names)
                    + ") was not seen when the calibrator was fitted (unseen='raise')");
        }
        return k == null ? -1 : k;
    }

    private double apply(double q, int k) {
        if (k < 0 || !(q > 0.0 && q < 1.0)) {
            return q;
        }
        return DetMath.expit(slopes[k] * (DetMath.log(q) - DetMath.log1p(-q)) + offsets[k]);
    }

    // -- prediction ---------------------------------------------------------------------------
    /**
     * Calibrated probability of one score in the segment given by one value per segment
     * column ({@link #columnNames()} order).
     *
     * @throws InvalidScoresException if the score is NaN or infinite
     * @throws SegmentKeyException for a value of the wrong type or a wrong number of values
     * @throws UnseenSegmentException for an unseen segment under {@code unseen="raise"}
     */
    public double predict(double score, Object... segmentValues) {
        double q = inner.predict(score);
        return apply(q, lookup(segmentValues, 0));
    }

    /**
     * Calibrated probabilities of a batch: {@code columns[j][i]} is row {@code i}'s value of
     * segment column {@code j} (column-major, {@link #columnNames()} order).
     *
     * @throws InvalidScoresException if the scores are empty or hold NaN or infinite values
     * @throws SegmentKeyException for a value of the wrong type, or columns that are not one
     *     per segment column with one value per score
     * @throws UnseenSegmentException for an unseen segment under {@code unseen="raise"} (the
     *     message names the first such row)
     */
    public double[] predict(double[] scores, Object[]... columns) {
        Maps.checkFinite(scores, "scores");
        if (columns.length != names.length) {
            throw new SegmentKeyException("segments has " + columns.length + " column(s); this "
                    + "map keys on " + names.length + ": " + Arrays.toString(names));
        }
        for (Object[] c : columns) {
            if (c.length != scores.length) {
                throw new SegmentKeyException(scores.length + " scores but " + c.length
                        + " segment rows");
            }
        }
        int[] ks = new int[scores.length];
        Object[] row = new Object[columns.length];
        for (int i = 0; i < scores.length; i++) {
            for (int j = 0; j < columns.length; j++) {
                row[j] = columns[j][i];
            }
            ks[i] = lookup(row, i);
        }
        double[] out = new double[scores.length];
        inner.evaluateInto(scores, out);
        for (int i = 0; i < out.length; i++) {
            out[i] = apply(out[i], ks[i]);
        }
        return out;
    }
}
