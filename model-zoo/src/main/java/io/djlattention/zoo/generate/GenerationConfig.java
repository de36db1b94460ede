/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/**
 * How one request generates: stopping (max new tokens, EOS, further stop token ids) and token
 * choice (greedy, or sampling with temperature, top-k and top-p from a per-request seeded
 * generator, so that a request samples the same tokens alone or in any batch, up to float32
 * rounding of the logits: a draw within rounding of the boundary between two tokens can flip).
 * Stop strings are a text-layer matter (they need a tokenizer) and live with the caller (see the
 * serving package).
 */
public final class GenerationConfig {

    private final int maxNewTokens;
    private final long eosTokenId;
    private final boolean sampling;
    private final float temperature;
    private final int topK;
    private final long seed;
    private final float topP;
    private final int[] stopTokenIds;

    private GenerationConfig(Builder b) {
        maxNewTokens = b.maxNewTokens;
        eosTokenId = b.eosTokenId;
        sampling = b.sampling;
        temperature = b.temperature;
        topK = b.topK;
        seed = b.seed;
        topP = b.topP;
        stopTokenIds = b.stopTokenIds.clone();
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

    /**
     * Returns top-p (nucleus sampling: the smallest set of most likely tokens whose probabilities
     * add up to at least p; 1 = no cut).
     *
     * @return p in (0, 1]
     */
    public float getTopP() {
        return topP;
    }

    /**
     * Returns the token ids that stop generation besides EOS (the stop token is kept in the
     * output, as EOS is).
     *
     * @return a copy of the stop token ids
     */
    public int[] getStopTokenIds() {
        return stopTokenIds.clone();
    }

    /**
     * Returns whether {@code token} ends generation: the EOS token or a stop token id.
     *
     * @param token a token id
     * @return true if generation stops after it
     */
    public boolean isStopToken(int token) {
        if (eosTokenId >= 0 && token == eosTokenId) {
            return true;
        }
        for (int t : stopTokenIds) {
            if (t == token) {
                return true;
            }
        }
        return false;
    }

    /** Builds a {@link GenerationConfig}. */
    public static final class Builder {

        private int maxNewTokens = -1;
        private long eosTokenId = -1;
        private boolean sampling;
        private float temperature = 1f;
        private int topK;
        private long seed;
        private float topP = 1f;
        private int[] stopTokenIds = new int[0];

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
         * Sets top-p for sampling (default 1: no cut): only the most likely tokens whose
         * probabilities add up to at least {@code topP} are drawn from (after top-k).
         *
         * @param topP in (0, 1]
         * @return this builder
         */
        public Builder optTopP(float topP) {
            this.topP = topP;
            return this;
        }

        /**
         * Sets token ids that stop generation besides EOS (default none).
         *
         * @param stopTokenIds the ids, each at least 0
         * @return this builder
         */
        public Builder optStopTokenIds(int... stopTokenIds) {
            this.stopTokenIds = stopTokenIds == null ? new int[0] : stopTokenIds.clone();
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
            if (!(topP > 0 && topP <= 1)) {
                throw new IllegalArgumentException(
                        "GenerationConfig: optTopP: expected a value in (0, 1], got " + topP);
            }
            for (int t : stopTokenIds) {
                if (t < 0) {
                    throw new IllegalArgumentException(
                            "GenerationConfig: optStopTokenIds: expected ids >= 0, got " + t);
                }
            }
            return new GenerationConfig(this);
        }
    }
}
