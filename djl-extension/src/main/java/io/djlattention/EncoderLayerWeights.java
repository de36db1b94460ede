/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;

import java.util.Objects;

/**
 * One post-norm BERT encoder layer's arrays in the layout {@link EncoderLayerOps#encoderLayer}
 * reads, made once at load (nothing is converted per call). Holds references only: the caller
 * owns and closes the arrays.
 *
 * <p>Each weight is either {@code [out, in]} in the stream's dtype (Hugging Face's layout), or
 * the result of {@link EncoderLayerOps#packWeight} for a float32 stream (prepared for the CPU's
 * GEMM once, valid in this process only). Vectors are float32.
 *
 * @param qkvWeight query, key, value rows stacked: {@code [3C, C]}
 * @param qkvBias {@code [3C]}
 * @param outWeight the attention output projection {@code [C, C]}
 * @param outBias {@code [C]}
 * @param attnNormWeight the attention sub-layer's LayerNorm gamma {@code [C]}
 * @param attnNormBias its beta {@code [C]}
 * @param upWeight the intermediate projection {@code [I, C]}
 * @param upBias {@code [I]}
 * @param downWeight the output projection {@code [C, I]}
 * @param downBias {@code [C]}
 * @param ffnNormWeight the feed-forward sub-layer's LayerNorm gamma {@code [C]}
 * @param ffnNormBias its beta {@code [C]}
 */
public record EncoderLayerWeights(
        NDArray qkvWeight,
        NDArray qkvBias,
        NDArray outWeight,
        NDArray outBias,
        NDArray attnNormWeight,
        NDArray attnNormBias,
        NDArray upWeight,
        NDArray upBias,
        NDArray downWeight,
        NDArray downBias,
        NDArray ffnNormWeight,
        NDArray ffnNormBias) {

    /** Rejects a missing array, naming it. */
    public EncoderLayerWeights {
        Objects.requireNonNull(qkvWeight, "qkvWeight must not be null");
        Objects.requireNonNull(qkvBias, "qkvBias must not be null");
        Objects.requireNonNull(outWeight, "outWeight must not be null");
        Objects.requireNonNull(outBias, "outBias must not be null");
        Objects.requireNonNull(attnNormWeight, "attnNormWeight must not be null");
        Objects.requireNonNull(attnNormBias, "attnNormBias must not be null");
        Objects.requireNonNull(upWeight, "upWeight must not be null");
        Objects.requireNonNull(upBias, "upBias must not be null");
        Objects.requireNonNull(downWeight, "downWeight must not be null");
        Objects.requireNonNull(downBias, "downBias must not be null");
        Objects.requireNonNull(ffnNormWeight, "ffnNormWeight must not be null");
        Objects.requireNonNull(ffnNormBias, "ffnNormBias must not be null");
    }
}
