/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import io.djlattention.DecoderLayerOps;
import io.djlattention.DecoderLayerOptions;
import io.djlattention.DecoderLayerWeights;
import io.djlattention.PagedAttentionOptions;
import io.djlattention.StepOps;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The host cost of one operator call from Java: a plain DJL op against djl_attn operators, on
 * tiny arrays, so that the kernels' own work is a small part of each call and what is timed is
 * the host path (Java argument building, JNI, the C interface, PyTorch's dispatcher, the
 * binding's checks, output allocation, wrapping the outputs as DJL arrays and closing them).
 *
 * <p>Calls, each closing its outputs as a model's forward would (on DJL's default device: the
 * GPU when the engine sees one, where a call's kernel is queued, not waited for):
 *
 * <ul>
 *   <li>{@code DJL add}: {@code a.add(b)}, {@code [1, 4, 2, 8]} float32: the anchor;
 *   <li>{@code StepOps.copyFromHost}: {@code copy_from_host} of one float: the floor of a
 *       djl_attn call (no output, a 4-byte copy), its whole cost the call path's;
 *   <li>{@code flashAttention}: {@link AttentionOps#flashAttention} on q, k, v {@code [1, 4, 2,
 *       8]} (two outputs: the logsumexp is freed at once);
 *   <li>{@code pagedAttention}: a decode step's {@link AttentionOps#pagedAttention} for one
 *       sequence of 5 cached tokens (block 16, 2 heads of 8) through a {@link PagedKvCache}'s
 *       batch (no per-call index check, as the decoder calls it);
 *   <li>{@code decoderLayer}: one fused LLaMA-style layer ({@link DecoderLayerOps#decoderLayer},
 *       C 16, 2 heads of 8, MLP 32, one token; 25 arguments, 15 tensors) — its kernel does a
 *       little real work (a few small GEMMs), so this row is an upper bound of its host cost.
 * </ul>
 *
 * <p>Each round times {@code --calls} calls of every case back to back, cases taking turns, so
 * that load from other processes falls on all alike; the table gives the median over {@code
 * --rounds} rounds (after 2 warm-up rounds) of wall µs per call and of the calling thread's CPU
 * µs per call, and the median of each round's ratio to the DJL add of the same round (on a shared
 * machine the CPU time and the ratios move less than the wall time).
 *
 * <p>Run: {@code OMP_WAIT_POLICY=PASSIVE mvn -B -Pcall-cost-bench -DskipTests verify} (CPU), or
 * {@code BENCH=callcost integration-tests/scripts/gpu-java-suite.sh RUN_DIR} on the GPU machine.
 */
public final class OperatorCallCostBenchmark {

    private static final String ANCHOR = "DJL add";

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private OperatorCallCostBenchmark() {}

