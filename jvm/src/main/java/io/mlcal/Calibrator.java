package io.mlcal;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Arrays;
import java.util.Map;

/**
 * A fitted mlcal calibrator loaded from its JSON: the document written by
 * {@code calibrator.to_json()} / {@code mlcal.save_calibrator} ({@code "format":
 * "mlcal-calibrator"}, binary or multiclass; top-level fields that do not enter prediction,
 * such as Venn-Abers' {@code interval}, are ignored), or a bare map document
 * ({@code map_.to_dict()}).
 *
 * <p>Predictions are bit-identical to mlcal's Python {@code predict} / {@code predict_proba}.
 * The map is validated as strictly as mlcal validates it; the calibrator's {@code params}
 * (fit-time settings that do not enter prediction) are only checked to be an object.
 *
 * <pre>
 * Calibrator cal = Calibrator.load(Path.of("calibrator.json"));
 * double[] p = cal.predict(new double[] {0.1, 0.7});
 * </pre>
 */
public final class Calibrator {
    /** The {@code "format"} value of a calibrator document. */
    public static final String CALIBRATOR_FORMAT = "mlcal-calibrator";
    /** The calibrator document format version this evaluator reads. */
    public static final int CALIBRATOR_FORMAT_VERSION = 1;

    private final String method;
    private final CalibrationMap map;

    private Calibrator(String method, CalibrationMap map) {
        this.method = method;
        this.map = map;
    }

    /**
     * Load a calibrator (or bare map) JSON file.
     *
     * @throws MapFormatException if the file cannot be read or is not a valid document
     */
    public static Calibrator load(Path path) {
        return fromDocument(Json.parse(readRegularFile(path, Json.MAX_DOCUMENT_BYTES)));
    }

    /**
     * At most {@code maxBytes} bytes of the regular file at {@code path}. A FIFO, device,
     * socket or directory (also behind a symlink) is refused from its attributes before it is
     * opened, so it cannot block or stream forever; at most {@code maxBytes + 1} bytes are
     * read whatever size the file reports (0 for {@code /dev/zero}), and the file's identity
     * is compared before and after reading (a file swapped meanwhile is refused). Java cannot
     * open without blocking: a FIFO swapped in between the check and the open (by someone who
     * can write the directory) would still block the open.
     *
     * @throws MapFormatException naming the path and what is wrong
     */
    static byte[] readRegularFile(Path path, int maxBytes) {
        BasicFileAttributes before = regularFileAttributes(path);
        byte[] buf = new byte[(int) Math.min(maxBytes + 1L, Math.max(before.size() + 1, 8192))];
        int n = 0;
        try (InputStream in = Files.newInputStream(path)) {
            while (n <= maxBytes) {
                if (n == buf.length) {
                    buf = Arrays.copyOf(buf, (int) Math.min(maxBytes + 1L, 2L * n));
                }
                int got = in.read(buf, n, buf.length - n);
                if (got < 0) {
                    break;
                }
                n += got;
            }
        } catch (IOException e) {
            throw new MapFormatException("cannot read calibrator file '" + path + "': " + e);
        }
        if (n > maxBytes) {
            throw new MapFormatException("calibrator file '" + path + "' is larger than the "
                    + maxBytes + "-byte limit");
        }
        Object key = before.fileKey();
        if (key != null && !key.equals(regularFileAttributes(path).fileKey())) {
            throw new MapFormatException("calibrator file '" + path + "' was replaced while "
                    + "it was read");
        }
        return Arrays.copyOf(buf, n);
    }

    private static BasicFileAttributes regularFileAttributes(Path path) {
        BasicFileAttributes attrs;
        try {
            attrs = Files.readAttributes(path, BasicFileAttributes.class);
        } catch (IOException e) {
            throw new MapFormatException("cannot read calibrator file '" + path + "': " + e);
        }
        if (!attrs.isRegularFile()) {
            throw new MapFormatException("calibrator file '" + path + "' is " + fileKind(path,
                    attrs) + ", not a regular file");
        }
        return attrs;
    }

    /** What a non-regular file is, in the words of mlcal's message. */
    private static String fileKind(Path path, BasicFileAttributes attrs) {
        if (attrs.isDirectory()) {
            return "a directory";
        }
        try {
            int type = ((Integer) Files.getAttribute(path, "unix:mode")) & 0170000;
            switch (type) {
                case 0010000: return "a FIFO (named pipe)";
                case 0020000: return "a character device";
                case 0060000: return "a block device";
                case 0140000: return "a socket";
                default: break;
            }
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException
                 | ClassCastException e) {
            // no unix view: fall through
        }
        return "not a regular file";
    }

