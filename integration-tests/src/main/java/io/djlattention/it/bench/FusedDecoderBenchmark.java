/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.ndarray.BaseNDManager;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;

import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.LayerPath;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DecoderConfig;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * Paged decode steps on the CPU through the fused decoder layer ({@code decoder_layer}, one
 * operator call per layer) against the op-by-op layers, in the same run, steps interleaved so
 * that load from other processes falls on both alike.
 *
 * <p>Models (random weights, float32): stories260K's shape (llama2.c: dim 64, 5 layers, 8 heads,
 * 4 KV heads, MLP 172, vocab 512) and a tiny LLaMA (stories15M's shape: dim 288, 6 layers, 6
 * heads, MLP 768, vocab 32000). Each batch row starts from a 32-token prompt (prefilled, not
 * timed) and decodes greedily; per configuration 5 warm-up steps per path, then the median of 40
 * steps. Per step: wall ms, the calling thread's CPU ms, and the arrays the step creates plus the
 * operator calls that return nothing (reshape_and_cache, decoder_layer): the step's operator
 * calls from Java. The two paths' generated ids are compared.
 *
 * <p>Run: {@code OMP_WAIT_POLICY=PASSIVE mvn -B -Pdecoder-bench -DskipTests verify}.
 */
public final class FusedDecoderBenchmark {

    private static final int WARMUP = 5;
    private static final int STEPS = 40;
    private static final int PROMPT = 32;

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private FusedDecoderBenchmark() {}

