/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.modality.nlp.generate.CausalLMOutput;
import ai.djl.ndarray.NDList;
import ai.djl.translate.NoBatchifyTranslator;
import ai.djl.translate.TranslatorContext;

/**
 * Lets DJL's {@code TextGenerator} drive a {@link Decoder} through a {@code Predictor<NDList,
 * CausalLMOutput>}: the input list passes through unchanged ({@code [inputIds, positionIds,
 * attentionMask, past k/v...]}), and the block's {@code [logits, present k/v...]} become a {@link
 * CausalLMOutput}. The outputs stay attached to the inputs' manager, which the generator's scopes
 * manage.
 */
public final class CausalLmTranslator implements NoBatchifyTranslator<NDList, CausalLMOutput> {

    /** {@inheritDoc} */
    @Override
    public NDList processInput(TranslatorContext ctx, NDList input) {
        return input;
    }

    /** {@inheritDoc} */
    @Override
    public CausalLMOutput processOutput(TranslatorContext ctx, NDList output) {
        return new CausalLMOutput(output.get(0), output.subNDList(1));
    }
}
