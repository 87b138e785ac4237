package io.mlcal;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * What a calibrator document may hold, method by method: the Java side of
 * {@code mlcal.calibrators.document_rules}. The table (map kinds each method fits, whether its
 * maps are non-decreasing, whether it takes an input transform, its extra top-level fields,
 * its parameter names and constraints) is the resource {@code methods.json}, written by
 * {@code python -m mlcal.calibrators.document_rules} and compared with mlcal's own table by
 * the tests; the checks here mirror mlcal's loader, so both accept and refuse the same
 * documents.
 */
final class DocumentRules {
    private DocumentRules() {
    }

    static final List<String> ENVELOPE = List.of("format", "format_version", "mlcal_version",
            "method", "params", "map");
    private static final List<String> BINARY_EXTRAS = List.of("interval", "fit_info");
    private static final List<String> BINARY_KINDS = List.of("beta", "linear", "sigmoid",
            "step");
    private static final Map<String, Map<String, Object>> TABLE = loadTable();
    /** The document method of multiclass auto, and its one-vs-rest candidate prefix. */
    static final String MULTICLASS_AUTO = "multiclass-auto";
    private static final String OVR_PREFIX = "one-vs-rest:";

    @SuppressWarnings("unchecked")
    private static Map<String, Map<String, Object>> loadTable() {
        try (InputStream in = DocumentRules.class.getResourceAsStream("methods.json")) {
            if (in == null) {
                throw new IllegalStateException("methods.json is missing from the jar");
            }
            Map<String, Map<String, Object>> out = new TreeMap<>();
            for (Map.Entry<String, Object> e
                    : ((Map<String, Object>) Json.parse(in.readAllBytes())).entrySet()) {
                out.put(e.getKey(), (Map<String, Object>) e.getValue());
            }
            return out;
        } catch (IOException e) {
            throw new IllegalStateException("cannot read methods.json: " + e);
        }
    }

    /** The method names of the table, sorted. */
    static List<String> methods() {
        return new ArrayList<>(TABLE.keySet());
    }

    private static MapFormatException error(String message) {
        return new MapFormatException("calibrator document: " + message);
    }

    private static boolean flag(Map<String, Object> entry, String key) {
        return Boolean.TRUE.equals(entry.get(key));
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Map<String, Object> entry, String key) {
        return (List<Object>) entry.get(key);
    }

    /** A binary method by name, case-insensitive (mlcal's {@code calibrator_class}). */
    private static Map<String, Object> binaryMethod(String name) {
        Map<String, Object> entry = TABLE.get(name.toLowerCase(Locale.ROOT));
        if (entry == null || flag(entry, "multiclass")) {
            List<String> names = new ArrayList<>();
            for (Map.Entry<String, Map<String, Object>> e : TABLE.entrySet()) {
                if (!flag(e.getValue(), "multiclass")) {
                    names.add(e.getKey());
                }
            }
            throw error("unknown calibrator " + Maps.shortRepr(name) + "; available: "
                    + String.join(", ", names));
        }
        return entry;
    }

    private static String nameOf(Map<String, Object> entry) {
        for (Map.Entry<String, Map<String, Object>> e : TABLE.entrySet()) {
            if (e.getValue() == entry) {
                return e.getKey();
            }
        }
        return "?";
    }

    /**
     * Check a calibrator document whose envelope (format, version, method string, params
     * object) and map ({@code map}, already built) were read.
     */
    @SuppressWarnings("unchecked")
    static void check(Map<String, Object> doc, String method, Map<String, Object> params,
                      CalibrationMap map) {
        Map<String, Object> multi = TABLE.get(method);
        Map<String, Object> mapDoc = (Map<String, Object>) doc.get("map");
        if (multi != null && flag(multi, "multiclass")) {
            checkMulticlass(doc, method, multi, params, map, mapDoc);
            return;
        }
        if (map instanceof SegmentedMap) {
            checkSegmented(doc, params, (SegmentedMap) map, mapDoc);
            return;
        }
        if (map instanceof MulticalibrationMap) {
            // mlcal's Multicalibration.from_dict: the envelope only, known valid parameters
            checkFields(doc, ENVELOPE, MulticalibrationMap.KIND);
            checkParams(TABLE.get(MulticalibrationMap.KIND), MulticalibrationMap.KIND, params);
            return;
        }
        Map<String, Object> entry = binaryMethod(method);
        String name = nameOf(entry);
        List<String> allowed = new ArrayList<>(ENVELOPE);
        allowed.addAll(BINARY_EXTRAS);
        checkFields(doc, allowed, name);
        checkParams(entry, name, params);
        if (map instanceof MultiMap) {
            throw error("a '" + name + "' calibrator fits " + kinds(entry) + " maps, not a '"
                    + map.kind() + "' map");
        }
        String chosen = checkExtras(doc, entry, name, mapDoc, "");
        checkBinaryMap(entry, name, params, mapDoc, chosen, "");
    }

