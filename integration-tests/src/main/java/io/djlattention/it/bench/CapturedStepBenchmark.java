/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.decoder.DeviceDecodeStep;
import io.djlattention.zoo.decoder.StepSampling;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;

/**
 * The whole decode step as a user times it, from Java, on three paths over the same model and
 * the same caches' contents: (host) {@code Decoder.forwardPaged} with the fused layers and the
 * logits' argmax read back — one JNI call per layer plus the embedding, head and argmax; (eager)
 * {@link DeviceDecodeStep} without a graph — the same operators the graph holds, called one by one;
 * (captured) {@link DeviceDecodeStep} replaying a CUDA graph per bucket — one launch per step. Each
 * path has its own cache holding {@code context} tokens of random K/V (the prefill is not timed);
 * the paths take turns step by step, 5 warm-up steps (the first captures), then the median of
 * {@code --steps}. Reports ms/step, the calling thread's CPU ms/step (host time), JNI operator calls
 * and graph replays per step, and the graphs' memory.
 *
 * <p>The model: the GPT-2-style 4-layer benchmark model of {@link DecoderBenchSetup} (float32), or
 * a Hugging Face checkpoint loaded through {@code Criteria} ({@code --model DIR}, {@code --dtype}).
 * {@code --ttft N} also times a prefill of one N-token prompt (time to first token, fused layers).
 */
public final class CapturedStepBenchmark {

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    private static final int WARMUP = 5;
    private static final int BLOCK_SIZE = 16;

    private CapturedStepBenchmark() {}

