/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;

import io.djlattention.CudaGraph;
import io.djlattention.DecoderLayerOps;
import io.djlattention.DecoderLayerOptions;
import io.djlattention.SamplingOps;
import io.djlattention.StepOps;
import io.djlattention.paged.PagedKvCache;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A {@link Decoder}'s decode step run whole on the device: token embedding, the fused layers,
 * the final norm and head, and the choice of each next token ({@code sample_tokens}) write into
 * arrays this object owns, so that only the chosen ids cross to the host. On a GPU each batch
 * bucket's step is captured once into a {@link CudaGraph} and then replayed: one launch per step
 * (docs/design/captured-decode-step.md). Batches are padded to a bucket (1, 2, 4, ... 256
 * sequences, as vLLM pads its captured batch sizes) and block tables to a width bucket (a power
 * of two of blocks, at most the model's positions), so a few graphs serve every step.
 *
 * <p>Not thread-safe: one step at a time, as a scheduler runs them. Greedy ids equal the fused
 * eager path's ({@link Decoder#forwardPaged} then the first maximum) on the same device.
 */
public final class DeviceDecodeStep implements AutoCloseable {

    /** Whether and how a generation engine runs its decode steps on the device. */
    public enum Mode {
        /** {@link #CAPTURED} on a GPU where the decoder takes its fused path, else {@link #OFF}. */
        AUTO,
        /** Every step through {@link Decoder#forwardPaged} and the host-side sampler. */
        OFF,
        /** The device step's operator calls, run one by one (the reference of the graphs). */
        EAGER,
        /** The device step, captured into a CUDA graph per bucket and replayed (GPU only). */
        CAPTURED
    }

    /** The largest batch one step takes. */
    public static final int MAX_SEQUENCES = 256;

    /** The default bound of {@link #getMemoryBytes()}: 1 GiB. */
    public static final long DEFAULT_MEMORY_BUDGET = 1L << 30;

    private final Decoder decoder;
    private final PagedKvCache cache;
    private final boolean capture;
    private final NDManager manager;
    private final int maxWidth;
    private final long memoryBudget;
    /** In the order of their last use: the first is the one a bound on memory drops first. */
    private final Map<Long, Bucket> buckets = new LinkedHashMap<>(16, 0.75f, true);
    private StepWeights weights;
    private float embedScale;
    private long graphReplays;

    /** One bucket's arrays and, once captured, its graph. */
    private static final class Bucket {
        final DecodeStepArrays arrays;
        CudaGraph graph;

        Bucket(DecodeStepArrays arrays) {
            this.arrays = arrays;
        }
    }

    /**
     * Creates the step of a decoder over a cache.
     *
     * @param decoder the decoder, on its fused path for this cache ({@link Decoder#isFused})
     * @param cache the cache, on the decoder's device
     * @param capture whether steps are captured into CUDA graphs (GPU only); false runs the same
     *     operator calls eagerly, the reference the graphs are tested against
     * @throws IllegalArgumentException if the decoder does not take the fused path for this
     *     cache, or capture is asked for off a GPU
     */
    public DeviceDecodeStep(Decoder decoder, PagedKvCache cache, boolean capture) {
        this(decoder, cache, capture, DEFAULT_MEMORY_BUDGET);
    }

    /**
     * Creates the step with a bound on the device memory its buckets hold ({@link
     * #getMemoryBytes()}): whenever a bucket is made or captured, the least recently used others
     * (their arrays and graphs) are released while the total is over the bound; the bucket a step
     * needs is always kept, so one bucket larger than the bound still runs.
     *
     * @param decoder the decoder, on its fused path for this cache
     * @param cache the cache, on the decoder's device
     * @param capture whether steps are captured into CUDA graphs (GPU only)
     * @param memoryBudget the bound, bytes
     * @throws IllegalArgumentException as {@link #DeviceDecodeStep(Decoder, PagedKvCache,
     *     boolean)}, or if the budget is not positive
     */
    public DeviceDecodeStep(
            Decoder decoder, PagedKvCache cache, boolean capture, long memoryBudget) {
        if (memoryBudget <= 0) {
            throw new IllegalArgumentException(
                    "memoryBudget: expected a positive number of bytes, got " + memoryBudget);
        }
        if (!decoder.isFused(cache)) {
            throw new IllegalArgumentException(
                    "decoder: expected the fused layer path for this cache (Decoder.isFused)");
        }
        if (capture && !cache.getDevice().isGpu()) {
            throw new IllegalArgumentException(
                    "capture: CUDA graphs need a GPU cache, got one on " + cache.getDevice());
        }
        this.decoder = decoder;
        this.cache = cache;
        this.capture = capture;
        this.memoryBudget = memoryBudget;
        manager = NDManager.newBaseManager(cache.getDevice());
        int blockSize = cache.getBlockSize();
        maxWidth = (decoder.getConfig().getMaxPositions() + blockSize - 1) / blockSize;
    }

    /**
     * Makes the device step a mode asks for.
     *
     * @param mode the mode
     * @param decoder the decoder
     * @param cache the cache
     * @return the step, or null for {@link Mode#OFF} (and {@link Mode#AUTO} off a GPU or off the
     *     fused path)
     * @throws IllegalArgumentException if {@link Mode#EAGER} or {@link Mode#CAPTURED} cannot run
     *     here (the message says why)
     */
    public static DeviceDecodeStep create(Mode mode, Decoder decoder, PagedKvCache cache) {
        switch (mode) {
            case OFF:
                return null;
            case AUTO:
                return cache.getDevice().isGpu() && supports(decoder, cache)
                        ? new DeviceDecodeStep(decoder, cache, true)
                        : null;
            case EAGER:
                return new DeviceDecodeStep(decoder, cache, false);
            default:
                return new DeviceDecodeStep(decoder, cache, true);
        }
    }

    /**
     * Whether a scheduler can run decode steps of this decoder over this cache here.
     *
     * @param decoder the decoder
     * @param cache the cache
     * @return whether the decoder takes its fused path for the cache
     */
    public static boolean supports(Decoder decoder, PagedKvCache cache) {
        return decoder.isFused(cache);
    }

    /**
     * Runs one decode step: every sequence's one new token (already given its slot by {@link
     * PagedKvCache#appendSlots}) through the model, and the choice of the token after it.
     *
     * @param sequenceIds the sequences, in batch order, at most {@link #MAX_SEQUENCES}
     * @param tokens each sequence's new token, in {@code [0, V)}
     * @param positions each new token's position (its sequence's cached tokens before it), below
     *     the model's positions
     * @param sampling how each sequence chooses
     * @return each sequence's next token
     * @throws IllegalArgumentException if an argument is out of range (named)
     */
    public long[] step(long[] sequenceIds, long[] tokens, long[] positions, StepSampling sampling) {
        int n = sequenceIds.length;
        checkInputs(n, tokens, positions, sampling);
        if (n == 0) {
            return new long[0];
        }
        StepWeights current = decoder.stepWeights();
        if (current != weights) {
            // New parameters: the graphs hold the old ones' addresses.
            closeBuckets();
            weights = current;
            embedScale =
                    current.embedScale == null ? 1f : current.embedScale.toFloatArray()[0];
        }
        int blockSize = cache.getBlockSize();
        long longest = 0;
        for (long p : positions) {
            longest = Math.max(longest, p + 1);
        }
        int needed = (int) ((longest + blockSize - 1) / blockSize);
        int width =
                Math.max(
                        Math.min(Integer.highestOneBit(Math.max(needed, 1) * 2 - 1), maxWidth),
                        needed);
        int rows = Integer.highestOneBit(n * 2 - 1);
        long key = ((long) rows << 32) | width;
        Bucket bucket = buckets.get(key);
        if (bucket == null) {
            evictFor(key);
            bucket = new Bucket(new DecodeStepArrays(manager, rows, width, decoder.getConfig()));
            buckets.put(key, bucket);
        }
        DecodeStepArrays a = bucket.arrays;
        fill(a, n, sequenceIds, tokens, positions, sampling);
        a.upload();
        if (!capture) {
            run(a);
        } else {
            if (bucket.graph == null) {
                bucket.graph = CudaGraph.capture(manager, () -> run(a));
                evictFor(key);
            }
            bucket.graph.replay();
            graphReplays++;
        }
        long[] all = a.nextIds.toLongArray();
        return n == rows ? all : java.util.Arrays.copyOf(all, n);
    }

    private void checkInputs(int n, long[] tokens, long[] positions, StepSampling sampling) {
        if (n > MAX_SEQUENCES) {
            throw new IllegalArgumentException(
                    "sequenceIds: at most " + MAX_SEQUENCES + " sequences per step, got " + n);
        }
        if (tokens.length != n || positions.length != n || sampling.size() != n) {
            throw new IllegalArgumentException(
                    "tokens, positions, sampling: expected "
                            + n
                            + " entries (one per sequence), got "
                            + tokens.length
                            + ", "
                            + positions.length
                            + ", "
                            + sampling.size());
        }
        DecoderConfig c = decoder.getConfig();
        for (int s = 0; s < n; ++s) {
            // The operators are told not to read these back (a captured step cannot): checked
            // here, on the host, once per step.
            if (tokens[s] < 0 || tokens[s] >= c.getVocabSize()) {
                throw new IllegalArgumentException(
                        "tokens: expected ids in [0, " + c.getVocabSize() + "), got " + tokens[s]);
            }
            if (positions[s] < 0 || positions[s] >= c.getMaxPositions()) {
                throw new IllegalArgumentException(
                        "positions: expected values in [0, "
                                + c.getMaxPositions()
                                + ") (the model's positions), got "
                                + positions[s]);
            }
        }
    }

    /**
     * The step's host arrays: rows past the batch are padding — token 0 at position 0, a
     * one-token context in block 0, no cache write (slot -1), greedy — whose outputs are dropped.
     */
    private void fill(
            DecodeStepArrays a,
            int n,
            long[] sequenceIds,
            long[] tokens,
            long[] positions,
            StepSampling sampling) {
        int b = a.rows;
        int w = a.width;
        int[] tables = new int[b * w];
        int[] contexts = new int[b];
        long[] slots = new long[b];
        cache.writeDecodeBatch(sequenceIds, w, tables, contexts, slots);
        for (int s = 0; s < n; ++s) {
            if (contexts[s] != positions[s] + 1) {
                throw new IllegalArgumentException(
                        "positions: sequence "
                                + sequenceIds[s]
                                + " has "
                                + contexts[s]
                                + " cached tokens, so its new token is at position "
                                + (contexts[s] - 1)
                                + ", got "
                                + positions[s]);
            }
        }
        for (int s = n; s < b; ++s) {
            contexts[s] = 1;
            slots[s] = -1;
        }
        a.longs.clear();
        for (int s = 0; s < b; ++s) {
            a.longs.put(s < n ? tokens[s] : 0);
        }
        for (int s = 0; s < b; ++s) {
            a.longs.put(s < n ? positions[s] : 0);
        }
        a.longs.put(slots);
        for (int s = 0; s < b; ++s) {
            a.longs.put(s < n ? sampling.seeds[s] : 0);
        }
        for (int s = 0; s < b; ++s) {
            a.longs.put(s < n ? sampling.offsets[s] : 0);
        }
        a.ints.clear();
        a.ints.put(tables);
        a.ints.put(contexts);
        for (int s = 0; s <= b; ++s) {
            a.ints.put(s);
        }
        for (int s = 0; s < b; ++s) {
            a.ints.put(s < n ? sampling.topK[s] : 0);
        }
        a.floats.clear();
        for (int s = 0; s < b; ++s) {
            a.floats.put(s < n ? sampling.temperature[s] : 0f);
        }
        for (int s = 0; s < b; ++s) {
            a.floats.put(s < n ? sampling.topP[s] : 1f);
        }
    }

    /** The step's operator calls: eager, or the ones a graph captures. */
    private void run(DecodeStepArrays a) {
        StepWeights w = weights;
        FusedDecoderWeights fused = w.fused();
        DecoderConfig c = decoder.getConfig();
        StepOps.embedTokens(
                a.hidden,
                a.tokenIds,
                w.tokenTable,
                w.positionTable == null ? null : a.positions,
                w.positionTable,
                embedScale,
                false);
        for (int l = 0; l < c.getNumLayers(); ++l) {
            DecoderLayerOps.decoderLayer(
                    a.hidden,
                    a.positions,
                    cache,
                    l,
                    a.blockTables,
                    a.cuSeqlensQ,
                    a.contextLens,
                    a.slots,
                    1,
                    false,
                    fused.layer(l),
                    fused.options(l));
        }
        NDArray[] norm = w.headNorm();
        StepOps.decoderHead(
                a.logits,
                a.hidden,
                null,
                norm[0],
                norm[1],
                w.head,
                c.getArchitecture() == DecoderConfig.Architecture.GPT2
                        ? DecoderLayerOptions.Norm.LAYER
                        : DecoderLayerOptions.Norm.RMS,
                c.getNormEps(),
                c.getFinalSoftcap(),
                false);
        SamplingOps.sampleTokens(
                a.nextIds, a.logits, a.temperature, a.topK, a.topP, a.seeds, a.offsets);
    }

    /**
     * Returns the number of CUDA graphs captured so far (one per bucket used).
     *
     * @return the graphs
     */
    public int getNumGraphs() {
        int n = 0;
        for (Bucket b : buckets.values()) {
            n += b.graph == null ? 0 : 1;
        }
        return n;
    }

    /**
     * Returns the device memory this step holds beyond the model and the cache: every bucket's
     * arrays and every graph's arena.
     *
     * @return bytes
     */
    public long getMemoryBytes() {
        long bytes = 0;
        for (Bucket b : buckets.values()) {
            bytes += b.arrays.deviceBytes() + (b.graph == null ? 0 : b.graph.getArenaBytes());
        }
        return bytes;
    }

    /**
     * Returns the number of graph replays so far (one per captured step).
     *
     * @return replays
     */
    public long getGraphReplays() {
        return graphReplays;
    }

    /** Releases the least recently used buckets but {@code keep} while over the budget. */
    private void evictFor(long keep) {
        java.util.Iterator<Map.Entry<Long, Bucket>> it = buckets.entrySet().iterator();
        while (getMemoryBytes() > memoryBudget && it.hasNext()) {
            Map.Entry<Long, Bucket> e = it.next();
            if (e.getKey() != keep) {
                it.remove();
                close(e.getValue());
            }
        }
    }

    private static void close(Bucket b) {
        if (b.graph != null) {
            b.graph.close();
        }
        b.arrays.close();
    }

    private void closeBuckets() {
        List<Bucket> all = new ArrayList<>(buckets.values());
        buckets.clear();
        for (Bucket b : all) {
            close(b);
        }
    }

    @Override
    public void close() {
        closeBuckets();
        manager.close();
    }
}