    /**
     * Runs the benchmark and prints a markdown table.
     *
     * @param args optional {@code --batches 1,8} (the default)
     */
    public static void main(String[] args) {
        int[] batches = {1, 8};
        for (int i = 0; i < args.length; ++i) {
            if ("--batches".equals(args[i])) {
                batches = BenchSupport.ints(BenchSupport.value(args, ++i), "--batches");
            } else {
                throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        System.out.println(DecoderBenchSetup.deviceLine());
        System.out.println();
        System.out.println(
                "| model | batch | op-by-op tok/s | fused tok/s | speed-up | op-by-op ms/step"
                        + " (host CPU ms) | fused ms/step (host CPU ms) | operator calls per step"
                        + " op-by-op / fused | same ids |");
        System.out.println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |");
        try (NDManager manager = NDManager.newBaseManager()) {
            for (String name : new String[] {"stories260K", "tiny LLaMA (stories15M shape)"}) {
                DecoderConfig config = config(name);
                Decoder decoder = new Decoder(config);
                decoder.initializeRandom(manager, 11, 0.05f);
                for (int batch : batches) {
                    run(name, decoder, manager, batch);
                }
            }
        }
    }

    private static DecoderConfig config(String name) {
        boolean small = name.startsWith("stories260K");
        return DecoderConfig.builder()
                .setArchitecture(DecoderConfig.Architecture.LLAMA)
                .setHiddenSize(small ? 64 : 288)
                .setIntermediateSize(small ? 172 : 768)
                .setNumLayers(small ? 5 : 6)
                .setNumHeads(small ? 8 : 6)
                .optNumKvHeads(small ? 4 : 6)
                .setVocabSize(small ? 512 : 32000)
                .optMaxPositions(512)
                .build();
    }

    /** One path's state: its cache, its sequences' last tokens, timings and generated ids. */
    private static final class PathRun implements AutoCloseable {
        final LayerPath path;
        final PagedKvCache cache;
        final long[] ids;
        final int[] lengths;
        long[] last;
        final List<Double> wall = new ArrayList<>();
        final List<Double> cpu = new ArrayList<>();
        final List<Long> generated = new ArrayList<>();
        int calls;

        PathRun(LayerPath path, Decoder decoder, NDManager manager, int batch) {
            this.path = path;
            int blocks = batch * ((PROMPT + WARMUP + STEPS + 1) / 16 + 2);
            cache = decoder.newCacheBuilder(manager).optBlockSize(16).optNumBlocks(blocks).build();
            ids = new long[batch];
            lengths = new int[batch];
            last = new long[batch];
        }

        @Override
        public void close() {
            cache.close();
        }
    }

    private static void run(String name, Decoder decoder, NDManager manager, int batch) {
        DecoderConfig c = decoder.getConfig();
        Random random = new Random(batch);
        long[][] prompts = new long[batch][PROMPT];
        for (long[] p : prompts) {
            for (int i = 0; i < PROMPT; ++i) {
                p[i] = random.nextInt(c.getVocabSize());
            }
        }
        try (PathRun opByOp = new PathRun(LayerPath.OP_BY_OP, decoder, manager, batch);
                PathRun fused = new PathRun(LayerPath.FUSED, decoder, manager, batch)) {
            for (PathRun r : new PathRun[] {opByOp, fused}) {
                prefill(decoder, manager, r, prompts);
            }
            for (int step = 0; step < WARMUP + STEPS; ++step) {
                for (PathRun r : new PathRun[] {opByOp, fused}) {
                    decodeStep(decoder, manager, r, step >= WARMUP);
                }
            }
            double opMs = BenchSupport.median(opByOp.wall);
            double fusedMs = BenchSupport.median(fused.wall);
            System.out.printf(
                    "| %s | %d | %.1f | %.1f | %.2fx | %.3f (%.3f) | %.3f (%.3f) | %d / %d"
                            + " | %s |%n",
                    name,
                    batch,
                    batch * 1000 / opMs,
                    batch * 1000 / fusedMs,
                    opMs / fusedMs,
                    opMs,
                    BenchSupport.median(opByOp.cpu),
                    fusedMs,
                    BenchSupport.median(fused.cpu),
                    opByOp.calls,
                    fused.calls,
                    opByOp.generated.equals(fused.generated) ? "yes" : "no");
        }
    }

    private static void prefill(Decoder model, NDManager manager, PathRun r, long[][] prompts) {
        Decoder decoder = model.withLayerPath(r.path);
        int batch = prompts.length;
        int[] lens = new int[batch];
        long[] tokens = new long[batch * PROMPT];
        long[] positions = new long[batch * PROMPT];
        for (int s = 0; s < batch; ++s) {
            r.ids[s] = s;
            r.cache.allocate(s, PROMPT);
            r.lengths[s] = PROMPT;
            lens[s] = PROMPT;
            System.arraycopy(prompts[s], 0, tokens, s * PROMPT, PROMPT);
            for (int i = 0; i < PROMPT; ++i) {
                positions[s * PROMPT + i] = i;
            }
        }
        try (NDManager m = manager.newSubManager();
                PagedBatch b = r.cache.prepare(r.ids, lens, m)) {
            NDArray logits =
                    decoder.forwardPaged(
                            r.cache, b, m.create(tokens), m.create(positions),
                            PrefillAttention.PAGED);
            r.last = logits.argMax(-1).toLongArray();
        }
    }

    private static void decodeStep(Decoder model, NDManager manager, PathRun r, boolean timed) {
        Decoder decoder = model.withLayerPath(r.path);
        int batch = r.ids.length;
        int[] ones = new int[batch];
        Arrays.fill(ones, 1);
        long[] positions = new long[batch];
        long start = System.nanoTime();
        long cpuStart = THREADS.getCurrentThreadCpuTime();
        for (int s = 0; s < batch; ++s) {
            r.cache.appendSlots(s, 1);
            positions[s] = r.lengths[s]++;
        }
        try (NDManager m = manager.newSubManager();
                PagedBatch b = r.cache.prepare(r.ids, ones, m)) {
            int before = ((BaseNDManager) m).getManagedArrays().size();
            NDArray logits =
                    decoder.forwardPaged(
                            r.cache, b, m.create(r.last), m.create(positions),
                            PrefillAttention.PAGED);
            r.last = logits.argMax(-1).toLongArray();
            // Arrays made by the step, plus the calls that return none: reshape_and_cache per
            // layer (op-by-op) or decoder_layer per layer (fused).
            int created = ((BaseNDManager) m).getManagedArrays().size() - before;
            r.calls = created + decoder.getConfig().getNumLayers();
        }
        if (timed) {
            r.wall.add((System.nanoTime() - start) / 1e6);
            r.cpu.add((THREADS.getCurrentThreadCpuTime() - cpuStart) / 1e6);
            for (long t : r.last) {
                r.generated.add(t);
            }
        }
    }
}