    /**
     * Runs the benchmark and prints a Markdown table.
     *
     * @param args optional {@code --calls N} (default 20000), {@code --rounds N} (default 9) and
     *     {@code --only TEXT} (time only the DJL add and the calls whose name contains TEXT, for a
     *     profiler)
     */
    public static void main(String[] args) {
        int calls = 20000;
        int rounds = 9;
        String only = "";
        for (int i = 0; i < args.length; ++i) {
            if ("--only".equals(args[i])) {
                only = BenchSupport.value(args, ++i);
            } else if ("--calls".equals(args[i])) {
                calls = BenchSupport.intValue(args, ++i);
            } else if ("--rounds".equals(args[i])) {
                rounds = BenchSupport.intValue(args, ++i);
            } else {
                throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Engine engine = Engine.getEngine("PyTorch");
        try (NDManager manager = NDManager.newBaseManager();
                Cases cases = new Cases(manager)) {
            System.out.printf(
                    Locale.ROOT,
                    "Host cost per operator call on %s (%s), %s %s, %d calls per case and round,"
                            + " median of %d rounds; load average %s; %s%n%n",
                    manager.getDevice(),
                    manager.getDevice().isGpu() ? "GPU" : BenchSupport.cpuModel(),
                    engine.getEngineName(),
                    engine.getVersion(),
                    calls,
                    rounds,
                    loadAverage(),
                    ZonedDateTime.now(ZoneOffset.UTC)
                            .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")));
            Map<String, List<double[]>> samples = new LinkedHashMap<>();
            for (String name : cases.names()) {
                if (name.equals(ANCHOR) || name.contains(only)) {
                    samples.put(name, new ArrayList<>());
                }
            }
            for (int round = -2; round < rounds; ++round) {
                for (String name : samples.keySet()) {
                    double[] us = time(cases.get(name), calls);
                    if (round >= 0) {
                        samples.get(name).add(us);
                    }
                }
            }
            System.out.println(
                    "| call | wall µs / call | host CPU µs / call | wall / DJL add | host CPU /"
                            + " DJL add |");
            System.out.println("| --- | ---: | ---: | ---: | ---: |");
            for (Map.Entry<String, List<double[]>> e : samples.entrySet()) {
                System.out.printf(
                        Locale.ROOT,
                        "| %s | %.2f | %.2f | %.2fx | %.2fx |%n",
                        e.getKey(),
                        BenchSupport.median(column(e.getValue(), 0)),
                        BenchSupport.median(column(e.getValue(), 1)),
                        medianRatio(e.getValue(), samples.get(ANCHOR), 0),
                        medianRatio(e.getValue(), samples.get(ANCHOR), 1));
            }
        }
    }

    /** Wall and thread-CPU microseconds per call of {@code calls} calls. */
    private static double[] time(Runnable call, int calls) {
        long cpu = THREADS.getCurrentThreadCpuTime();
        long start = System.nanoTime();
        for (int c = 0; c < calls; ++c) {
            call.run();
        }
        long wall = System.nanoTime() - start;
        cpu = THREADS.getCurrentThreadCpuTime() - cpu;
        return new double[] {wall / 1e3 / calls, cpu / 1e3 / calls};
    }

    /** The median over rounds of a call's time over the DJL add's in the same round. */
    private static double medianRatio(List<double[]> rows, List<double[]> anchor, int index) {
        List<Double> ratio = new ArrayList<>(rows.size());
        for (int r = 0; r < rows.size(); ++r) {
            ratio.add(rows.get(r)[index] / anchor.get(r)[index]);
        }
        return BenchSupport.median(ratio);
    }

    private static List<Double> column(List<double[]> rows, int index) {
        List<Double> out = new ArrayList<>(rows.size());
        for (double[] row : rows) {
            out.add(row[index]);
        }
        return out;
    }

    private static String loadAverage() {
        double load = ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
        return String.format(
                Locale.ROOT,
                "%.1f on %d cores",
                load,
                Runtime.getRuntime().availableProcessors());
    }

    /** The timed calls and the arrays they read. */
    private static final class Cases implements AutoCloseable {

        private static final int HEADS = 2;
        private static final int DIM = 8;
        private static final int HIDDEN = HEADS * DIM;
        private static final int MLP = 32;
        private static final int CONTEXT = 5;

        private final Map<String, Runnable> calls = new LinkedHashMap<>();
        private final PagedKvCache cache;
        private final PagedBatch batch;

        Cases(NDManager manager) {
            NDArray a = manager.randomNormal(new Shape(1, 4, HEADS, DIM));
            NDArray b = manager.randomNormal(new Shape(1, 4, HEADS, DIM));
            calls.put(ANCHOR, () -> a.add(b).close());

            NDArray dst = manager.zeros(new Shape(1));
            // The source is host memory on every device (copy_from_host reads a CPU array).
            NDArray src = manager.ones(new Shape(1)).toDevice(Device.cpu(), false);
            calls.put("StepOps.copyFromHost (1 float)", () -> StepOps.copyFromHost(dst, src));

            AttentionOptions flash = AttentionOptions.builder().build();
            calls.put(
                    "AttentionOps.flashAttention",
                    () -> AttentionOps.flashAttention(a, b, b, flash).close());

            cache =
                    PagedKvCache.builder()
                            .setManager(manager)
                            .setNumLayers(1)
                            .setNumKvHeads(HEADS)
                            .setHeadDim(DIM)
                            .optBlockSize(16)
                            .optNumBlocks(4)
                            .build();
            cache.allocate(0, CONTEXT - 1);
            cache.appendSlots(0, 1);
            batch = cache.prepare(new long[] {0}, new int[] {1}, manager);
            NDArray query = manager.randomNormal(new Shape(1, HEADS, DIM));
            PagedAttentionOptions paged = PagedAttentionOptions.builder().build();
            calls.put(
                    "AttentionOps.pagedAttention (decode, cache batch)",
                    () -> AttentionOps.pagedAttention(query, cache, 0, batch, paged).close());

            DecoderLayerWeights weights =
                    DecoderLayerWeights.builder()
                            .setAttentionNorm(manager.ones(new Shape(HIDDEN)), null)
                            .setQkv(weight(manager, 3 * HEADS * DIM, HIDDEN), null)
                            .setOut(weight(manager, HIDDEN, HEADS * DIM), null)
                            .setMlpNorm(manager.ones(new Shape(HIDDEN)), null)
                            .setUp(weight(manager, 2 * MLP, HIDDEN), null)
                            .setDown(weight(manager, HIDDEN, MLP), null)
                            .build();
            DecoderLayerOptions options =
                    DecoderLayerOptions.builder()
                            .setNumHeads(HEADS)
                            .setScale((float) (1 / Math.sqrt(DIM)))
                            .build();
            NDArray hidden = manager.randomNormal(new Shape(1, HIDDEN));
            NDArray positions = manager.create(new long[] {CONTEXT - 1});
            calls.put(
                    "DecoderLayerOps.decoderLayer (1 token, C 16)",
                    () ->
                            DecoderLayerOps.decoderLayer(
                                    hidden, positions, cache, 0, batch, weights, options));
            // One call of each before timing: the first call loads the libraries.
            for (Runnable call : calls.values()) {
                call.run();
            }
        }

        private static NDArray weight(NDManager manager, int rows, int cols) {
            return manager.randomNormal(0, 0.1f, new Shape(rows, cols), DataType.FLOAT32);
        }

        Iterable<String> names() {
            return new ArrayList<>(calls.keySet());
        }

        Runnable get(String name) {
            return calls.get(name);
        }

        @Override
        public void close() {
            batch.close();
            cache.close();
        }
    }
}
