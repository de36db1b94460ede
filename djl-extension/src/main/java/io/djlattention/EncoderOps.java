/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.NativeArrays.optionalArray;
import static io.djlattention.NativeArrays.pytorchArray;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.pytorch.engine.PtNDArray;

/**
 * The encoder family behind {@link AttentionOps}, which documents it: BERT attention out of a
 * fused Q/K/V projection, the fused bias + residual + norm epilogues, and the padding pack and
 * unpack of ragged batches.
 */
final class EncoderOps {

    private EncoderOps() {}

    static NDArray bertAttention(
            NDArray qkv, NDArray qkvBias, NDArray kvLens, int numHeads, double scale) {
        PtNDArray ptQkv = pytorchArray(qkv, "qkv");
        PtNDArray ptBias = optionalArray(qkvBias, "qkvBias");
        PtNDArray ptLens = optionalArray(kvLens, "kvLens");
        return OperatorCall.of(Operator.BERT_ATTENTION)
                .tensor(ptQkv)
                .optionalTensor(ptBias)
                .optionalTensor(ptLens)
                .intArg(numHeads)
                .floatArg(scale)
                .invoke(ptQkv.getManager())[0];
    }

    static NDArray addBiasResidualLayerNorm(
            NDArray x, NDArray bias, NDArray residual, NDArray gamma, NDArray beta, double eps) {
        PtNDArray ptX = pytorchArray(x, "x");
        PtNDArray ptBias = optionalArray(bias, "bias");
        return OperatorCall.of(Operator.ADD_BIAS_RESIDUAL_LAYERNORM)
                .tensor(ptX)
                .optionalTensor(ptBias)
                .tensor(pytorchArray(residual, "residual"))
                .tensor(pytorchArray(gamma, "gamma"))
                .tensor(pytorchArray(beta, "beta"))
                .floatArg(eps)
                .invoke(ptX.getManager())[0];
    }

    static NDArray addBiasResidualAffine(
            NDArray x, NDArray bias, NDArray residual, NDArray scale, NDArray shift) {
        PtNDArray ptX = pytorchArray(x, "x");
        PtNDArray ptBias = optionalArray(bias, "bias");
        return OperatorCall.of(Operator.ADD_BIAS_RESIDUAL_AFFINE)
                .tensor(ptX)
                .optionalTensor(ptBias)
                .tensor(pytorchArray(residual, "residual"))
                .tensor(pytorchArray(scale, "scale"))
                .tensor(pytorchArray(shift, "shift"))
                .invoke(ptX.getManager())[0];
    }

    static NDArray addBiasGelu(NDArray x, NDArray bias, boolean tanhApproximation) {
        PtNDArray ptX = pytorchArray(x, "x");
        PtNDArray ptBias = optionalArray(bias, "bias");
        return OperatorCall.of(Operator.ADD_BIAS_GELU)
                .tensor(ptX)
                .optionalTensor(ptBias)
                .boolArg(tanhApproximation)
                .invoke(ptX.getManager())[0];
    }

    static NDList removePadding(NDArray x, NDArray lens) {
        PtNDArray ptX = pytorchArray(x, "x");
        return new NDList(
                OperatorCall.of(Operator.REMOVE_PADDING)
                        .tensor(ptX)
                        .tensor(pytorchArray(lens, "lens"))
                        .invoke(ptX.getManager()));
    }

    static NDArray restorePadding(NDArray packed, NDArray cuSeqlens, long seqLen) {
        PtNDArray ptPacked = pytorchArray(packed, "packed");
        return OperatorCall.of(Operator.RESTORE_PADDING)
                .tensor(ptPacked)
                .tensor(pytorchArray(cuSeqlens, "cuSeqlens"))
                .intArg(seqLen)
                .invoke(ptPacked.getManager())[0];
    }
}
