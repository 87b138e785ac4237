package io.mlcal;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Rows of a segmented or multicalibration calibrator's command-line input: a score and one
 * value per segment column (segment feature), read by column name from JSON lines or CSV.
 *
 * <ul>
 * <li>{@code jsonl}: one JSON object per non-blank line; the score is a JSON number, a segment
 * value a string, integer, boolean or null (missing: the row is unseen), typed as in Python
 * (an integer 1 in a string column is an error, {@code 3.0} in an integer column is 3).
 * <li>{@code csv}: a header row, then one row per line (RFC 4180 quoting; no newlines inside
 * fields); the score is a decimal number, and each segment field is read by its column's
 * type: a string column takes the text as it is, an integer column a whole number, a boolean
 * column {@code true}/{@code false} (any case); an empty unquoted field is a missing value.
 * A multicalibration map's numeric feature takes a decimal number, a categorical feature the
 * text as it is (an empty unquoted field is a missing value, which the map refuses).
 * </ul>
 * In JSON lines, a multicalibration map's numeric feature is a JSON number (or a boolean, read
 * as 1 or 0) and a categorical feature any scalar, read as Python's {@code str} writes it.
 
 */
final class SegmentRows {
    final double[] scores;
    final Object[][] columns;

    private SegmentRows(double[] scores, Object[][] columns) {
        this.scores = scores;
        this.columns = columns;
    }

