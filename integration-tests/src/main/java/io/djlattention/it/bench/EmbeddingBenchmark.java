/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;

import com.google.gson.JsonArray;
import com.google.protobuf.CodedOutputStream;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.BertEncoder;
import io.djlattention.zoo.encoder.MiniLm;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.function.Supplier;

/**
 * CPU throughput of all-MiniLM-L6-v2 sentence embeddings (sentences per second, mean pooling and
 * L2 normalisation included) on the same real weights, four ways:
 *
 * <ul>
 *   <li><b>fused</b>: {@link BertEncoder} with {@link BertEncoder.Attention#FUSED} (packed tokens,
 *       fused Q/K/V GEMM, varlen flash attention, fused bias/residual/LayerNorm and bias/GELU);
 *   <li><b>stock</b>: the same block with {@link BertEncoder.Attention#STOCK} (plain DJL NDArray
 *       ops on the padded batch);
 *   <li><b>ORT default</b>: ONNX Runtime Java on the same ONNX file with default session options
 *       (its own intra-op thread count: one per physical core);
 *   <li><b>ORT = threads</b>: ONNX Runtime with its intra-op threads set to the DJL thread count.
 * </ul>
 *
 * For each thread count (libtorch's intra-op threads, {@link JniUtils#setNumThreads}), batch and
 * sequence length, every sentence has exactly that many tokens ({@code [CLS]}, random word-piece
 * ids, {@code [SEP]}; no padding). The four run round-robin within each repetition, so load from
 * other processes hits them alike; each timing starts from Java {@code long[][]} token ids (array
 * creation, forward, pooling, copy back to Java). The table gives median milliseconds per batch,
 * sentences per second, fused's speed-up over stock and over ORT with equal threads (at one thread
 * also as a ratio of the calling thread's CPU time, which then holds all the work and is not
 * inflated by time slicing on a busy machine), and the smallest cosine between fused's and ORT's
 * embeddings (a parity check on the timed inputs).
 *
 * <p>Usage: {@code EmbeddingBenchmark [--threads 2,1] [--batches 1,32] [--lengths 16,128,512]
 * [--warmup 2] [--runs 7] [--min-seconds 3] [--quick] [--out file.md] [--profile dir]}: each
 * cell runs {@code
 * warmup} untimed rounds, then at least {@code runs} timed rounds and until every implementation
 * has been timed for {@code min-seconds}. {@code --quick}: batch 32, length 128, 2 threads, 1
 * warm-up, 5 runs, no minimum time. {@code --profile dir} then profiles one cell (the first
 * thread count, the last batch, the first length): the fused path under libtorch's profiler and
 * ONNX Runtime under its own, and prints the time per operator of each, then times MiniLM's four
 * GEMM shapes alone on one thread (libtorch {@code mm} against ONNX Runtime's MatMul). Through
 * Maven: {@code mvn -B -Pembed-bench -DskipTests verify} (arguments in the property {@code
 * embed.bench.args}). On a machine shared with other jobs, {@code OMP_WAIT_POLICY=PASSIVE} keeps
 * libtorch's OpenMP threads from spinning against the load (docs/benchmarks.md); ONNX Runtime
 * spins by default in both of its configurations.
 */
public final class EmbeddingBenchmark {

    private static final int CLS = 101;
    private static final int SEP = 102;

    private EmbeddingBenchmark() {}

