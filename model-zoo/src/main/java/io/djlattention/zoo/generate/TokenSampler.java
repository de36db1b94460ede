/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import java.util.Arrays;
import java.util.Random;

/**
 * Chooses the next token from one row of logits: greedy argmax (the first maximum, as {@code
 * torch.argmax} and DJL's {@code StepGeneration.greedyStepGen}) or sampling ({@code softmax(logits
 * / temperature)} over the top-k, then cut to the top-p nucleus as Hugging Face's {@code
 * TopPLogitsWarper} does, drawn from the request's own generator).
 */
public final class TokenSampler {

    private final GenerationConfig config;
    private final Random random;

    /**
     * Creates the sampler of one request.
     *
     * @param config the request's configuration
     */
    public TokenSampler(GenerationConfig config) {
        this(config, config.getSeed());
    }

    /**
     * Creates a sampler with its own seed (one of several parallel samples).
     *
     * @param config the request's configuration
     * @param seed the seed of this sampler's generator
     */
    public TokenSampler(GenerationConfig config, long seed) {
        this.config = config;
        this.random = new Random(seed);
    }

    /**
     * Returns the index of the first maximum.
     *
     * @param logits the logits
     * @return the argmax
     */
    public static int argMax(float[] logits) {
        int best = 0;
        for (int i = 1; i < logits.length; ++i) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        return best;
    }

    /**
     * Chooses the next token.
     *
     * @param logits {@code [V]}
     * @return the token id
     */
    public int next(float[] logits) {
        if (!config.isSampling()) {
            return argMax(logits);
        }
        int vocab = logits.length;
        int k = config.getTopK() == 0 ? vocab : Math.min(config.getTopK(), vocab);
        float threshold = Float.NEGATIVE_INFINITY;
        if (k < vocab) {
            float[] sorted = logits.clone();
            Arrays.sort(sorted);
            threshold = sorted[vocab - k];
        }
        double max = logits[argMax(logits)];
        double[] weights = new double[vocab];
        double total = 0;
        for (int i = 0; i < vocab; ++i) {
            if (logits[i] >= threshold) {
                weights[i] = Math.exp((logits[i] - max) / config.getTemperature());
                total += weights[i];
            }
        }
        if (config.getTopP() < 1f) {
            total = nucleus(weights, total, config.getTopP());
        }
        double u = random.nextDouble() * total;
        int last = 0;
        for (int i = 0; i < vocab; ++i) {
            if (weights[i] > 0) {
                last = i;
                u -= weights[i];
                if (u < 0) {
                    return i;
                }
            }
        }
        return last;
    }

    /**
     * Keeps the most likely tokens whose weights add up to at least {@code p * total} (ties by the
     * lower id first, so the cut is deterministic) and zeroes the rest.
     *
     * @return the kept weights' total
     */
    private static double nucleus(double[] weights, double total, float p) {
        int n = 0;
        Integer[] order = new Integer[weights.length];
        for (int i = 0; i < weights.length; ++i) {
            if (weights[i] > 0) {
                order[n++] = i;
            }
        }
        Integer[] live = Arrays.copyOf(order, n);
        Arrays.sort(
                live,
                (a, b) -> {
                    int c = Double.compare(weights[b], weights[a]);
                    return c != 0 ? c : Integer.compare(a, b);
                });
        double kept = 0;
        int keep = 0;
        while (keep < n && kept < p * total) {
            kept += weights[live[keep++]];
        }
        for (int i = keep; i < n; ++i) {
            weights[live[i]] = 0;
        }
        return kept;
    }
}
