/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;
import ai.djl.pytorch.engine.PtNDArray;

import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.paged.PagedOperands;

/**
 * The fused decoder-layer operator on DJL NDArrays: one {@code djl_attn::decoder_layer} call runs
 * a whole pre-norm transformer decoder layer over a paged KV cache — norm, q|k|v projection,
 * RoPE, the cache write (FP8 caches included), paged attention over the batch's decode and
 * chunked-prefill rows (GQA, sliding window, soft-cap), output projection, residual, norm, MLP
 * (SwiGLU, GeGLU or GELU), residual, and Gemma-2's extra norms (docs/design/fused-decoder-
 * layer.md). One JNI round trip per layer instead of 15-25.
 *
 * <p>CPU and CUDA. Like {@link AttentionOps}, float32 and float16 from Java; the operator
 * validates every argument and names the one it refuses. On CUDA the call reads nothing back to
 * the host (the batch was checked once when it was built).
 */
public final class DecoderLayerOps {

    private DecoderLayerOps() {}

    /**
     * Runs one decoder layer on the step's stream, in place: writes the new tokens' keys and
     * values to the layer's cache and adds both sub-layers to {@code hidden}.
     *
     * @param hidden the residual stream {@code [T, C]} of the batch's new tokens in batch order,
     *     contiguous, the cache's dtype; updated in place
     * @param positions int64 {@code [T]}: each token's position, below the rotary table's rows
     * @param cache the cache, in {@code hidden}'s dtype or FP8 (its scales are passed)
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed; checked once when
     *     it was built, not again here
     * @param weights the layer's arrays
     * @param options heads, norm, activation, scale, window, soft-cap, RoPE pairing
     * @throws IllegalArgumentException if the batch is not one of this cache's, or an argument
     *     breaks a rule of {@code decoder_layer} (the message names it)
     */
    public static void decoderLayer(
            NDArray hidden,
            NDArray positions,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            DecoderLayerWeights weights,
            DecoderLayerOptions options) {
        // The cache checks that the batch is its own and open.
        PagedOperands operands = cache.operands(layer, batch);
        boolean fp8 = operands.getKeyScale() != null; // an FP8 cache carries its scales
        // The batch's longest chunk, known on the host: on CUDA a decode step (1) takes the
        // split-KV decode kernels without reading the batch back.
        run(
                hidden,
                positions,
                operands.getKeyCache(),
                operands.getValueCache(),
                operands.getKeyScale(),
                operands.getValueScale(),
                operands.isFp8E5m2(),
                batch.getBlockTables(),
                batch.getCuSeqlensQ(),
                batch.getContextLens(),
                batch.getSlotMapping(),
                batch.getMaxQueryLen(),
                isFresh(batch, fp8),
                weights,
                options);
    }

    /**
     * Whether every sequence's chunk is its whole context (a prompt's first chunk): on CUDA the
     * layer then attends with the flash kernel over its own keys and values. On an FP8 cache
     * every chunk must also be longer than one token: a chunk of one reads its token back from
     * the cache (the operator's rule, docs/operators.md), which the flash kernel does not.
     */
    private static boolean isFresh(PagedBatch batch, boolean fp8) {
        int[] queryLens = batch.getQueryLens();
        int[] contexts = batch.getContextLensHost();
        if (batch.getMaxQueryLen() <= 1) {
            return false; // a decode step: the decode kernels
        }
        for (int s = 0; s < queryLens.length; ++s) {
            if (queryLens[s] != contexts[s] || (fp8 && queryLens[s] < 2)) {
                return false;
            }
        }
        return true;
    }

