/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.jni.SupportedValues;

import java.util.List;

/**
 * A vLLM-style paged KV cache: per layer, a key cache and a value cache of shape {@code [numBlocks,
 * blockSize, Hkv, D]} on one device, shared by all sequences through their block tables ({@link
 * BlockManager}).
 *
 * <p>Sized either by a block count or by a memory budget ({@code numBlocks = budget / (2 · layers ·
 * blockSize · Hkv · D · bytes per element)}). The arrays are created zero-filled, live in the
 * cache's own manager, survive any {@link NDScope} and are freed by {@link #close} (idempotent).
 *
 * <p>The cache stores the model's data type ({@link KvCacheDtype#AUTO}, the default) or FP8
 * ({@link KvCacheDtype#FP8_E4M3} or {@link KvCacheDtype#FP8_E5M2}: uint8 arrays of e4m3 or e5m2
 * bytes, one byte per element, with each
 * layer's {@link KvCacheScales}, passed to every paged operator call through {@link
 * #getKeyScale}/{@link #getValueScale}). Keys, values and queries stay in the model's data type
 * ({@link #getDataType}) either way.
 *
 * <p>A step: give each sequence its new slots ({@link #allocate} for a prompt, {@link #appendSlots}
 * for decode tokens, which also performs copy-on-write of shared blocks), build the batch tensors
 * ({@link #prepare}), and per layer write the new K/V and run the paged kernels on the batch
 * ({@code AttentionOps.reshapeAndCache}, {@code pagedAttention}, {@code pagedPrefillAttention}
 * with this cache and the batch). The block tables are reachable read-only ({@link
 * #getBlockTable}): every change goes through this cache, so none skips the copy-on-write of
 * {@link #appendSlots}. Not thread-safe.
 */
public final class PagedKvCache implements AutoCloseable {

    /** The loaded library's head dims ({@link #supportedHeadDims}), read on first use. */
    private final NDManager manager;
    private final BlockManager blocks;
    private final NDArray[] keyCaches;
    private final NDArray[] valueCaches;
    private final int numKvHeads;
    private final int headDim;
    private final DataType dataType;
    private final KvCacheDtype cacheDtype;
    private final NDArray[] keyScales; // per layer float32 [1] or [Hkv]; null unless FP8
    private final NDArray[] valueScales;
    private boolean closed;

