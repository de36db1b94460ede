/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.ndarray.NDList;
import ai.djl.translate.Batchifier;
import ai.djl.translate.Translator;
import ai.djl.translate.TranslatorContext;

import java.util.Arrays;

/**
 * The translator of a {@link GenerationBlock}: a request becomes one 1-D int32 array of prompt
 * ids, the block's output array the request's answer. {@code batchPredict} hands all requests of
 * the batch to the block in one call ({@link #getBatchifier}: the prompts side by side, not
 * stacked, since their lengths differ), so they go through the scheduler together.
 *
 * <ul>
 *   <li>{@link #forTokens()}: {@code int[]} prompt ids to {@code int[]} generated ids;
 *   <li>{@link #forText}: {@code String} to {@code String} through a Hugging Face tokenizer: the
 *       prompt is encoded with the tokenizer's special tokens (as {@code tokenizer(text)} in
 *       transformers), and the generated ids alone are decoded, special tokens skipped.
 * </ul>
 *
 * @param <I> the input type
 * @param <O> the output type
 */
public final class GenerationTranslator<I, O> implements Translator<I, O> {

    private final HuggingFaceTokenizer tokenizer;

    private GenerationTranslator(HuggingFaceTokenizer tokenizer) {
        this.tokenizer = tokenizer;
    }

    /**
     * Returns the token-id translator.
     *
     * @return an {@code int[] → int[]} translator
     */
    public static GenerationTranslator<int[], int[]> forTokens() {
        return new GenerationTranslator<>(null);
    }

    /**
     * Returns the text translator.
     *
     * @param tokenizer the checkpoint's tokenizer; its owner closes it
     * @return a {@code String → String} translator
     */
    public static GenerationTranslator<String, String> forText(HuggingFaceTokenizer tokenizer) {
        if (tokenizer == null) {
            throw new IllegalArgumentException("tokenizer: required for String input");
        }
        return new GenerationTranslator<>(tokenizer);
    }

    /** {@inheritDoc} */
    @Override
    public NDList processInput(TranslatorContext ctx, I input) {
        int[] ids;
        if (tokenizer == null) {
            if (input == null) {
                throw new IllegalArgumentException("input: expected prompt token ids, got null");
            }
            ids = ((int[]) input).clone();
        } else {
            if (input == null) {
                throw new IllegalArgumentException("input: expected a prompt text, got null");
            }
            String text = (String) input;
            long[] encoded = tokenizer.encode(text).getIds();
            if (encoded.length == 0) {
                throw new IllegalArgumentException(
                        "input: the prompt text \""
                                + text
                                + "\" encodes to no tokens; expected a non-empty prompt");
            }
            ids = Arrays.stream(encoded).mapToInt(Math::toIntExact).toArray();
        }
        if (ids.length == 0) {
            throw new IllegalArgumentException(
                    "input: expected at least one prompt token, got none");
        }
        return new NDList(ctx.getNDManager().create(ids));
    }

    /** {@inheritDoc} */
    @Override
    @SuppressWarnings("unchecked")
    public O processOutput(TranslatorContext ctx, NDList list) {
        int[] generated = list.singletonOrThrow().toIntArray();
        if (tokenizer == null) {
            return (O) generated;
        }
        long[] ids = Arrays.stream(generated).asLongStream().toArray();
        return (O) tokenizer.decode(ids, true);
    }

    /** {@inheritDoc} */
    @Override
    public Batchifier getBatchifier() {
        return PromptBatchifier.INSTANCE;
    }

    /** Puts each request's one array side by side in the batch list, and takes them apart. */
    private static final class PromptBatchifier implements Batchifier {

        private static final long serialVersionUID = 1L;
        static final PromptBatchifier INSTANCE = new PromptBatchifier();

        /** {@inheritDoc} */
        @Override
        public NDList batchify(NDList[] inputs) {
            NDList all = new NDList(inputs.length);
            for (NDList one : inputs) {
                all.add(one.singletonOrThrow());
            }
            return all;
        }

        /** {@inheritDoc} */
        @Override
        public NDList[] unbatchify(NDList inputs) {
            NDList[] each = new NDList[inputs.size()];
            for (int i = 0; i < each.length; ++i) {
                each[i] = new NDList(inputs.get(i));
            }
            return each;
        }
    }
}
