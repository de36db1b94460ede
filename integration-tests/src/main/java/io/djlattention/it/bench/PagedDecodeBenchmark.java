/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.ndarray.BaseNDManager;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.paged.BlockManager;
import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.DecoderConfig;

import java.io.IOException;
import java.io.Reader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * CPU decode throughput of the paged KV cache against DJL's contiguous cache, and KV memory waste
 * of the paged cache against a max-length preallocation.
 *
 * <p>Part 1: a GPT-2-style decoder (4 layers, C = 512, 8 heads of 64, vocab 8192, float32, fixed
 * random weights; {@code --hidden} and {@code --arch} change its width and architecture) decodes one token per sequence per step for batch ∈ {1, 8, 32} and context ∈
 * {128, 1024}: (a) stock — the block's TextGenerator protocol, past K/V concatenated with the new
 * token's every step, attention by stock DJL ops; (b) flash — the same contiguous cache with {@code
 * flash_attention}; (c) paged — {@link PagedKvCache} (block 16), {@code reshape_and_cache} + {@code
 * paged_attention}. The caches start holding {@code context} tokens of random K/V (the prefill is
 * not timed). Each configuration: 3 warm-up steps, then the median of 15 steps, the three paths
 * taking turns step by step; tokens/s = batch / median step time, argmax of the logits included.
 * For the paged step it also prints the operator calls of one step (top-level operators in
 * libtorch's profiler trace), the arrays a step creates, the split of its wall time (prepare /
 * forward / read back) and the calling thread's CPU time per step: on a GPU, where the model's
 * work is small, these say how much of a step is the host issuing operators.
 *
 * <p>Part 2: a continuous-batching simulation (no model) of 2000 requests with log-normal prompt
 * and output lengths (max length 2048), 64 running at once; at every step it compares the KV slots
 * in use with what the paged cache holds (whole blocks of 16) and with a max-length preallocation
 * per running request. Waste = 1 − used / allocated, averaged over steps.
 *
 * <p>Run: {@code mvn -B -q -pl integration-tests exec:java
 * -Dexec.mainClass=io.djlattention.it.bench.PagedDecodeBenchmark} (after {@code mvn install} of the
 * modules, or from an IDE with the module class path).
 */
public final class PagedDecodeBenchmark {

    private static final int WARMUP = 3;
    private static final int STEPS = 15;
    private static final int BLOCK_SIZE = 16;

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    /** What the paged cache stores ({@code --kv-cache-dtype}). */
    private static KvCacheDtype cacheDtype = KvCacheDtype.AUTO;

    /** Where the profiled steps' traces are kept, or null to delete them. */
    private static Path traceDir;

    private PagedDecodeBenchmark() {}