    /** mlcal's {@code SegmentedCalibrator.from_dict}: the envelope only, exactly the
     * parameters, the same unseen policy in params and map, and a shared (inner) map that the
     * shared method fits. */
    @SuppressWarnings("unchecked")
    private static void checkSegmented(Map<String, Object> doc, Map<String, Object> params,
                                       SegmentedMap map, Map<String, Object> mapDoc) {
        Map<String, Object> entry = TABLE.get(SegmentedMap.KIND);
        checkFields(doc, ENVELOPE, SegmentedMap.KIND);
        Set<Object> expected = new HashSet<>(list(entry, "param_names"));
        // a document written before a parameter was added may lack it ("optional_params"):
        // every required parameter and no unknown one, whichever optional ones are present
        Set<Object> required = new HashSet<>(expected);
        required.removeAll(list(entry, "optional_params"));
        if (!expected.containsAll(params.keySet()) || !params.keySet().containsAll(required)) {
            List<String> names = new ArrayList<>();
            for (Object n : list(entry, "param_names")) {
                names.add((String) n);
            }
            throw error("'segmented' params must be exactly " + names);
        }
        checkParams(entry, SegmentedMap.KIND, params);
        if (!map.unseen().equals(params.get("unseen"))) {
            throw error("params say unseen=" + Maps.shortRepr(params.get("unseen"))
                    + " but the map says '" + map.unseen() + "'");
        }
        Map<String, Object> shared = binaryMethod((String) params.get("method"));
        checkBinaryMap(shared, nameOf(shared), Map.of(),
                (Map<String, Object>) mapDoc.get("inner"), null, "shared map: ");
    }

    private static String kinds(Map<String, Object> entry) {
        List<Object> kinds = list(entry, "map_kinds");
        List<String> out = new ArrayList<>();
        for (Object k : kinds.isEmpty() ? new ArrayList<Object>(BINARY_KINDS) : kinds) {
            out.add("'" + k + "'");
        }
        return String.join(" or ", out);
    }

    private static void checkFields(Map<String, Object> doc, List<String> allowed,
                                    String method) {
        List<String> unknown = new ArrayList<>();
        for (String key : doc.keySet()) {
            if (!allowed.contains(key)) {
                unknown.add(key);
            }
        }
        if (!unknown.isEmpty()) {
            unknown.sort(null);
            throw error("unknown top-level field(s) " + Maps.shortRepr(unknown.get(0))
                    + (unknown.size() > 1 ? " (and " + (unknown.size() - 1) + " more)" : "")
                    + "; a '" + method + "' document holds " + String.join(", ", allowed));
        }
    }

    // -- parameters ---------------------------------------------------------------------------
    @SuppressWarnings("unchecked")
    private static void checkParams(Map<String, Object> entry, String owner,
                                    Map<String, Object> params) {
        List<Object> names = list(entry, "param_names");
        for (String key : params.keySet()) {
            if (!names.contains(key)) {
                throw error(owner + " has no parameter " + Maps.shortRepr(key));
            }
        }
        Map<String, Object> constraints = (Map<String, Object>) entry.get("params");
        for (Map.Entry<String, Object> c : constraints.entrySet()) {
            if (!params.containsKey(c.getKey())) {
                continue;
            }
            Object value = params.get(c.getKey());
            boolean ok = false;
            for (Object spec : (List<Object>) c.getValue()) {
                ok |= accepts((Map<String, Object>) spec, value);
            }
            if (!ok) {
                throw error(owner + ": parameter '" + c.getKey() + "' has an invalid value "
                        + Maps.shortRepr(value));
            }
        }
        if (("auto".equals(owner) || MULTICLASS_AUTO.equals(owner))
                && params.get("candidates") instanceof List) {
            Set<Object> seen = new HashSet<>();
            for (Object m : (List<Object>) params.get("candidates")) {
                if (!seen.add(m)) {
                    throw error(owner + ": parameter 'candidates' lists a method twice");
                }
            }
        }
    }

