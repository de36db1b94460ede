/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/**
 * The outcome of one request.
 *
 * @param requestId the id {@code submit} returned
 * @param prompt the prompt tokens
 * @param generated the generated tokens (the EOS token included when it stopped generation)
 * @param finishReason why it stopped
 * @param preemptions how often it was preempted and recomputed
 */
public record GenerationResult(
        long requestId, int[] prompt, int[] generated, FinishReason finishReason, int preemptions) {

    /** Why a request stopped. */
    public enum FinishReason {
        /** It generated its max new tokens. */
        LENGTH,
        /** It generated the EOS token. */
        EOS,
        /** It reached the model's max positions. */
        MAX_POSITIONS
    }
}