    /**
     * Runs the benchmark and prints a Markdown table.
     *
     * @param args see the class comment
     * @throws Exception if a model cannot be loaded, a forward fails or the output cannot be
     *     written
     */
    public static void main(String[] args) throws Exception {
        int[] threads = {2, 1};
        int[] batches = {1, 32};
        int[] lengths = {16, 128, 512};
        int warmup = 2;
        int runs = 7;
        double minSeconds = 3;
        Path out = null;
        Path profile = null;
        for (int i = 0; i < args.length; ++i) {
            switch (args[i]) {
                case "--quick":
                    threads = new int[] {2};
                    batches = new int[] {32};
                    lengths = new int[] {128};
                    warmup = 1;
                    runs = 5;
                    minSeconds = 0;
                    break;
                case "--threads":
                    threads = BenchSupport.ints(BenchSupport.value(args, ++i), "--threads");
                    break;
                case "--batches":
                    batches = BenchSupport.ints(BenchSupport.value(args, ++i), "--batches");
                    break;
                case "--lengths":
                    lengths = BenchSupport.ints(BenchSupport.value(args, ++i), "--lengths");
                    break;
                case "--warmup":
                    warmup = BenchSupport.intValue(args, ++i);
                    break;
                case "--runs":
                    runs = BenchSupport.intValue(args, ++i);
                    break;
                case "--min-seconds":
                    minSeconds = BenchSupport.doubleValue(args, ++i);
                    break;
                case "--out":
                    out = Path.of(BenchSupport.value(args, ++i));
                    break;
                case "--profile":
                    profile = Path.of(BenchSupport.value(args, ++i));
                    break;
                default:
                    throw new IllegalArgumentException(
                            "unknown argument " + args[i] + " (see EmbeddingBenchmark's Javadoc)");
            }
        }
        for (int length : lengths) {
            if (length < 2 || length > 512) {
                throw new IllegalArgumentException(
                        "--lengths: expected 2..512 tokens (MiniLM's positions), got " + length);
            }
        }
        if (runs < 1 || warmup < 0) {
            throw new IllegalArgumentException("--runs >= 1 and --warmup >= 0 expected");
        }

        Engine engine = Engine.getEngine("PyTorch");
        StringBuilder table = new StringBuilder();
        table.append(
                String.format(
                        Locale.ROOT,
                        "all-MiniLM-L6-v2 sentence embeddings, float32, CPU.%n%n"
                                + "- Date: %s%n"
                                + "- Device: %s, %d available processors, %s; %s %s, ONNX"
                                + " Runtime %s%n"
                                + "- Command: %s%n"
                                + "- %d warm-up rounds, then the median of >= %d timed rounds"
                                + " (and >= %.0f s per implementation); OMP_WAIT_POLICY=%s%n%n",
                        ZonedDateTime.now(ZoneOffset.UTC)
                                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")),
                        BenchSupport.cpuModel(),
                        Runtime.getRuntime().availableProcessors(),
                        System.getProperty("os.arch"),
                        engine.getEngineName(),
                        engine.getVersion(),
                        OrtEnvironment.getEnvironment().getVersion(),
                        command(args),
                        warmup,
                        runs,
                        minSeconds,
                        System.getenv().getOrDefault("OMP_WAIT_POLICY", "(unset)")));
        table.append(
                "| threads | batch | tokens | fused ms | stock ms | ORT default ms | ORT = threads"
                        + " ms | fused sent/s | stock sent/s | ORT default sent/s | ORT = threads"
                        + " sent/s | fused / stock | fused / ORT = threads | same, CPU time (1"
                        + " thread) | min cos fused vs ORT |\n");
        table.append(
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
                        + " --- | --- |\n");
        System.out.print(table);

        try (NDManager manager = NDManager.newBaseManager();
                OrtMiniLm ortDefault = OrtMiniLm.create(0)) {
            BertEncoder encoder =
                    BertEncoder.builder()
                            .setConfig(MiniLm.config())
                            .optOutput(BertEncoder.Output.SENTENCE_EMBEDDING)
                            .build();
            setWeights(manager, encoder);
            for (int t : threads) {
                JniUtils.setNumThreads(t);
                try (OrtMiniLm ortEqual = OrtMiniLm.create(t)) {
                    for (int batch : batches) {
                        for (int length : lengths) {
                            String row =
                                    runCase(
                                            manager,
                                            encoder,
                                            ortDefault,
                                            ortEqual,
                                            t,
                                            batch,
                                            length,
                                            warmup,
                                            runs,
                                            minSeconds);
                            System.out.print(row);
                            table.append(row);
                        }
                    }
                }
            }
        }
        if (profile != null) {
            String report = profile(profile, threads[0], batches[batches.length - 1], lengths[0]);
            System.out.print(report);
            table.append(report);
        }
        if (out != null) {
            Files.writeString(out, table.toString());
        }
    }

