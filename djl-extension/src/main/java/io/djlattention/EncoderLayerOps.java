/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;
import ai.djl.pytorch.engine.PtNDArray;


import java.util.Objects;

/**
 * The fused encoder-layer operator on DJL NDArrays: one {@code djl_attn::encoder_layer} call
 * runs a whole post-norm BERT encoder layer over packed tokens — the q|k|v GEMM, attention of
 * each sequence's tokens (biases added as they load), the output GEMM with bias, residual and
 * LayerNorm, the intermediate GEMM with bias and GELU, the output GEMM with bias, residual and
 * LayerNorm — with every temporary in a reused per-thread workspace (docs/design/
 * fused-encoder-layer.md). One JNI round trip per layer instead of about 12.
 *
 * <p>CPU only (the CUDA encoder runs op by op); float32 and float16 from Java. The operator
 * validates every argument and names the one it refuses.
 */
public final class EncoderLayerOps {

    private EncoderLayerOps() {}

    /**
     * Prepares a float32 {@code [out, in]} weight once for the CPU GEMMs of {@link
     * #encoderLayer}, in the arithmetic of {@code mode}: {@link GemmMode#FLOAT32} MKL's packed
     * layout where libtorch carries MKL (1.5-3x faster products at a few tokens), {@link
     * GemmMode#BFLOAT16} bfloat16, {@link GemmMode#INT8} int8 per output channel. The result is
     * valid only in this process (the packed layout depends on the CPU): never save it.
     *
     * @param weight float32 {@code [out, in]}, contiguous, on the CPU
     * @param mode the GEMMs' arithmetic
     * @return a uint8 array {@code [bytes]} attached to {@code weight}'s manager
     * @throws IllegalArgumentException if the weight breaks a rule of {@code gemm_pack_weight},
     *     or the mode is INT8 and this libtorch has no int8 GEMM
     */
    public static NDArray packWeight(NDArray weight, GemmMode mode) {
        PtNDArray w = AttentionOps.pytorchArray(weight, "weight");
        return OperatorCall.of(Operator.GEMM_PACK_WEIGHT)
                .tensor(w)
                .intArg(Objects.requireNonNull(mode, "mode").code())
                .invoke(w.getManager())[0];
    }

    /**
     * Runs one encoder layer on packed tokens, in place.
     *
     * @param hidden the layer's input {@code [T, C]}, contiguous, float32 or float16, on the
     *     CPU; overwritten by the layer's output
     * @param cuSeqlens int32 {@code [B + 1]}: sequence {@code b} is rows {@code [cu[b],
     *     cu[b+1])}, {@code cu[0] = 0}, {@code cu[B] = T}
     * @param maxSeqlen at least the longest sequence
     * @param weights the layer's arrays
     * @param numHeads heads {@code H}, dividing {@code C}
     * @param normEps the LayerNorms' epsilon
     * @param scale the factor on {@code q . k}, usually {@code 1 / sqrt(C / H)}
     * @param geluTanh GELU's tanh approximation instead of erf
     * @throws IllegalArgumentException if an argument breaks a rule of {@code encoder_layer}
     *     (the message names it)
     */
    public static void encoderLayer(
            NDArray hidden,
            NDArray cuSeqlens,
            int maxSeqlen,
            EncoderLayerWeights weights,
            int numHeads,
            float normEps,
            float scale,
            boolean geluTanh) {
        PtNDArray ptHidden = AttentionOps.pytorchArray(hidden, "hidden");
        OperatorCall.of(Operator.ENCODER_LAYER)
                .tensor(ptHidden)
                .tensor(AttentionOps.pytorchArray(cuSeqlens, "cuSeqlens"))
                .intArg(maxSeqlen)
                .tensor(AttentionOps.pytorchArray(weights.qkvWeight(), "qkvWeight"))
                .tensor(AttentionOps.pytorchArray(weights.qkvBias(), "qkvBias"))
                .tensor(AttentionOps.pytorchArray(weights.outWeight(), "outWeight"))
                .tensor(AttentionOps.pytorchArray(weights.outBias(), "outBias"))
                .tensor(AttentionOps.pytorchArray(weights.attnNormWeight(), "attnNormWeight"))
                .tensor(AttentionOps.pytorchArray(weights.attnNormBias(), "attnNormBias"))
                .tensor(AttentionOps.pytorchArray(weights.upWeight(), "upWeight"))
                .tensor(AttentionOps.pytorchArray(weights.upBias(), "upBias"))
                .tensor(AttentionOps.pytorchArray(weights.downWeight(), "downWeight"))
                .tensor(AttentionOps.pytorchArray(weights.downBias(), "downBias"))
                .tensor(AttentionOps.pytorchArray(weights.ffnNormWeight(), "ffnNormWeight"))
                .tensor(AttentionOps.pytorchArray(weights.ffnNormBias(), "ffnNormBias"))
                .intArg(numHeads)
                .floatArg(normEps)
                .floatArg(scale)
                .boolArg(geluTanh)
                .invoke(ptHidden.getManager());
    }
}