    private static double number(Map<String, Object> spec, String key) {
        Object v = spec.get(key);
        return v instanceof Json.Number ? ((Json.Number) v).value : Double.POSITIVE_INFINITY;
    }

    @SuppressWarnings("unchecked")
    private static boolean accepts(Map<String, Object> spec, Object value) {
        switch ((String) spec.get("kind")) {
            case "none":
                return value == Json.NULL;
            case "boolean":
                return value instanceof Boolean;
            case "options":
                return value instanceof String
                        && ((List<Object>) spec.get("options")).contains(value);
            case "integer":
                return value instanceof Json.Number && ((Json.Number) value).integer
                        && ((Json.Number) value).value >= number(spec, "low")
                        && ((Json.Number) value).value <= number(spec, "high");
            case "real": {
                if (!(value instanceof Json.Number)) {
                    return false;
                }
                double v = ((Json.Number) value).value;
                double lo = number(spec, "low");
                double hi = number(spec, "high");
                String closed = (String) spec.get("closed");
                boolean left = closed.equals("both") || closed.equals("left");
                boolean right = closed.equals("both") || closed.equals("right");
                return Double.isFinite(v) && (left ? v >= lo : v > lo)
                        && (right ? v <= hi : v < hi);
            }
            case "list": {
                if (!(value instanceof List) || ((List<Object>) value).isEmpty()) {
                    return false;
                }
                for (Object item : (List<Object>) value) {
                    if (!accepts((Map<String, Object>) spec.get("item"), item)) {
                        return false;
                    }
                }
                return true;
            }
            case "multiclass-candidate": {
                // mlcal's MulticlassCandidate: a multiclass method other than "auto", or the
                // prefix followed by a registered binary method (exact names)
                if (!(value instanceof String)) {
                    return false;
                }
                String v = (String) value;
                String prefix = (String) spec.get("prefix");
                if (v.startsWith(prefix)) {
                    Map<String, Object> e = TABLE.get(v.substring(prefix.length()));
                    return e != null && !flag(e, "multiclass");
                }
                return !"auto".equals(v) && ((List<Object>) spec.get("multiclass")).contains(v);
            }
            case "registered-method": {
                Map<String, Object> e = value instanceof String ? TABLE.get(value) : null;
                return e != null && !flag(e, "multiclass") && !"auto".equals(value);
            }
            default:
                throw new IllegalStateException("unknown constraint " + spec.get("kind"));
        }
    }

    // -- extras -------------------------------------------------------------------------------
    /**
     * Check the extra fields of a binary method's document (or of one class's
     * {@code class_extras} object); returns auto's chosen method, or null.
     */
    @SuppressWarnings("unchecked")
    private static String checkExtras(Map<String, Object> doc, Map<String, Object> entry,
                                      String name, Map<String, Object> mapDoc, String where) {
        List<Object> own = list(entry, "extras");
        for (String key : BINARY_EXTRAS) {
            if (doc.containsKey(key) && !own.contains(key)) {
                throw error(where + name + " documents have no '" + key + "'");
            }
        }
        if (own.contains("interval")) {
            Object block = doc.get("interval");
            if (!(block instanceof Map) || !((Map<String, Object>) block).keySet()
                    .equals(Set.of("lower", "upper"))) {
                throw error(where + "venn-abers: field 'interval' must be an object with "
                        + "exactly 'lower' and 'upper' maps");
            }
            for (String key : List.of("lower", "upper")) {
                Object sub = ((Map<String, Object>) block).get(key);
                CalibrationMap m;
                try {
                    m = Maps.fromDoc(sub);
                } catch (MapFormatException e) {
                    throw error(where + e.getMessage());
                }
                if (!(m instanceof StepMap) || !transformOf((Map<String, Object>) sub)
                        .equals(transformOf(mapDoc))) {
                    throw error(where + "venn-abers: interval '" + key + "' must be a step map "
                            + "with the point map's input_transform");
                }
            }
        }
        if (own.contains("fit_info") && doc.containsKey("fit_info")) {
            return checkSelection(doc.get("fit_info"), where);
        }
        return null;
    }

