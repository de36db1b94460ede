/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import java.util.List;

/**
 * A sentence-embedding model as the server uses it: texts in, one {@code float[dimension]} each
 * out. Implementations need not be thread-safe: {@link EmbeddingService} calls them from one
 * thread. See {@link ZooEmbeddingModel} for the model-zoo encoders.
 */
public interface EmbeddingModel extends AutoCloseable {

    /**
     * Embeds a batch of texts.
     *
     * @param texts non-empty texts
     * @return one embedding per text, in order
     * @throws Exception if the model fails; an {@link IllegalArgumentException} means the input is
     *     at fault (answered with 400)
     */
    List<float[]> embed(List<String> texts) throws Exception;

    /**
     * Returns the number of tokens a text counts as (the usage the API reports).
     *
     * @param text a text
     * @return its tokens, or 0 if the model cannot tell
     */
    int countTokens(String text);

    /**
     * Hands memory that the model's calls freed back to the operating system, where its runtime
     * keeps it for reuse (libtorch's CPU tensors: glibc's arenas). {@link EmbeddingService} calls
     * it when its queue empties after a burst, so the process's resident size falls back; it
     * should be cheap when there is nothing to return. Does nothing by default.
     */
    default void releaseMemory() {}

    /** Frees the model's resources. */
    @Override
    void close();
}