    /**
     * Runs the benchmark and prints markdown tables.
     *
     * @param args optional: {@code --batches 1,8,32 --contexts 128,1024} (the defaults), {@code
     *     --hidden 512} (the model's width; 64 makes compute negligible, so a step's time is the
     *     host's cost of issuing it), {@code --arch gpt2} (or {@code llama}) and {@code
     *     --no-waste} to skip part 2, {@code --kv-cache-dtype fp8} for an FP8 paged cache, {@code --trace DIR} to keep the profiled step's Chrome trace
     *     of each configuration there; on a GPU the arrays are on DJL's default device
     * @throws IOException if the profiler's trace of the counted step cannot be read
     */
    public static void main(String[] args) throws IOException {
        int[] batches = {1, 8, 32};
        int[] contexts = {128, 1024};
        int hidden = 512;
        DecoderConfig.Architecture architecture = DecoderConfig.Architecture.GPT2;
        boolean waste = true;
        for (int i = 0; i < args.length; ++i) {
            switch (args[i]) {
                case "--batches":
                    batches = BenchSupport.ints(BenchSupport.value(args, ++i), "--batches");
                    break;
                case "--contexts":
                    contexts = BenchSupport.ints(BenchSupport.value(args, ++i), "--contexts");
                    break;
                case "--hidden":
                    hidden = BenchSupport.intValue(args, ++i);
                    break;
                case "--arch":
                    architecture =
                            DecoderConfig.Architecture.valueOf(
                                    BenchSupport.value(args, ++i).toUpperCase(Locale.ROOT));
                    break;
                case "--no-waste":
                    waste = false;
                    break;
                case "--kv-cache-dtype":
                    cacheDtype = KvCacheDtype.fromString(BenchSupport.value(args, ++i));
                    break;
                case "--trace":
                    traceDir = Files.createDirectories(Path.of(BenchSupport.value(args, ++i)));
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        System.out.println(DecoderBenchSetup.deviceLine());
        DecoderConfig config = DecoderBenchSetup.config(architecture, hidden);
        try (NDManager manager = NDManager.newBaseManager()) {
            System.out.println("Arrays on " + manager.getDevice());
            System.out.printf(
                    "Model: %s, %d layers, hidden %d, %d heads of %d, vocab %d, %s%n",
                    config.getArchitecture(), config.getNumLayers(), config.getHiddenSize(),
                    config.getNumHeads(), config.getHeadDim(), config.getVocabSize(),
                    config.getDataType());
            Decoder decoder = new Decoder(config);
            decoder.initializeRandom(manager, 1, 0.05f);
            System.out.println();
            System.out.println(
                    "| batch | context | stock tok/s | flash (contiguous) tok/s"
                            + " | paged tok/s | paged / stock | paged ms/step"
                            + " | paged ops/step | paged arrays/step"
                            + " | paged prepare / forward / read ms | paged host CPU ms/step |");
            System.out.println(
                    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
            for (int context : contexts) {
                for (int batch : batches) {
                    double[] tps = measure(decoder, manager, batch, context);
                    System.out.printf(
                            "| %d | %d | %.1f | %.1f | %.1f | %.2fx | %.3f | %d | %d"
                                    + " | %.3f / %.3f / %.3f | %.3f |%n",
                            batch, context, tps[0], tps[1], tps[2], tps[2] / tps[0],
                            1e3 * batch / tps[2], (int) tps[7], (int) tps[3], tps[4], tps[5],
                            tps[6], tps[8]);
                }
            }
        }
        if (waste) {
            memoryWaste();
        }
    }

    /**
     * Tokens/s of stock, flash (contiguous) and paged decode. The three run step by step in turn
     * (stock, flash, paged, stock, ...), so that load from other processes on a shared machine
     * falls on all three alike.
     */
    private static double[] measure(Decoder decoder, NDManager parent, int batch, int context)
            throws IOException {
        try (NDManager m = parent.newSubManager();
                Contiguous stock =
                        new Contiguous(
                                decoder, m, batch, context, Decoder.ContiguousAttention.STOCK);
                Contiguous flash =
                        new Contiguous(
                                decoder, m, batch, context, Decoder.ContiguousAttention.FLASH);
                Paged paged = new Paged(decoder, m, batch, context, WARMUP + STEPS + 1)) {
            long[][] times = new long[3][WARMUP + STEPS];
            long[][] phases = new long[3][WARMUP + STEPS];
            long[] cpu = new long[WARMUP + STEPS];
            for (int step = 0; step < WARMUP + STEPS; ++step) {
                times[0][step] = stock.step();
                times[1][step] = flash.step();
                times[2][step] = paged.step();
                for (int p = 0; p < 3; ++p) {
                    phases[p][step] = paged.phaseNs[p];
                }
                cpu[step] = paged.cpuNs;
            }
            double[] tps = new double[9];
            for (int i = 0; i < 3; ++i) {
                tps[i] = batch / (median(times[i]) / 1e9);
            }
            tps[3] = paged.arraysPerStep;
            for (int p = 0; p < 3; ++p) {
                tps[4 + p] = median(phases[p]) / 1e6;
            }
            tps[7] = profiledOperatorCalls(paged);
            tps[8] = median(cpu) / 1e6;
            return tps;
        }
    }

    /** Decode with the contiguous cache of the block's TextGenerator protocol. */
    private static final class Contiguous implements AutoCloseable {
        private final Decoder decoder;
        private final NDManager manager;
        private final Decoder.ContiguousAttention attention;
        private final int batch;
        private final Random random;
        private NDList past = new NDList();
        private int len;

        Contiguous(
                Decoder decoder,
                NDManager parent,
                int batch,
                int context,
                Decoder.ContiguousAttention attention) {
            this.decoder = decoder;
            this.manager = parent.newSubManager();
            this.attention = attention;
            this.batch = batch;
            this.len = context;
            this.random = new Random(batch);
            DecoderConfig c = decoder.getConfig();
            for (int i = 0; i < 2 * c.getNumLayers(); ++i) {
                past.add(
                        manager.randomNormal(
                                new Shape(batch, c.getNumKvHeads(), context, c.getHeadDim())));
            }
        }

        @SuppressWarnings("try")
        long step() {
            Decoder view = decoder.withContiguousAttention(attention);
            long start = System.nanoTime();
            try (NDScope ignore = new NDScope()) {
                NDArray ids =
                        manager.create(
                                tokens(random, batch, decoder.getConfig().getVocabSize()),
                                new Shape(batch, 1));
                NDArray pos = manager.full(new Shape(batch, 1), len, DataType.INT64);
                // Nothing is padded: no attention mask (a call with one runs the masked stock
                // attention).
                NDList in = new NDList(ids, pos);
                in.addAll(past);
                NDList out = view.forward(null, in, false);
                out.get(0).get(":, -1, :").argMax(-1).toLongArray();
                NDList next = out.subNDList(1);
                NDScope.unregister(next);
                past.close();
                past = next;
            }
            ++len;
            return System.nanoTime() - start;
        }

        @Override
        public void close() {
            past.close();
            manager.close();
        }
    }

    /** Decode through the paged cache. */
    private static final class Paged implements AutoCloseable {
        private final Decoder decoder;
        private final PagedKvCache cache;
        private final long[] ids;
        private final int[] ones;
        private final Random random;
        private int len;
        /**
         * Arrays the last step created in its manager (the step's inputs and batch tensors
         * included; an operator returning several arrays counts each).
         */
        int arraysPerStep;
        /** The last step's prepare, forward and read-back nanoseconds. */
        final long[] phaseNs = new long[3];
        /**
         * The last step's CPU time of the calling thread: the host's own cost of the step, less
         * sensitive to other processes than wall time. With libtorch's intra-op threads at 1
         * ({@code -Dai.djl.pytorch.num_threads=1}) a CPU step's operator work is included; on a
         * GPU it is the host time of issuing the step.
         */
        long cpuNs;

        Paged(Decoder decoder, NDManager manager, int batch, int context, int steps) {
            this.decoder = decoder;
            int blocksPerSeq = (context + steps) / BLOCK_SIZE + 1;
            cache =
                    decoder.newCacheBuilder(manager)
                            .optBlockSize(BLOCK_SIZE)
                            .optNumBlocks(batch * blocksPerSeq)
                            .optCacheDtype(cacheDtype)
                            .build();
            for (int l = 0; l < cache.getNumLayers(); ++l) {
                fillRandom(cache.getKeyCache(l));
                fillRandom(cache.getValueCache(l));
            }
            ids = new long[batch];
            ones = new int[batch];
            for (int s = 0; s < batch; ++s) {
                ids[s] = s;
                ones[s] = 1;
                cache.allocate(s, context);
            }
            random = new Random(batch);
            len = context;
        }

        long step() {
            long cpuStart = THREADS.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            try (NDManager stepManager = NDManager.newBaseManager(cache.getDevice())) {
                for (long id : ids) {
                    cache.appendSlots(id, 1);
                }
                long[] positions = new long[ids.length];
                Arrays.fill(positions, len);
                try (PagedBatch b = cache.prepare(ids, ones, stepManager)) {
                    long prepared = System.nanoTime();
                    NDArray logits =
                            decoder.forwardPaged(
                                    cache,
                                    b,
                                    stepManager.create(
                                            tokens(
                                                    random,
                                                    ids.length,
                                                    decoder.getConfig().getVocabSize())),
                                    stepManager.create(positions),
                                    Decoder.PrefillAttention.PAGED);
                    long forwarded = System.nanoTime();
                    logits.argMax(-1).toLongArray();
                    long read = System.nanoTime();
                    // Where a step's wall time goes: the cache's Java side and its uploads, the
                    // forward's host time (issuing operators, and any waits inside), and the
                    // final read, which waits for whatever the GPU still has queued.
                    phaseNs[0] = prepared - start;
                    phaseNs[1] = forwarded - prepared;
                    phaseNs[2] = read - forwarded;
                    arraysPerStep = ((BaseNDManager) stepManager).getManagedArrays().size();
                }
            }
            ++len;
            long time = System.nanoTime() - start;
            cpuNs = THREADS.getCurrentThreadCpuTime() - cpuStart;
            return time;
        }

        @Override
        public void close() {
            cache.close();
        }
    }

    /**
     * The operator calls of one more paged step, counted by libtorch's profiler: the top-level
     * operators it records (ATen's and {@code djl_attn}'s, each a call through the dispatcher;
     * operators they call inside are not counted). Nearly every one is its own JNI round trip
     * from Java; DJL's {@code linear} is one JNI call that records two ({@code aten::t}, then
     * {@code addmm} or {@code matmul}). Array reads (the argmax's toLongArray) and DJL's shape
     * queries are not operators and are not counted.
     */
    private static int profiledOperatorCalls(Paged paged) throws IOException {
        Path trace =
                traceDir == null
                        ? Files.createTempFile("decode-step-profile", ".json")
                        : traceDir.resolve(
                                String.format(
                                        "decode-step-b%d-c%d.json",
                                        paged.ids.length, paged.len));
        try {
            try {
                JniUtils.startProfile(false, false, false);
            } catch (RuntimeException e) {
                // A libtorch without the profiler: the table shows -1, the timings stand.
                System.err.println("operator count unavailable: " + e.getMessage());
                return -1;
            }
            try {
                paged.step();
            } finally {
                JniUtils.stopProfile(trace.toString());
            }
            return topLevelOperators(trace);
        } finally {
            if (traceDir == null) {
                Files.deleteIfExists(trace);
            }
        }
    }

    /** Complete events of a Chrome trace that no other event of their thread encloses. */
    private static int topLevelOperators(Path trace) throws IOException {
        JsonElement root;
        try (Reader reader = Files.newBufferedReader(trace)) {
            root = JsonParser.parseReader(reader);
        }
        JsonArray events =
                root.isJsonArray()
                        ? root.getAsJsonArray()
                        : root.getAsJsonObject().getAsJsonArray("traceEvents");
        List<double[]> spans = new ArrayList<>(); // {thread, start, end}
        for (JsonElement e : events) {
            JsonObject event = e.getAsJsonObject();
            if (!event.has("dur") || !event.has("ts")) {
                continue;
            }
            double start = event.get("ts").getAsDouble();
            double thread = event.has("tid") ? event.get("tid").getAsDouble() : 0;
            spans.add(new double[] {thread, start, start + event.get("dur").getAsDouble()});
        }
        // Parents first: by thread, then start, then the longer span first.
        spans.sort(
                Comparator.<double[]>comparingDouble(s -> s[0])
                        .thenComparingDouble(s -> s[1])
                        .thenComparingDouble(s -> -s[2]));
        int topLevel = 0;
        double thread = Double.NaN;
        double end = Double.NEGATIVE_INFINITY;
        for (double[] span : spans) {
            if (span[0] != thread || span[1] >= end) {
                ++topLevel;
                thread = span[0];
                end = span[2];
            }
        }
        return topLevel;
    }

    private static void fillRandom(NDArray cache) {
        try (NDArray r = cache.getManager().randomNormal(cache.getShape())) {
            if (cache.getDataType() == DataType.UINT8) {
                // Finite, varied e4m3 bytes for timing: magnitude byte min(16 |x|, 0x47) (a
                // monotone stand-in for the encoding, values below 3.75) and x's sign; never
                // 0x7f/0xff (NaN).
                try (NDArray magnitude =
                                r.abs().mul(16).clip(0, 0x47).toType(DataType.UINT8, false);
                        NDArray sign = r.lt(0).toType(DataType.UINT8, false).mul(0x80)) {
                    cache.set(new ai.djl.ndarray.index.NDIndex("..."), magnitude.add(sign));
                }
                return;
            }
            cache.set(new ai.djl.ndarray.index.NDIndex("..."), r);
        }
    }

    private static long[] tokens(Random random, int n, int vocab) {
        long[] t = new long[n];
        for (int i = 0; i < n; ++i) {
            t[i] = random.nextInt(vocab);
        }
        return t;
    }

    private static double median(long[] times) {
        long[] measured = Arrays.copyOfRange(times, WARMUP, times.length);
        Arrays.sort(measured);
        int n = measured.length;
        return n % 2 == 1 ? measured[n / 2] : (measured[n / 2 - 1] + measured[n / 2]) / 2.0;
    }

    /** Part 2: KV slots in use vs allocated, under continuous batching. */
    private static void memoryWaste() {
        int maxLen = 2048;
        int requests = 2000;
        int maxRunning = 64;
        Random random = new Random(2026);
        int[] prompt = new int[requests];
        int[] output = new int[requests];
        long totalLen = 0;
        for (int r = 0; r < requests; ++r) {
            prompt[r] = clamp((int) Math.exp(Math.log(160) + 0.9 * random.nextGaussian()), 4, 1536);
            output[r] =
                    clamp(
                            (int) Math.exp(Math.log(180) + 0.9 * random.nextGaussian()),
                            4,
                            maxLen - prompt[r]);
            totalLen += prompt[r] + output[r];
        }
        BlockManager blocks = new BlockManager(maxRunning * maxLen / BLOCK_SIZE, BLOCK_SIZE);
        List<int[]> running = new ArrayList<>(); // {id, remaining}
        int next = 0;
        double pagedAllocated = 0;
        double preallocated = 0;
        double used = 0;
        int steps = 0;
        while (next < requests || !running.isEmpty()) {
            while (running.size() < maxRunning && next < requests) {
                blocks.allocate(next, prompt[next]);
                running.add(new int[] {next, output[next]});
                ++next;
            }
            for (int[] r : running) {
                blocks.appendSlots(r[0], 1);
                --r[1];
            }
            long inUse = 0;
            for (int[] r : running) {
                inUse += blocks.getTable(r[0]).getNumTokens();
            }
            used += inUse;
            pagedAllocated +=
                    (double) (blocks.getAllocator().getNumBlocks() - blocks.getNumFreeBlocks())
                            * BLOCK_SIZE;
            preallocated += (double) running.size() * maxLen;
            ++steps;
            running.removeIf(
                    r -> {
                        if (r[1] == 0) {
                            blocks.free(r[0]);
                            return true;
                        }
                        return false;
                    });
        }
        System.out.println();
        System.out.printf(
                "KV memory, %d requests (mean length %.0f tokens, max %d), %d running,"
                        + " %d steps:%n",
                requests, (double) totalLen / requests, maxLen, maxRunning, steps);
        System.out.println();
        System.out.println("| cache | allocated / used | waste |");
        System.out.println("| --- | --- | --- |");
        System.out.printf(
                "| max-length preallocation (%d tokens per request) | %.2f | %.1f%% |%n",
                maxLen, preallocated / used, 100 * (1 - used / preallocated));
        System.out.printf(
                "| paged, block %d | %.3f | %.1f%% |%n",
                BLOCK_SIZE, pagedAllocated / used, 100 * (1 - used / pagedAllocated));
    }

    private static int clamp(int v, int lo, int hi) {
        return Math.max(lo, Math.min(hi, v));
    }
}
