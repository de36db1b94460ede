/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.training.ParameterStore;
import io.djlattention.nn.FusedBertBlock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * CPU benchmark of {@link FusedBertBlock} against stock DJL's {@link BertBlock} on the same
 * parameters, at inference: a BERT-base-sized encoder (hidden 768, 12 heads, intermediate 3072) of
 * 1 layer and of 12 layers, batch in {1, 8, 32}, sequence length S in {128, 512}, with 0% and 50%
 * padding (right padding; with 50% the lengths spread evenly around S/2 and sum to half the
 * positions). Each case: warm-up runs, then the median latency of timed runs of the full block
 * forward (embeddings, encoder, pooling), valid tokens per second, the speed-up (stock median /
 * fused median) and the ratio of the median process CPU times (all threads), which a busy shared
 * machine distorts less than wall-clock time. Stock and fused run
 * alternately in the same process, so load on the machine hits both alike. The last column is
 * the largest difference of the sequence outputs at valid positions, relative to the largest
 * stock output: the blocks are untrained (DJL's default initialisation, BatchNorm running
 * statistics 0 and 1), so activations grow through the layers, to ~1e5 after 12; scores then
 * dwarf stock DJL's -100000 mask offset and stock attends to padding a little, which the fused
 * path's exact mask does not.
 *
 * <p>Usage: {@code BertBenchmark [--quick] [--layers 1,12] [--batches 1,8,32] [--seqs 128,512]
 * [--encoder-batches 1,8] [--warmup 2] [--runs 5] [--out file.md]}. {@code --quick} shrinks the
 * grid to 1 layer, batch {1, 8}, S 128 and one warm-up, three runs. {@code --encoder-batches}
 * limits the batches of the 12-layer encoder (the slowest part).
 */
public final class BertBenchmark {

    private static final int VOCAB = 30522;

    private BertBenchmark() {}

