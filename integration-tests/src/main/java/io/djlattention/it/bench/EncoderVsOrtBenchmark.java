/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;

import io.djlattention.GemmMode;
import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.BertEncoder;
import io.djlattention.zoo.encoder.BertEncoderConfig;
import io.djlattention.zoo.encoder.MiniLm;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;

/**
 * Issue 24's fair comparison: sentence embeddings (mean pooling, L2 normalisation) through {@link
 * BertEncoder} (FUSED: {@code encoder_layer} per layer, in float32 and in the bfloat16 and int8
 * GEMM modes; optionally the OP_BY_OP reference) against ONNX Runtime Java on the same ONNX file
 * and the same token ids, at equal threads (libtorch's intra-op threads and ORT's intra-op
 * threads), ORT with all graph optimizations ({@link OrtMiniLm}).
 *
 * <p>Cells, all in one run: all-MiniLM-L6-v2 at unpadded 1 x 16, 8 x 128, 32 x 128, 8 x 512, 32 x
 * 512 tokens and a mixed set of 256 sentences of 5-200 words (random word pieces, ~1.3 per word,
 * plus [CLS] and [SEP]) in batches of 32: ours in input order (the fused path packs the real
 * tokens), ORT on length-sorted batches (each padded to its longest), as a careful ORT user runs
 * it; ONNX Runtime's own int8 MiniLM ({@code quantize_dynamic} of the same file) next to ours in
 * int8; and a random-weight BERT-base (12 layers, 768) at 8 x 128 against ORT float32 on its
 * export. The int8 and BERT-base models are made at bench time ({@link EncoderBenchModels}). Each
 * timing starts from Java {@code long[][]} token ids and ends with Java {@code float[][]}
 * embeddings (tokenization, the same Hugging Face tokenizer for both, is left out).
 * Implementations run round-robin in each round, so load from other processes falls on all
 * alike (cells under 2048 tokens repeat each timing, 2048 / tokens calls); the table gives the
 * median ms per call, ratios (> 1: ours faster), 1 - min cos against
 * ORT float32, and the share of the process's CPU time spent in the kernel (system time,
 * /proc/self/stat) over the timed rounds.
 *
 * <p>Usage: {@code EncoderVsOrtBenchmark [--threads 1,2] [--rounds 5] [--cells 1x16,bert-base]
 * [--op-by-op] [--models dir] [--python path] [--out file.md]}. {@code --cells} keeps the cells
 * whose key (1x16, 8x128, 32x128, 8x512, 32x512, mixed, bert-base) is listed; {@code --models}
 * (default {@code integration-tests/target/bench-models}) holds the made models; {@code --python}
 * (default {@code .venv-bench/bin/python} of the repository, made by {@code
 * native-ops/scripts/bench-env.sh}) makes them.
 */
public final class EncoderVsOrtBenchmark {

    private static final int CLS = 101;
    private static final int SEP = 102;
    private static final String[] IMPLS = {
        "fused", "fused bf16", "fused int8", "op by op", "ORT", "ORT int8"
    };

    private EncoderVsOrtBenchmark() {}

    /** One way to embed a list of batches. */
    private interface Impl {
        float[][] embed(List<long[][]> batches);
    }

    /** A cell: its table name, its key for --cells, its batches. */
    private static final class Cell {
        final String model;
        final String name;
        final String key;
        final List<long[][]> batches;

        Cell(String model, String name, String key, List<long[][]> batches) {
            this.model = model;
            this.name = name;
            this.key = key;
            this.batches = batches;
        }
    }