    private static String transformOf(Map<String, Object> mapDoc) {
        Object t = mapDoc.get("input_transform");
        return t == null ? "identity" : (String) t;
    }

    private static final Map<String, String> TOP_KEYS = new TreeMap<>(Map.ofEntries(
            Map.entry("version", "int"), Map.entry("rule", "str"), Map.entry("se_rule", "float"),
            Map.entry("n_folds", "int"), Map.entry("seed", "int"), Map.entry("n_points", "int"),
            Map.entry("n_unique", "int"), Map.entry("candidates", "list"),
            Map.entry("best", "str-or-null"), Map.entry("chosen", "str"),
            Map.entry("chosen_params", "dict"), Map.entry("fold_unit", "str"),
            Map.entry("cv_repeats", "int"), Map.entry("reason", "str"),
            Map.entry("anchor", "dict")));
    private static final Map<String, String> ROW_KEYS = Map.of("method", "str", "status", "str",
            "complexity", "float", "cv_log_loss", "float", "se", "float");

    @SuppressWarnings("unchecked")
    private static void checkObject(Object obj, Map<String, String> spec, String what,
                                    List<String> required, String where) {
        if (!(obj instanceof Map)) {
            throw error(where + what + " must be an object");
        }
        Map<String, Object> m = (Map<String, Object>) obj;
        for (String key : m.keySet()) {
            if (!spec.containsKey(key)) {
                throw error(where + what + " has unknown fields ['" + key + "']");
            }
        }
        for (String key : required) {
            if (!m.containsKey(key)) {
                throw error(where + what + " lacks ['" + key + "']");
            }
        }
        for (Map.Entry<String, Object> e : m.entrySet()) {
            Object v = e.getValue();
            boolean ok;
            switch (spec.get(e.getKey())) {
                case "int":
                    ok = v instanceof Json.Number && ((Json.Number) v).integer;
                    break;
                case "float":
                    ok = v instanceof Json.Number && Double.isFinite(((Json.Number) v).value);
                    break;
                case "str":
                    ok = v instanceof String;
                    break;
                case "str-or-null":
                    ok = v instanceof String || v == Json.NULL;
                    break;
                case "list":
                    ok = v instanceof List;
                    break;
                default:
                    ok = v instanceof Map;
            }
            if (!ok) {
                throw error(where + what + " field '" + e.getKey() + "' has a wrong type: "
                        + Maps.shortRepr(v));
            }
        }
    }

    /** mlcal's {@code check_selection} of auto's {@code fit_info}; returns the chosen method. */
    @SuppressWarnings("unchecked")
    private static String checkSelection(Object info, String where) {
        List<String> required = new ArrayList<>(TOP_KEYS.keySet());
        required.remove("chosen_params");
        required.remove("fold_unit");
        required.remove("cv_repeats");
        required.remove("anchor");
        checkObject(info, TOP_KEYS, "fit_info", required, where);
        Map<String, Object> m = (Map<String, Object>) info;
        Object params = m.get("chosen_params");
        if (params != null) {
            for (Object v : ((Map<String, Object>) params).values()) {
                if (!(v == Json.NULL || v instanceof String || v instanceof Json.Number
                        || v instanceof Boolean)) {
                    throw error(where + "fit_info 'chosen_params' must map names to numbers, "
                            + "strings or null");
                }
            }
        }
        List<Object> methods = new ArrayList<>();
        for (Object row : (List<Object>) m.get("candidates")) {
            checkObject(row, ROW_KEYS, "fit_info candidate", List.of("method", "status"), where);
            methods.add(((Map<String, Object>) row).get("method"));
        }
        if (!methods.contains(m.get("chosen"))) {
            throw error(where + "fit_info 'chosen' is not a candidate");
        }
        return (String) m.get("chosen");
    }

