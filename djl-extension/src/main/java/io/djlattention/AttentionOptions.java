/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;

/**
 * Options of {@link AttentionOps#flashAttention}: causal masking, the softmax scale and the valid
 * key lengths of a right-padded batch. Immutable; build with {@link #builder()}.
 */
public final class AttentionOptions {

    private static final AttentionOptions DEFAULTS = builder().build();

    private final boolean causal;
    private final Float scale;
    private final NDArray kvLens;

    private AttentionOptions(Builder builder) {
        this.causal = builder.causal;
        this.scale = builder.scale;
        this.kvLens = builder.kvLens;
    }

    /**
     * Returns the default options: not causal, scale {@code 1/sqrt(D)}, every key valid.
     *
     * @return the default options
     */
    public static AttentionOptions defaults() {
        return DEFAULTS;
    }

    /**
     * Creates a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns whether the causal mask applies. It is aligned to the bottom-right corner, as in
     * FlashAttention: with {@code L} valid keys, query {@code i} sees key {@code j} iff {@code j
     * <= i + L - Sq}. When {@code Sq == L} this is the usual lower triangle; when {@code Sq < L}
     * the queries are the last {@code Sq} positions (decoding after a cache).
     *
     * @return whether the causal mask applies
     */
    public boolean isCausal() {
        return causal;
    }

    /**
     * Returns the scale applied to {@code q·kᵀ} before the softmax.
     *
     * @param headDim the head dim {@code D} of the query
     * @return the scale set, or {@code 1/sqrt(headDim)} when none was set
     */
    public double getScale(long headDim) {
        return scale != null ? scale : 1.0 / Math.sqrt(headDim);
    }

    /**
     * Returns the valid keys per batch row, int32 {@code [B]}, or {@code null} for all keys.
     *
     * @return the valid key lengths, or {@code null}
     */
    public NDArray getKvLens() {
        return kvLens;
    }

    /** Builds {@link AttentionOptions}. */
    public static final class Builder {

        private boolean causal;
        private Float scale;
        private NDArray kvLens;

        Builder() {}

        /**
         * Sets whether the causal mask applies (default: no).
         *
         * @param causal whether the causal mask applies
         * @return this builder
         */
        public Builder optCausal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /**
         * Sets the scale applied to {@code q·kᵀ} (default: {@code 1/sqrt(D)}).
         *
         * @param scale the scale, finite
         * @return this builder
         */
        public Builder optScale(float scale) {
            if (!Float.isFinite(scale)) {
                throw new IllegalArgumentException("scale: expected a finite value, got " + scale);
            }
            this.scale = scale;
            return this;
        }

        /**
         * Sets the valid keys per batch row for right-padded keys: int32 {@code [B]}, values in
         * {@code [0, Sk]}; rows past a batch's length are ignored. A query that sees no key
         * gets a zero output and a logsumexp of {@code -inf}.
         *
         * @param kvLens int32 {@code [B]}, or {@code null} for all keys
         * @return this builder
         */
        public Builder optKvLens(NDArray kvLens) {
            this.kvLens = kvLens;
            return this;
        }

        /**
         * Builds the options.
         *
         * @return the options
         */
        public AttentionOptions build() {
            return new AttentionOptions(this);
        }
    }
}