    /**
     * Per-operator times of one cell: the fused path under libtorch's profiler (self time of
     * each op: its time minus that of the ops it calls) and ONNX Runtime (equal threads) under
     * its own profiler (kernel time per node, by operator type).
     */
    private static String profile(Path dir, int threads, int batch, int length) throws Exception {
        Files.createDirectories(dir);
        long[][] ids = randomIds(batch, length, new Random(7));
        long[][] mask = new long[batch][length];
        for (long[] row : mask) {
            Arrays.fill(row, 1);
        }
        int runs = 3;
        JniUtils.setNumThreads(threads);
        Map<String, Double> torchOps;
        try (NDManager manager = NDManager.newBaseManager()) {
            BertEncoder encoder =
                    BertEncoder.builder()
                            .setConfig(MiniLm.config())
                            .optOutput(BertEncoder.Output.SENTENCE_EMBEDDING)
                            .build();
            setWeights(manager, encoder);
            djl(manager, encoder, BertEncoder.Attention.FUSED, ids, mask); // warm-up
            Path trace = dir.resolve("fused-trace.json");
            JniUtils.startProfile(false, false, false);
            for (int i = 0; i < runs; ++i) {
                djl(manager, encoder, BertEncoder.Attention.FUSED, ids, mask);
            }
            JniUtils.stopProfile(trace.toString());
            torchOps = torchSelfTimes(trace);
        }
        Map<String, Double> ortOps;
        try (OrtMiniLm ort =
                OrtMiniLm.create(
                        MiniLm.onnxFile(), threads, dir.resolve("ort-trace").toString())) {
            for (int i = 0; i < runs; ++i) {
                ort.embed(ids, mask);
            }
            ortOps = ortKernelTimes(Path.of(ort.endProfiling()));
        }
        StringBuilder sb = new StringBuilder();
        sb.append(
                String.format(
                        Locale.ROOT,
                        "%nProfile: %d threads, batch %d, %d tokens, ms per forward (mean of %d;"
                                + " traces in %s).%n%n",
                        threads,
                        batch,
                        length,
                        runs,
                        dir));
        sb.append(opTable("fused (libtorch profiler, self time)", torchOps, runs));
        sb.append(opTable("ONNX Runtime, equal threads (kernel time by op type)", ortOps, runs));
        sb.append(gemmTable(batch * length));
        return sb.toString();
    }

    /**
     * The GEMMs alone: libtorch's {@code mm} (the weight an {@code [out, in]} array used
     * transposed, as a linear layer does) against ONNX Runtime's MatMul on a one-node graph, at
     * MiniLM's shapes, one thread, timed by the calling thread's CPU time (with one thread both
     * run on it, so a busy machine does not distort the comparison).
     */
    private static String gemmTable(int rows) throws Exception {
        int[][] shapes = {{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}};
        String[] names = {"Q/K/V (fused)", "attention output", "FFN up", "FFN down"};
        int threadsBefore = JniUtils.getNumThreads();
        JniUtils.setNumThreads(1);
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        Random random = new Random(3);
        StringBuilder sb = new StringBuilder();
        sb.append(
                String.format(
                        Locale.ROOT,
                        "GEMMs alone, %d rows, 1 thread, median caller-thread CPU ms of 5:%n%n"
                                + "| GEMM | in x out | libtorch mm ms | GFLOP/s | ORT MatMul ms |"
                                + " GFLOP/s | libtorch / ORT |%n| --- | --- | --- | --- | --- |"
                                + " --- | --- |%n",
                        rows));
        try (NDManager manager = NDManager.newBaseManager()) {
            for (int i = 0; i < shapes.length; ++i) {
                int in = shapes[i][0];
                int out = shapes[i][1];
                float[] x = new float[rows * in];
                float[] w = new float[in * out];
                for (int j = 0; j < x.length; ++j) {
                    x[j] = (float) random.nextGaussian();
                }
                for (int j = 0; j < w.length; ++j) {
                    w[j] = (float) random.nextGaussian();
                }
                NDArray xa = manager.create(x, new Shape(rows, in));
                // [out, in] storage used through a transposed view: what Linear.linear runs.
                NDArray wa =
                        manager.create(w, new Shape(in, out)).transpose().duplicate().transpose();
                List<Double> torch = new ArrayList<>();
                List<Double> ort = new ArrayList<>();
                try (OrtSession.SessionOptions options = new OrtSession.SessionOptions()) {
                    options.setIntraOpNumThreads(1);
                    try (OrtSession session =
                                    env.createSession(matMulModel(rows, in, out, w), options);
                            OnnxTensor xt =
                                    OnnxTensor.createTensor(
                                            env, FloatBuffer.wrap(x), new long[] {rows, in})) {
                        for (int it = 0; it < 7; ++it) {
                            long c0 = mx.getCurrentThreadCpuTime();
                            xa.matMul(wa).close();
                            long c1 = mx.getCurrentThreadCpuTime();
                            session.run(Map.of("X", xt)).close();
                            long c2 = mx.getCurrentThreadCpuTime();
                            if (it >= 2) {
                                torch.add((c1 - c0) / 1e6);
                                ort.add((c2 - c1) / 1e6);
                            }
                        }
                    }
                }
                double t = BenchSupport.median(torch);
                double o = BenchSupport.median(ort);
                double gflop = 2.0 * rows * in * out / 1e9;
                sb.append(
                        String.format(
                                Locale.ROOT,
                                "| %s | %d x %d | %.1f | %.0f | %.1f | %.0f | %.2fx |%n",
                                names[i],
                                in,
                                out,
                                t,
                                gflop / (t / 1e3),
                                o,
                                gflop / (o / 1e3),
                                t / o));
            }
        } finally {
            JniUtils.setNumThreads(threadsBefore);
        }
        return sb.append('\n').toString();
    }

