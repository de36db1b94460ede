/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/**
 * How one request generates: stopping (max new tokens, EOS) and token choice (greedy, or sampling
 * with temperature and top-k from a per-request seeded generator, so that a request samples the
 * same tokens alone or in any batch).
 */
public final class GenerationConfig {

    private final int maxNewTokens;
    private final long eosTokenId;
    private final boolean sampling;
    private final float temperature;
    private final int topK;
    private final long seed;

    private GenerationConfig(Builder b) {
        maxNewTokens = b.maxNewTokens;
        eosTokenId = b.eosTokenId;
        sampling = b.sampling;
        temperature = b.temperature;
        topK = b.topK;
        seed = b.seed;
    }

    /**
     * Returns a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns a greedy configuration.
     *
     * @param maxNewTokens the tokens to generate at most
     * @return the configuration
     */
    public static GenerationConfig greedy(int maxNewTokens) {
        return builder().setMaxNewTokens(maxNewTokens).build();
    }

    /**
     * Returns the most tokens to generate.
     *
     * @return max new tokens
     */
    public int getMaxNewTokens() {
        return maxNewTokens;
    }

    /**
     * Returns the end-of-sequence token, or -1 for none.
     *
     * @return the EOS id
     */
    public long getEosTokenId() {
        return eosTokenId;
    }

    /**
     * Returns whether tokens are sampled (else greedy argmax).
     *
     * @return true when sampling
     */
    public boolean isSampling() {
        return sampling;
    }

    /**
     * Returns the sampling temperature.
     *
     * @return the temperature
     */
    public float getTemperature() {
        return temperature;
    }

    /**
     * Returns top-k (0 = the whole vocabulary).
     *
     * @return k
     */
    public int getTopK() {
        return topK;
    }

    /**
     * Returns the seed of the request's sampling generator.
     *
     * @return the seed
     */
    public long getSeed() {
        return seed;
    }

    /** Builds a {@link GenerationConfig}. */
    public static final class Builder {

        private int maxNewTokens = -1;
        private long eosTokenId = -1;
        private boolean sampling;
        private float temperature = 1f;
        private int topK;
        private long seed;

        Builder() {}

        /**
         * Sets the most tokens to generate (required).
         *
         * @param maxNewTokens at least 1
         * @return this builder
         */
        public Builder setMaxNewTokens(int maxNewTokens) {
            this.maxNewTokens = maxNewTokens;
            return this;
        }

        /**
         * Sets the end-of-sequence token (default none); generation stops after emitting it.
         *
         * @param eosTokenId the id
         * @return this builder
         */
        public Builder optEosTokenId(long eosTokenId) {
            this.eosTokenId = eosTokenId;
            return this;
        }

        /**
         * Switches to sampling with a temperature, top-k (0 = all) and seed.
         *
         * @param temperature positive
         * @param topK 0 or more
         * @param seed the seed
         * @return this builder
         */
        public Builder optSampling(float temperature, int topK, long seed) {
            this.sampling = true;
            this.temperature = temperature;
            this.topK = topK;
            this.seed = seed;
            return this;
        }

        /**
         * Builds the configuration.
         *
         * @return the configuration
         */
        public GenerationConfig build() {
            if (maxNewTokens < 1) {
                throw new IllegalArgumentException(
                        "GenerationConfig: setMaxNewTokens is required and must be >= 1, got "
                                + maxNewTokens);
            }
            if (sampling && !(temperature > 0) || topK < 0) {
                throw new IllegalArgumentException(
                        "GenerationConfig: optSampling: expected temperature > 0 and topK >= 0,"
                                + " got "
                                + temperature
                                + " and "
                                + topK);
            }
            return new GenerationConfig(this);
        }
    }
}