    private PagedKvCache(Builder b, int numBlocks) {
        this.numKvHeads = b.numKvHeads;
        this.headDim = b.headDim;
        this.dataType = b.dataType;
        this.cacheDtype = b.cacheDtype;
        this.blocks = new BlockManager(numBlocks, b.blockSize);
        this.manager = b.manager.newSubManager(b.manager.getDevice());
        manager.setName("paged kv cache");
        Shape shape = new Shape(numBlocks, b.blockSize, b.numKvHeads, b.headDim);
        DataType storage = b.cacheDtype.storageType(b.dataType);
        keyCaches = new NDArray[b.numLayers];
        valueCaches = new NDArray[b.numLayers];
        boolean fp8 = b.cacheDtype.isFp8();
        KvCacheScales scales = b.scales == null ? KvCacheScales.unit() : b.scales;
        keyScales = fp8 ? new NDArray[b.numLayers] : null;
        valueScales = fp8 ? new NDArray[b.numLayers] : null;
        for (int l = 0; l < b.numLayers; ++l) {
            // Zero bytes are +0 in e4m3 and e5m2: a fresh FP8 cache reads as zeros like a float one.
            keyCaches[l] = manager.zeros(shape, storage);
            valueCaches[l] = manager.zeros(shape, storage);
            NDScope.unregister(keyCaches[l], valueCaches[l]);
            if (fp8) {
                keyScales[l] = manager.create(scales.keyScales(l));
                valueScales[l] = manager.create(scales.valueScales(l));
                NDScope.unregister(keyScales[l], valueScales[l]);
            }
        }
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
     * Returns the head dims the loaded library's paged attention operators take; {@link
     * Builder#build()} rejects others. A library that exports {@code paged.max_head_dim} takes
     * every head dim from 1 to that maximum; an older one only its compiled list {@code
     * paged.head_dims} (64, 80, 96, 128, 256). Read from the library ({@code
     * native-ops/src/paged/paged_params.h}), never restated in Java.
     *
     * @return the head dims, ascending
     */
    public static int[] supportedHeadDims() {
        return PagedKernelSupport.headDims();
    }

    /**
     * Returns the block sizes the paged attention kernels take, the native library's one list;
     * {@link Builder#build()} rejects others.
     *
     * @return the block sizes, ascending
     */
    public static int[] supportedBlockSizes() {
        return PagedKernelSupport.blockSizes();
    }

    /**
     * Returns the smallest supported head dim that holds {@code headDim}: {@code headDim} itself
     * wherever the library takes it (every head dim up to 256 since issue 15), else the next one
     * up of an older library's list, to which a model stores its K/V zero-padded (zeros add
     * nothing to {@code q·k}; the padded output columns are dropped).
     *
     * @param headDim the model's head dim, {@code >= 1}
     * @return the cache head dim
     * @throws IllegalArgumentException if {@code headDim} is above every supported head dim
     */
    public static int paddedHeadDim(int headDim) {
        return PagedKernelSupport.paddedHeadDim(headDim);
    }

    /**
     * Returns the bytes one block takes over all layers, keys and values.
     *
     * @param numLayers the layers
     * @param blockSize the tokens per block
     * @param numKvHeads the KV heads
     * @param headDim the head dim
     * @param dataType the element type of the cache arrays ({@link KvCacheDtype#storageType})
     * @return bytes per block
     */
    public static long bytesPerBlock(
            int numLayers, int blockSize, int numKvHeads, int headDim, DataType dataType) {
        return 2L * numLayers * blockSize * numKvHeads * headDim * dataType.getNumOfBytes();
    }

    /**
     * Returns a sequence's block table, read-only: the blocks change only through this cache
     * ({@link #appendSlots} copies a shared partial block before writing to it), never around it.
     *
     * @param sequenceId the sequence
     * @return its table
     * @throws IllegalArgumentException if the sequence is unknown
     */
    public BlockTable getBlockTable(long sequenceId) {
        return blocks.getTable(sequenceId);
    }

    /**
     * Returns the blocks {@code numTokens} tokens occupy.
     *
     * @param numTokens the tokens
     * @return {@code ceil(numTokens / blockSize)}
     */
    public int blocksFor(int numTokens) {
        return blocks.blocksFor(numTokens);
    }

    /**
     * Returns how many leading tokens of {@code tokens[0 .. maxTokens)} the prefix index holds
     * ({@link BlockManager#findCachedPrefix}); changes nothing.
     *
     * @param tokens the token ids
     * @param maxTokens how many leading tokens may be shared, in {@code [0, tokens.length]}
     * @return the tokens that would be shared, a multiple of the block size
     */
    public int findCachedPrefix(int[] tokens, int maxTokens) {
        return blocks.findCachedPrefix(tokens, maxTokens);
    }

    /**
     * Returns the number of blocks in the prefix index.
     *
     * @return the indexed blocks
     */
    public int getNumIndexedBlocks() {
        return blocks.getPrefixCache().size();
    }

    /**
     * Returns the key cache of a layer, {@code [numBlocks, blockSize, Hkv, D]}.
     *
     * @param layer the layer
     * @return its key cache
     */
    public NDArray getKeyCache(int layer) {
        checkOpen();
        return keyCaches[layer];
    }

    /**
     * Returns the value cache of a layer, {@code [numBlocks, blockSize, Hkv, D]}.
     *
     * @param layer the layer
     * @return its value cache
     */
    public NDArray getValueCache(int layer) {
        checkOpen();
        return valueCaches[layer];
    }

    /**
     * Returns the number of layers.
     *
     * @return the layers
     */
    public int getNumLayers() {
        return keyCaches.length;
    }

    /**
     * Returns the number of blocks.
     *
     * @return numBlocks
     */
    public int getNumBlocks() {
        return blocks.getAllocator().getNumBlocks();
    }

    /**
     * Returns the tokens per block.
     *
     * @return blockSize
     */
    public int getBlockSize() {
        return blocks.getBlockSize();
    }

    /**
     * Returns the KV heads.
     *
     * @return Hkv
     */
    public int getNumKvHeads() {
        return numKvHeads;
    }

    /**
     * Returns the head dim of the cache.
     *
     * @return D
     */
    public int getHeadDim() {
        return headDim;
    }

    /**
     * Returns the model's data type: of the keys and values written and of the queries.
     *
     * @return float32 or float16
     */
    public DataType getDataType() {
        return dataType;
    }

    /**
     * Returns what the cache stores.
     *
     * @return AUTO (the model's data type), FP8_E4M3 or FP8_E5M2
     */
    public KvCacheDtype getCacheDtype() {
        return cacheDtype;
    }

    /**
     * Returns the element type of the key and value cache arrays.
     *
     * @return {@link #getDataType()}, or uint8 for an FP8 cache
     */
    public DataType getStorageType() {
        return cacheDtype.storageType(dataType);
    }

    /**
     * Returns the key scales of a layer, the {@code k_scale} of the paged operators.
     *
     * @param layer the layer
     * @return float32 {@code [1]} or {@code [Hkv]} for an FP8 cache, else null
     */
    public NDArray getKeyScale(int layer) {
        checkOpen();
        return keyScales == null ? null : keyScales[layer];
    }

    /**
     * Returns the value scales of a layer, the {@code v_scale} of the paged operators.
     *
     * @param layer the layer
     * @return float32 {@code [1]} or {@code [Hkv]} for an FP8 cache, else null
     */
    public NDArray getValueScale(int layer) {
        checkOpen();
        return valueScales == null ? null : valueScales[layer];
    }

    /**
     * Returns FP8 scales measured from this cache's contents: per layer (and per KV head if {@code
     * perHead}), {@code 2 · amax / 448} of the keys and of the values. Fill a float cache ({@link
     * KvCacheDtype#AUTO}) with representative prompts, then build the FP8 cache with these. The
     * factor 2 leaves room for later tokens beyond the calibration's largest value at the cost of
     * one of e4m3's 17 binades; a layer (head) that is all zeros gets scale 1.
     *
     * @param perHead per KV head ({@code [Hkv]}) rather than per tensor ({@code [1]})
     * @return the scales
     * @throws IllegalStateException if this cache is FP8 (its bytes are already quantised)
     */
    public KvCacheScales measureFp8Scales(boolean perHead) {
        checkOpen();
        if (cacheDtype != KvCacheDtype.AUTO) {
            throw new IllegalStateException(
                    "measureFp8Scales: expected a float cache (KvCacheDtype.AUTO), got "
                            + cacheDtype);
        }
        int layers = keyCaches.length;
        float[][] k = new float[layers][];
        float[][] v = new float[layers][];
        for (int l = 0; l < layers; ++l) {
            k[l] = fp8Scales(keyCaches[l], perHead);
            v[l] = fp8Scales(valueCaches[l], perHead);
        }
        return KvCacheScales.of(k, v);
    }

    /** {@code 2 · amax / 448} over all blocks and slots, per head or over everything. */
    private static float[] fp8Scales(NDArray cache, boolean perHead) {
        try (NDScope ignored = new NDScope()) {
            NDArray magnitude = cache.abs().toType(DataType.FLOAT32, false);
            // [numBlocks, blockSize, Hkv, D] -> [Hkv, rest]: the engine reduces one axis at once.
            NDArray amax =
                    perHead
                            ? magnitude
                                    .transpose(2, 0, 1, 3)
                                    .reshape(cache.getShape().get(2), -1)
                                    .max(new int[] {1})
                            : magnitude.max().reshape(1);
            float[] scales = amax.toFloatArray();
            for (int i = 0; i < scales.length; ++i) {
                scales[i] = scales[i] > 0 ? 2f * scales[i] / KvCacheScales.FP8_E4M3_MAX : 1f;
            }
            return scales;
        }
    }

    /**
     * Returns the device of the cache.
     *
     * @return the device
     */
    public Device getDevice() {
        return manager.getDevice();
    }

    /**
     * Returns the bytes of all key and value caches.
     *
     * @return the allocated bytes
     */
    public long getAllocatedBytes() {
        return getNumBlocks()
                * bytesPerBlock(
                        keyCaches.length, getBlockSize(), numKvHeads, headDim, getStorageType());
    }

    /**
     * Returns the number of free blocks.
     *
     * @return free blocks
     */
    public int getNumFreeBlocks() {
        return blocks.getNumFreeBlocks();
    }

    /**
     * Creates a new sequence with {@code numTokens} slots (its prompt).
     *
     * @param sequenceId the sequence id
     * @param numTokens the tokens
     * @throws OutOfBlocksException if too few blocks are free (nothing changed)
     */
    public void allocate(long sequenceId, int numTokens) {
        checkOpen();
        blocks.allocate(sequenceId, numTokens);
    }

    /**
     * Gives a sequence {@code n} more slots, copying a shared partial last block first.
     *
     * @param sequenceId the sequence
     * @param n the new tokens
     * @throws OutOfBlocksException if too few blocks are free (nothing changed)
     */
    public void appendSlots(long sequenceId, int n) {
        checkOpen();
        copyBlocks(blocks.appendSlots(sequenceId, n));
    }

    /**
     * Makes {@code childId} share all blocks of {@code parentId} (parallel sampling, shared
     * prefix); either one writing to a shared partial block later gets a private copy.
     *
     * @param parentId the existing sequence
     * @param childId the new sequence
     */
    public void fork(long parentId, long childId) {
        checkOpen();
        blocks.fork(parentId, childId);
    }

    /**
     * Creates a new sequence that starts with the indexed blocks holding the longest prefix of
     * {@code tokens[0 .. maxTokens)} (shared with the sequences that wrote them; see {@link
     * BlockManager#allocateWithCachedPrefix}).
     *
     * @param sequenceId the sequence id
     * @param tokens its token ids
     * @param maxTokens how many leading tokens may be shared
     * @return the shared tokens (a multiple of the block size); compute only the rest
     */
    public int allocateWithCachedPrefix(long sequenceId, int[] tokens, int maxTokens) {
        checkOpen();
        return blocks.allocateWithCachedPrefix(sequenceId, tokens, maxTokens);
    }

    /**
     * Enters a sequence's full blocks whose K/V is written in the prefix index ({@link
     * BlockManager#registerWritten}).
     *
     * @param sequenceId the sequence
     * @param tokens its token ids
     * @param numWritten how many leading tokens' K/V is written
     */
    public void registerWritten(long sequenceId, int[] tokens, int numWritten) {
        checkOpen();
        blocks.registerWritten(sequenceId, tokens, numWritten);
    }

    /**
     * Drops a sequence; its unshared blocks are free again.
     *
     * @param sequenceId the sequence
     */
    public void free(long sequenceId) {
        blocks.free(sequenceId);
    }

    /**
     * Builds the batch tensors for a step, on the cache's device.
     *
     * @param sequenceIds the sequences, in batch order
     * @param queryLens the new tokens of each (their slots given already)
     * @param arrays the manager the batch arrays attach to (its device must be the cache's)
     * @return the batch; close it after the step
     */
    public PagedBatch prepare(long[] sequenceIds, int[] queryLens, NDManager arrays) {
        checkOpen();
        return PagedBatch.of(blocks, sequenceIds, queryLens, arrays);
    }

    /**
     * Writes the host arrays of a decode step (one new token per sequence, its slot already
     * given by {@link #appendSlots}) into the caller's buffers, after the checks {@link #prepare}
     * runs: what a captured step copies into the arrays its graph reads. Row {@code s} of {@code
     * tables} ({@code width} entries) holds sequence s's blocks, zero-padded; rows past the
     * sequences are left as they are.
     *
     * @param sequenceIds the sequences, in batch order
     * @param width the tables' row length, at least every sequence's block count
     * @param tables {@code [>= numSeqs * width]}
     * @param contexts {@code [>= numSeqs]}: cached tokens, the new one included
     * @param slots {@code [>= numSeqs]}: each new token's slot
     * @throws IllegalArgumentException if a sequence is unknown, holds more than {@code width}
     *     blocks or has nothing cached
     */
    public void writeDecodeBatch(
            long[] sequenceIds, int width, int[] tables, int[] contexts, long[] slots) {
        checkOpen();
        PagedBatch.writeDecode(blocks, sequenceIds, width, tables, contexts, slots);
    }

    /**
     * Returns what the paged operators read for one layer in one step: the layer's caches and
     * scales with the batch. The batch must be this cache's ({@link #prepare}) and open: its block
     * tables, context lengths, query offsets and slots were then checked against this cache's
     * blocks once, when it was built, and the per-layer operators need not check them again.
     *
     * @param layer the layer, in {@code [0, getNumLayers())}
     * @param batch the step's batch
     * @return the layer's operands for the batch
     * @throws IllegalArgumentException if the layer is out of range, or the batch is another
     *     cache's or closed
     * @throws IllegalStateException if this cache is closed
     */
    public PagedOperands operands(int layer, PagedBatch batch) {
        checkOpen();
        if (batch == null || !batch.isOf(blocks)) {
            throw new IllegalArgumentException(
                    "batch: expected a PagedBatch prepared by this cache (PagedKvCache.prepare)");
        }
        if (batch.isClosed()) {
            throw new IllegalArgumentException("batch: the PagedBatch is closed");
        }
        if (layer < 0 || layer >= keyCaches.length) {
            throw new IllegalArgumentException(
                    "layer: expected a value in [0, " + keyCaches.length + "), got " + layer);
        }
        return new PagedOperands(
                keyCaches[layer],
                valueCaches[layer],
                keyScales == null ? null : keyScales[layer],
                valueScales == null ? null : valueScales[layer],
                cacheDtype == KvCacheDtype.FP8_E5M2,
                batch);
    }

    /**
     * Performs block copies in every layer's key and value cache (bytes as they are: an FP8
     * block's copy is exact, its layer's scales being the same for every block).
     *
     * @param copies the copies
     */
    public void copyBlocks(List<BlockCopy> copies) {
        for (BlockCopy copy : copies) {
            for (int l = 0; l < keyCaches.length; ++l) {
                copyBlock(keyCaches[l], copy);
                copyBlock(valueCaches[l], copy);
            }
        }
    }

    private static void copyBlock(NDArray cache, BlockCopy copy) {
        try (NDArray source = cache.get(new NDIndex("{}", copy.source()))) {
            cache.set(new NDIndex("{}", copy.destination()), source);
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("the paged KV cache is closed");
        }
    }

    /** Frees the caches; closing twice is harmless. */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            manager.close();
        }
    }

    /** Builds a {@link PagedKvCache}: the model's shape, then a block count or memory budget. */
    public static final class Builder {

        private NDManager manager;
        private int numLayers;
        private int numKvHeads;
        private int headDim;
        private int blockSize = 16;
        private int numBlocks;
        private long memoryBudget;
        private DataType dataType = DataType.FLOAT32;
        private KvCacheDtype cacheDtype = KvCacheDtype.AUTO;
        private KvCacheScales scales;

        Builder() {}

        /**
         * Sets the manager whose device holds the cache (required).
         *
         * @param manager the manager
         * @return this builder
         */
        public Builder setManager(NDManager manager) {
            this.manager = manager;
            return this;
        }

        /**
         * Sets the number of layers (required).
         *
         * @param numLayers the layers
         * @return this builder
         */
        public Builder setNumLayers(int numLayers) {
            this.numLayers = numLayers;
            return this;
        }

        /**
         * Sets the number of KV heads (required).
         *
         * @param numKvHeads Hkv
         * @return this builder
         */
        public Builder setNumKvHeads(int numKvHeads) {
            this.numKvHeads = numKvHeads;
            return this;
        }

        /**
         * Sets the head dim (required; one of {@link #supportedHeadDims()}, see {@link
         * #paddedHeadDim}).
         *
         * @param headDim D
         * @return this builder
         */
        public Builder setHeadDim(int headDim) {
            this.headDim = headDim;
            return this;
        }

        /**
         * Sets the tokens per block (default 16; one of {@link #supportedBlockSizes()}).
         *
         * @param blockSize the block size
         * @return this builder
         */
        public Builder optBlockSize(int blockSize) {
            this.blockSize = blockSize;
            return this;
        }

        /**
         * Sets the number of blocks (this or {@link #optMemoryBudget} is required).
         *
         * @param numBlocks the blocks
         * @return this builder
         */
        public Builder optNumBlocks(int numBlocks) {
            this.numBlocks = numBlocks;
            return this;
        }

        /**
         * Sizes the cache to at most this many bytes of keys and values.
         *
         * @param bytes the budget
         * @return this builder
         */
        public Builder optMemoryBudget(long bytes) {
            this.memoryBudget = bytes;
            return this;
        }

        /**
         * Sets the model's data type (default float32; float16 also): of the keys and values
         * written, the queries, and of the cache itself unless {@link #optCacheDtype} says FP8.
         *
         * @param dataType the type
         * @return this builder
         */
        public Builder optDataType(DataType dataType) {
            this.dataType = dataType;
            return this;
        }

        /**
         * Sets what the cache stores (default {@link KvCacheDtype#AUTO}: the model's data type).
         *
         * @param cacheDtype AUTO, FP8_E4M3 or FP8_E5M2
         * @return this builder
         */
        public Builder optCacheDtype(KvCacheDtype cacheDtype) {
            this.cacheDtype = cacheDtype;
            return this;
        }

        /**
         * Sets the scales of an FP8 cache (default {@link KvCacheScales#unit()}; see {@link
         * KvCacheScales} for how to pick them). Only for the FP8 cache dtypes.
         *
         * @param scales per layer, per tensor or per KV head
         * @return this builder
         */
        public Builder optScales(KvCacheScales scales) {
            this.scales = scales;
            return this;
        }

        /**
         * Builds the cache.
         *
         * @return the cache
         */
        public PagedKvCache build() {
            if (manager == null) {
                throw new IllegalArgumentException("PagedKvCache: setManager is required");
            }
            requirePositive(numLayers, "setNumLayers");
            requirePositive(numKvHeads, "setNumKvHeads");
            requirePositive(headDim, "setHeadDim");
            requirePositive(blockSize, "optBlockSize");
            // The kernels' own lists and wording, so a cache is never built that every paged
            // attention call would then reject.
            int[] headDims = supportedHeadDims();
            requireIn(
                    headDim,
                    headDims,
                    PagedKernelSupport.describeHeadDims(headDims),
                    "setHeadDim",
                    "a head dim D");
            int[] blockSizes = supportedBlockSizes();
            requireIn(
                    blockSize,
                    blockSizes,
                    SupportedValues.format(blockSizes),
                    "optBlockSize",
                    "a block size");
            if (dataType != DataType.FLOAT32 && dataType != DataType.FLOAT16) {
                throw new IllegalArgumentException(
                        "PagedKvCache: optDataType: expected float32 or float16, got " + dataType);
            }
            if (cacheDtype == null) {
                throw new IllegalArgumentException(
                        "PagedKvCache: optCacheDtype: expected AUTO, FP8_E4M3 or FP8_E5M2, got"
                                + " null");
            }
            if (cacheDtype.isFp8()) {
                if (scales != null) {
                    scales.checkFits("PagedKvCache: optScales", numLayers, numKvHeads);
                }
            } else if (scales != null) {
                // Scales on a float cache would be silently unused: the operators reject them.
                throw new IllegalArgumentException(
                        "PagedKvCache: optScales: scales apply to an FP8 cache, the cache"
                                + " dtype is "
                                + cacheDtype);
            }
            if ((numBlocks > 0) == (memoryBudget > 0)) {
                throw new IllegalArgumentException(
                        "PagedKvCache: exactly one of optNumBlocks and optMemoryBudget is"
                                + " required");
            }
            int blocks = numBlocks;
            if (memoryBudget > 0) {
                long perBlock =
                        bytesPerBlock(
                                numLayers,
                                blockSize,
                                numKvHeads,
                                headDim,
                                cacheDtype.storageType(dataType));
                long fit = memoryBudget / perBlock;
                if (fit < 1) {
                    throw new IllegalArgumentException(
                            "PagedKvCache: optMemoryBudget: "
                                    + memoryBudget
                                    + " bytes hold no block of "
                                    + perBlock
                                    + " bytes");
                }
                blocks = (int) Math.min(Integer.MAX_VALUE, fit);
            }
            return new PagedKvCache(this, blocks);
        }

        private static void requireIn(
                int value, int[] supported, String described, String setter, String what) {
            for (int s : supported) {
                if (s == value) {
                    return;
                }
            }
            throw new IllegalArgumentException(
                    "PagedKvCache: "
                            + setter
                            + ": expected "
                            + what
                            + " in "
                            + described
                            + ", got "
                            + value);
        }

        private static void requirePositive(int value, String setter) {
            if (value < 1) {
                throw new IllegalArgumentException(
                        "PagedKvCache: " + setter + " is required and must be >= 1, got " + value);
            }
        }
    }
}
