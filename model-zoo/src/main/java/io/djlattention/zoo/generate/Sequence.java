/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** A request's state: its tokens so far (prompt then generated) and its sampler. */
final class Sequence {
    final long id;
    final GenerationConfig config;
    final TokenSampler sampler;
    final long seed; // the sampler's; a device step keys its draws on it
    final int promptLength;
    int[] tokens;
    int generated;
    int preemptions;
    int cached; // tokens whose K/V are in the cache
    boolean prefilled; // all tokens but the last sampled one are cached

    final List<Sequence> pendingForks = new ArrayList<>();

    Sequence(long id, int[] prompt, GenerationConfig config, long seed) {
        this.id = id;
        this.config = config;
        this.sampler = new TokenSampler(config, seed);
        this.seed = seed;
        this.promptLength = prompt.length;
        this.tokens = prompt.clone();
    }

    GenerationResult result(GenerationResult.FinishReason reason, String error) {
        return new GenerationResult(
                id,
                Arrays.copyOf(tokens, promptLength),
                Arrays.copyOfRange(tokens, promptLength, tokens.length),
                reason,
                preemptions,
                error);
    }

    void append(int token) {
        tokens = Arrays.copyOf(tokens, tokens.length + 1);
        tokens[tokens.length - 1] = token;
        ++generated;
    }
}