    /**
     * Load from JSON text (when the first non-blank character is '{' or '[') or else from the
     * file at that path, the rule of mlcal's {@code load_calibrator}.
     *
     * @throws MapFormatException if the document is invalid or the file cannot be read
     */
    public static Calibrator load(String source) {
        String head = source.stripLeading();
        if (head.startsWith("{") || head.startsWith("[") || head.startsWith("\uFEFF")) {
            return fromDocument(Json.parse(source.getBytes(StandardCharsets.UTF_8)));
        }
        return load(Path.of(source));
    }

    /**
     * Build from a parsed JSON document ({@link Json#parse}).
     *
     * @throws MapFormatException if it is neither a valid calibrator nor a valid map document
     */
    public static Calibrator fromDocument(Object node) {
        if (!(node instanceof Map)) {
            throw new MapFormatException("not an mlcal calibrator document (expected a JSON "
                    + "object, got " + Maps.typeName(node) + ")");
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> doc = (Map<String, Object>) node;
        if (!doc.containsKey("format") && doc.containsKey("type")) {
            return new Calibrator(null, Maps.fromDoc(doc));
        }
        if (!CALIBRATOR_FORMAT.equals(doc.get("format"))) {
            throw new MapFormatException("not an mlcal calibrator document (expected \"format\": "
                    + "\"" + CALIBRATOR_FORMAT + "\", or a map document with a \"type\")");
        }
        Object version = doc.get("format_version");
        if (!Maps.isInteger(version, CALIBRATOR_FORMAT_VERSION)) {
            throw new MapFormatException("unsupported calibrator format_version "
                    + Maps.shortRepr(version) + " (this evaluator reads version "
                    + CALIBRATOR_FORMAT_VERSION + ")");
        }
        Object method = doc.get("method");
        if (!(method instanceof String)) {
            throw new MapFormatException("calibrator document: 'method' must be a string, got "
                    + Maps.shortRepr(method));
        }
        if (!(doc.get("params") instanceof Map)) {
            throw new MapFormatException("calibrator document: 'params' must be an object");
        }
        CalibrationMap map;
        try {
            // segmented and multicalibration maps take named columns besides the score: not
            // Maps kinds (mlcal's map_from_dict refuses them too)
            if (SegmentedMap.KIND.equals(method)) {
                map = SegmentedMap.fromDoc(doc.get("map"));
            } else if (MulticalibrationMap.KIND.equals(method)) {
                map = multicalibrationMap(doc.get("map"));
            } else {
                map = Maps.fromDoc(doc.get("map"));
            }
        } catch (MapFormatException e) {
            throw new MapFormatException("calibrator document: " + e.getMessage());
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> params = (Map<String, Object>) doc.get("params");
        // the map must be one the method fits; fields, parameters and extras as mlcal checks
        DocumentRules.check(doc, (String) method, params, map);
        return new Calibrator((String) method, map);
    }

    /** The map of a {@code "multicalibration"} document (mlcal's {@code
     * Multicalibration.from_dict}: the map must have that type before it is read). */
    private static CalibrationMap multicalibrationMap(Object raw) {
        if (!(raw instanceof Map) || !MulticalibrationMap.KIND.equals(((Map<?, ?>) raw)
                .get("type"))) {
            throw new MapFormatException("a '" + MulticalibrationMap.KIND + "' calibrator holds "
                    + "a '" + MulticalibrationMap.KIND + "' map");
        }
        return MulticalibrationMap.fromDoc(raw);
    }

    /** The fitting method ({@code "isotonic"}, ...), or null for a bare map document. */
    public String method() {
        return method;
    }

    /** The calibration map. */
    public CalibrationMap map() {
        return map;
    }

    /** Whether the map takes an (n, K) score matrix. */
    public boolean isMulticlass() {
        return map instanceof MultiMap;
    }

    /** Number of classes: K of a multiclass map, 2 of a binary one. */
    public int nClasses() {
        return isMulticlass() ? ((MultiMap) map).nClasses() : 2;
    }

    private BinaryMap binary() {
        if (map instanceof ColumnMap) {
            throw new IllegalStateException("this is a " + map.kind() + " map: pass its "
                    + "columns " + ((ColumnMap) map).columnNames() + " too, "
                    + "predict(score, values...) or predict(scores, columns...)");
        }
        if (!(map instanceof BinaryMap)) {
            throw new IllegalStateException("this is a " + map.kind() + " (multiclass) map: "
                    + "use predictProba(double[][]) with one column per class");
        }
        return (BinaryMap) map;
    }

    /**
     * Calibrated probability of the positive class for one score (binary maps).
     *
     * @throws InvalidScoresException if the score is NaN or infinite
     * @throws IllegalStateException for a multiclass map
     */
    public double predict(double score) {
        if (map instanceof ColumnMap && ((ColumnMap) map).columnNames().isEmpty()) {
            return ((ColumnMap) map).predict(score);   // a map of the score alone
        }
        return binary().predict(score);
    }

    /**
     * Calibrated probabilities of the positive class (binary maps), a new array.
     *
     * @throws InvalidScoresException if the scores are empty or hold NaN or infinite values
     * @throws IllegalStateException for a multiclass map
     */
    public double[] predict(double[] scores) {
        if (map instanceof ColumnMap && ((ColumnMap) map).columnNames().isEmpty()) {
            return ((ColumnMap) map).predict(scores);   // a map of the score alone
        }
        return binary().predict(scores);
    }

    /** Whether the map is a segmented map (scores plus segment values in). */
    public boolean isSegmented() {
        return map instanceof SegmentedMap;
    }

    /** Whether the map reads named columns besides the score (a segmented or
     * multicalibration map): {@link #columnNames()} gives them. */
    public boolean readsColumns() {
        return map instanceof ColumnMap;
    }

    /** The columns the map reads besides the score (empty for a score-only map). */
    public java.util.List<String> columnNames() {
        return map instanceof ColumnMap ? ((ColumnMap) map).columnNames() : java.util.List.of();
    }

    private ColumnMap segmented() {
        if (!(map instanceof ColumnMap)) {
            throw new IllegalStateException("this " + map.kind() + " map takes no segment "
                    + "values: use predict(double[])");
        }
        return (ColumnMap) map;
    }

    /**
     * Calibrated probability of one score in a segment (segmented maps) or with its segment
     * features (multicalibration maps): one value per column, in {@link #columnNames()} order.
     *
     * @throws InvalidScoresException if the score is NaN or infinite
     * @throws SegmentKeyException for a value of another type than its column's
     * @throws UnseenSegmentException for an unseen segment under {@code unseen="raise"}
     * @throws InvalidFeaturesException for missing, non-finite or mistyped features
     *     (multicalibration maps)
     * @throws IllegalStateException for a map without segments
     */
    public double predict(double score, Object... segmentValues) {
        return segmented().predict(score, segmentValues);
    }

    /**
     * Calibrated probabilities of scores in segments (segmented maps) or with their segment
     * features (multicalibration maps): {@code columns[j][i]} is row {@code i}'s value of
     * column {@code j}.
     *
     * @throws InvalidScoresException if the scores are empty or hold NaN or infinite values
     * @throws SegmentKeyException for values of the wrong type or shape
     * @throws UnseenSegmentException for an unseen segment under {@code unseen="raise"}
     * @throws InvalidFeaturesException for missing, non-finite or mistyped features
     *     (multicalibration maps)
     * @throws IllegalStateException for a map without segments
     */
    public double[] predict(double[] scores, Object[]... columns) {
        return segmented().predict(scores, columns);
    }

    /**
     * Probabilities of both classes {@code [1 - p, p]} (binary maps), as Python's
     * {@code predict_proba}.
     */
    public double[][] predictProba(double[] scores) {
        double[] p = predict(scores);
        double[][] out = new double[p.length][];
        for (int i = 0; i < p.length; i++) {
            out[i] = new double[] {1.0 - p[i], p[i]};
        }
        return out;
    }

    /**
     * Calibrated class probabilities for an (n, K) score matrix (multiclass maps).
     *
     * @throws InvalidScoresException for an empty matrix, rows not of length K, or NaN or
     *     infinite scores
     * @throws IllegalStateException for a binary map
     */
    public double[][] predictProba(double[][] scores) {
        return multi().predictProba(scores);
    }

    /**
     * {@link #predictProba(double[][])} on a row-major matrix (K scores per row, rows one after
     * another), returning the row-major probabilities: no per-row arrays, for large batches.
     *
     * @throws InvalidScoresException if the length is 0 or not a multiple of K, or for NaN or
     *     infinite scores
     * @throws IllegalStateException for a binary map
     */
    public double[] predictProbaRowMajor(double[] scores) {
        return multi().predictProbaRowMajor(scores);
    }

    private MultiMap multi() {
        if (!(map instanceof MultiMap)) {
            throw new IllegalStateException("this is a binary " + map.kind() + " map: use "
                    + "predict(double[]) or predictProba(double[])");
        }
        return (MultiMap) map;
    }
}
