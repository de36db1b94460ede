/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.KvCacheScales;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.ContiguousAttention;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DecoderConfig;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Text generation as a DJL {@link ai.djl.nn.Block}: a {@link Decoder} with the settings of how it
 * generates. The block of the model zoo's decoder models ({@link DecoderModels}).
 *
 * <p>{@link #forward} takes one 1-D int32 or int64 array of prompt token ids per request ({@code
 * [S_i]}, any number of requests) and returns one 1-D int32 array of generated ids per request
 * ({@code [N_i]}, {@code 1 <= N_i <= maxNewTokens}, the EOS token included when it stopped
 * generation), in request order. How:
 *
 * <ul>
 *   <li>{@link Attention#PAGED} (default): all requests go through one {@link
 *       ContinuousBatchingScheduler} over a {@link PagedKvCache} made for the call (its blocks
 *       {@link Builder#optNumBlocks}, or by default exactly what the call's requests can use, so
 *       nothing is preempted) and freed after it;
 *   <li>{@link Attention#FLASH} and {@link Attention#STOCK}: each request alone over a contiguous
 *       KV cache ({@link Decoder#forward}, the {@code TextGenerator} protocol) with flash attention
 *       or stock DJL ops: the reference paths.
 * </ul>
 *
 * <p>Every request generates with the same {@link GenerationConfig} (sampling included: the same
 * seed), so a request's tokens depend only on its prompt, not on the batch it came in. Prompts are
 * refused, not truncated: an empty prompt, a token id outside the vocabulary, or a prompt of {@code
 * maxPositions} tokens or more (it would leave no position to generate into) fail the whole call
 * with an {@link IllegalArgumentException} naming the request. Generation stops at the model's
 * max positions (finish reason {@code MAX_POSITIONS}).
 *
 * <p>A call builds its own cache and scheduler, so concurrent calls are safe (each holds its own
 * blocks). An engine that runs one long-lived scheduler (streaming, cancellation) builds it with
 * {@link #newCache} and {@link #newScheduler} from the same settings.
 */
public final class GenerationBlock extends AbstractBlock {

    /** How the block attends. */
    public enum Attention {
        /** Paged KV cache and the continuous-batching scheduler. */
        PAGED,
        /** {@code flash_attention} over a contiguous cache, one request at a time. */
        FLASH,
        /** Stock DJL ops over a contiguous cache, one request at a time. */
        STOCK
    }

    private final Decoder decoder;
    /** The decoder with this block's contiguous attention (FLASH or STOCK paths). */
    private final Decoder contiguous;
    private final Attention attention;
    private final PrefillAttention prefill;
    private final GenerationConfig generationConfig;
    private final int maxBatchSize;
    private final int blockSize;
    private final int numBlocks;
    private final boolean prefixSharing;
    private final KvCacheDtype kvCacheDtype;
    private final KvCacheScales kvCacheScales;

    private GenerationBlock(Builder b) {
        super((byte) 1);
        decoder = b.decoder;
        attention = b.attention;
        prefill = b.prefill;
        generationConfig = b.generationConfig;
        maxBatchSize = b.maxBatchSize;
        blockSize = b.blockSize;
        numBlocks = b.numBlocks;
        prefixSharing = b.prefixSharing;
        kvCacheDtype = b.kvCacheDtype;
        kvCacheScales = b.kvCacheScales;
        addChildBlock("decoder", decoder);
        // A view over the same weights: the decoder itself is left as it was given.
        contiguous =
                decoder.withContiguousAttention(
                        attention == Attention.STOCK
                                ? ContiguousAttention.STOCK
                                : ContiguousAttention.FLASH);
    }

    /**
     * Returns a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns the decoder.
     *
     * @return the decoder
     */
    public Decoder getDecoder() {
        return decoder;
    }

    /**
     * Returns how the block attends.
     *
     * @return the attention
     */
    public Attention getAttention() {
        return attention;
    }

    /**
     * Returns the prefill kernel of the paged path.
     *
     * @return FLASH or PAGED
     */
    public PrefillAttention getPrefillAttention() {
        return prefill;
    }

    /**
     * Returns the configuration every request generates with.
     *
     * @return the generation configuration
     */
    public GenerationConfig getGenerationConfig() {
        return generationConfig;
    }

    /**
     * Returns the end-of-sequence token id of the generation configuration.
     *
     * @return the id, or -1 for none
     */
    public long getEosTokenId() {
        return generationConfig.getEosTokenId();
    }

    /**
     * Returns the most sequences the scheduler runs at once.
     *
     * @return the max batch size
     */
    public int getMaxBatchSize() {
        return maxBatchSize;
    }

    /**
     * Returns the tokens per KV cache block.
     *
     * @return the block size
     */
    public int getBlockSize() {
        return blockSize;
    }

    /**
     * Returns the cache blocks of a call, or 0 when each call's cache is sized to its requests.
     *
     * @return the blocks, or 0
     */
    public int getNumBlocks() {
        return numBlocks;
    }

    /**
     * Returns whether the scheduler shares identical prompt prefixes between requests.
     *
     * @return true if prefixes are shared
     */
    public boolean isPrefixSharing() {
        return prefixSharing;
    }

    /**
     * Returns what the paged KV cache stores.
     *
     * @return AUTO (the model's data type), FP8_E4M3 or FP8_E5M2
     */
    public KvCacheDtype getKvCacheDtype() {
        return kvCacheDtype;
    }

    /**
     * Returns the scales of an FP8 cache.
     *
     * @return the scales, or null (unit scales for FP8; none for AUTO)
     */
    public KvCacheScales getKvCacheScales() {
        return kvCacheScales;
    }

    /**
     * Returns a paged KV cache for this decoder with this block's block size and cache dtype.
     *
     * @param manager the manager whose device holds the cache
     * @param blocks the number of blocks
     * @return the cache; the caller closes it
     */
    public PagedKvCache newCache(NDManager manager, int blocks) {
        return decoder.newCacheBuilder(manager)
                .optBlockSize(blockSize)
                .optNumBlocks(blocks)
                .optCacheDtype(kvCacheDtype)
                .optScales(kvCacheScales)
                .build();
    }

    /**
     * Returns a scheduler over a cache with this block's settings (max batch size, prefill kernel,
     * prefix sharing).
     *
     * @param cache an empty cache from {@link #newCache}
     * @return the scheduler
     */
    public ContinuousBatchingScheduler newScheduler(PagedKvCache cache) {
        return ContinuousBatchingScheduler.builder()
                .setDecoder(decoder)
                .setCache(cache)
                .optMaxBatchSize(maxBatchSize)
                .optPrefillAttention(prefill)
                .optPrefixSharing(prefixSharing)
                .build();
    }

    /**
     * Returns the cache blocks that a set of requests can use at most, each running to its max new
     * tokens or the model's max positions.
     *
     * @param prompts the prompts
     * @return the blocks
     */
    public int blocksFor(List<int[]> prompts) {
        int maxPositions = decoder.getConfig().getMaxPositions();
        long total = 0;
        for (int[] p : prompts) {
            int longest =
                    (int)
                            Math.min(
                                    (long) p.length + generationConfig.getMaxNewTokens(),
                                    maxPositions);
            total += (longest + blockSize - 1) / blockSize;
        }
        return Math.toIntExact(Math.max(1, total));
    }

    /**
     * Generates a continuation of each prompt with this block's settings.
     *
     * @param prompts the prompt token ids of each request
     * @param manager the manager whose device runs the generation (temporaries are freed)
     * @return the result of each request, in request order
     * @throws IllegalArgumentException if a prompt is empty, holds an id outside the vocabulary or
     *     is too long for the model's max positions
     */
    public List<GenerationResult> generate(List<int[]> prompts, NDManager manager) {
        for (int r = 0; r < prompts.size(); ++r) {
            checkPrompt(r, prompts.get(r));
        }
        if (prompts.isEmpty()) {
            return List.of();
        }
        if (attention != Attention.PAGED) {
            List<GenerationResult> results = new ArrayList<>(prompts.size());
            for (int r = 0; r < prompts.size(); ++r) {
                results.add(generateContiguous(r, prompts.get(r), manager));
            }
            return results;
        }
        int blocks = numBlocks > 0 ? numBlocks : blocksFor(prompts);
        try (NDManager m = manager.newSubManager();
                PagedKvCache cache = newCache(m, blocks)) {
            ContinuousBatchingScheduler scheduler = newScheduler(cache);
            long[] ids = new long[prompts.size()];
            for (int r = 0; r < ids.length; ++r) {
                ids[r] = scheduler.submit(prompts.get(r), generationConfig);
            }
            Map<Long, GenerationResult> done = scheduler.runToCompletion();
            List<GenerationResult> results = new ArrayList<>(ids.length);
            for (long id : ids) {
                results.add(done.get(id));
            }
            return results;
        }
    }

    private void checkPrompt(int r, int[] prompt) {
        if (prompt.length == 0) {
            throw new IllegalArgumentException(
                    "prompt of request " + r + ": expected at least one token, got none");
        }
        int vocab = decoder.getConfig().getVocabSize();
        for (int t : prompt) {
            if (t < 0 || t >= vocab) {
                throw new IllegalArgumentException(
                        "prompt of request "
                                + r
                                + ": expected token ids in [0, "
                                + vocab
                                + "), got "
                                + t);
            }
        }
        int maxPositions = decoder.getConfig().getMaxPositions();
        if (prompt.length >= maxPositions) {
            throw new IllegalArgumentException(
                    "prompt of request "
                            + r
                            + ": "
                            + prompt.length
                            + " tokens leave no room under the model's max positions "
                            + maxPositions
                            + " (prompts are refused, not truncated)");
        }
    }

    /**
     * One request over a contiguous cache: a prefill forward, then one forward per new token with
     * the previous step's keys and values.
     */
    private GenerationResult generateContiguous(long id, int[] prompt, NDManager parent) {
        TokenSampler sampler = new TokenSampler(generationConfig);
        int maxPositions = decoder.getConfig().getMaxPositions();
        int[] tokens = prompt.clone();
        int[] fresh = prompt;
        GenerationResult.FinishReason reason;
        try (NDManager request = parent.newSubManager()) {
            NDManager carry = request.newSubManager();
            NDList past = null;
            while (true) {
                int start = tokens.length - fresh.length;
                NDManager next = request.newSubManager();
                float[] row;
                try (NDManager step = request.newSubManager()) {
                    long[] ids = Arrays.stream(fresh).asLongStream().toArray();
                    // One request, nothing padded: no attention mask (the decoder then needs
                    // no mask to decide on, and attends with flash_attention on FLASH).
                    NDList in =
                            new NDList(
                                    step.create(ids, new Shape(1, ids.length)),
                                    step.arange(start, tokens.length, 1, DataType.INT64)
                                            .reshape(1, ids.length));
                    if (past != null) {
                        in.addAll(past);
                    }
                    NDList out = contiguous.forward(null, in, false);
                    row = out.get(0).get("0, -1, :").toFloatArray();
                    past = out.subNDList(1);
                    past.attach(next);
                }
                carry.close();
                carry = next;
                int token = sampler.next(row);
                tokens = Arrays.copyOf(tokens, tokens.length + 1);
                tokens[tokens.length - 1] = token;
                int generated = tokens.length - prompt.length;
                long eos = generationConfig.getEosTokenId();
                if (eos >= 0 && token == eos) {
                    reason = GenerationResult.FinishReason.EOS;
                } else if (generated == generationConfig.getMaxNewTokens()) {
                    reason = GenerationResult.FinishReason.LENGTH;
                } else if (tokens.length >= maxPositions) {
                    reason = GenerationResult.FinishReason.MAX_POSITIONS;
                } else {
                    fresh = new int[] {token};
                    continue;
                }
                break;
            }
            carry.close();
        }
        return new GenerationResult(
                id,
                prompt.clone(),
                Arrays.copyOfRange(tokens, prompt.length, tokens.length),
                reason,
                0);
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        List<int[]> prompts = new ArrayList<>(inputs.size());
        for (int r = 0; r < inputs.size(); ++r) {
            NDArray a = inputs.get(r);
            if (a.getShape().dimension() != 1
                    || (a.getDataType() != DataType.INT32 && a.getDataType() != DataType.INT64)) {
                throw new IllegalArgumentException(
                        "input "
                                + r
                                + ": expected 1-D int32 or int64 prompt ids, got "
                                + a.getDataType()
                                + " "
                                + a.getShape());
            }
            prompts.add(a.toType(DataType.INT32, false).toIntArray());
        }
        NDManager manager = inputs.isEmpty() ? null : inputs.get(0).getManager();
        NDList out = new NDList(inputs.size());
        for (GenerationResult r : generate(prompts, manager)) {
            out.add(manager.create(r.generated()));
        }
        return out;
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        // The lengths depend on when each request stops: unknown (-1) up to maxNewTokens.
        Shape[] out = new Shape[inputShapes.length];
        Arrays.fill(out, new Shape(-1));
        return out;
    }

    /** Builds a {@link GenerationBlock}. */
    public static final class Builder {

        private Decoder decoder;
        private Attention attention = Attention.PAGED;
        private PrefillAttention prefill = PrefillAttention.FLASH;
        private GenerationConfig generationConfig;
        private int maxBatchSize = 32;
        private int blockSize = 16;
        private int numBlocks;
        private boolean prefixSharing = true;
        private KvCacheDtype kvCacheDtype = KvCacheDtype.AUTO;
        private KvCacheScales kvCacheScales;

        Builder() {}

        /**
         * Sets the decoder (required).
         *
         * @param decoder the decoder
         * @return this builder
         */
        public Builder setDecoder(Decoder decoder) {
            this.decoder = decoder;
            return this;
        }

        /**
         * Sets how every request generates (required): max new tokens, EOS, greedy or sampling.
         *
         * @param generationConfig the configuration
         * @return this builder
         */
        public Builder setGenerationConfig(GenerationConfig generationConfig) {
            this.generationConfig = generationConfig;
            return this;
        }

        /**
         * Sets how the block attends (default PAGED).
         *
         * @param attention PAGED, FLASH or STOCK
         * @return this builder
         */
        public Builder optAttention(Attention attention) {
            this.attention = attention;
            return this;
        }

        /**
         * Sets the prefill kernel of the paged path (default FLASH).
         *
         * @param prefill FLASH or PAGED
         * @return this builder
         */
        public Builder optPrefillAttention(PrefillAttention prefill) {
            this.prefill = prefill;
            return this;
        }

        /**
         * Sets the most sequences running at once on the paged path (default 32).
         *
         * @param maxBatchSize at least 1
         * @return this builder
         */
        public Builder optMaxBatchSize(int maxBatchSize) {
            this.maxBatchSize = maxBatchSize;
            return this;
        }

        /**
         * Sets the tokens per cache block (default 16).
         *
         * @param blockSize a block size the paged kernels take
         * @return this builder
         */
        public Builder optBlockSize(int blockSize) {
            this.blockSize = blockSize;
            return this;
        }

        /**
         * Sets the blocks of each call's cache (default 0: what the call's requests can use, so
         * none is preempted). Fewer blocks make the scheduler preempt and recompute.
         *
         * @param numBlocks 0, or at least the blocks of the longest request
         * @return this builder
         */
        public Builder optNumBlocks(int numBlocks) {
            this.numBlocks = numBlocks;
            return this;
        }

        /**
         * Shares identical prompt prefixes between requests of a call (default true).
         *
         * @param prefixSharing whether to share
         * @return this builder
         */
        public Builder optPrefixSharing(boolean prefixSharing) {
            this.prefixSharing = prefixSharing;
            return this;
        }

        /**
         * Sets what the paged KV cache stores (default AUTO: the model's data type; FP8_E4M3:
         * one byte per element, see {@link KvCacheDtype}).
         *
         * @param kvCacheDtype AUTO, FP8_E4M3 or FP8_E5M2
         * @return this builder
         */
        public Builder optKvCacheDtype(KvCacheDtype kvCacheDtype) {
            this.kvCacheDtype = kvCacheDtype;
            return this;
        }

        /**
         * Sets the scales of an FP8 cache (default {@link KvCacheScales#unit()}).
         *
         * @param kvCacheScales the scales, or null for the default
         * @return this builder
         */
        public Builder optKvCacheScales(KvCacheScales kvCacheScales) {
            this.kvCacheScales = kvCacheScales;
            return this;
        }

        /**
         * Builds the block.
         *
         * @return the block
         */
        public GenerationBlock build() {
            if (decoder == null || generationConfig == null) {
                throw new IllegalArgumentException(
                        "GenerationBlock: setDecoder and setGenerationConfig are required");
            }
            if (maxBatchSize < 1) {
                throw new IllegalArgumentException(
                        "GenerationBlock: optMaxBatchSize: expected >= 1, got " + maxBatchSize);
            }
            if (blockSize < 1) {
                throw new IllegalArgumentException(
                        "GenerationBlock: optBlockSize: expected >= 1, got " + blockSize);
            }
            if (numBlocks < 0) {
                throw new IllegalArgumentException(
                        "GenerationBlock: optNumBlocks: expected >= 0, got " + numBlocks);
            }
            if (kvCacheDtype == null) {
                throw new IllegalArgumentException(
                        "GenerationBlock: optKvCacheDtype: expected AUTO, FP8_E4M3 or FP8_E5M2,"
                                + " got null");
            }
            if (kvCacheScales != null && !kvCacheDtype.isFp8()) {
                throw new IllegalArgumentException(
                        "GenerationBlock: optKvCacheScales: scales apply to an FP8 cache,"
                                + " the cache dtype is "
                                + kvCacheDtype);
            }
            if (kvCacheScales != null) {
                // Checked here, not at the first call's cache, so a bad setting fails the load.
                DecoderConfig c = decoder.getConfig();
                kvCacheScales.checkFits(
                        "GenerationBlock: optKvCacheScales", c.getNumLayers(), c.getNumKvHeads());
            }
            return new GenerationBlock(this);
        }
    }
}