    /** A one-node ONNX model {@code Y = MatMul(X [rows, in], W [in, out])}, W an initializer. */
    private static byte[] matMulModel(int rows, int in, int out, float[] w)
            throws java.io.IOException {
        ByteBuffer raw = ByteBuffer.allocate(4 * w.length).order(ByteOrder.LITTLE_ENDIAN);
        raw.asFloatBuffer().put(w);
        byte[] weight =
                proto(
                        o -> {
                            o.writeInt64(1, in); // dims
                            o.writeInt64(1, out);
                            o.writeInt32(2, 1); // FLOAT
                            o.writeString(8, "W");
                            o.writeByteArray(9, raw.array());
                        });
        byte[] node =
                proto(
                        o -> {
                            o.writeString(1, "X");
                            o.writeString(1, "W");
                            o.writeString(2, "Y");
                            o.writeString(4, "MatMul");
                        });
        byte[] graph =
                proto(
                        o -> {
                            o.writeByteArray(1, node);
                            o.writeString(2, "gemm");
                            o.writeByteArray(5, weight);
                            o.writeByteArray(11, valueInfo("X", rows, in));
                            o.writeByteArray(12, valueInfo("Y", rows, out));
                        });
        return proto(
                o -> {
                    o.writeInt64(1, 8); // ir_version
                    o.writeByteArray(8, proto(op -> op.writeInt64(2, 13))); // opset 13
                    o.writeByteArray(7, graph);
                });
    }

    /** A float32 ValueInfoProto of a fixed shape. */
    private static byte[] valueInfo(String name, long... dims) throws java.io.IOException {
        byte[] shape =
                proto(
                        o -> {
                            for (long d : dims) {
                                o.writeByteArray(1, proto(dim -> dim.writeInt64(1, d)));
                            }
                        });
        byte[] tensor =
                proto(
                        o -> {
                            o.writeInt32(1, 1); // elem_type FLOAT
                            o.writeByteArray(2, shape);
                        });
        byte[] type = proto(o -> o.writeByteArray(1, tensor));
        return proto(
                o -> {
                    o.writeString(1, name);
                    o.writeByteArray(2, type);
                });
    }

    private interface ProtoWriter {
        void write(CodedOutputStream out) throws java.io.IOException;
    }

    private static byte[] proto(ProtoWriter writer) throws java.io.IOException {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        writer.write(out);
        out.flush();
        return bytes.toByteArray();
    }

