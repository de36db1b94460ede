/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;


/**
 * Token sampling on the logits' device: one {@code djl_attn::sample_tokens} call chooses the next
 * token of every row of a batch (greedy, or sampled with a temperature, top-k and top-p), so that
 * a decode step on a GPU returns only the chosen ids to the host.
 *
 * <p>The rules are those of the zoo's {@code TokenSampler}: greedy is the first maximum ({@code
 * torch.argmax}); sampling draws from {@code softmax(logits / temperature)} over the logits {@code
 * >=} the k-th largest (ties kept), cut to the largest logits (equal logits by the lower id)
 * whose weight reaches {@code top_p} of the total. The uniform number is Philox4x32-10 keyed by
 * the row's seed and counting by its offset only, so a row draws the same id in any batch and on
 * every run, on the CPU and on CUDA alike. Weights are 40-bit fixed point: tokens more than 27.7
 * temperatures below the maximum logit are never drawn (docs/operators.md, "sample_tokens").
 *
 * <p>CPU and CUDA; logits float32 or float16 from Java. The operator validates every argument and
 * names the one it refuses; on CUDA the settings' values are read back for that check, except
 * while the stream is captured into a CUDA graph.
 */
public final class SamplingOps {

    private SamplingOps() {}

    /**
     * Chooses one token id per row, writing them into {@code ids}.
     *
     * @param ids int64 {@code [B]}, contiguous: overwritten with the chosen ids
     * @param logits {@code [B, V]}, contiguous, float32 or float16, {@code 1 <= V <= 2^24}
     * @param temperature float32 {@code [B]}: 0 for greedy, else a finite value {@code > 0}
     * @param topK int32 {@code [B]}: 0 for every token, else the number of largest logits kept
     *     (ties at the k-th kept too)
     * @param topP float32 {@code [B]} in {@code (0, 1]}: the nucleus's share of the top-k weight
     * @param seeds int64 {@code [B]}: each row's random seed
     * @param offsets int64 {@code [B]}: each row's step counter; (seed, offset) fixes the draw
     * @throws IllegalArgumentException if an argument breaks a rule of {@code sample_tokens} (the
     *     message names it); every array must be on the logits' device
     */
    public static void sampleTokens(
            NDArray ids,
            NDArray logits,
            NDArray temperature,
            NDArray topK,
            NDArray topP,
            NDArray seeds,
            NDArray offsets) {
        PtNDArray ptIds = AttentionOps.pytorchArray(ids, "ids");
        OperatorCall.of(Operator.SAMPLE_TOKENS)
                .tensor(ptIds)
                .tensor(AttentionOps.pytorchArray(logits, "logits"))
                .tensor(AttentionOps.pytorchArray(temperature, "temperature"))
                .tensor(AttentionOps.pytorchArray(topK, "topK"))
                .tensor(AttentionOps.pytorchArray(topP, "topP"))
                .tensor(AttentionOps.pytorchArray(seeds, "seeds"))
                .tensor(AttentionOps.pytorchArray(offsets, "offsets"))
                .invoke(ptIds.getManager());
    }

    /**
     * Chooses one token id per row into a new int64 {@code [B]} array on the logits' device,
     * attached to the logits' manager. Arguments as {@link #sampleTokens(NDArray, NDArray,
     * NDArray, NDArray, NDArray, NDArray, NDArray)}.
     *
     * @param logits {@code [B, V]}
     * @param temperature float32 {@code [B]}
     * @param topK int32 {@code [B]}
     * @param topP float32 {@code [B]}
     * @param seeds int64 {@code [B]}
     * @param offsets int64 {@code [B]}
     * @return the ids, int64 {@code [B]}
     */
    public static NDArray sampleTokens(
            NDArray logits,
            NDArray temperature,
            NDArray topK,
            NDArray topP,
            NDArray seeds,
            NDArray offsets) {
        PtNDArray ptLogits = AttentionOps.pytorchArray(logits, "logits");
        long rows = ptLogits.getShape().dimension() > 0 ? ptLogits.getShape().get(0) : 0;
        NDArray ids =
                ptLogits.getManager().zeros(new Shape(rows), DataType.INT64, ptLogits.getDevice());
        sampleTokens(ids, logits, temperature, topK, topP, seeds, offsets);
        return ids;
    }
}
