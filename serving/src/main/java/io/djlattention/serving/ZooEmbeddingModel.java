/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.ZooModel;

import java.util.List;

/**
 * An {@link EmbeddingModel} over a model-zoo {@code ZooModel<String, float[]>} (for example the
 * built-in all-MiniLM-L6-v2) through one {@link Predictor}'s {@code batchPredict}.
 */
public final class ZooEmbeddingModel implements EmbeddingModel {

    private final ZooModel<String, float[]> model;
    private final Predictor<String, float[]> predictor;
    private final HuggingFaceTokenizer tokenizer;
    private final boolean ownsModel;

    /**
     * Wraps a model.
     *
     * @param model the model
     * @param tokenizer its tokenizer, to count usage tokens (may be null: usage is then 0)
     * @param ownsModel whether {@link #close} closes the model (and the tokenizer) too
     */
    public ZooEmbeddingModel(
            ZooModel<String, float[]> model, HuggingFaceTokenizer tokenizer, boolean ownsModel) {
        this.model = model;
        this.predictor = model.newPredictor();
        this.tokenizer = tokenizer;
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
        return tokenizer == null ? 0 : tokenizer.encode(text).getIds().length;
    }

    /** {@inheritDoc} */
    @Override
    public void close() {
        predictor.close();
        if (ownsModel) {
            model.close();
            if (tokenizer != null) {
                tokenizer.close();
            }
        }
    }
}