    /**
     * Runs the benchmark and prints a Markdown table.
     *
     * @param args see the class comment
     * @throws Exception if a forward fails or the output file cannot be written
     */
    public static void main(String[] args) throws Exception {
        int[] layerCounts = {1, 12};
        int[] batches = {1, 8, 32};
        int[] seqs = {128, 512};
        int[] encoderBatches = null;
        int warmup = 2;
        int runs = 5;
        Path out = null;
        for (int i = 0; i < args.length; ++i) {
            switch (args[i]) {
                case "--quick":
                    layerCounts = new int[] {1};
                    batches = new int[] {1, 8};
                    seqs = new int[] {128};
                    warmup = 1;
                    runs = 3;
                    break;
                case "--layers":
                    layerCounts = BenchSupport.ints(BenchSupport.value(args, ++i), "--layers");
                    break;
                case "--batches":
                    batches = BenchSupport.ints(BenchSupport.value(args, ++i), "--batches");
                    break;
                case "--seqs":
                    seqs = BenchSupport.ints(BenchSupport.value(args, ++i), "--seqs");
                    break;
                case "--encoder-batches":
                    encoderBatches =
                            BenchSupport.ints(BenchSupport.value(args, ++i), "--encoder-batches");
                    break;
                case "--warmup":
                    warmup = BenchSupport.intValue(args, ++i);
                    break;
                case "--runs":
                    runs = BenchSupport.intValue(args, ++i);
                    break;
                case "--out":
                    out = Path.of(BenchSupport.value(args, ++i));
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Engine engine = Engine.getEngine("PyTorch");
        String header =
                String.format(
                        Locale.ROOT,
                        "Device: %s, %s %s on %s, %d available processors, %s; %d warm-up, median"
                                + " of %d runs.%n",
                        System.getProperty("os.arch"),
                        engine.getEngineName(),
                        engine.getVersion(),
                        engine.defaultDevice(),
                        Runtime.getRuntime().availableProcessors(),
                        BenchSupport.cpuModel(),
                        warmup,
                        runs);
        StringBuilder table = new StringBuilder(header);
        table.append(
                "\n| layers | batch | S | padding | stock ms | fused ms | stock tok/s | fused tok/s"
                        + " | speed-up | CPU-time ratio | max rel diff |\n");
        table.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        System.out.print(table);
        for (int layers : layerCounts) {
            for (int seq : seqs) {
                for (int batch : batches) {
                    if (layers > 1
                            && encoderBatches != null
                            && Arrays.stream(encoderBatches).noneMatch(b -> b == batch)) {
                        continue;
                    }
                    for (double padding : new double[] {0.0, 0.5}) {
                        String row = runCase(layers, batch, seq, padding, warmup, runs);
                        System.out.print(row);
                        table.append(row);
                    }
                }
            }
        }
        if (out != null) {
            Files.writeString(out, table.toString());
        }
    }

    private static String runCase(
            int layers, int batch, int seq, double padding, int warmup, int runs) {
        try (NDManager manager = NDManager.newBaseManager()) {
            BertBlock stock =
                    BertBlock.builder()
                            .setTokenDictionarySize(VOCAB)
                            .optTypeDictionarySize(2)
                            .optEmbeddingSize(768)
                            .optAttentionHeadCount(12)
                            .optHiddenSize(3072)
                            .optTransformerBlockCount(layers)
                            .optMaxSequenceLength(seq)
                            .build();
            Shape shape = new Shape(batch, seq);
            Engine.getInstance().setRandomSeed(1234);
            stock.initialize(manager, DataType.FLOAT32, shape, shape, shape);
            FusedBertBlock fused = FusedBertBlock.from(stock, 12);
            int[] lens = lengths(batch, seq, padding);
            NDList inputs = inputs(manager, batch, seq, lens);
            ParameterStore ps = new ParameterStore(manager, false);

            double diff = maxValidDiff(manager, ps, stock, fused, inputs, lens);
            List<Double> stockTimes = new ArrayList<>();
            List<Double> fusedTimes = new ArrayList<>();
            List<Double> stockCpu = new ArrayList<>();
            List<Double> fusedCpu = new ArrayList<>();
            for (int i = 0; i < warmup + runs; ++i) {
                double[] s = time(manager, ps, stock, inputs);
                double[] f = time(manager, ps, fused, inputs);
                if (i >= warmup) {
                    stockTimes.add(s[0]);
                    fusedTimes.add(f[0]);
                    stockCpu.add(s[1]);
                    fusedCpu.add(f[1]);
                }
            }
            double stockMs = BenchSupport.median(stockTimes);
            double fusedMs = BenchSupport.median(fusedTimes);
            double cpuRatio = BenchSupport.median(stockCpu) / BenchSupport.median(fusedCpu);
            long valid = Arrays.stream(lens).asLongStream().sum();
            return String.format(
                    Locale.ROOT,
                    "| %d | %d | %d | %d%% | %.1f | %.1f | %.0f | %.0f | %.2fx | %.2fx | %.1e |%n",
                    layers,
                    batch,
                    seq,
                    Math.round(padding * 100),
                    stockMs,
                    fusedMs,
                    valid / (stockMs / 1e3),
                    valid / (fusedMs / 1e3),
                    stockMs / fusedMs,
                    cpuRatio,
                    diff);
        }
    }

    /** Lengths with the given padding fraction: evenly spread, summing to (1 - p) B S. */
    static int[] lengths(int batch, int seq, double padding) {
        int[] lens = new int[batch];
        long target = Math.round((1 - padding) * batch * seq);
        long sum = 0;
        for (int b = 0; b < batch; ++b) {
            double spread = batch == 1 ? 0.5 : (double) b / (batch - 1);
            double fraction = padding == 0 ? 1 : (1 - padding) * (0.5 + spread);
            lens[b] = (int) Math.max(1, Math.min(seq, Math.round(fraction * seq)));
            sum += lens[b];
        }
        // Nudge the last rows so that the total is exact.
        for (int b = batch - 1; sum != target && b >= 0; --b) {
            int delta = (int) Math.max(1 - lens[b], Math.min(seq - lens[b], target - sum));
            lens[b] += delta;
            sum += delta;
        }
        return lens;
    }

    private static NDList inputs(NDManager manager, int batch, int seq, int[] lens) {
        Random random = new Random(42);
        int[] tokens = new int[batch * seq];
        int[] types = new int[batch * seq];
        int[] mask = new int[batch * seq];
        for (int b = 0; b < batch; ++b) {
            for (int s = 0; s < lens[b]; ++s) {
                tokens[b * seq + s] = random.nextInt(VOCAB);
                types[b * seq + s] = s < lens[b] / 2 ? 0 : 1;
                mask[b * seq + s] = 1;
            }
        }
        Shape shape = new Shape(batch, seq);
        return new NDList(
                manager.create(tokens, shape),
                manager.create(types, shape),
                manager.create(mask, shape));
    }

    /** Wall-clock and process CPU milliseconds of one forward. */
    private static double[] time(
            NDManager manager, ParameterStore ps, ai.djl.nn.Block block, NDList inputs) {
        try (NDManager scope = manager.newSubManager()) {
            long cpuStart = processCpuNanos();
            long start = System.nanoTime();
            NDList out = block.forward(ps, inputs, false);
            out.get(1).toFloatArray(); // the result is complete (PyTorch CPU ops are eager)
            double ms = (System.nanoTime() - start) / 1e6;
            double cpuMs = (processCpuNanos() - cpuStart) / 1e6;
            out.attach(scope);
            return new double[] {ms, cpuMs};
        }
    }

    /** CPU time of the whole process (every thread: Java, libtorch's, the operator pool). */
    private static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os =
                java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        try {
            if (os instanceof com.sun.management.OperatingSystemMXBean) {
                return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
            }
        } catch (NoClassDefFoundError e) {
            // a Java runtime without the jdk.management module: no CPU-time column
        }
        return 0;
    }

    private static double maxValidDiff(
            NDManager manager,
            ParameterStore ps,
            BertBlock stock,
            FusedBertBlock fused,
            NDList inputs,
            int[] lens) {
        try (NDManager scope = manager.newSubManager()) {
            NDList a = stock.forward(ps, inputs, false);
            NDList b = fused.forward(ps, inputs, false);
            a.attach(scope);
            b.attach(scope);
            float[] x = a.get(0).toFloatArray();
            float[] y = b.get(0).toFloatArray();
            int seq = (int) a.get(0).getShape().get(1);
            int width = (int) a.get(0).getShape().get(2);
            double max = 0;
            for (int i = 0; i < x.length; ++i) {
                int row = i / (seq * width);
                int pos = (i / width) % seq;
                if (pos < lens[row]) {
                    max = Math.max(max, Math.abs(x[i] - y[i]));
                }
            }
            double scale = 0;
            for (int i = 0; i < x.length; ++i) {
                scale = Math.max(scale, Math.abs(x[i]));
            }
            return max / Math.max(scale, Float.MIN_NORMAL);
        }
    }
}
