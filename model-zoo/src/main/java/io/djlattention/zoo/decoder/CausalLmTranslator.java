/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.modality.nlp.generate.CausalLMOutput;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.translate.NoBatchifyTranslator;
import ai.djl.translate.TranslatorContext;

/**
 * Lets DJL's {@code TextGenerator} drive a {@link Decoder} through a {@code Predictor<NDList,
 * CausalLMOutput>}: the input list {@code [inputIds, positionIds, attentionMask, past k/v...]}
 * reaches the decoder, and the block's {@code [logits, present k/v...]} become a {@link
 * CausalLMOutput}. The outputs stay attached to the inputs' manager, which the generator's scopes
 * manage.
 *
 * <p>The attention mask is passed on only when it hides a key (left padding): the decoder reads
 * no mask back, and runs flash attention only for a call without one ({@link Decoder}). Whether
 * it hides any is read once per generation, on the prompt's call (no past keys): the generator
 * then only appends ones. The answer travels with the generation as the name of the first present
 * key array, which the generator hands back on the next step ({@link #UNPADDED} or {@link
 * #PADDED}); past arrays without that name (made elsewhere) have their mask read again.
 */
public final class CausalLmTranslator implements NoBatchifyTranslator<NDList, CausalLMOutput> {

    /** The name of a first past key array whose generation has no padding. */
    public static final String UNPADDED = "djl_attn.unpadded";
    /** The name of a first past key array whose generation is padded. */
    public static final String PADDED = "djl_attn.padded";

    private static final String ATTACHMENT = "djl_attn.unpadded";

    /** {@inheritDoc} */
    @Override
    public NDList processInput(TranslatorContext ctx, NDList input) {
        if (input.size() < 3) {
            return input; // no mask: nothing to decide
        }
        boolean unpadded;
        String carried = input.size() > 3 ? input.get(3).getName() : null;
        if (UNPADDED.equals(carried)) {
            unpadded = true;
        } else if (PADDED.equals(carried)) {
            unpadded = false;
        } else {
            // The prompt's call (or past arrays of unknown origin): one read of the mask.
            unpadded = !input.get(2).eq(0).any().getBoolean();
        }
        ctx.setAttachment(ATTACHMENT, unpadded);
        if (!unpadded) {
            return input;
        }
        NDList withoutMask = new NDList(input.size() - 1);
        withoutMask.add(input.get(0));
        withoutMask.add(input.get(1));
        for (int i = 3; i < input.size(); ++i) {
            withoutMask.add(input.get(i));
        }
        return withoutMask;
    }

    /** {@inheritDoc} */
    @Override
    public CausalLMOutput processOutput(TranslatorContext ctx, NDList output) {
        NDList presents = output.subNDList(1);
        Object unpadded = ctx.getAttachment(ATTACHMENT);
        if (unpadded != null && !presents.isEmpty()) {
            NDArray first = presents.get(0);
            first.setName(Boolean.TRUE.equals(unpadded) ? UNPADDED : PADDED);
        }
        return new CausalLMOutput(output.get(0), presents);
    }
}
