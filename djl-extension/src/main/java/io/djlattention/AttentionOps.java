/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.pytorch.engine.PtNDArray;
import io.djlattention.jni.OperatorCall;
import java.util.Objects;

/**
 * Fused attention operators on DJL NDArrays of the PyTorch engine.
 *
 * <p>Each method calls a {@code djl_attn} operator through PyTorch's dispatcher, so CPU arrays
 * run the CPU kernels and GPU arrays the CUDA kernels. The operator validates its arguments
 * (ranks, sizes, dtypes, devices, strides, value ranges) and its message comes back as an
 * {@link IllegalArgumentException}; any other native failure as an {@link EngineException}.
 * Results are attached to the manager of the first input, so closing that manager frees them.
 *
 * <p>Supported dtypes from Java are float32 and float16: DJL 0.35.1's PyTorch engine cannot hold
 * bfloat16 arrays, so bfloat16 is rejected before any native call (it remains supported for
 * Python and TorchScript callers of the same operators).
 */
public final class AttentionOps {

    private AttentionOps() {}

    /**
     * Computes {@code softmax(q·kᵀ·scale + mask)·v} per head without materialising the score
     * matrix (FlashAttention).
     *
     * @param q queries {@code [B, Sq, Hq, D]}, float32 or float16, last dim contiguous (views
     *     into a fused QKV projection are fine)
     * @param k keys {@code [B, Sk, Hkv, D]}, {@code Hq % Hkv == 0} (MHA, GQA, MQA)
     * @param v values {@code [B, Sk, Hkv, D]}
     * @param options causal mask, scale and valid key lengths
     * @return the output {@code [B, Sq, Hq, D]}, dtype of {@code q}
     */
    public static NDArray flashAttention(
            NDArray q, NDArray k, NDArray v, AttentionOptions options) {
        return flashAttentionWithLogSumExp(q, k, v, options).get(0);
    }

    /**
     * Computes {@link #flashAttention} with the default options.
     *
     * @param q queries {@code [B, Sq, Hq, D]}
     * @param k keys {@code [B, Sk, Hkv, D]}
     * @param v values {@code [B, Sk, Hkv, D]}
     * @return the output {@code [B, Sq, Hq, D]}
     */
    public static NDArray flashAttention(NDArray q, NDArray k, NDArray v) {
        return flashAttention(q, k, v, AttentionOptions.defaults());
    }

    /**
     * Computes {@link #flashAttention} and also returns the logsumexp of each row's scaled,
     * masked scores (natural log), as needed to combine partial attentions or for a backward
     * pass. A row that sees no key has output 0 and logsumexp {@code -inf}.
     *
     * @param q queries {@code [B, Sq, Hq, D]}
     * @param k keys {@code [B, Sk, Hkv, D]}
     * @param v values {@code [B, Sk, Hkv, D]}
     * @param options causal mask, scale and valid key lengths
     * @return the output {@code [B, Sq, Hq, D]} and the logsumexp {@code [B, Hq, Sq]} float32
     */
    public static NDList flashAttentionWithLogSumExp(
            NDArray q, NDArray k, NDArray v, AttentionOptions options) {
        PtNDArray ptQ = pytorchArray(q, "q");
        PtNDArray ptK = pytorchArray(k, "k");
        PtNDArray ptV = pytorchArray(v, "v");
        Objects.requireNonNull(options, "options must not be null");
        PtNDArray kvLens =
                options.getKvLens() == null ? null : pytorchArray(options.getKvLens(), "kvLens");
        long headDim = q.getShape().dimension() > 0 ? q.getShape().tail() : 1;
        PtNDArray[] outputs =
                OperatorCall.of("flash_attention", 6)
                        .tensor(ptQ)
                        .tensor(ptK)
                        .tensor(ptV)
                        .optionalTensor(kvLens)
                        .floatArg(options.getScale(headDim))
                        .boolArg(options.isCausal())
                        .invoke(ptQ.getManager(), 2);
        return new NDList(outputs);
    }

    /** The checks Java owns: nulls, bfloat16, arrays of another engine. */
    static PtNDArray pytorchArray(NDArray array, String name) {
        Objects.requireNonNull(array, name + " must not be null");
        if (array.getDataType() == DataType.BFLOAT16) {
            throw new IllegalArgumentException(
                    name
                            + ": bfloat16 is not supported from Java (DJL 0.35.1's PyTorch engine"
                            + " cannot hold bfloat16 arrays); use float16 or float32");
        }
        if (!(array instanceof PtNDArray)) {
            throw new IllegalArgumentException(
                    name
                            + ": expected an NDArray of the PyTorch engine, got one of "
                            + array.getManager().getEngine().getEngineName());
        }
        return (PtNDArray) array;
    }
}
