/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;

/** One layer's arrays as a step reads them. */
final class LayerWeights {
    final NormWeights norm1 = new NormWeights();
    /** {@code [(Hq + 2 Hkv) D, C]}: q, k and v rows stacked. */
    NDArray qkvWeight;
    /** GPT-2 {@code [3 C]}; null for LLaMA. */
    NDArray qkvBias;
    /** {@code [C, Hq D]}; its GPT-2 bias is pending in norm2. */
    NDArray outWeight;
    final NormWeights norm2 = new NormWeights();
    /** Gemma-2's norm of the attention output (post_attention_layernorm); null otherwise. */
    NormWeights attentionOutNorm;
    /** Gemma-2's norm of the MLP output (post_feedforward_layernorm); null otherwise. */
    NormWeights mlpOutNorm;
    /** GPT-2's c_fc {@code [I, C]}; LLaMA's gate and up rows stacked {@code [2 I, C]}. */
    NDArray upWeight;
    /** GPT-2's c_fc bias {@code [I]}; null for LLaMA. */
    NDArray upBias;
    /** {@code [C, I]}; its GPT-2 bias is pending in the next norm. */
    NDArray downWeight;
}
