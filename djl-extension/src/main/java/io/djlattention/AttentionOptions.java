/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;

/**
 * Options of {@link AttentionOps#flashAttention}, {@link AttentionOps#flashAttentionVarlen} and
 * {@link AttentionOps#flashAttentionFp8}: causal masking, the softmax scale, the valid key lengths
 * of a right-padded batch, and FlashAttention-2's sliding window (local attention), logit
 * soft-capping and ALiBi slopes (not taken by the FP8 operator).
 * Immutable; build with {@link #builder()}.
 *
 * <p>With {@code L} valid keys and {@code Sq} query rows, {@code o = L - Sq} (bottom-right
 * alignment): query {@code i} sees key {@code j} iff {@code j >= i + o - windowLeft} (when
 * {@code windowLeft >= 0}), {@code j <= i + o + windowRight} (when {@code windowRight >= 0}) and
 * {@code j <= i + o} (when causal). The score {@code s = scale·q·k} becomes {@code softcap ·
 * tanh(s / softcap)} when {@code softcap > 0}, then {@code s - slope_h · |i + o - j|} with ALiBi.
 */
public final class AttentionOptions {

    private static final AttentionOptions DEFAULTS = builder().build();

    private final boolean causal;
    private final Float scale;
    private final NDArray kvLens;
    private final int windowLeft;
    private final int windowRight;
    private final float softcap;
    private final NDArray alibiSlopes;

    private AttentionOptions(Builder builder) {
        this.causal = builder.causal;
        this.scale = builder.scale;
        this.kvLens = builder.kvLens;
        this.windowLeft = builder.windowLeft;
        this.windowRight = builder.windowRight;
        this.softcap = builder.softcap;
        this.alibiSlopes = builder.alibiSlopes;
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

    /**
     * Returns the keys a query sees before its own position: {@code -1} for all (the default).
     *
     * @return the left window size, {@code -1} for unbounded
     */
    public int getWindowLeft() {
        return windowLeft;
    }

    /**
     * Returns the keys a query sees after its own position: {@code -1} for all (the default).
     *
     * @return the right window size, {@code -1} for unbounded
     */
    public int getWindowRight() {
        return windowRight;
    }

    /**
     * Returns the logit soft-cap: {@code 0} for none (the default).
     *
     * @return the soft-cap, {@code >= 0}
     */
    public float getSoftcap() {
        return softcap;
    }

    /**
     * Returns the ALiBi slopes, float32 {@code [Hq]} or {@code [B, Hq]}, or {@code null} for none.
     *
     * @return the ALiBi slopes, or {@code null}
     */
    public NDArray getAlibiSlopes() {
        return alibiSlopes;
    }

    /** The scale rule of every attention operator: a finite value. */
    static void checkScale(float scale) {
        if (!Float.isFinite(scale)) {
            throw new IllegalArgumentException("scale: expected a finite value, got " + scale);
        }
    }

    /** The window rule of the flash and paged operators: -1 (unbounded) or a size >= 0. */
    static void checkWindowSize(String name, int size) {
        if (size < -1) {
            throw new IllegalArgumentException(
                    name + ": expected -1 (unbounded) or a value >= 0, got " + size);
        }
    }

    /** The soft-cap rule of the flash and paged operators: 0 (none) or a finite value > 0. */
    static void checkSoftcap(float softcap) {
        if (!Float.isFinite(softcap) || softcap < 0) {
            throw new IllegalArgumentException(
                    "softcap: expected a finite value >= 0 (0: none), got " + softcap);
        }
    }

    /** Builds {@link AttentionOptions}. */
    public static final class Builder {

        private boolean causal;
        private Float scale;
        private NDArray kvLens;
        private int windowLeft = -1;
        private int windowRight = -1;
        private float softcap;
        private NDArray alibiSlopes;

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
            checkScale(scale);
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
         * Sets a sliding window (local attention, as Mistral's {@code sliding_window}): query
         * {@code i} sees keys {@code j} with {@code i + o - left <= j <= i + o + right}, {@code o =
         * L - Sq}; {@code -1} leaves a side unbounded (default: both). A causal decoder with a
         * window of {@code W} tokens uses {@code optWindow(W - 1, 0)} with {@link #optCausal}.
         * Rows that see no key get a zero output and a logsumexp of {@code -inf}.
         *
         * @param left the keys before the query's position, {@code >= -1}
         * @param right the keys after the query's position, {@code >= -1}
         * @return this builder
         */
        public Builder optWindow(int left, int right) {
            checkWindowSize("window left", left);
            checkWindowSize("window right", right);
            this.windowLeft = left;
            this.windowRight = right;
            return this;
        }

        /**
         * Sets the logit soft-cap (Gemma-2's {@code attn_logit_softcapping}): each scaled score
         * {@code s} becomes {@code softcap · tanh(s / softcap)} before the mask and softmax;
         * {@code 0} for none (the default).
         *
         * @param softcap the cap, finite and {@code >= 0}
         * @return this builder
         */
        public Builder optSoftcap(float softcap) {
            checkSoftcap(softcap);
            this.softcap = softcap;
            return this;
        }

        /**
         * Sets ALiBi slopes: {@code -slope_h · |i + o - j|} is added to the (soft-capped) score
         * of query {@code i} and key {@code j} in head {@code h}. One slope per query head,
         * float32 {@code [Hq]}, or per batch row and head {@code [B, Hq]} (for varlen calls,
         * {@code B} is the number of sequences); on the device of the queries. The operator
         * checks the sizes against the call.
         *
         * @param alibiSlopes float32 {@code [Hq]} or {@code [B, Hq]}, or {@code null} for none
         * @return this builder
         */
        public Builder optAlibiSlopes(NDArray alibiSlopes) {
            if (alibiSlopes != null) {
                if (alibiSlopes.getDataType() != DataType.FLOAT32) {
                    throw new IllegalArgumentException(
                            "alibiSlopes: expected dtype float32, got " + alibiSlopes.getDataType());
                }
                int rank = alibiSlopes.getShape().dimension();
                if (rank != 1 && rank != 2) {
                    throw new IllegalArgumentException(
                            "alibiSlopes: expected 1 dim [Hq] or 2 dims [B, Hq], got " + rank);
                }
            }
            this.alibiSlopes = alibiSlopes;
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