    private static final Map<String, String> MULTICLASS_TOP_KEYS = new TreeMap<>(Map.ofEntries(
            Map.entry("version", "int"), Map.entry("rule", "str"), Map.entry("se_rule", "float"),
            Map.entry("n_folds", "int"), Map.entry("seed", "int"), Map.entry("n_rows", "int"),
            Map.entry("n_classes", "int"), Map.entry("input_kind", "str"),
            Map.entry("candidates", "list"), Map.entry("best", "str-or-null"),
            Map.entry("chosen", "str"), Map.entry("reason", "str")));
    /** multiclass auto's candidate rows: auto's, plus the CV Brier of criterion "both". */
    private static final Map<String, String> MULTICLASS_ROW_KEYS = Map.of("method", "str",
            "status", "str", "complexity", "float", "cv_log_loss", "float", "se", "float",
            "cv_brier", "float", "brier_se", "float");

    /**
     * mlcal's {@code check_multiclass_selection} of multiclass auto's {@code fit_info}; returns
     * the validated record (its {@code chosen} a candidate accepted as a multiclass-candidate).
     */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> checkMulticlassSelection(Object info,
                                                                Map<String, Object> candidate) {
        if (info == null) {
            throw error("a multiclass auto document needs 'fit_info'");
        }
        checkObject(info, MULTICLASS_TOP_KEYS, "fit_info",
                new ArrayList<>(MULTICLASS_TOP_KEYS.keySet()), "");
        Map<String, Object> m = (Map<String, Object>) info;
        Object kind = m.get("input_kind");
        if (!kind.equals("probabilities") && !kind.equals("logits")) {
            throw error("fit_info 'input_kind' must be 'probabilities' or 'logits', got "
                    + Maps.shortRepr(kind));
        }
        List<Object> methods = new ArrayList<>();
        for (Object row : (List<Object>) m.get("candidates")) {
            checkObject(row, MULTICLASS_ROW_KEYS, "fit_info candidate", List.of("method", "status"), "");
            Object name = ((Map<String, Object>) row).get("method");
            if (!accepts(candidate, name)) {
                throw error("fit_info candidate " + Maps.shortRepr(name)
                        + " is not a multiclass method");
            }
            methods.add(name);
        }
        if (!methods.contains(m.get("chosen"))) {
            throw error("fit_info 'chosen' is not a candidate");
        }
        return m;
    }

