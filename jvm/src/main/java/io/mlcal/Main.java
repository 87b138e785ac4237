package io.mlcal;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Command line: score a file with a calibrator.
 *
 * <pre>
 * java -jar mlcal-calibrator.jar CALIBRATOR.json SCORES [--input text|f64le]
 *      [--output text|hex|f64le] [--out FILE [--overwrite]] [--time REPEATS]
 * </pre>
 *
 * SCORES ({@code -} for standard input) holds one score per line, or for a multiclass map one
 * row per line with K numbers separated by commas or blanks ({@code --input text}, the
 * default), or raw little-endian float64 values, rows one after another ({@code f64le}).
 * Predictions go to standard output (or {@code --out}, which never replaces an existing
 * file unless {@code --overwrite} is given): {@code text} one value (row) per line
 * in shortest round-trip decimal, {@code hex} the 16-hex-digit IEEE bit pattern of each value,
 * {@code f64le} raw little-endian float64; binary maps give P(y=1), multiclass maps K
 * probabilities per row. {@code --time R} also reports on standard error the best of R timed
 * predictions of the whole input (after one warm-up), for benchmarks. Exit status: 0 on
 * success, 1 for an invalid calibrator or invalid scores (the message names the problem),
 * 2 for bad usage.
 *
 * <p>{@code --batch JOBS} scores many files in one JVM: each line of JOBS is
 * {@code CALIBRATOR<TAB>SCORES<TAB>OUT} with f64le scores and predictions; a job whose
 * calibrator or scores are invalid writes {@code ExceptionName: message} to {@code OUT.err}
 * instead (the parity tests use this). For a segmented or multicalibration calibrator, SCORES
 * is read as JSON lines (see {@link SegmentRows}), unless the map reads no column besides the
 * score (a multicalibration map fitted without features).
 *
 * <p>A segmented calibrator (docs/segments.md) or a multicalibration calibrator
 * (docs/multicalibration.md) reads rows with named columns: {@code --input jsonl} (one JSON
 * object per line) or {@code --input csv} (a header row), each holding the score column
 * ({@code --score-column}, default {@code score}) and every segment column (segment feature)
 * by name; other columns are ignored.
 */
public final class Main {
    private Main() {
    }

    private static final String USAGE = "usage: java -jar mlcal-calibrator.jar CALIBRATOR.json "
            + "SCORES [--input text|f64le|csv|jsonl] [--score-column NAME] "
            + "[--output text|hex|f64le] [--out FILE [--overwrite]] [--time REPEATS]\n"
            + "       java -jar mlcal-calibrator.jar --batch JOBS\n"
            + "       java -jar mlcal-calibrator.jar --kinds";

    public static void main(String[] args) {
        System.exit(run(args, System.out, System.err));
    }

