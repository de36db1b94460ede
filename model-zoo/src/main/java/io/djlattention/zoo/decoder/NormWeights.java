/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;

/** A norm's parameters as a step reads them. */
final class NormWeights {
    /** The gain, in the model's dtype (LLaMA) or float32 (GPT-2; Gemma-2's 1 + w). */
    NDArray gain;
    /** GPT-2: float32 bias; null for LLaMA's RMSNorm. */
    NDArray bias;
    /** GPT-2: float32 biases not yet added to the stream x', or null for none. */
    NDArray pending;
}