    /** The multiclass-candidate constraint of multiclass auto's 'candidates' parameter. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> candidateSpec(Map<String, Object> entry) {
        Map<String, Object> constraints = (Map<String, Object>) entry.get("params");
        for (Object spec : (List<Object>) constraints.get("candidates")) {
            Map<String, Object> s = (Map<String, Object>) spec;
            if ("list".equals(s.get("kind"))) {
                return (Map<String, Object>) s.get("item");
            }
        }
        throw new IllegalStateException("methods.json: multiclass-auto has no candidate list");
    }

    // -- the map ------------------------------------------------------------------------------
    /** mlcal's {@code check_binary_map} (and auto's, through its chosen method). */
    @SuppressWarnings("unchecked")
    private static void checkBinaryMap(Map<String, Object> entry, String name,
                                       Map<String, Object> params, Map<String, Object> mapDoc,
                                       String chosen, String where) {
        if ("offset".equals(mapDoc.get("type")) && flag(entry, "offset_stage")) {
            // a re-offset stage: the method's rules apply to the inner map (the offset is
            // strictly increasing, so monotonicity carries over)
            mapDoc = (Map<String, Object>) mapDoc.get("inner");
        }
        if (name.equals("auto")) {
            if (chosen == null) {
                if (!BINARY_KINDS.contains((String) mapDoc.get("type"))) {
                    throw error(where + "a 'auto' calibrator fits binary maps, not a '"
                            + mapDoc.get("type") + "' map");
                }
                return;
            }
            // an anchor candidate (mlcal's auto ANCHORS) is fitted by its registered method
            Map<String, Object> anchors = (Map<String, Object>) entry.get("anchors");
            Object method = anchors == null ? null : anchors.get(chosen);
            entry = binaryMethod(method instanceof String ? (String) method : chosen);
            where = where + "auto chose '" + chosen + "': ";
            name = nameOf(entry);
            params = Map.of();   // auto fits its candidates with input_transform="auto"
        }
        String kind = (String) mapDoc.get("type");
        List<Object> kinds = list(entry, "map_kinds");
        if (!(kinds.isEmpty() ? BINARY_KINDS.contains(kind) : kinds.contains(kind))) {
            throw error(where + "a '" + name + "' calibrator fits " + kinds(entry)
                    + " maps, not a '" + kind + "' map");
        }
        String transform = transformOf(mapDoc);
        Object choice = params.getOrDefault("input_transform", "auto");
        boolean ok = flag(entry, "unit_interval")
                ? choice.equals("auto") || choice.equals(transform)
                : transform.equals("identity");
        if (!ok) {
            throw error(where + "a '" + name + "' calibrator with these parameters cannot "
                    + "record input transform '" + transform + "'");
        }
        if (flag(entry, "monotone")) {
            String why = decreasingAt(mapDoc);
            if (why != null) {
                throw error(where + "a '" + name + "' map is non-decreasing, this one is not ("
                        + why + ")");
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static String decreasingAt(Map<String, Object> mapDoc) {
        switch ((String) mapDoc.get("type")) {
            case "step":
            case "linear": {
                double[] v = ((Json.NumberArray) mapDoc.get("values")).toDoubleArray();
                for (int i = 1; i < v.length; i++) {
                    if (v[i] < v[i - 1]) {
                        return "values[" + i + "] = " + v[i] + " is below values[" + (i - 1)
                                + "] = " + v[i - 1];
                    }
                }
                return null;
            }
            case "sigmoid":
                return ((Json.Number) mapDoc.get("a")).value <= 0.0 ? null
                        : "a > 0 makes it decreasing";
            case "beta":
                return ((Json.Number) mapDoc.get("a")).value >= 0.0
                        && ((Json.Number) mapDoc.get("b")).value >= 0.0 ? null
                        : "a and b must be >= 0";
            default:
                return null;
        }
    }

    // -- multiclass ---------------------------------------------------------------------------
    @SuppressWarnings("unchecked")
    private static void checkMulticlass(Map<String, Object> doc, String method,
                                        Map<String, Object> entry, Map<String, Object> params,
                                        CalibrationMap map, Map<String, Object> mapDoc) {
        List<String> allowed = new ArrayList<>(ENVELOPE);
        for (Object extra : list(entry, "extras")) {
            allowed.add((String) extra);
        }
        checkFields(doc, allowed, method);
        boolean ovr = method.equals("multiclass-one-vs-rest");
        Map<String, Object> inner = null;
        Map<String, Object> innerParams = Map.of();
        if (ovr) {
            Object spec = params.getOrDefault("calibrator", "isotonic");
            if (spec instanceof Map) {
                Map<String, Object> d = (Map<String, Object>) spec;
                if (!(d.get("method") instanceof String) || !(d.get("params") instanceof Map)
                        || d.size() != 2) {
                    throw error("a one-vs-rest 'calibrator' must be a method name or "
                            + "{\"method\": ..., \"params\": {...}}");
                }
                inner = binaryMethod((String) d.get("method"));
                innerParams = (Map<String, Object>) d.get("params");
                checkParams(inner, nameOf(inner), innerParams);
            } else if (spec instanceof String) {
                inner = binaryMethod((String) spec);
            } else {
                throw error("OneVsRest: calibrator must be a binary method name or an mlcal "
                        + "calibrator, got " + Maps.shortRepr(spec));
            }
        }
        checkParams(entry, method, params);
        if (!list(entry, "map_kinds").contains(map.kind())) {
            throw error("a '" + method + "' calibrator needs a " + kinds(entry) + " map, got '"
                    + map.kind() + "'");
        }
        Object inputKind = params.getOrDefault("input_kind", "auto");
        String where = "";
        if (method.equals(MULTICLASS_AUTO)) {
            // the map is the chosen candidate's, fitted on the input kind fit_info records;
            // its rules are that candidate's (mlcal's MulticlassAuto._restore_extras)
            Map<String, Object> info = checkMulticlassSelection(doc.get("fit_info"),
                    candidateSpec(entry));
            String chosen = (String) info.get("chosen");
            inputKind = info.get("input_kind");
            where = "multiclass auto chose '" + chosen + "': ";
            ovr = chosen.startsWith(OVR_PREFIX);
            if (ovr) {
                inner = binaryMethod(chosen.substring(OVR_PREFIX.length()));
                entry = TABLE.get("multiclass-one-vs-rest");
            } else {
                entry = TABLE.get("multiclass-" + chosen);
                if (entry == null || !flag(entry, "multiclass")) {
                    throw error(where + "no such multiclass method in the evaluator's table");
                }
            }
            if (!list(entry, "map_kinds").contains(map.kind())) {
                throw error("the map (" + map.kind() + ") is not one that '" + chosen
                        + "' fits");
            }
        }
        if (!ovr) {
            checkSoftmax(entry, inputKind, mapDoc, where);
            if (doc.containsKey("class_extras")) {
                throw error(where + "'" + method + "' documents have no 'class_extras'");
            }
            return;
        }
        checkClassMaps(doc, inner, innerParams, mapDoc, where);
    }

    /** One-vs-rest's class maps (with their class_extras) against the inner binary method. */
    @SuppressWarnings("unchecked")
    private static void checkClassMaps(Map<String, Object> doc, Map<String, Object> inner,
                                       Map<String, Object> innerParams,
                                       Map<String, Object> mapDoc, String where) {
        List<Object> classMaps = (List<Object>) mapDoc.get("maps");
        List<String> chosen = new ArrayList<>();
        for (int k = 0; k < classMaps.size(); k++) {
            chosen.add(null);
        }
        Object extras = doc.get("class_extras");
        if (extras != null && extras != Json.NULL) {
            if (!(extras instanceof List) || ((List<Object>) extras).size() != classMaps.size()) {
                throw error(where + "'class_extras' must be a list of " + classMaps.size()
                        + " objects, one per class");
            }
            for (Object e : (List<Object>) extras) {
                if (!(e instanceof Map)) {
                    throw error(where + "'class_extras' must be a list of " + classMaps.size()
                            + " objects, one per class");
                }
            }
            for (int k = 0; k < classMaps.size(); k++) {
                Map<String, Object> e = (Map<String, Object>) ((List<Object>) extras).get(k);
                for (String key : e.keySet()) {
                    if (!BINARY_EXTRAS.contains(key)) {
                        throw error(where + "class_extras[" + k + "] has unknown fields ['" + key
                                + "']");
                    }
                }
                chosen.set(k, checkExtras(e, inner, nameOf(inner),
                        (Map<String, Object>) classMaps.get(k),
                        where + "class_extras[" + k + "]: "));
            }
        }
        for (int k = 0; k < classMaps.size(); k++) {
            checkBinaryMap(inner, nameOf(inner), innerParams,
                    (Map<String, Object>) classMaps.get(k), chosen.get(k),
                    where + "class map " + k + ": ");
        }
    }

    @SuppressWarnings("unchecked")
    private static void checkSoftmax(Map<String, Object> entry, Object kind,
                                     Map<String, Object> mapDoc, String where) {
        Object raw = mapDoc.get("weights");
        boolean matrix = raw instanceof List && !((List<Object>) raw).isEmpty();
        if (matrix) {
            for (Object row : (List<Object>) raw) {
                matrix &= row instanceof List;
            }
        }
        String shape = (String) entry.get("weights");
        boolean ok = shape.equals("matrix") == matrix;
        if (ok && shape.equals("ones")) {
            for (double w : ((Json.NumberArray) raw).toDoubleArray()) {
                ok &= w == 1.0;
            }
            for (double b : ((Json.NumberArray) mapDoc.get("bias")).toDoubleArray()) {
                ok &= b == 0.0;
            }
        }
        if (!ok) {
            throw error(where + "the map's weights are not of the shape the method fits ("
                    + shape + ")");
        }
        String expected = kind.equals("probabilities") ? "log-probabilities"
                : kind.equals("logits") ? "logits" : null;
        if (expected != null && !expected.equals(mapDoc.get("input"))) {
            throw error(where + "input_kind '" + kind + "' fits a map on '" + expected
                    + "', not "
                    + Maps.shortRepr(mapDoc.get("input")));
        }
    }
}