    static int run(String[] args, PrintStream stdout, PrintStream stderr) {
        List<String> positional = new ArrayList<>();
        String input = "text";
        String output = "text";
        String out = null;
        int repeats = 0;
        boolean overwrite = false;
        String scoreColumn = "score";
        try {
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "--input":
                        input = choice(args, ++i, "text", "f64le", "csv", "jsonl");
                        break;
                    case "--score-column": scoreColumn = value(args, ++i); break;
                    case "--output": output = choice(args, ++i, "text", "hex", "f64le"); break;
                    case "--out": out = value(args, ++i); break;
                    case "--overwrite": overwrite = true; break;
                    case "--time": repeats = Integer.parseInt(value(args, ++i)); break;
                    case "--batch":
                        return batch(Path.of(value(args, ++i)), stderr);
                    case "--kinds":
                        stdout.println(String.join("\n", Maps.kinds()));
                        return 0;
                    case "--methods":
                        stdout.println(String.join("\n", DocumentRules.methods()));
                        return 0;
                    case "--detmath":
                        return detmath(value(args, ++i), value(args, ++i), value(args, ++i),
                                stderr);
                    case "--print-tables":
                        printTables(stdout);
                        return 0;
                    case "-h":
                    case "--help":
                        stdout.println(USAGE);
                        return 0;
                    default:
                        if (a.startsWith("--")) {
                            throw new UsageException("unknown option " + a);
                        }
                        positional.add(a);
                }
            }
            if (positional.size() != 2) {
                throw new UsageException("expected CALIBRATOR.json and SCORES");
            }
        } catch (UsageException | NumberFormatException e) {
            stderr.println("mlcal-calibrator: " + e.getMessage() + "\n" + USAGE);
            return 2;
        }
        try {
            Calibrator cal = Calibrator.load(Path.of(positional.get(0)));
            boolean named = input.equals("csv") || input.equals("jsonl");
            // a multicalibration map over the score alone also reads plain scores
            boolean columns = cal.readsColumns() && !(cal.columnNames().isEmpty() && !named);
            if (columns || named) {
                if (!columns) {
                    throw new InvalidScoresException("--input csv/jsonl is for segmented and "
                            + "multicalibration calibrators");
                }
                if (!named) {
                    throw new InvalidScoresException("a " + cal.map().kind() + " calibrator "
                            + "reads rows with named columns " + cal.columnNames() + ": pass "
                            + "--input csv or --input jsonl");
                }
                SegmentRows rows = SegmentRows.read(open(positional.get(1)), input,
                        scoreColumn, (ColumnMap) cal.map());
                double[] result = cal.predict(rows.scores, rows.columns);
                if (repeats > 0) {
                    stderr.println("predict_seconds=" + timeColumns(cal, rows, repeats)
                            + " values=" + rows.scores.length);
                }
                write(result, 1, output, out, overwrite, stdout);
                return 0;
            }
            int width = cal.isMulticlass() ? cal.nClasses() : 1;
            double[] flat = input.equals("f64le") ? readBinary(positional.get(1), width)
                    : readText(positional.get(1), width);
            double[] result = predictFlat(cal, flat, width, false);
            if (repeats > 0) {
                stderr.println("predict_seconds=" + timePredict(cal, flat, width, repeats)
                        + " values=" + flat.length);
            }
            write(result, width, output, out, overwrite, stdout);
            return 0;
        } catch (MapFormatException | InvalidScoresException | SegmentKeyException
                 | UnseenSegmentException e) {
            stderr.println("mlcal-calibrator: " + e.getClass().getSimpleName() + ": "
                    + e.getMessage());
            return 1;
        } catch (IOException e) {
            stderr.println("mlcal-calibrator: " + e);
            return 1;
        }
    }

    private static int batch(Path jobs, PrintStream stderr) {
        try {
            for (String line : Files.readAllLines(jobs, StandardCharsets.UTF_8)) {
                if (line.isBlank()) {
                    continue;
                }
                String[] f = line.split("\t");
                if (f.length != 3) {
                    stderr.println("mlcal-calibrator: a batch line needs 3 tab-separated paths");
                    return 2;
                }
                try {
                    Calibrator cal = Calibrator.load(Path.of(f[0]));
                    if (!cal.columnNames().isEmpty()) {   // SCORES is JSON lines: score and
                        // columns (a multicalibration map of the score alone reads f64le)
                        SegmentRows rows = SegmentRows.read(open(f[1]), "jsonl", "score",
                                (ColumnMap) cal.map());
                        write(cal.predict(rows.scores, rows.columns), 1, "f64le", f[2], false,
                                null);
                        continue;
                    }
                    int width = cal.isMulticlass() ? cal.nClasses() : 1;
                    double[] p = predictFlat(cal, readBinary(f[1], width), width, true);
                    write(p, width, "f64le", f[2], false, null);
                } catch (MapFormatException | InvalidScoresException | SegmentKeyException
                         | UnseenSegmentException e) {
                    Files.writeString(Path.of(f[2] + ".err"), e.getClass().getSimpleName()
                            + ": " + e.getMessage(), StandardOpenOption.CREATE_NEW,
                            StandardOpenOption.WRITE);
                }
            }
            return 0;
        } catch (IOException e) {
            stderr.println("mlcal-calibrator: " + e);
            return 1;
        }
    }

    /** Diagnostic: one DetMath function over f64le values (the tests compare it with
     * Python's detmath over whole ranges). */
    private static int detmath(String name, String in, String out, PrintStream stderr)
            throws UsageException {
        java.util.function.DoubleUnaryOperator f;
        switch (name) {
            case "exp": f = DetMath::exp; break;
            case "log": f = DetMath::log; break;
            case "log1p": f = DetMath::log1p; break;
            case "expit": f = DetMath::expit; break;
            default: throw new UsageException("--detmath: unknown function " + name);
        }
        try {
            double[] x = readBinary(in, 1);
            for (int i = 0; i < x.length; i++) {
                x[i] = f.applyAsDouble(x[i]);
            }
            write(x, 1, "f64le", out, false, null);
            return 0;
        } catch (IOException e) {
            stderr.println("mlcal-calibrator: " + e);
            return 1;
        }
    }

    private static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    private static String value(String[] args, int i) throws UsageException {
        if (i >= args.length) {
            throw new UsageException("option " + args[i - 1] + " needs a value");
        }
        return args[i];
    }

    private static String choice(String[] args, int i, String... allowed) throws UsageException {
        String v = value(args, i);
        for (String a : allowed) {
            if (a.equals(v)) {
                return v;
            }
        }
        throw new UsageException(args[i - 1] + " must be one of " + String.join(", ", allowed));
    }

    /** Best time in seconds of {@code repeats} predictions through the library API
     * ({@code predict} or {@code predictProbaRowMajor}; one untimed warm-up first). */
    private static double timePredict(Calibrator cal, double[] flat, int width, int repeats) {
        long best = Long.MAX_VALUE;
        double check = 0.0;
        for (int r = 0; r <= repeats; r++) {
            long t0 = System.nanoTime();
            check += predictFlat(cal, flat, width, false)[0];
            long dt = System.nanoTime() - t0;
            if (r > 0) {
                best = Math.min(best, dt);
            }
        }
        return check < 0 ? -1 : best / 1e9; // check keeps the work observable
    }

    /** Best time in seconds of {@code repeats} predictions of rows with named columns
     * (columns already read; one untimed warm-up first). */
    private static double timeColumns(Calibrator cal, SegmentRows rows, int repeats) {
        long best = Long.MAX_VALUE;
        double check = 0.0;
        for (int r = 0; r <= repeats; r++) {
            long t0 = System.nanoTime();
            check += cal.predict(rows.scores, rows.columns)[0];
            long dt = System.nanoTime() - t0;
            if (r > 0) {
                best = Math.min(best, dt);
            }
        }
        return check < 0 ? -1 : best / 1e9;
    }

    private static double[][] toRows(double[] flat, int width) {
        double[][] rows = new double[flat.length / width][width];
        for (int i = 0; i < rows.length; i++) {
            System.arraycopy(flat, i * width, rows[i], 0, width);
        }
        return rows;
    }

    /** Predictions of row-major scores of the given width, row-major; {@code viaRows} goes
     * through the {@code double[][]} API instead of the row-major one. */
    static double[] predictFlat(Calibrator cal, double[] flat, int width, boolean viaRows) {
        if (!cal.isMulticlass()) {
            return cal.predict(flat);
        }
        if (!viaRows) {
            return cal.predictProbaRowMajor(flat);
        }
        double[][] p = cal.predictProba(toRows(flat, width));
        double[] res = new double[flat.length];
        for (int i = 0; i < p.length; i++) {
            System.arraycopy(p[i], 0, res, i * width, width);
        }
        return res;
    }

    private static InputStream open(String name) throws IOException {
        return name.equals("-") ? System.in : Files.newInputStream(Path.of(name));
    }

    private static double[] readBinary(String name, int width) throws IOException {
        byte[] data;
        try (InputStream in = open(name)) {
            data = in.readAllBytes();
        }
        if (data.length % (8 * width) != 0) {
            throw new InvalidScoresException("scores file holds " + data.length + " bytes, not a "
                    + "whole number of rows of " + width + " float64 value(s)");
        }
        double[] out = new double[data.length / 8];
        ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).asDoubleBuffer().get(out);
        return out;
    }

    private static double[] readText(String name, int width) throws IOException {
        List<double[]> rows = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(open(name),
                StandardCharsets.UTF_8))) {
            String line;
            int lineNo = 0;
            while ((line = r.readLine()) != null) {
                lineNo++;
                String t = line.strip();
                if (t.isEmpty()) {
                    continue;
                }
                String[] parts = t.split("[,\\s]+");
                if (parts.length != width) {
                    throw new InvalidScoresException("scores line " + lineNo + " holds "
                            + parts.length + " value(s), expected " + width);
                }
                double[] row = new double[width];
                for (int k = 0; k < width; k++) {
                    try {
                        row[k] = Double.parseDouble(parts[k]);
                    } catch (NumberFormatException e) {
                        throw new InvalidScoresException("scores line " + lineNo + ": '"
                                + parts[k] + "' is not a number");
                    }
                }
                rows.add(row);
            }
        }
        double[] flat = new double[rows.size() * width];
        for (int i = 0; i < rows.size(); i++) {
            System.arraycopy(rows.get(i), 0, flat, i * width, width);
        }
        return flat;
    }

    /** Write predictions to {@code out} (refusing to replace an existing file unless
     * {@code overwrite}) or, when it is null, to standard output. */
    private static void write(double[] values, int width, String format, String out,
                              boolean overwrite, PrintStream stdout) throws IOException {
        byte[] bytes;
        if (format.equals("f64le")) {
            ByteBuffer buf = ByteBuffer.allocate(values.length * 8).order(ByteOrder.LITTLE_ENDIAN);
            buf.asDoubleBuffer().put(values);
            bytes = buf.array();
        } else {
            StringBuilder sb = new StringBuilder(values.length * 20);
            for (int i = 0; i < values.length; i++) {
                if (format.equals("hex")) {
                    String h = Long.toHexString(Double.doubleToRawLongBits(values[i]));
                    sb.append("0000000000000000", h.length(), 16).append(h);
                } else {
                    sb.append(values[i]);
                }
                sb.append((i + 1) % width == 0 ? '\n' : ',');
            }
            bytes = sb.toString().getBytes(StandardCharsets.UTF_8);
        }
        if (out == null) {
            stdout.write(bytes);
            stdout.flush();
        } else {
            OpenOption[] mode = overwrite ? new OpenOption[] {StandardOpenOption.CREATE,
                StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE}
                : new OpenOption[] {StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE};
            try (OutputStream os = Files.newOutputStream(Path.of(out), mode)) {
                os.write(bytes);
            } catch (FileAlreadyExistsException e) {
                throw new IOException(out + " already exists; pass --overwrite to replace it");
            }
        }
    }

    private static void printTables(PrintStream stdout) {
        StringBuilder sb = new StringBuilder();
        appendHex(sb, "exp_hi", DetMath.EXP_HI);
        appendHex(sb, "exp_lo", DetMath.EXP_LO);
        appendHex(sb, "log_hi", DetMath.LOG_HI);
        appendHex(sb, "log_lo", DetMath.LOG_LO);
        appendHex(sb, "scalars", new double[] {DetMath.LN2_HI, DetMath.LN2_LO, DetMath.RED_HI,
            DetMath.RED_LO, DetMath.INV_STEP});
        stdout.print(sb);
    }

    private static void appendHex(StringBuilder sb, String name, double[] values) {
        sb.append(name);
        for (double v : values) {
            sb.append(' ').append(Long.toHexString(Double.doubleToRawLongBits(v)));
        }
        sb.append('\n');
    }
}
