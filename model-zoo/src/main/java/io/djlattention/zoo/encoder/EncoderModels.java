/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.MalformedModelException;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;

import java.io.IOException;
import java.nio.file.Path;

/** Builds encoder (BERT-architecture) {@link ZooModel}s for the model zoo's loaders. */
public final class EncoderModels {

    private EncoderModels() {}

    /**
     * Loads a BERT-architecture encoder as a model of the criteria's input and output types.
     *
     * @param checkpoint a Hugging Face checkpoint directory, or {@code null} for the built-in
     *     all-MiniLM-L6-v2
     * @param criteria the criteria (types, device, arguments)
     * @param <I> the input type
     * @param <O> the output type
     * @return the model
     * @throws ModelNotFoundException if the criteria's types are not an encoder task
     * @throws MalformedModelException if the checkpoint is not a supported encoder
     * @throws IOException if a file cannot be read
     */
    public static <I, O> ZooModel<I, O> load(Path checkpoint, Criteria<I, O> criteria)
            throws ModelNotFoundException, MalformedModelException, IOException {
        throw new UnsupportedOperationException("EncoderModels.load: not implemented yet");
    }
}