    /**
     * Runs the benchmark.
     *
     * @param args {@code --batches 1,16,64 --context 512 --steps 30 [--model DIR --dtype float16]
     *     [--ttft 2048]}
     * @throws Exception if the model cannot be loaded
     */
    public static void main(String[] args) throws Exception {
        int[] batches = {1, 16, 64};
        int context = 512;
        int steps = 30;
        int ttft = 0;
        String model = null;
        String dtype = "float16";
        for (int i = 0; i < args.length; ++i) {
            switch (args[i]) {
                case "--batches":
                    batches = BenchSupport.ints(BenchSupport.value(args, ++i), "--batches");
                    break;
                case "--context":
                    context = BenchSupport.intValue(args, ++i);
                    break;
                case "--steps":
                    steps = BenchSupport.intValue(args, ++i);
                    break;
                case "--ttft":
                    ttft = BenchSupport.intValue(args, ++i);
                    break;
                case "--model":
                    model = BenchSupport.value(args, ++i);
                    break;
                case "--dtype":
                    dtype = BenchSupport.value(args, ++i);
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        System.out.println(DecoderBenchSetup.deviceLine());
        if (model == null) {
            try (NDManager manager = NDManager.newBaseManager()) {
                Decoder decoder = new Decoder(DecoderBenchSetup.gpt2Config());
                decoder.initializeRandom(manager, 1, 0.05f);
                run(decoder, manager, "GPT-2 benchmark model (random weights)", batches, context,
                        steps, ttft);
            }
            return;
        }
        Criteria<int[], int[]> criteria =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelPath(Path.of(model))
                        .optEngine("PyTorch")
                        .optArgument("attention", "paged")
                        .optArgument("dtype", dtype)
                        .build();
        long start = System.nanoTime();
        try (ZooModel<int[], int[]> zoo = criteria.loadModel()) {
            System.out.printf("Loaded %s through Criteria in %.1f s%n", model,
                    (System.nanoTime() - start) / 1e9);
            Decoder decoder = DecoderModels.generationBlock(zoo).getDecoder();
            run(decoder, zoo.getNDManager(), model + " (" + dtype + ")", batches, context, steps,
                    ttft);
        }
    }

    private static void run(Decoder decoder, NDManager manager, String name, int[] batches,
            int context, int steps, int ttft) {
        DecoderConfig c = decoder.getConfig();
        System.out.printf("Model: %s: %s, %d layers, hidden %d, %d/%d heads of %d, vocab %d, %s,"
                        + " on %s; context %d, %d timed steps%n%n",
                name, c.getArchitecture(), c.getNumLayers(), c.getHiddenSize(), c.getNumHeads(),
                c.getNumKvHeads(), c.getHeadDim(), c.getVocabSize(), c.getDataType(),
                manager.getDevice(), context, steps);
        System.out.println("| batch | host ms/step | eager device ms/step | captured ms/step"
                + " | host / captured | host CPU ms/step (host / eager / captured)"
                + " | JNI operator calls/step (host / eager / captured) | graph replays/step"
                + " | graphs, memory |");
        System.out.println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        for (int batch : batches) {
            try (NDManager m = manager.newSubManager();
                    ThreePaths paths = new ThreePaths(decoder, m, batch, context, WARMUP + steps + 1)) {
                long[][] wall = new long[3][WARMUP + steps];
                long[][] cpu = new long[3][WARMUP + steps];
                for (int s = 0; s < WARMUP + steps; ++s) {
                    for (int p = 0; p < 3; ++p) {
                        long c0 = THREADS.getCurrentThreadCpuTime();
                        long t0 = System.nanoTime();
                        paths.step(p);
                        wall[p][s] = System.nanoTime() - t0;
                        cpu[p][s] = THREADS.getCurrentThreadCpuTime() - c0;
                    }
                }
                int layers = c.getNumLayers();
                System.out.printf("| %d | %.3f | %.3f | %.3f | %.2fx | %.3f / %.3f / %.3f"
                                + " | %d / %d / %d | 1 | %d, %.1f MiB |%n",
                        batch, ms(wall[0]), ms(wall[1]), ms(wall[2]), ms(wall[0]) / ms(wall[2]),
                        ms(cpu[0]), ms(cpu[1]), ms(cpu[2]),
                        // host: embed (+ GPT-2 positions) + layers + norm + head + argmax;
                        // eager: 3 uploads + embed + layers + head + sample; captured: 3 + replay.
                        layers + 5, layers + 6, 4,
                        paths.captured.getNumGraphs(), paths.captured.getMemoryBytes() / 1048576.0);
            }
        }
        if (ttft > 0) {
            timeToFirstToken(decoder, manager, ttft);
        }
    }

    /** Prefill of one prompt through the fused layers, logits of its last token read back. */
    private static void timeToFirstToken(Decoder decoder, NDManager manager, int prompt) {
        long[] times = new long[4];
        Random random = new Random(7);
        for (int r = 0; r < times.length; ++r) {
            try (NDManager m = manager.newSubManager();
                    PagedKvCache cache =
                            decoder.newCacheBuilder(m)
                                    .optBlockSize(BLOCK_SIZE)
                                    .optNumBlocks(prompt / BLOCK_SIZE + 2)
                                    .build()) {
                long[] tokens = new long[prompt];
                long[] positions = new long[prompt];
                for (int i = 0; i < prompt; ++i) {
                    tokens[i] = random.nextInt(decoder.getConfig().getVocabSize());
                    positions[i] = i;
                }
                long start = System.nanoTime();
                cache.allocate(0, prompt);
                try (NDManager step = NDManager.newBaseManager(cache.getDevice());
                        PagedBatch b = cache.prepare(new long[] {0}, new int[] {prompt}, step)) {
                    NDArray logits =
                            decoder.forwardPaged(cache, b, step.create(tokens),
                                    step.create(positions), Decoder.PrefillAttention.PAGED);
                    logits.argMax(-1).toLongArray();
                }
                times[r] = System.nanoTime() - start;
            }
        }
        long[] timed = Arrays.copyOfRange(times, 1, times.length);
        Arrays.sort(timed);
        System.out.printf("%nTime to first token, one %d-token prompt (fused layers, paged"
                + " prefill): %.1f ms (median of %d after a warm-up)%n", prompt,
                timed[timed.length / 2] / 1e6, timed.length);
    }

    private static double ms(long[] ns) {
        long[] timed = Arrays.copyOfRange(ns, WARMUP, ns.length);
        Arrays.sort(timed);
        int n = timed.length;
        return (n % 2 == 1 ? timed[n / 2] : (timed[n / 2 - 1] + timed[n / 2]) / 2.0) / 1e6;
    }

    /** The three paths, each with its own cache of the same contents. */
    private static final class ThreePaths implements AutoCloseable {
        final Decoder decoder;
        final PagedKvCache[] caches = new PagedKvCache[3];
        final DeviceDecodeStep eager;
        final DeviceDecodeStep captured;
        final long[] ids;
        final int[] ones;
        final Random random = new Random(11);
        final int[] len = new int[3];

        ThreePaths(Decoder decoder, NDManager m, int batch, int context, int steps) {
            this.decoder = decoder;
            int blocksPerSeq = (context + steps) / BLOCK_SIZE + 1;
            ids = new long[batch];
            ones = new int[batch];
            for (int p = 0; p < 3; ++p) {
                caches[p] =
                        decoder.newCacheBuilder(m)
                                .optBlockSize(BLOCK_SIZE)
                                .optNumBlocks(batch * blocksPerSeq)
                                .build();
                for (int s = 0; s < batch; ++s) {
                    ids[s] = s;
                    ones[s] = 1;
                    caches[p].allocate(s, context);
                }
                len[p] = context;
            }
            // The same random K/V in the three caches.
            for (int l = 0; l < caches[0].getNumLayers(); ++l) {
                NDArray k = m.randomNormal(caches[0].getKeyCache(l).getShape())
                        .toType(caches[0].getKeyCache(l).getDataType(), false);
                NDArray v = m.randomNormal(caches[0].getValueCache(l).getShape())
                        .toType(caches[0].getValueCache(l).getDataType(), false);
                for (PagedKvCache cache : caches) {
                    cache.getKeyCache(l).set(new ai.djl.ndarray.index.NDIndex("..."), k);
                    cache.getValueCache(l).set(new ai.djl.ndarray.index.NDIndex("..."), v);
                }
                k.close();
                v.close();
            }
            eager = new DeviceDecodeStep(decoder, caches[1], false);
            captured =
                    new DeviceDecodeStep(decoder, caches[2], caches[2].getDevice().isGpu());
        }

        void step(int p) {
            PagedKvCache cache = caches[p];
            for (long id : ids) {
                cache.appendSlots(id, 1);
            }
            long[] positions = new long[ids.length];
            Arrays.fill(positions, len[p]);
            long[] tokens = new long[ids.length];
            for (int s = 0; s < tokens.length; ++s) {
                tokens[s] = random.nextInt(decoder.getConfig().getVocabSize());
            }
            if (p == 0) {
                try (NDManager stepManager = NDManager.newBaseManager(cache.getDevice());
                        PagedBatch b = cache.prepare(ids, ones, stepManager)) {
                    NDArray logits =
                            decoder.forwardPaged(cache, b, stepManager.create(tokens),
                                    stepManager.create(positions), Decoder.PrefillAttention.PAGED);
                    logits.argMax(-1).toLongArray();
                }
            } else {
                (p == 1 ? eager : captured)
                        .step(ids, tokens, positions, new StepSampling(ids.length));
            }
            ++len[p];
        }

        @Override
        public void close() {
            eager.close();
            captured.close();
            for (PagedKvCache c : caches) {
                c.close();
            }
        }
    }
}
