/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.Application;
import ai.djl.repository.zoo.ModelZoo;

import java.util.Collections;
import java.util.Set;

/**
 * The model zoo of group {@code io.djlattention}: the built-in models {@value #MINILM} (sentence
 * embeddings, fill-mask) and {@value #STORIES} (text generation), both shipped inside the jars and
 * loaded offline. Local Hugging Face directories and llama2.c files go through {@link
 * CheckpointLoader}.
 *
 * <p>Three ways in, all standard DJL (see docs/model-zoo.md):
 *
 * <ul>
 *   <li>{@code optModelUrls("djl://io.djlattention/all-MiniLM-L6-v2")}: DJL resolves {@code djl://}
 *       URLs through a {@code RepositoryFactory}; this module registers one ({@link
 *       DjlAttentionRepositoryFactory}) that keeps the group offline.
 *   <li>{@code optModelPath(dir)}: the same factory recognises Hugging Face checkpoints and llama2.c
 *       files and hands them to {@link CheckpointLoader}.
 *   <li>{@code optGroupId("io.djlattention").optArtifactId("all-MiniLM-L6-v2")}: DJL asks this zoo's
 *       loaders directly.
 * </ul>
 */
public final class DjlAttentionModelZoo extends ModelZoo {

    /** The zoo's group id. */
    public static final String GROUP_ID = "io.djlattention";
    /** The built-in encoder: all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, Apache-2.0). */
    public static final String MINILM = "all-MiniLM-L6-v2";
    /** The built-in decoder: llama2.c's stories260K (5 layers, hidden 64, MIT). */
    public static final String STORIES = "stories260K";

    /** Creates the zoo with its two built-in models. */
    public DjlAttentionModelZoo() {
        addModel(new BuiltinModelLoader(GROUP_ID, MINILM, Application.NLP.TEXT_EMBEDDING));
        addModel(new BuiltinModelLoader(GROUP_ID, STORIES, Application.NLP.TEXT_GENERATION));
    }

    /** {@inheritDoc} */
    @Override
    public String getGroupId() {
        return GROUP_ID;
    }

    /** {@inheritDoc} */
    @Override
    public Set<String> getSupportedEngines() {
        return Collections.singleton("PyTorch");
    }
}
