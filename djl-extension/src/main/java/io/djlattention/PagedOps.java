/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.NativeArrays.optionalArray;
import static io.djlattention.NativeArrays.pytorchArray;

import ai.djl.ndarray.NDArray;
import ai.djl.pytorch.engine.PtNDArray;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.paged.PagedOperands;
import java.util.Objects;

/**
 * The paged family behind {@link AttentionOps}, which documents it: {@code reshape_and_cache},
 * {@code paged_attention} and {@code paged_prefill_attention}, each on arrays the caller keeps
 * (indices checked by the operator, one device-to-host copy per call) or on a {@link
 * PagedKvCache} and one of its {@link PagedBatch}es (checked once when the batch was built, so
 * the per-layer calls pass {@code check_indices = false}).
 */
final class PagedOps {

    private PagedOps() {}

    static void reshapeAndCache(
            NDArray key,
            NDArray value,
            NDArray keyCache,
            NDArray valueCache,
            NDArray slotMapping,
            NDArray kScale,
            NDArray vScale) {
        reshapeAndCache(
                key, value, keyCache, valueCache, slotMapping, true, kScale, vScale, false);
    }

    static void reshapeAndCache(
            NDArray key, NDArray value, PagedKvCache cache, int layer, PagedBatch batch) {
        PagedOperands operands = cache.operands(layer, batch);
        reshapeAndCache(
                key,
                value,
                operands.getKeyCache(),
                operands.getValueCache(),
                batch.getSlotMapping(),
                false,
                operands.getKeyScale(),
                operands.getValueScale(),
                operands.isFp8E5m2());
    }

