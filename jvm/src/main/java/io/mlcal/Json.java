package io.mlcal;

import java.nio.ByteBuffer;
import java.util.AbstractList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.RandomAccess;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A strict JSON parser (RFC 8259) for calibrator documents, with the limits of mlcal's
 * {@code loads_strict}: UTF-8 without byte-order mark, at most {@link #MAX_DOCUMENT_BYTES},
 * nesting at most {@link #MAX_DEPTH} levels, no duplicate keys, no NaN/Infinity, every number
 * within the double range, integers of at most {@link #MAX_INT_DIGITS} digits.
 *
 * <p>Values: {@code Map<String, Object>} (insertion ordered), {@code List<Object>},
 * {@code String}, {@link Number}, {@code Boolean} and {@link #NULL}. A number keeps its literal
 * and whether it was written as an integer; its double value is {@code Double.parseDouble} of
 * the literal, correctly rounded like Python's {@code float()}. An array of numbers only is
 * held as one {@code double[]} ({@link NumberArray}: 8 bytes a number, not an object each).
 *
 * <p>Element budget (mlcal's {@code check_element_budget}): a document of n bytes may hold at
 * most {@code ELEMENT_SLACK + n / BYTES_PER_CONTAINER} arrays and objects and
 * {@code ELEMENT_SLACK + n / BYTES_PER_STRING} strings (keys included), and as many numbers
 * outside number-only arrays; a valid mlcal document needs far fewer. Counted while parsing,
 * so memory stays a small multiple of the document size (the size cap alone let 2-byte
 * numbers become ~80-byte objects).
 */
public final class Json {
    public static final int MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;
    public static final int MAX_DEPTH = 32;
    public static final int MAX_INT_DIGITS = 400;
    public static final int BYTES_PER_CONTAINER = 16;
    public static final int BYTES_PER_STRING = 8;
    public static final int ELEMENT_SLACK = 1024;
    /** Integers of smaller magnitude are exact in a double (2^53). */
    static final double EXACT_INTEGER_LIMIT = 9007199254740992.0;
    /** JSON null (a Java null would be ambiguous with a missing key). */
    public static final Object NULL = new Object() {
        @Override
        public String toString() {
            return "null";
        }
    };

    /** A JSON number: its double value and whether its literal is an integer. */
    public static final class Number {
        public final double value;
        public final boolean integer;
        public final String literal;

        Number(String literal, boolean integer) {
            this(literal, integer, Double.parseDouble(literal));
        }

        Number(String literal, boolean integer, double value) {
            this.literal = literal;
            this.integer = integer;
            this.value = value;
        }

        @Override
        public String toString() {
            return literal;
        }
    }

    /** An array of numbers only, held as doubles; its items read as {@link Number}s. */
    public static final class NumberArray extends AbstractList<Object> implements RandomAccess {
        private final double[] values;
        private final BitSet integers;
        /** The literals of integers a double does not hold exactly (|v| >= 2^53), by index:
         * segment keys are 64-bit integers. */
        private final Map<Integer, String> wideIntegers;

        NumberArray(double[] values, BitSet integers) {
            this(values, integers, Map.of());
        }

        NumberArray(double[] values, BitSet integers, Map<Integer, String> wideIntegers) {
            this.values = values;
            this.integers = integers;
            this.wideIntegers = wideIntegers;
        }

        @Override
        public Object get(int i) {
            double v = values[i];
            boolean integer = integers.get(i);
            String wide = integer ? wideIntegers.get(i) : null;
            String literal = wide != null ? wide : integer && Math.abs(v) < 1e18
                    ? Long.toString((long) v) : Double.toString(v);
            return new Number(literal, integer, v);
        }

        @Override
        public int size() {
            return values.length;
        }

        /** The values (a copy). */
        public double[] toDoubleArray() {
            return values.clone();
        }
    }

    private final String text;
    private final long maxContainers;
    private final long maxStrings;
    private int pos;
    private long containers;
    private long strings;
    private long boxedNumbers;

    private Json(String text, long sizeBytes) {
        this.text = text;
        this.maxContainers = ELEMENT_SLACK + sizeBytes / BYTES_PER_CONTAINER;
        this.maxStrings = ELEMENT_SLACK + sizeBytes / BYTES_PER_STRING;
    }

    private static long utf8Length(String text) {
        long n = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c < 0x80) {
                n += 1;
            } else if (c < 0x800) {
                n += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < text.length()
                    && Character.isLowSurrogate(text.charAt(i + 1))) {
                n += 4;
                i++;
            } else {
                n += 3;
            }
        }
        return n;
    }

    /** Parse UTF-8 bytes (strictly decoded) as one JSON document. */
    public static Object parse(byte[] data) {
        if (data.length > MAX_DOCUMENT_BYTES) {
            throw new MapFormatException("document is " + data.length + " bytes, over the "
                    + MAX_DOCUMENT_BYTES + "-byte limit");
        }
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(data)).toString();
        } catch (CharacterCodingException e) {
            throw new MapFormatException("document is not UTF-8 text");
        }
        return parse(text, data.length);
    }

    /** Parse a string as one JSON document. */
    public static Object parse(String text) {
        return parse(text, utf8Length(text));
    }

    private static Object parse(String text, long sizeBytes) {
        if (text.length() > MAX_DOCUMENT_BYTES) {
            throw new MapFormatException("document is " + text.length() + " characters, over the "
                    + MAX_DOCUMENT_BYTES + " limit");
        }
        if (text.startsWith("\uFEFF")) {
            throw new MapFormatException("document starts with a byte-order mark (U+FEFF); JSON "
                    + "files must not (save it as UTF-8 without BOM)");
        }
        Json p = new Json(text, sizeBytes);
        p.skipSpace();
        Object value = p.value(1);
        p.skipSpace();
        if (p.pos != text.length()) {
            throw p.error("extra data after the document");
        }
        return value;
    }

    private MapFormatException error(String what) {
        return new MapFormatException("not valid JSON: " + what + " at character " + pos);
    }

    private void skipSpace() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            pos++;
        }
    }

    private Object value(int depth) {
        if (pos >= text.length()) {
            throw error("unexpected end of the document");
        }
        char c = text.charAt(pos);
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", NULL);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                if (text.startsWith("NaN", pos) || text.startsWith("Infinity", pos)) {
                    throw error("non-finite numbers are not allowed");
                }
                throw error("unexpected character '" + c + "'");
        }
    }

    private void checkDepth(int depth) {
        if (depth > MAX_DEPTH) {
            throw new MapFormatException("document is nested deeper than " + MAX_DEPTH
                    + " levels");
        }
    }

    private Object literal(String word, Object value) {
        if (!text.startsWith(word, pos)) {
            throw error("unexpected character '" + text.charAt(pos) + "'");
        }
        pos += word.length();
        return value;
    }

    private void countContainer() {
        if (++containers > maxContainers) {
            throw new MapFormatException("document holds more than " + maxContainers
                    + " arrays and objects, more than a valid document of its size can");
        }
    }

    private void countString() {
        if (++strings > maxStrings) {
            throw new MapFormatException("document holds more than " + maxStrings
                    + " strings, more than a valid document of its size can");
        }
    }

    private void countBoxed(Object v) {
        if (v instanceof Number && ++boxedNumbers > maxStrings) {
            throw new MapFormatException("document holds more than " + maxStrings
                    + " numbers outside number arrays, more than a valid document of its "
                    + "size can");
        }
    }

    private Map<String, Object> object(int depth) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (openContainer(depth, '}')) {
            return out;
        }
        do {
            skipSpace();
            if (pos >= text.length() || text.charAt(pos) != '"') {
                throw error("expected a string key");
            }
            String key = string();
            skipSpace();
            expect(':');
            skipSpace();
            Object v = value(depth + 1);
            countBoxed(v);
            if (out.containsKey(key)) {
                throw new MapFormatException("duplicate key " + Maps.shortRepr(key)
                        + " in an object");
            }
            out.put(key, v);
        } while (nextItem('}'));
        return out;
    }

    private List<Object> array(int depth) {
        double[] nums = new double[0];
        BitSet integers = new BitSet();
        if (openContainer(depth, ']')) {
            return new NumberArray(nums, integers);
        }
        nums = new double[16];
        Map<Integer, String> wide = new TreeMap<>();
        int n = 0;
        List<Object> out = null;   // set once an item is not a number
        do {
            skipSpace();
            char c = pos < text.length() ? text.charAt(pos) : ' ';
            if (out == null && (c == '-' || isDigit(c))) {
                Number num = number();
                if (n == nums.length) {
                    nums = Arrays.copyOf(nums, 2 * n);
                }
                integers.set(n, num.integer);
                if (num.integer && !(Math.abs(num.value) < EXACT_INTEGER_LIMIT)) {
                    wide.put(n, num.literal);
                }
                nums[n++] = num.value;
                continue;
            }
            if (out == null) {
                NumberArray head = new NumberArray(Arrays.copyOf(nums, n), integers, wide);
                nums = null;
                out = new ArrayList<>(Math.max(n + 1, 10));
                for (int i = 0; i < n; i++) {
                    Object v = head.get(i);
                    countBoxed(v);
                    out.add(v);
                }
            }
            Object v = value(depth + 1);
            countBoxed(v);
            out.add(v);
        } while (nextItem(']'));
        return out != null ? out : new NumberArray(Arrays.copyOf(nums, n), integers,
                wide.isEmpty() ? Map.of() : wide);
    }

    /** Step over the opening bracket; true (with {@code close} consumed) when it is empty. */
    private boolean openContainer(int depth, char close) {
        checkDepth(depth);
        countContainer();
        pos++;
        skipSpace();
        if (pos < text.length() && text.charAt(pos) == close) {
            pos++;
            return true;
        }
        return false;
    }

    /** After an item: true past a comma, false past the closing {@code close}. */
    private boolean nextItem(char close) {
        skipSpace();
        if (pos < text.length() && text.charAt(pos) == ',') {
            pos++;
            return true;
        }
        expect(close);
        return false;
    }

    private void expect(char c) {
        if (pos >= text.length() || text.charAt(pos) != c) {
            throw error("expected '" + c + "'");
        }
        pos++;
    }

    private String string() {
        countString();
        pos++; // opening quote
        StringBuilder sb = new StringBuilder();
        while (true) {
            if (pos >= text.length()) {
                throw error("unterminated string");
            }
            char c = text.charAt(pos++);
            if (c == '"') {
                return sb.toString();
            }
            if (c < 0x20) {
                throw error("control character in a string");
            }
            if (c != '\\') {
                sb.append(c);
                continue;
            }
            if (pos >= text.length()) {
                throw error("unterminated string");
            }
            char e = text.charAt(pos++);
            switch (e) {
                case '"': sb.append('"'); break;
                case '\\': sb.append('\\'); break;
                case '/': sb.append('/'); break;
                case 'b': sb.append('\b'); break;
                case 'f': sb.append('\f'); break;
                case 'n': sb.append('\n'); break;
                case 'r': sb.append('\r'); break;
                case 't': sb.append('\t'); break;
                case 'u':
                    if (pos + 4 > text.length()) {
                        throw error("invalid \\u escape");
                    }
                    try {
                        String hex = text.substring(pos, pos + 4);
                        if (!hex.matches("[0-9a-fA-F]{4}")) {
                            throw error("invalid \\u escape");
                        }
                        sb.append((char) Integer.parseInt(hex, 16));
                    } catch (NumberFormatException ex) {
                        throw error("invalid \\u escape");
                    }
                    pos += 4;
                    break;
                default:
                    throw error("invalid escape '\\" + e + "'");
            }
        }
    }

    private Number number() {
        int start = pos;
        if (text.charAt(pos) == '-') {
            pos++;
        }
        int intStart = pos;
        if (pos < text.length() && text.charAt(pos) == '0') {
            pos++;
        } else if (pos < text.length() && isDigit(text.charAt(pos))) {
            skipDigits();
        } else {
            if (text.startsWith("Infinity", pos)) {
                throw error("non-finite numbers are not allowed");
            }
            throw error("invalid number");
        }
        int intDigits = pos - intStart;
        boolean integer = true;
        if (pos < text.length() && text.charAt(pos) == '.') {
            integer = false;
            pos++;
            if (skipDigits() == 0) {
                throw error("invalid number");
            }
        }
        if (pos < text.length() && (text.charAt(pos) == 'e' || text.charAt(pos) == 'E')) {
            integer = false;
            pos++;
            if (pos < text.length() && (text.charAt(pos) == '+' || text.charAt(pos) == '-')) {
                pos++;
            }
            if (skipDigits() == 0) {
                throw error("invalid number");
            }
        }
        String lit = text.substring(start, pos);
        if (integer && intDigits > MAX_INT_DIGITS) {
            throw new MapFormatException("an integer has more than " + MAX_INT_DIGITS + " digits");
        }
        Number n = new Number(lit, integer);
        // Python keeps a huge integer exact (the map loader then rejects it as non-finite);
        // a huge float literal is rejected by the parser itself
        if (!integer && Double.isInfinite(n.value)) {
            throw new MapFormatException("number " + (lit.length() > 40 ? lit.substring(0, 40)
                    : lit) + " is out of the range of a 64-bit float");
        }
        return n;
    }

    /** Step over a run of digits and return its length. */
    private int skipDigits() {
        int start = pos;
        while (pos < text.length() && isDigit(text.charAt(pos))) {
            pos++;
        }
        return pos - start;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }
}