    static SegmentRows read(InputStream in, String format, String scoreColumn, ColumnMap map)
            throws IOException {
        List<String> names = map.columnNames();
        List<String> types = map.columnTypes();
        List<Double> scores = new ArrayList<>();
        List<Object[]> rows = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(in,
                StandardCharsets.UTF_8))) {
            if (format.equals("jsonl")) {
                readJsonLines(r, scoreColumn, names, scores, rows, map);
            } else {
                readCsv(r, scoreColumn, names, types, scores, rows, map);
            }
        }
        double[] s = new double[scores.size()];
        Object[][] cols = new Object[names.size()][s.length];
        for (int i = 0; i < s.length; i++) {
            s[i] = scores.get(i);
            for (int j = 0; j < cols.length; j++) {
                cols[j][i] = rows.get(i)[j];
            }
        }
        return new SegmentRows(s, cols);
    }

    @SuppressWarnings("unchecked")
    private static void readJsonLines(BufferedReader r, String scoreColumn, List<String> names,
                                      List<Double> scores, List<Object[]> rows, ColumnMap map)
            throws IOException {
        String line;
        int lineNo = 0;
        while ((line = r.readLine()) != null) {
            lineNo++;
            if (line.isBlank()) {
                continue;
            }
            Object node;
            try {
                node = Json.parse(line.getBytes(StandardCharsets.UTF_8));
            } catch (MapFormatException e) {
                throw new InvalidScoresException("input line " + lineNo + " is not valid JSON: "
                        + e.getMessage());
            }
            if (!(node instanceof Map)) {
                throw new InvalidScoresException("input line " + lineNo + " is not a JSON "
                        + "object");
            }
            Map<String, Object> obj = (Map<String, Object>) node;
            Object score = obj.get(scoreColumn);
            if (!(score instanceof Json.Number)) {
                throw new InvalidScoresException("input line " + lineNo + ": '" + scoreColumn
                        + "' must be a number, got " + Maps.shortRepr(score));
            }
            scores.add(((Json.Number) score).value);
            Object[] row = new Object[names.size()];
            for (int j = 0; j < row.length; j++) {
                if (!obj.containsKey(names.get(j))) {
                    throw map.columnError("input line " + lineNo + " has no " + word(map)
                            + " '" + names.get(j) + "' (null marks a missing value)");
                }
                row[j] = obj.get(names.get(j));
            }
            rows.add(row);
        }
    }

    private static void readCsv(BufferedReader r, String scoreColumn, List<String> names,
                                List<String> types, List<Double> scores, List<Object[]> rows,
                                ColumnMap map) throws IOException {
        String header = r.readLine();
        if (header == null) {
            throw new InvalidScoresException("scores is empty");
        }
        List<String> head = new ArrayList<>();
        for (Field f : split(header, 1)) {
            head.add(f.text);
        }
        int scoreAt = head.indexOf(scoreColumn);
        if (scoreAt < 0) {
            throw new InvalidScoresException("the CSV header has no score column '"
                    + scoreColumn + "'");
        }
        int[] at = new int[names.size()];
        for (int j = 0; j < at.length; j++) {
            at[j] = head.indexOf(names.get(j));
            if (at[j] < 0) {
                throw map.columnError(word(map) + " '" + names.get(j) + "' is missing from "
                        + "the CSV header " + head);
            }
        }
        String line;
        int lineNo = 1;
        while ((line = r.readLine()) != null) {
            lineNo++;
            if (line.isEmpty()) {
                continue;
            }
            List<Field> fields = split(line, lineNo);
            if (fields.size() != head.size()) {
                throw new InvalidScoresException("CSV line " + lineNo + " holds "
                        + fields.size() + " fields, the header " + head.size());
            }
            try {
                scores.add(Double.parseDouble(fields.get(scoreAt).text.strip()));
            } catch (NumberFormatException e) {
                throw new InvalidScoresException("CSV line " + lineNo + ": '"
                        + fields.get(scoreAt).text + "' is not a number");
            }
            Object[] row = new Object[at.length];
            for (int j = 0; j < at.length; j++) {
                row[j] = typed(fields.get(at[j]), types.get(j), names.get(j), lineNo, map);
            }
            rows.add(row);
        }
    }

    /** A CSV field as a value of its column's type, or null when it is empty and unquoted. */
    private static Object typed(Field f, String type, String column, int lineNo,
                                ColumnMap map) {
        if (f.text.isEmpty() && !f.quoted) {
            return null;
        }
        String t = f.text.strip();
        switch (type) {
            case "string":
            case "categorical":
                return f.text;
            case "numeric":
                if (DECIMAL.matcher(t).matches()) {
                    return Double.parseDouble(t);   // correctly rounded, as Python's float()
                }
                throw map.columnError("CSV line " + lineNo + ", feature column '" + column
                        + "': '" + f.text + "' is not a number");
            case "boolean":
                if (t.equalsIgnoreCase("true") || t.equalsIgnoreCase("false")) {
                    return Boolean.valueOf(t.equalsIgnoreCase("true"));
                }
                break;
            default:
                try {
                    return new BigInteger(t);
                } catch (NumberFormatException e) {
                    try {
                        return Double.parseDouble(t);   // 3.0 is 3; 3.5 is refused later
                    } catch (NumberFormatException e2) {
                        break;
                    }
                }
        }
        throw new SegmentKeyException("CSV line " + lineNo + ", segment column '" + column
                + "': '" + f.text + "' is not a " + type);
    }

    /** A decimal number as CSV writes it (no hex, no NaN/Infinity, no type suffix). */
    private static final java.util.regex.Pattern DECIMAL = java.util.regex.Pattern.compile(
            "[+-]?(\\d+\\.?\\d*|\\.\\d+)([eE][+-]?\\d+)?");

    private static String word(ColumnMap map) {
        return map instanceof SegmentedMap ? "segment column" : "feature column";
    }

    private static final class Field {
        final String text;
        final boolean quoted;

        Field(String text, boolean quoted) {
            this.text = text;
            this.quoted = quoted;
        }
    }

    /** RFC 4180 fields of one line: commas separate, double quotes quote ("" is a quote). */
    private static List<Field> split(String line, int lineNo) {
        List<Field> out = new ArrayList<>();
        int i = 0;
        while (true) {
            StringBuilder sb = new StringBuilder();
            boolean quoted = i < line.length() && line.charAt(i) == '"';
            if (quoted) {
                i++;
                while (true) {
                    if (i >= line.length()) {
                        throw new InvalidScoresException("CSV line " + lineNo
                                + ": unterminated quoted field");
                    }
                    char c = line.charAt(i++);
                    if (c == '"') {
                        if (i < line.length() && line.charAt(i) == '"') {
                            sb.append('"');
                            i++;
                        } else {
                            break;
                        }
                    } else {
                        sb.append(c);
                    }
                }
                if (i < line.length() && line.charAt(i) != ',') {
                    throw new InvalidScoresException("CSV line " + lineNo + ": text after a "
                            + "closing quote");
                }
            } else {
                while (i < line.length() && line.charAt(i) != ',') {
                    sb.append(line.charAt(i++));
                }
            }
            out.add(new Field(sb.toString(), quoted));
            if (i >= line.length()) {
                return out;
            }
            i++;   // the comma
        }
    }
}
