/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.NativeArrays.optionalArray;
import static io.djlattention.NativeArrays.pytorchArray;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.pytorch.engine.PtNDArray;
import java.util.Objects;

/**
 * The dense FlashAttention family ({@code flash_attention}, {@code flash_attention_varlen},
 * {@code flash_attention_fp8}) behind {@link AttentionOps}, which documents them.
 */
final class FlashOps {

    private FlashOps() {}

    static NDList flashAttentionWithLogSumExp(
            NDArray q, NDArray k, NDArray v, AttentionOptions options) {
        return new NDList(flashAttention(q, k, v, options, 2));
    }

    /** The output alone: the logsumexp is freed natively, never wrapped as an array. */
    static NDArray flashAttention(NDArray q, NDArray k, NDArray v, AttentionOptions options) {
        return flashAttention(q, k, v, options, 1)[0];
    }

    private static PtNDArray[] flashAttention(
            NDArray q, NDArray k, NDArray v, AttentionOptions options, int numOutputs) {
        PtNDArray ptQ = pytorchArray(q, "q");
        PtNDArray ptK = pytorchArray(k, "k");
        PtNDArray ptV = pytorchArray(v, "v");
        Objects.requireNonNull(options, "options must not be null");
        long headDim = q.getShape().dimension() > 0 ? q.getShape().tail() : 1;
        OperatorCall call =
                OperatorCall.of(Operator.FLASH_ATTENTION)
                        .tensor(ptQ)
                        .tensor(ptK)
                        .tensor(ptV)
                        .optionalTensor(optionalArray(options.getKvLens(), "kvLens"));
        return withOptions(call, options, headDim).invoke(ptQ.getManager(), numOutputs);
    }

    static NDList flashAttentionVarlen(
            NDArray q,
            NDArray k,
            NDArray v,
            NDArray cuSeqlensQ,
            NDArray cuSeqlensK,
            long maxSeqlenQ,
            long maxSeqlenK,
            AttentionOptions options) {
        PtNDArray ptQ = pytorchArray(q, "q");
        Objects.requireNonNull(options, "options must not be null");
        long headDim = q.getShape().dimension() > 0 ? q.getShape().tail() : 1;
        OperatorCall call =
                OperatorCall.of(Operator.FLASH_ATTENTION_VARLEN)
                        .tensor(ptQ)
                        .tensor(pytorchArray(k, "k"))
                        .tensor(pytorchArray(v, "v"))
                        .tensor(pytorchArray(cuSeqlensQ, "cuSeqlensQ"))
                        .tensor(pytorchArray(cuSeqlensK, "cuSeqlensK"))
                        .intArg(maxSeqlenQ)
                        .intArg(maxSeqlenK);
        return new NDList(withOptions(call, options, headDim).invoke(ptQ.getManager()));
    }

    static NDArray flashAttentionFp8(
            NDArray q,
            NDArray k,
            NDArray v,
            NDArray qDescale,
            NDArray kDescale,
            NDArray vDescale,
            AttentionOptions options) {
        return flashAttentionFp8(q, k, v, qDescale, kDescale, vDescale, options, 1)[0];
    }

    static NDList flashAttentionFp8WithLogSumExp(
            NDArray q,
            NDArray k,
            NDArray v,
            NDArray qDescale,
            NDArray kDescale,
            NDArray vDescale,
            AttentionOptions options) {
        return new NDList(flashAttentionFp8(q, k, v, qDescale, kDescale, vDescale, options, 2));
    }

    /**
     * {@code flash_attention_fp8} with a float16 output: the schema's default, bfloat16, is an
     * array DJL's PyTorch engine cannot hold.
     */
    private static PtNDArray[] flashAttentionFp8(
            NDArray q,
            NDArray k,
            NDArray v,
            NDArray qDescale,
            NDArray kDescale,
            NDArray vDescale,
            AttentionOptions options,
            int numOutputs) {
        PtNDArray ptQ = pytorchArray(q, "q");
        PtNDArray ptK = pytorchArray(k, "k");
        PtNDArray ptV = pytorchArray(v, "v");
        Objects.requireNonNull(options, "options must not be null");
        if (options.getWindowLeft() != -1
                || options.getWindowRight() != -1
                || options.getSoftcap() != 0f
                || options.getAlibiSlopes() != null) {
            throw new IllegalArgumentException(
                    "options: flash_attention_fp8 takes a scale, the causal mask and kvLens only,"
                            + " got a sliding window, soft-cap or ALiBi slopes");
        }
        long headDim = q.getShape().dimension() > 0 ? q.getShape().tail() : 1;
        return OperatorCall.of(Operator.FLASH_ATTENTION_FP8)
                .tensor(ptQ)
                .tensor(ptK)
                .tensor(ptV)
                .optionalTensor(optionalArray(options.getKvLens(), "kvLens"))
                .floatArg(options.getScale(headDim))
                .boolArg(options.isCausal())
                .optionalTensor(optionalArray(qDescale, "qDescale"))
                .optionalTensor(optionalArray(kDescale, "kDescale"))
                .optionalTensor(optionalArray(vDescale, "vDescale"))
                .boolArg(true)
                .invoke(ptQ.getManager(), numOutputs);
    }

    /**
     * The arguments both flash schemas end with: {@code scale, causal, window_left, window_right,
     * softcap, alibi_slopes?}.
     */
    private static OperatorCall withOptions(
            OperatorCall call, AttentionOptions options, long headDim) {
        return call.floatArg(options.getScale(headDim))
                .boolArg(options.isCausal())
                .intArg(options.getWindowLeft())
                .intArg(options.getWindowRight())
                .floatArg(options.getSoftcap())
                .optionalTensor(optionalArray(options.getAlibiSlopes(), "alibiSlopes"));
    }
}