    private static String opTable(String title, Map<String, Double> microsByOp, int runs) {
        double total = microsByOp.values().stream().mapToDouble(Double::doubleValue).sum();
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "%s: %.1f ms in ops%n%n", title, total / 1e3 / runs));
        sb.append("| op | ms | share |\n| --- | --- | --- |\n");
        microsByOp.entrySet().stream()
                .sorted((a, b) -> Double.compare(b.getValue(), a.getValue()))
                .limit(15)
                .forEach(
                        e ->
                                sb.append(
                                        String.format(
                                                Locale.ROOT,
                                                "| %s | %.2f | %.1f%% |%n",
                                                e.getKey(),
                                                e.getValue() / 1e3 / runs,
                                                100 * e.getValue() / total)));
        sb.append('\n');
        return sb.toString();
    }

    /** Self time (microseconds) per op name of a libtorch chrome trace: duration minus children. */
    static Map<String, Double> torchSelfTimes(Path trace) throws java.io.IOException {
        List<JsonObject> events = traceEvents(trace);
        Map<String, List<JsonObject>> byThread = new LinkedHashMap<>();
        for (JsonObject e : events) {
            if (e.has("dur") && e.has("ts") && "X".equals(str(e, "ph", "X"))) {
                byThread.computeIfAbsent(str(e, "tid", "0"), k -> new ArrayList<>()).add(e);
            }
        }
        Map<String, Double> self = new LinkedHashMap<>();
        for (List<JsonObject> list : byThread.values()) {
            list.sort(
                    (a, b) -> {
                        int c = Double.compare(num(a, "ts"), num(b, "ts"));
                        return c != 0 ? c : Double.compare(num(b, "dur"), num(a, "dur"));
                    });
            java.util.ArrayDeque<double[]> stack = new java.util.ArrayDeque<>(); // end, children
            java.util.ArrayDeque<JsonObject> open = new java.util.ArrayDeque<>();
            for (JsonObject e : list) {
                double ts = num(e, "ts");
                while (!stack.isEmpty() && stack.peek()[0] <= ts) {
                    close(stack.pop(), open.pop(), self);
                }
                if (!stack.isEmpty()) {
                    stack.peek()[1] += num(e, "dur");
                }
                stack.push(new double[] {ts + num(e, "dur"), 0});
                open.push(e);
            }
            while (!stack.isEmpty()) {
                close(stack.pop(), open.pop(), self);
            }
        }
        return self;
    }

    private static void close(double[] frame, JsonObject e, Map<String, Double> self) {
        self.merge(str(e, "name", "?"), Math.max(0, num(e, "dur") - frame[1]), Double::sum);
    }

    /** Kernel time (microseconds) per operator type of an ONNX Runtime profile. */
    static Map<String, Double> ortKernelTimes(Path trace) throws java.io.IOException {
        Map<String, Double> times = new LinkedHashMap<>();
        for (JsonObject e : traceEvents(trace)) {
            if ("Node".equals(str(e, "cat", "")) && str(e, "name", "").endsWith("_kernel_time")) {
                JsonObject a = e.has("args") ? e.getAsJsonObject("args") : new JsonObject();
                times.merge(str(a, "op_name", "?"), num(e, "dur"), Double::sum);
            }
        }
        return times;
    }

    private static List<JsonObject> traceEvents(Path trace) throws java.io.IOException {
        JsonElement root = JsonParser.parseString(Files.readString(trace));
        JsonArray array =
                root.isJsonArray()
                        ? root.getAsJsonArray()
                        : root.getAsJsonObject().getAsJsonArray("traceEvents");
        List<JsonObject> events = new ArrayList<>();
        for (JsonElement e : array) {
            if (e.isJsonObject()) {
                events.add(e.getAsJsonObject());
            }
        }
        return events;
    }

    private static String str(JsonObject o, String key, String fallback) {
        JsonElement e = o.get(key);
        return e == null || e.isJsonNull() ? fallback : e.getAsString();
    }

    private static double num(JsonObject o, String key) {
        JsonElement e = o.get(key);
        return e == null || e.isJsonNull() ? 0 : e.getAsDouble();
    }

    private static String runCase(
            NDManager manager,
            BertEncoder encoder,
            OrtMiniLm ortDefault,
            OrtMiniLm ortEqual,
            int threads,
            int batch,
            int length,
            int warmup,
            int runs,
            double minSeconds) {
        long[][] ids = randomIds(batch, length, new Random(31L * batch + length));
        long[][] mask = new long[batch][length];
        for (long[] row : mask) {
            Arrays.fill(row, 1);
        }
        Map<String, Supplier<float[][]>> impls = new LinkedHashMap<>();
        impls.put("fused", () -> djl(manager, encoder, BertEncoder.Attention.FUSED, ids, mask));
        impls.put("stock", () -> djl(manager, encoder, BertEncoder.Attention.STOCK, ids, mask));
        impls.put("ortDefault", () -> ortDefault.embed(ids, mask));
        impls.put("ortEqual", () -> ortEqual.embed(ids, mask));

        Map<String, List<Double>> times = new LinkedHashMap<>();
        Map<String, List<Double>> cpuTimes = new LinkedHashMap<>();
        Map<String, float[][]> last = new LinkedHashMap<>();
        for (String name : impls.keySet()) {
            times.put(name, new ArrayList<>());
            cpuTimes.put(name, new ArrayList<>());
        }
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long minNanos = (long) (minSeconds * 1e9);
        for (int round = 0; ; ++round) {
            for (Map.Entry<String, Supplier<float[][]>> e : impls.entrySet()) {
                long cpuStart = mx.getCurrentThreadCpuTime();
                long start = System.nanoTime();
                float[][] result = e.getValue().get();
                long nanos = System.nanoTime() - start;
                long cpuNanos = mx.getCurrentThreadCpuTime() - cpuStart;
                if (round >= warmup) {
                    times.get(e.getKey()).add(nanos / 1e6);
                    cpuTimes.get(e.getKey()).add(cpuNanos / 1e6);
                }
                last.put(e.getKey(), result);
            }
            if (round + 1 - warmup >= runs && minTotal(times) * 1e6 >= minNanos) {
                break;
            }
        }
        double fused = BenchSupport.median(times.get("fused"));
        double stock = BenchSupport.median(times.get("stock"));
        double ortDef = BenchSupport.median(times.get("ortDefault"));
        double ortEq = BenchSupport.median(times.get("ortEqual"));
        double minCos = BenchSupport.minCosine(last.get("fused"), last.get("ortEqual"));
        // With one thread, libtorch (OpenMP and MKL at 1 thread) and ONNX Runtime (intra-op
        // pool of 1) run everything on the calling thread, so its CPU time is the work done,
        // which time slicing on a busy machine does not inflate as it does wall-clock time.
        String cpuRatio =
                threads == 1
                        ? String.format(
                                Locale.ROOT,
                                "%.2fx",
                                BenchSupport.median(cpuTimes.get("ortEqual")) / BenchSupport.median(cpuTimes.get("fused")))
                        : "-";
        return String.format(
                Locale.ROOT,
                "| %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %.2fx |"
                        + " %.2fx | %s | %.7f |%n",
                threads,
                batch,
                length,
                fused,
                stock,
                ortDef,
                ortEq,
                batch / (fused / 1e3),
                batch / (stock / 1e3),
                batch / (ortDef / 1e3),
                batch / (ortEq / 1e3),
                stock / fused,
                ortEq / fused,
                cpuRatio,
                minCos);
    }

    /** Sets the MiniLM weights (setWeights copies them; the read ones are freed at once). */
    private static void setWeights(NDManager manager, BertEncoder encoder) throws Exception {
        try (NDManager temp = NDManager.newBaseManager()) {
            encoder.setWeights(manager, MiniLm.weights(temp), MiniLm.onnxFile().toString());
        }
    }

    /** One DJL forward from Java ids to Java embeddings, as a caller would run it. */
    private static float[][] djl(
            NDManager manager,
            BertEncoder encoder,
            BertEncoder.Attention attention,
            long[][] ids,
            long[][] mask) {
        BertEncoder view = encoder.withAttention(attention);
        int batch = ids.length;
        int length = ids[0].length;
        try (NDManager scope = manager.newSubManager()) {
            long[] flatIds = new long[batch * length];
            long[] flatMask = new long[batch * length];
            for (int b = 0; b < batch; ++b) {
                System.arraycopy(ids[b], 0, flatIds, b * length, length);
                System.arraycopy(mask[b], 0, flatMask, b * length, length);
            }
            Shape shape = new Shape(batch, length);
            NDArray emb =
                    view.sentenceEmbeddings(
                            scope.create(flatIds, shape),
                            null,
                            scope.create(flatMask, shape),
                            BertEncoder.Pooling.MEAN,
                            true);
            float[] flat = emb.toFloatArray();
            int dim = (int) emb.getShape().get(1);
            float[][] out = new float[batch][];
            for (int b = 0; b < batch; ++b) {
                out[b] = Arrays.copyOfRange(flat, b * dim, (b + 1) * dim);
            }
            return out;
        }
    }

    private static long[][] randomIds(int batch, int length, Random random) {
        long[][] ids = new long[batch][length];
        for (long[] row : ids) {
            row[0] = CLS;
            for (int s = 1; s < length - 1; ++s) {
                row[s] = 1996 + random.nextInt(30522 - 1996); // ordinary word pieces
            }
            row[length - 1] = SEP;
        }
        return ids;
    }

    private static double minTotal(Map<String, List<Double>> times) {
        double min = Double.MAX_VALUE;
        for (List<Double> t : times.values()) {
            min = Math.min(min, t.stream().mapToDouble(Double::doubleValue).sum());
        }
        return min;
    }

    private static String command(String[] args) {
        String joined = String.join(" ", args);
        if (System.getProperty("embed.bench.maven") != null) {
            return "`mvn -B -Pembed-bench -DskipTests verify"
                    + (joined.isEmpty() ? "" : " -Dembed.bench.args='" + joined + "'")
                    + "`";
        }
        return "`java -cp <integration-tests classpath> "
                + EmbeddingBenchmark.class.getName()
                + (joined.isEmpty() ? "" : " " + joined)
                + "`";
    }
}
