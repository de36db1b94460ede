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
 * @param error why it failed ({@link FinishReason#FAILED}), else null
 */
public record GenerationResult(
        long requestId,
        int[] prompt,
        int[] generated,
        FinishReason finishReason,
        int preemptions,
        String error) {

    /**
     * Creates the result of a request that did not fail.
     *
     * @param requestId the id {@code submit} returned
     * @param prompt the prompt tokens
     * @param generated the generated tokens
     * @param finishReason why it stopped
     * @param preemptions how often it was preempted and recomputed
     */
    public GenerationResult(
            long requestId,
            int[] prompt,
            int[] generated,
            FinishReason finishReason,
            int preemptions) {
        this(requestId, prompt, generated, finishReason, preemptions, null);
    }

    /** Why a request stopped. */
    public enum FinishReason {
        /** It generated its max new tokens. */
        LENGTH,
        /** It generated the EOS token. */
        EOS,
        /** It reached the model's max positions. */
        MAX_POSITIONS,
        /** It generated one of its stop token ids ({@link GenerationConfig#getStopTokenIds}). */
        STOP,
        /** It was cancelled before it finished; {@code generated} holds the tokens so far. */
        CANCELLED,
        /** Its forward pass failed; {@code error} says why, {@code generated} holds the tokens so far. */
        FAILED
    }
}
