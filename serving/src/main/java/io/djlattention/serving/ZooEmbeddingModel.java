/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.jni.NativeHeap;
import io.djlattention.zoo.encoder.EncoderModels;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * An {@link EmbeddingModel} over a model-zoo {@code ZooModel<String, float[]>} (for example the
 * built-in all-MiniLM-L6-v2) through one {@link Predictor}'s {@code batchPredict}. Usage counts the
 * tokens the model embeds: the text's tokens with the special tokens, at most the model's {@code
 * maxLength} (the encoders truncate there), whatever truncation {@code tokenizer.json} itself sets
 * (all-MiniLM-L6-v2's says 128; the encoder embeds up to 512).
 */
public final class ZooEmbeddingModel implements EmbeddingModel {

    private final ZooModel<String, float[]> model;
    private final Predictor<String, float[]> predictor;
    private final HuggingFaceTokenizer tokenizer;
    private final boolean ownsModel;
    private final int maxLength;

    /**
     * Wraps a model.
     *
     * @param model the model
     * @param tokenizerFile its {@code tokenizer.json}, to count usage tokens (may be null: usage
     *     is then 0); read without truncation, as the model's translator reads it
     * @param ownsModel whether {@link #close} closes the model too
     * @throws IOException if the tokenizer cannot be read
     */
    public ZooEmbeddingModel(
            ZooModel<String, float[]> model, Path tokenizerFile, boolean ownsModel)
            throws IOException {
        this.model = model;
        this.tokenizer = tokenizerFile == null ? null : EncoderModels.tokenizer(tokenizerFile);
        String max = model.getProperty("maxLength");
        this.maxLength = max == null ? Integer.MAX_VALUE : Integer.parseInt(max);
        this.predictor = model.newPredictor();
        this.ownsModel = ownsModel;
    }

    /** {@inheritDoc} */
    @Override
    public List<float[]> embed(List<String> texts) throws Exception {
        return predictor.batchPredict(texts);
    }

    /** {@inheritDoc} */
    @Override
    public int countTokens(String text) {
        return tokenizer == null ? 0 : Math.min(tokenizer.encode(text).getIds().length, maxLength);
    }

    /** Returns the C heap's free memory to the system ({@link NativeHeap#releaseFree}). */
    @Override
    public void releaseMemory() {
        NativeHeap.releaseFree();
    }

    /** {@inheritDoc} */
    @Override
    public void close() {
        predictor.close();
        if (tokenizer != null) {
            tokenizer.close();
        }
        if (ownsModel) {
            model.close();
        }
    }
}
