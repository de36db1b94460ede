/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;

import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.BertEncoder;
import io.djlattention.zoo.encoder.MiniLm;

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
 * Issue 24's fair comparison: all-MiniLM-L6-v2 sentence embeddings (mean pooling, L2
 * normalisation) through {@link BertEncoder} (FUSED: {@code encoder_layer} per layer; also its
 * bfloat16 mode and the OP_BY_OP reference) against ONNX Runtime Java on the same ONNX file and
 * the same token ids, at equal threads (libtorch's intra-op threads and ORT's intra-op threads,
 * 1 and 2), ORT with all graph optimizations ({@link OrtMiniLm}).
 *
 * <p>Cells: unpadded 1 x 16, 8 x 128, 32 x 128, 8 x 512, 32 x 512 tokens, and a mixed set of 256
 * sentences of 5-200 words (random word pieces, ~1.3 per word, plus [CLS] and [SEP]) in batches
 * of 32: ours in input order (the fused path packs the real tokens), ORT on length-sorted
 * batches (each padded to its longest), as a careful ORT user runs it. Each timing starts from
 * Java {@code long[][]} token ids and ends with Java {@code float[][]} embeddings (tokenization,
 * the same Hugging Face tokenizer for both, is left out). Implementations run round-robin in each
 * round, so load from other processes falls on all alike; the table gives the median ms per
 * cell, the ratio fused / ORT (> 1: ours faster), 1 - min cos against ORT, and the share of the
 * process's CPU time spent in the kernel (system time, /proc/self/stat) over the timed rounds.
 *
 * <p>Usage: {@code EncoderVsOrtBenchmark [--threads 1,2] [--rounds 5] [--out file.md]}.
 */
public final class EncoderVsOrtBenchmark {

    private static final int CLS = 101;
    private static final int SEP = 102;
    private static final String[] IMPLS = {"fused", "fused bf16", "op by op", "ORT"};

    private EncoderVsOrtBenchmark() {}

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
        for (int i = 0; i < args.length; ++i) {
            switch (args[i]) {
                case "--threads":
                    threads = BenchSupport.ints(BenchSupport.value(args, ++i), "--threads");
                    break;
                case "--rounds":
                    rounds = BenchSupport.intValue(args, ++i);
                    break;
                case "--out":
                    out = Path.of(BenchSupport.value(args, ++i));
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Map<String, List<long[][]>> cells = new LinkedHashMap<>();
        Random random = new Random(24);
        int[][] fixed = {{1, 16}, {8, 128}, {32, 128}, {8, 512}, {32, 512}};
        for (int[] c : fixed) {
            cells.put(c[0] + " x " + c[1], List.<long[][]>of(randomIds(c[0], c[1], random)));
        }
        cells.put("mixed 256 x 5-200 words", mixed(256, random));

        StringBuilder table = new StringBuilder();
        table.append(
                String.format(
                        Locale.ROOT,
                        "- Date: %s; device: %s, %d processors; load average at start %s%n"
                                + "- Command: EncoderVsOrtBenchmark %s; %d rounds after one"
                                + " warm-up, median; OMP_WAIT_POLICY=%s%n%n",
                        ZonedDateTime.now(ZoneOffset.UTC)
                                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")),
                        BenchSupport.cpuModel(),
                        Runtime.getRuntime().availableProcessors(),
                        loadAverage(),
                        String.join(" ", args),
                        rounds,
                        System.getenv().getOrDefault("OMP_WAIT_POLICY", "(unset)")));
        table.append(
                "| threads | cell | fused ms | fused bf16 ms | op by op ms | ORT ms | fused / ORT"
                        + " | bf16 / ORT | 1 - min cos fused vs ORT | same, bf16 | system time"
                        + " share |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
                        + " ---: | ---: |\n");
        System.out.print(table);
        try (NDManager manager = NDManager.newBaseManager()) {
            BertEncoder fused = encoder(manager, false);
            BertEncoder bf16 = encoder(manager, true);
            for (int t : threads) {
                JniUtils.setNumThreads(t);
                try (OrtMiniLm ort = OrtMiniLm.create(t)) {
                    for (Map.Entry<String, List<long[][]>> cell : cells.entrySet()) {
                        String row = runCell(manager, fused, bf16, ort, t, cell, rounds);
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

    private static BertEncoder encoder(NDManager manager, boolean bf16) throws Exception {
        BertEncoder encoder =
                BertEncoder.builder().setConfig(MiniLm.config()).optBfloat16Gemm(bf16).build();
        try (NDManager temp = NDManager.newBaseManager()) {
            encoder.setWeights(manager, MiniLm.weights(temp), MiniLm.onnxFile().toString());
        }
        return encoder;
    }

    private static String runCell(
            NDManager manager,
            BertEncoder fused,
            BertEncoder bf16,
            OrtMiniLm ort,
            int threads,
            Map.Entry<String, List<long[][]>> cell,
            int rounds)
            throws IOException {
        List<long[][]> batches = cell.getValue();
        List<long[][]> sorted = sortedBatches(batches);
        BertEncoder opByOp = fused.withAttention(BertEncoder.Attention.OP_BY_OP);
        BertEncoder[] ours = {fused, bf16, opByOp};
        Map<String, List<Double>> times = new LinkedHashMap<>();
        float[][][] last = new float[IMPLS.length][][];
        for (String name : IMPLS) {
            times.put(name, new ArrayList<>());
        }
        long[] cpuBefore = null;
        for (int round = -1; round < rounds; ++round) {
            if (round == 0) {
                cpuBefore = cpuTicks();
            }
            for (int i = 0; i < IMPLS.length; ++i) {
                long start = System.nanoTime();
                last[i] = i < ours.length ? ours(manager, ours[i], batches) : ort(ort, sorted);
                double ms = (System.nanoTime() - start) / 1e6;
                if (round >= 0) {
                    times.get(IMPLS[i]).add(ms);
                }
            }
        }
        long[] cpuAfter = cpuTicks();
        double system =
                (double) (cpuAfter[1] - cpuBefore[1])
                        / Math.max(1, (cpuAfter[0] + cpuAfter[1]) - (cpuBefore[0] + cpuBefore[1]));
        double[] med = new double[IMPLS.length];
        for (int i = 0; i < IMPLS.length; ++i) {
            med[i] = BenchSupport.median(times.get(IMPLS[i]));
        }
        float[][] ortInOrder = unsort(batches, last[3]);
        return String.format(
                Locale.ROOT,
                "| %d | %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.1e | %.1e | %.1f%% |%n",
                threads,
                cell.getKey(),
                med[0],
                med[1],
                med[2],
                med[3],
                med[3] / med[0],
                med[3] / med[1],
                1 - BenchSupport.minCosine(last[0], ortInOrder),
                1 - BenchSupport.minCosine(last[1], ortInOrder),
                100 * system);
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