    /**
     * Runs one decoder layer on a batch given as its arrays rather than a {@link PagedBatch}: how
     * a captured step ({@code CudaGraph}) passes the arrays it keeps at fixed addresses. The
     * caller vouches for their values, as {@code PagedBatch} does when it is built (the block
     * manager's tables, slots below the cache's, contexts within their tables, positions below
     * the rotary table's rows): nothing is read back to check them on a GPU.
     *
     * @param hidden the residual stream {@code [T, C]}; updated in place
     * @param positions int64 {@code [T]}
     * @param cache the cache
     * @param layer the layer
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}
     * @param cuSeqlensQ int32 {@code [numSeqs + 1]}: sequence s owns rows {@code [cu[s], cu[s+1])}
     * @param contextLens int32 {@code [numSeqs]}: cached tokens, the new ones included
     * @param slotMapping int64 {@code [T]}: each new token's slot, negative to skip its write
     * @param maxSeqlenQ the longest chunk (1: a decode step, which takes the decode kernels)
     * @param freshChunks whether every chunk is its sequence's whole context (nothing cached
     *     before it), which lets CUDA attend with the flash kernel over the chunk's own keys
     * @param weights the layer's arrays
     * @param options the layer's settings
     * @throws IllegalArgumentException if an argument breaks a rule of {@code decoder_layer}
     */
    public static void decoderLayer(
            NDArray hidden,
            NDArray positions,
            PagedKvCache cache,
            int layer,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            NDArray slotMapping,
            int maxSeqlenQ,
            boolean freshChunks,
            DecoderLayerWeights weights,
            DecoderLayerOptions options) {
        run(
                hidden,
                positions,
                cache.getKeyCache(layer),
                cache.getValueCache(layer),
                cache.getKeyScale(layer),
                cache.getValueScale(layer),
                cache.getCacheDtype() == KvCacheDtype.FP8_E5M2,
                blockTables,
                cuSeqlensQ,
                contextLens,
                slotMapping,
                maxSeqlenQ,
                freshChunks,
                weights,
                options);
    }

    /** One {@code decoder_layer} call on a layer's cache arrays and a batch's index arrays. */
    private static void run(
            NDArray hidden,
            NDArray positions,
            NDArray keyCache,
            NDArray valueCache,
            NDArray kScale,
            NDArray vScale,
            boolean fp8E5m2,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            NDArray slotMapping,
            int maxSeqlenQ,
            boolean freshChunks,
            DecoderLayerWeights weights,
            DecoderLayerOptions options) {
        PtNDArray ptHidden = AttentionOps.pytorchArray(hidden, "hidden");
        OperatorCall.of(Operator.DECODER_LAYER)
                .tensor(ptHidden)
                .tensor(AttentionOps.pytorchArray(positions, "positions"))
                .tensor(AttentionOps.pytorchArray(keyCache, "keyCache"))
                .tensor(AttentionOps.pytorchArray(valueCache, "valueCache"))
                .tensor(AttentionOps.pytorchArray(blockTables, "blockTables"))
                .tensor(AttentionOps.pytorchArray(cuSeqlensQ, "cuSeqlensQ"))
                .tensor(AttentionOps.pytorchArray(contextLens, "contextLens"))
                .tensor(AttentionOps.pytorchArray(slotMapping, "slotMapping"))
                .optionalTensor(optional(kScale, "kScale"))
                .optionalTensor(optional(vScale, "vScale"))
                .tensor(AttentionOps.pytorchArray(weights.attnNormWeight, "attnNormWeight"))
                .optionalTensor(optional(weights.attnNormBias, "attnNormBias"))
                .tensor(AttentionOps.pytorchArray(weights.qkvWeight, "qkvWeight"))
                .optionalTensor(optional(weights.qkvBias, "qkvBias"))
                .optionalTensor(optional(weights.ropeCosSin, "ropeCosSin"))
                .tensor(AttentionOps.pytorchArray(weights.outWeight, "outWeight"))
                .optionalTensor(optional(weights.outBias, "outBias"))
                .optionalTensor(optional(weights.attnOutNormWeight, "attnOutNormWeight"))
                .tensor(AttentionOps.pytorchArray(weights.mlpNormWeight, "mlpNormWeight"))
                .optionalTensor(optional(weights.mlpNormBias, "mlpNormBias"))
                .tensor(AttentionOps.pytorchArray(weights.upWeight, "upWeight"))
                .optionalTensor(optional(weights.upBias, "upBias"))
                .tensor(AttentionOps.pytorchArray(weights.downWeight, "downWeight"))
                .optionalTensor(optional(weights.downBias, "downBias"))
                .optionalTensor(optional(weights.mlpOutNormWeight, "mlpOutNormWeight"))
                .intArg(options.getNumHeads())
                .intArg(options.getNorm().ordinal())
                .intArg(options.getActivation().ordinal())
                .floatArg(options.getNormEps())
                .floatArg(options.getScale())
                .intArg(options.getWindowLeft())
                .floatArg(options.getSoftcap())
                .boolArg(options.isRopeInterleaved())
                .boolArg(false)
                .intArg(maxSeqlenQ)
                .boolArg(freshChunks)
                .boolArg(fp8E5m2)
                .invoke(ptHidden.getManager());
    }

    private static PtNDArray optional(NDArray array, String name) {
        return array == null ? null : AttentionOps.pytorchArray(array, name);
    }
}
