/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import java.util.Arrays;

/**
 * How each sequence of a device decode step chooses its next token ({@code sample_tokens}):
 * temperature 0 is greedy (the first maximum); otherwise {@code softmax(logits / temperature)}
 * over the top-k, cut to the top-p nucleus, drawn with the counter-based generator keyed by the
 * sequence's seed and offset (its token index), so a draw does not depend on the batch it runs
 * in.
 */
public final class StepSampling {

    final float[] temperature;
    final int[] topK;
    final float[] topP;
    final long[] seeds;
    final long[] offsets;

    /**
     * Creates the settings of {@code n} sequences, all greedy.
     *
     * @param n the number of sequences
     */
    public StepSampling(int n) {
        temperature = new float[n];
        topK = new int[n];
        topP = new float[n];
        Arrays.fill(topP, 1f);
        seeds = new long[n];
        offsets = new long[n];
    }

    /**
     * Sets sequence {@code s}'s settings.
     *
     * @param s the sequence's index in the step
     * @param temperature 0 for greedy, else &gt; 0
     * @param topK 0 for every token, else the number kept
     * @param topP the nucleus, in (0, 1]
     * @param seed the sequence's seed
     * @param offset the index of the token being chosen (the sequence's step counter)
     * @return this
     * @throws IllegalArgumentException if a value is out of its range
     */
    public StepSampling set(int s, float temperature, int topK, float topP, long seed, long offset) {
        if (!(temperature >= 0) || Float.isInfinite(temperature)) {
            throw new IllegalArgumentException(
                    "temperature: expected a finite value >= 0, got " + temperature);
        }
        if (topK < 0) {
            throw new IllegalArgumentException("topK: expected a value >= 0, got " + topK);
        }
        if (!(topP > 0 && topP <= 1)) {
            throw new IllegalArgumentException("topP: expected a value in (0, 1], got " + topP);
        }
        this.temperature[s] = temperature;
        this.topK[s] = topK;
        this.topP[s] = topP;
        seeds[s] = seed;
        offsets[s] = offset;
        return this;
    }

    /**
     * Returns the temperatures (a copy).
     *
     * @return float32 per sequence
     */
    public float[] temperatures() {
        return temperature.clone();
    }

    /**
     * Returns the top-k values (a copy).
     *
     * @return int32 per sequence
     */
    public int[] topKs() {
        return topK.clone();
    }

    /**
     * Returns the top-p values (a copy).
     *
     * @return float32 per sequence
     */
    public float[] topPs() {
        return topP.clone();
    }

    /**
     * Returns the seeds (a copy).
     *
     * @return int64 per sequence
     */
    public long[] seeds() {
        return seeds.clone();
    }

    /**
     * Returns the offsets (a copy).
     *
     * @return int64 per sequence
     */
    public long[] offsets() {
        return offsets.clone();
    }

    /**
     * Returns the number of sequences.
     *
     * @return n
     */
    public int size() {
        return temperature.length;
    }
}