    static NDArray pagedAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray contextLens,
            int maxContextLen,
            PagedAttentionOptions options) {
        Objects.requireNonNull(options, "options must not be null");
        return call(
                query,
                keyCache,
                valueCache,
                blockTables,
                null,
                contextLens,
                maxContextLen,
                options,
                true,
                options.getKeyScale(),
                options.getValueScale(),
                null,
                null,
                false);
    }

    static NDArray pagedAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            PagedAttentionOptions options) {
        PagedOperands operands = cacheOperands(cache, layer, batch, options);
        return call(
                query,
                operands.getKeyCache(),
                operands.getValueCache(),
                batch.getBlockTables(),
                null,
                batch.getContextLens(),
                batch.getMaxContextLen(),
                options,
                false,
                operands.getKeyScale(),
                operands.getValueScale(),
                null,
                null,
                operands.isFp8E5m2());
    }

    static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            int maxSeqlenQ,
            PagedAttentionOptions options) {
        Objects.requireNonNull(options, "options must not be null");
        return call(
                query,
                keyCache,
                valueCache,
                blockTables,
                cuSeqlensQ,
                contextLens,
                maxSeqlenQ,
                options,
                true,
                options.getKeyScale(),
                options.getValueScale(),
                null,
                null,
                false);
    }

    static NDArray pagedPrefillAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            PagedAttentionOptions options) {
        return pagedPrefillAttention(query, null, null, cache, layer, batch, options);
    }

    static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray key,
            NDArray value,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            PagedAttentionOptions options) {
        PagedOperands operands = cacheOperands(cache, layer, batch, options);
        if ((key == null) != (value == null)) {
            throw new IllegalArgumentException(
                    (key == null ? "key" : "value")
                            + " must not be null when "
                            + (key == null ? "value" : "key")
                            + " is given: the chunks' own keys and values go together");
        }
        return call(
                query,
                operands.getKeyCache(),
                operands.getValueCache(),
                batch.getBlockTables(),
                batch.getCuSeqlensQ(),
                batch.getContextLens(),
                batch.getMaxQueryLen(),
                options,
                false,
                operands.getKeyScale(),
                operands.getValueScale(),
                key,
                value,
                operands.isFp8E5m2());
    }

    /**
     * One call of {@code paged_attention} ({@code cuSeqlensQ} null: one query row per sequence)
     * or {@code paged_prefill_attention} (the query rows of each sequence's chunk, and the
     * chunks' own keys and values when {@code key} and {@code value} are not null).
     */
    private static NDArray call(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            int maxLen,
            PagedAttentionOptions options,
            boolean checkIndices,
            NDArray kScale,
            NDArray vScale,
            NDArray key,
            NDArray value,
            boolean fp8E5m2) {
        PtNDArray ptQuery = pytorchArray(query, "query");
        OperatorCall call =
                OperatorCall.of(
                                cuSeqlensQ == null
                                        ? Operator.PAGED_ATTENTION
                                        : Operator.PAGED_PREFILL_ATTENTION)
                        .tensor(ptQuery)
                        .tensor(pytorchArray(keyCache, "keyCache"))
                        .tensor(pytorchArray(valueCache, "valueCache"))
                        .tensor(pytorchArray(blockTables, "blockTables"));
        if (cuSeqlensQ != null) {
            call.tensor(pytorchArray(cuSeqlensQ, "cuSeqlensQ"));
        }
        call.tensor(pytorchArray(contextLens, "contextLens"));
        withOptions(call, query, maxLen, options, checkIndices, kScale, vScale);
        if (cuSeqlensQ != null) {
            // paged_prefill_attention's causal, window_right (a decode query is the last
            // position of its sequence: it sees every key either way), then the chunks' own rows.
            call.boolArg(options.isCausal())
                    .intArg(options.getWindowRight())
                    .optionalTensor(optionalArray(key, "key"))
                    .optionalTensor(optionalArray(value, "value"));
        }
        return call.boolArg(fp8E5m2).invoke(ptQuery.getManager())[0];
    }

    /**
     * The arguments both paged attention schemas continue with: {@code scale, max_len,
     * alibi_slopes?, check_indices, k_scale?, v_scale?, window_left, softcap}.
     */
    private static OperatorCall withOptions(
            OperatorCall call,
            NDArray query,
            int maxLen,
            PagedAttentionOptions options,
            boolean checkIndices,
            NDArray kScale,
            NDArray vScale) {
        return call.floatArg(options.getScale(headDim(query)))
                .intArg(maxLen)
                .optionalTensor(optionalArray(options.getAlibiSlopes(), "alibiSlopes"))
                .boolArg(checkIndices)
                .optionalTensor(optionalArray(kScale, "kScale"))
                .optionalTensor(optionalArray(vScale, "vScale"))
                .intArg(options.getWindowLeft())
                .floatArg(options.getSoftcap());
    }

    private static void reshapeAndCache(
            NDArray key,
            NDArray value,
            NDArray keyCache,
            NDArray valueCache,
            NDArray slotMapping,
            boolean checkSlots,
            NDArray kScale,
            NDArray vScale,
            boolean fp8E5m2) {
        PtNDArray ptKey = pytorchArray(key, "key");
        OperatorCall.of(Operator.RESHAPE_AND_CACHE)
                .tensor(ptKey)
                .tensor(pytorchArray(value, "value"))
                .tensor(pytorchArray(keyCache, "keyCache"))
                .tensor(pytorchArray(valueCache, "valueCache"))
                .tensor(pytorchArray(slotMapping, "slotMapping"))
                .boolArg(checkSlots)
                .optionalTensor(optionalArray(kScale, "kScale"))
                .optionalTensor(optionalArray(vScale, "vScale"))
                .boolArg(fp8E5m2)
                .invoke(ptKey.getManager());
    }

    /**
     * The operands of a call on a cache's batch (the cache checks that the batch is its own);
     * the scales are the cache's, not the options'.
     */
    private static PagedOperands cacheOperands(
            PagedKvCache cache, int layer, PagedBatch batch, PagedAttentionOptions options) {
        Objects.requireNonNull(options, "options must not be null");
        PagedOperands operands = cache.operands(layer, batch);
        if (options.getKeyScale() != null || options.getValueScale() != null) {
            throw new IllegalArgumentException(
                    "options: a PagedKvCache carries its own FP8 scales; leave optKvScales unset"
                            + " for a call on a cache");
        }
        return operands;
    }

    private static long headDim(NDArray query) {
        return query != null && query.getShape().dimension() > 0 ? query.getShape().tail() : 1;
    }
}