    /**
     * Runs the benchmark and prints a Markdown table.
     *
     * @param args see the class comment
     * @throws Exception if a model cannot be loaded or a forward fails
     */
    public static void main(String[] args) throws Exception {
        int[] threads = {1, 2};
        int rounds = 5;
        Path out = null;
        List<String> only = null;
        boolean opByOp = false;
        Path root = EncoderBenchModels.repoRoot();
        Path models = root.resolve("integration-tests/target/bench-models");
        Path python = root.resolve(".venv-bench/bin/python");
        for (int i = 0; i < args.length; ++i) {
            switch (args[i]) {
                case "--threads":
                    threads = BenchSupport.ints(BenchSupport.value(args, ++i), "--threads");
                    break;
                case "--rounds":
                    rounds = BenchSupport.intValue(args, ++i);
                    break;
                case "--cells":
                    only = Arrays.asList(BenchSupport.value(args, ++i).split(","));
                    break;
                case "--op-by-op":
                    opByOp = true;
                    break;
                case "--models":
                    models = Path.of(BenchSupport.value(args, ++i));
                    break;
                case "--python":
                    python = Path.of(BenchSupport.value(args, ++i));
                    break;
                case "--out":
                    out = Path.of(BenchSupport.value(args, ++i));
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        List<Cell> cells = new ArrayList<>();
        Random random = new Random(24);
        int[][] fixed = {{1, 16}, {8, 128}, {32, 128}, {8, 512}, {32, 512}};
        for (int[] c : fixed) {
            cells.add(
                    new Cell(
                            "MiniLM-L6",
                            c[0] + " x " + c[1],
                            c[0] + "x" + c[1],
                            List.<long[][]>of(randomIds(c[0], c[1], random))));
        }
        cells.add(new Cell("MiniLM-L6", "mixed 256 x 5-200 words", "mixed", mixed(256, random)));
        cells.add(
                new Cell(
                        "BERT-base",
                        "8 x 128",
                        "bert-base",
                        List.<long[][]>of(randomIds(8, 128, random))));
        if (only != null) {
            List<String> keys = only;
            cells.removeIf(c -> !keys.contains(c.key));
        }
        boolean needBert = cells.stream().anyMatch(c -> c.model.equals("BERT-base"));
        EncoderBenchModels made =
                EncoderBenchModels.prepare(python, models, MiniLm.onnxFile());

        StringBuilder table = new StringBuilder();
        table.append(
                String.format(
                        Locale.ROOT,
                        "- Date: %s; device: %s, %d processors; load average at start %s%n"
                                + "- Command: EncoderVsOrtBenchmark %s; %d rounds after one"
                                + " warm-up, median; OMP_WAIT_POLICY=%s%n",
                        ZonedDateTime.now(ZoneOffset.UTC)
                                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")),
                        BenchSupport.cpuModel(),
                        Runtime.getRuntime().availableProcessors(),
                        loadAverage(),
                        String.join(" ", args),
                        rounds,
                        System.getenv().getOrDefault("OMP_WAIT_POLICY", "(unset)")));
        if (made.missing != null) {
            table.append("- Not run (ORT int8 column, BERT-base): " + made.missing + "\n");
        }
        table.append(
                "\n| threads | model | cell | fused ms | bf16 ms | int8 ms | op by op ms | ORT ms"
                        + " | ORT int8 ms | fused / ORT | bf16 / ORT | int8 / ORT | int8 / ORT"
                        + " int8 | 1 - cos fused | 1 - cos bf16 | 1 - cos int8 | 1 - cos ORT"
                        + " int8 | system time |\n|"
                        + " --- |".repeat(3)
                        + " ---: |".repeat(15)
                        + "\n");
        System.out.print(table);
        try (NDManager manager = NDManager.newBaseManager()) {
            Map<GemmMode, BertEncoder> minilm = new LinkedHashMap<>();
            Map<GemmMode, BertEncoder> bert = new LinkedHashMap<>();
            for (GemmMode mode : GemmMode.values()) {
                minilm.put(mode, miniLm(manager, mode));
                if (needBert && made.bertBase != null) {
                    bert.put(mode, bertBase(manager, made.bertBase, mode));
                }
            }
            for (int t : threads) {
                JniUtils.setNumThreads(t);
                try (OrtMiniLm ort = OrtMiniLm.create(t);
                        OrtMiniLm ortInt8 =
                                made.minilmInt8 == null
                                        ? null
                                        : OrtMiniLm.create(made.minilmInt8, t);
                        OrtMiniLm ortBert =
                                bert.isEmpty() ? null : OrtMiniLm.create(made.bertBaseOnnx, t)) {
                    for (Cell cell : cells) {
                        boolean isBert = cell.model.equals("BERT-base");
                        if (isBert && bert.isEmpty()) {
                            continue;
                        }
                        Map<GemmMode, BertEncoder> ours = isBert ? bert : minilm;
                        List<long[][]> sorted = sortedBatches(cell.batches);
                        Map<String, Impl> impls = new LinkedHashMap<>();
                        impls.put("fused", b -> ours(manager, ours.get(GemmMode.FLOAT32), b));
                        impls.put("fused bf16", b -> ours(manager, ours.get(GemmMode.BFLOAT16), b));
                        impls.put("fused int8", b -> ours(manager, ours.get(GemmMode.INT8), b));
                        if (opByOp) {
                            BertEncoder reference =
                                    ours.get(GemmMode.FLOAT32)
                                            .withAttention(BertEncoder.Attention.OP_BY_OP);
                            impls.put("op by op", b -> ours(manager, reference, b));
                        }
                        OrtMiniLm f32 = isBert ? ortBert : ort;
                        impls.put("ORT", b -> unsort(b, ort(f32, sorted)));
                        if (!isBert && ortInt8 != null) {
                            impls.put("ORT int8", b -> unsort(b, ort(ortInt8, sorted)));
                        }
                        String row = runCell(t, cell, impls, rounds);
                        System.out.print(row);
                        table.append(row);
                    }
                }
            }
        }
        table.append(String.format(Locale.ROOT, "%n- Load average at end: %s%n", loadAverage()));
        if (out != null) {
            Files.writeString(out, table.toString());
        }
    }

    private static BertEncoder miniLm(NDManager manager, GemmMode mode) throws Exception {
        BertEncoder encoder = BertEncoder.builder().setConfig(MiniLm.config()).optGemm(mode).build();
        try (NDManager temp = NDManager.newBaseManager()) {
            encoder.setWeights(manager, MiniLm.weights(temp), MiniLm.onnxFile().toString());
        }
        return encoder;
    }

    private static BertEncoder bertBase(NDManager manager, Path dir, GemmMode mode)
            throws Exception {
        HfCheckpoint hf = HfCheckpoint.open(dir);
        BertEncoder encoder =
                BertEncoder.builder()
                        .setConfig(BertEncoderConfig.fromCheckpoint(hf))
                        .optGemm(mode)
                        .build();
        try (NDManager temp = NDManager.newBaseManager()) {
            encoder.setWeights(manager, hf.readTensors(temp), hf);
        }
        return encoder;
    }

    private static String runCell(int threads, Cell cell, Map<String, Impl> impls, int rounds)
            throws IOException {
        Map<String, List<Double>> times = new LinkedHashMap<>();
        Map<String, float[][]> last = new LinkedHashMap<>();
        for (String name : impls.keySet()) {
            times.put(name, new ArrayList<>());
        }
        // Small cells repeat each timing (1 x 16: 128 calls) so one scheduler hiccup on a busy
        // machine does not decide the median; the table gives ms per call.
        int tokens = cell.batches.stream().flatMap(Arrays::stream).mapToInt(r -> r.length).sum();
        int reps = Math.max(1, 2048 / tokens);
        long[] cpuBefore = null;
        for (int round = -1; round < rounds; ++round) {
            if (round == 0) {
                cpuBefore = cpuTicks();
            }
            for (Map.Entry<String, Impl> impl : impls.entrySet()) {
                long start = System.nanoTime();
                for (int r = 0; r < reps; ++r) {
                    last.put(impl.getKey(), impl.getValue().embed(cell.batches));
                }
                double ms = (System.nanoTime() - start) / 1e6 / reps;
                if (round >= 0) {
                    times.get(impl.getKey()).add(ms);
                }
            }
        }
        long[] cpuAfter = cpuTicks();
        double system =
                (double) (cpuAfter[1] - cpuBefore[1])
                        / Math.max(1, (cpuAfter[0] + cpuAfter[1]) - (cpuBefore[0] + cpuBefore[1]));
        Map<String, Double> med = new LinkedHashMap<>();
        for (Map.Entry<String, List<Double>> e : times.entrySet()) {
            med.put(e.getKey(), BenchSupport.median(e.getValue()));
        }
        float[][] ort = last.get("ORT");
        StringBuilder row = new StringBuilder();
        row.append(String.format(Locale.ROOT, "| %d | %s | %s |", threads, cell.model, cell.name));
        for (String name : IMPLS) {
            row.append(med.containsKey(name) ? String.format(Locale.ROOT, " %.1f |", med.get(name))
                    : " - |");
        }
        row.append(ratio(med, "ORT", "fused"))
                .append(ratio(med, "ORT", "fused bf16"))
                .append(ratio(med, "ORT", "fused int8"))
                .append(ratio(med, "ORT int8", "fused int8"));
        for (String name : new String[] {"fused", "fused bf16", "fused int8", "ORT int8"}) {
            row.append(last.containsKey(name)
                    ? String.format(Locale.ROOT, " %.1e |",
                            1 - BenchSupport.minCosine(last.get(name), ort))
                    : " - |");
        }
        row.append(String.format(Locale.ROOT, " %.1f%% |%n", 100 * system));
        return row.toString();
    }

    /** " a/b x |" where both were timed, else " - |". */
    private static String ratio(Map<String, Double> med, String baseline, String ours) {
        if (!med.containsKey(baseline) || !med.containsKey(ours)) {
            return " - |";
        }
        return String.format(Locale.ROOT, " %.2fx |", med.get(baseline) / med.get(ours));
    }

    /** Our embeddings of every batch, as a caller gets them (ids to float[][]). */
    private static float[][] ours(NDManager manager, BertEncoder encoder, List<long[][]> batches) {
        List<float[]> all = new ArrayList<>();
        for (long[][] ids : batches) {
            int b = ids.length;
            int s = 0;
            for (long[] row : ids) {
                s = Math.max(s, row.length);
            }
            long[] flatIds = new long[b * s];
            long[] flatMask = new long[b * s];
            for (int i = 0; i < b; ++i) {
                System.arraycopy(ids[i], 0, flatIds, i * s, ids[i].length);
                Arrays.fill(flatMask, i * s, i * s + ids[i].length, 1);
            }
            try (NDManager scope = manager.newSubManager()) {
                Shape shape = new Shape(b, s);
                NDArray emb =
                        encoder.sentenceEmbeddings(
                                scope.create(flatIds, shape),
                                null,
                                scope.create(flatMask, shape),
                                BertEncoder.Pooling.MEAN,
                                true);
                float[] flat = emb.toFloatArray();
                int dim = flat.length / b;
                for (int i = 0; i < b; ++i) {
                    all.add(Arrays.copyOfRange(flat, i * dim, (i + 1) * dim));
                }
            }
        }
        return all.toArray(new float[0][]);
    }

    /** ORT's embeddings of the sorted batches, each padded to its longest sentence. */
    private static float[][] ort(OrtMiniLm ort, List<long[][]> sorted) {
        List<float[]> all = new ArrayList<>();
        for (long[][] batch : sorted) {
            int s = 0;
            for (long[] row : batch) {
                s = Math.max(s, row.length);
            }
            long[][] ids = new long[batch.length][s];
            long[][] mask = new long[batch.length][s];
            for (int i = 0; i < batch.length; ++i) {
                System.arraycopy(batch[i], 0, ids[i], 0, batch[i].length);
                Arrays.fill(mask[i], 0, batch[i].length, 1);
            }
            all.addAll(Arrays.asList(ort.embed(ids, mask)));
        }
        return all.toArray(new float[0][]);
    }

    /** The same sentences sorted by length (stable), re-cut into batches of the same sizes. */
    private static List<long[][]> sortedBatches(List<long[][]> batches) {
        List<long[]> all = new ArrayList<>();
        for (long[][] b : batches) {
            all.addAll(Arrays.asList(b));
        }
        List<long[]> sorted = new ArrayList<>(all);
        sorted.sort(Comparator.comparingInt(r -> r.length));
        List<long[][]> out = new ArrayList<>();
        int at = 0;
        for (long[][] b : batches) {
            out.add(sorted.subList(at, at + b.length).toArray(new long[0][]));
            at += b.length;
        }
        return out;
    }

    /** ORT's sorted-order embeddings back in input order. */
    private static float[][] unsort(List<long[][]> batches, float[][] sortedEmbeddings) {
        List<long[]> all = new ArrayList<>();
        for (long[][] b : batches) {
            all.addAll(Arrays.asList(b));
        }
        Integer[] order = new Integer[all.size()];
        for (int i = 0; i < order.length; ++i) {
            order[i] = i;
        }
        Arrays.sort(order, Comparator.comparingInt(i -> all.get(i).length));
        float[][] out = new float[order.length][];
        for (int i = 0; i < order.length; ++i) {
            out[order[i]] = sortedEmbeddings[i];
        }
        return out;
    }

    private static long[][] randomIds(int batch, int length, Random random) {
        long[][] ids = new long[batch][];
        for (int b = 0; b < batch; ++b) {
            ids[b] = sentence(length, random);
        }
        return ids;
    }

    private static long[] sentence(int length, Random random) {
        long[] row = new long[length];
        row[0] = CLS;
        for (int s = 1; s < length - 1; ++s) {
            row[s] = 1996 + random.nextInt(30522 - 1996); // ordinary word pieces
        }
        row[length - 1] = SEP;
        return row;
    }

    /** `count` sentences of 5-200 words (~1.3 word pieces a word), in batches of 32. */
    private static List<long[][]> mixed(int count, Random random) {
        List<long[][]> batches = new ArrayList<>();
        for (int from = 0; from < count; from += 32) {
            long[][] batch = new long[Math.min(32, count - from)][];
            for (int i = 0; i < batch.length; ++i) {
                int words = 5 + random.nextInt(196);
                batch[i] = sentence(Math.min(512, (int) Math.round(words * 1.3) + 2), random);
            }
            batches.add(batch);
        }
        return batches;
    }

    /** {user, system} CPU ticks of this process, from /proc/self/stat (fields 14 and 15). */
    private static long[] cpuTicks() throws IOException {
        String stat = Files.readString(Path.of("/proc/self/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return new long[] {Long.parseLong(f[11]), Long.parseLong(f[12])};
    }

    private static String loadAverage() {
        return String.format(
                Locale.ROOT,
                "%.1f",
                ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
    }
}
