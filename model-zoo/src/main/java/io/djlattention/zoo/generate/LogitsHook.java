/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/**
 * A {@link ContinuousBatchingScheduler} test hook that sees the logits every token is chosen from
 * (the batch-invariance tests compare them bit for bit).
 */
@FunctionalInterface
public interface LogitsHook {

    /**
     * Called before a sequence's next token is chosen (not for replayed tokens).
     *
     * @param requestId the request
     * @param logits its logits row {@code [V]} (do not modify)
     */
    void onLogits(long requestId, float[] logits);
}
