/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import ai.djl.ndarray.NDArray;

/**
 * What the paged operators read for one layer of a {@link PagedKvCache} in one step: the layer's
 * key and value caches and FP8 scales, and the step's {@link PagedBatch}. Made only by {@link
 * PagedKvCache#operands}, which checks that the batch was prepared by that cache and is open; the
 * batch's index arrays were checked against the cache's blocks when it was built, so an operator
 * given these passes {@code check_indices = false} and reads nothing back from the device.
 *
 * <p>Holds references, not copies: valid while the cache and the batch are open.
 */
public final class PagedOperands {

    private final NDArray keyCache;
    private final NDArray valueCache;
    private final NDArray keyScale;
    private final NDArray valueScale;
    private final boolean fp8E5m2;
    private final PagedBatch batch;

    PagedOperands(
            NDArray keyCache,
            NDArray valueCache,
            NDArray keyScale,
            NDArray valueScale,
            boolean fp8E5m2,
            PagedBatch batch) {
        this.keyCache = keyCache;
        this.valueCache = valueCache;
        this.keyScale = keyScale;
        this.valueScale = valueScale;
        this.fp8E5m2 = fp8E5m2;
        this.batch = batch;
    }

    /**
     * Returns the layer's key cache.
     *
     * @return {@code [numBlocks, blockSize, Hkv, D]}, the model's dtype or uint8 (FP8)
     */
    public NDArray getKeyCache() {
        return keyCache;
    }

    /**
     * Returns the layer's value cache.
     *
     * @return {@code [numBlocks, blockSize, Hkv, D]}, the model's dtype or uint8 (FP8)
     */
    public NDArray getValueCache() {
        return valueCache;
    }

    /**
     * Returns the layer's key scales, the operators' {@code k_scale}.
     *
     * @return float32 {@code [1]} or {@code [Hkv]} for an FP8 cache, else null
     */
    public NDArray getKeyScale() {
        return keyScale;
    }

    /**
     * Returns the layer's value scales, the operators' {@code v_scale}.
     *
     * @return float32 {@code [1]} or {@code [Hkv]} for an FP8 cache, else null
     */
    public NDArray getValueScale() {
        return valueScale;
    }

    /**
     * Returns whether the cache's uint8 arrays hold e5m2 bytes, the operators' {@code fp8_e5m2}.
     *
     * @return true for a {@link KvCacheDtype#FP8_E5M2} cache
     */
    public boolean isFp8E5m2() {
        return fp8E5m2;
    }

    /**
     * Returns the step's batch: its block tables, context lengths, slots and query offsets.
     *
     * @return the batch, one of the cache's and open when these operands were made
     */
    public PagedBatch getBatch() {
        return batch;
    }
}
