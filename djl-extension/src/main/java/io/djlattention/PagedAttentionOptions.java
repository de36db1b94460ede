/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;

/**
 * Options of the paged operators ({@link AttentionOps#pagedAttention}, {@link
 * AttentionOps#pagedPrefillAttention}): the softmax scale, the causal mask and a sliding window,
 * a logit soft-cap, ALiBi slopes and, for callers that keep their own FP8 cache arrays, the
 * cache's scales. Immutable; build with {@link #builder()}.
 *
 * <p>Query row {@code t} of a sequence's {@code n} new rows sits at position {@code p = context -
 * n + t} (FlashAttention's bottom-right alignment; {@code p < 0} for the first rows of a prefill
 * chunk longer than its context). By default the paged operators are causal: the query sees key
 * {@code j} iff {@code j <= p} and, when {@code windowLeft >= 0}, {@code j >= p - windowLeft}
 * ({@code 0}: only itself); a row that sees no key gives zeros. With {@code optCausal(false)}
 * ({@link AttentionOps#pagedPrefillAttention} only) every row sees all of its sequence's keys, or
 * with {@code windowRight >= 0} those with {@code j <= p + windowRight}. The score {@code s =
 * scale·q·k_j} becomes {@code softcap·tanh(s / softcap)} when {@code softcap > 0}, then gets the
 * ALiBi term {@code -slope·|j - p|} ({@code slope·(j - p)} on the causal keys, as vLLM writes it),
 * the slope of the query head, from one row {@code [Hq]} for every sequence or from row {@code s}
 * of {@code [num_seqs, Hq]} for sequence {@code s}. The window, soft-cap and ALiBi rules are
 * {@link AttentionOptions}'s (Mistral's {@code sliding_window}, Gemma-2's {@code
 * attn_logit_softcapping}, FlashAttention's {@code flash_attn_with_kvcache}).
 */
public final class PagedAttentionOptions {

    private static final PagedAttentionOptions DEFAULTS = builder().build();

    private final Float scale;
    private final NDArray alibiSlopes;
    private final int windowLeft;
    private final boolean causal;
    private final int windowRight;
    private final float softcap;
    private final NDArray keyScale;
    private final NDArray valueScale;

    private PagedAttentionOptions(Builder builder) {
        this.scale = builder.scale;
        this.alibiSlopes = builder.alibiSlopes;
        this.windowLeft = builder.windowLeft;
        this.causal = builder.causal;
        this.windowRight = builder.windowRight;
        this.softcap = builder.softcap;
        this.keyScale = builder.keyScale;
        this.valueScale = builder.valueScale;
    }

    /**
     * Returns the default options: scale {@code 1/sqrt(D)}, causal, no window, no soft-cap, no
     * ALiBi, no FP8 scales.
     *
     * @return the default options
     */
    public static PagedAttentionOptions defaults() {
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
     * Returns the factor on {@code q·k}.
     *
     * @param headDim the head dim {@code D} of the query
     * @return the scale set, or {@code 1/sqrt(headDim)} when none was set
     */
    public float getScale(long headDim) {
        return scale != null ? scale : (float) (1.0 / Math.sqrt(headDim));
    }

    /**
     * Returns the ALiBi slopes, float32 {@code [Hq]} (every sequence) or {@code [num_seqs, Hq]}
     * (row {@code s} for sequence {@code s}), or {@code null} for none.
     *
     * @return the slopes, or {@code null}
     */
    public NDArray getAlibiSlopes() {
        return alibiSlopes;
    }

    /**
     * Returns the keys before the query's position it sees: {@code -1} for all (the default).
     *
     * @return the left window size, {@code -1} for unbounded
     */
    public int getWindowLeft() {
        return windowLeft;
    }

    /**
     * Returns whether each query row sees only the keys up to its own position (the default).
     *
     * @return {@code true} for the causal mask
     */
    public boolean isCausal() {
        return causal;
    }

    /**
     * Returns the keys after the query's position a non-causal query sees: {@code -1} for all
     * (the default). No effect on causal calls.
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
     * Returns the key scales of an FP8 cache given as arrays, or {@code null} for 1.
     *
     * @return float32 {@code [1]} or {@code [Hkv]}, or {@code null}
     */
    public NDArray getKeyScale() {
        return keyScale;
    }

    /**
     * Returns the value scales of an FP8 cache given as arrays, or {@code null} for 1.
     *
     * @return float32 {@code [1]} or {@code [Hkv]}, or {@code null}
     */
    public NDArray getValueScale() {
        return valueScale;
    }

    /** Builds {@link PagedAttentionOptions}. */
    public static final class Builder {

        private Float scale;
        private NDArray alibiSlopes;
        private int windowLeft = -1;
        private boolean causal = true;
        private int windowRight = -1;
        private float softcap;
        private NDArray keyScale;
        private NDArray valueScale;

        Builder() {}

        /**
         * Sets the factor on {@code q·k} (default: {@code 1/sqrt(D)}, {@code D} the query's last
         * dim).
         *
         * @param scale the scale, finite
         * @return this builder
         */
        public Builder optScale(float scale) {
            AttentionOptions.checkScale(scale);
            this.scale = scale;
            return this;
        }

        /**
         * Sets ALiBi slopes, one per query head, on the query's device: one row for every
         * sequence, or one row per sequence (FlashAttention's {@code [batch, heads]}). The
         * operator checks the shape against the call's query heads and sequences.
         *
         * @param alibiSlopes float32 {@code [Hq]} or {@code [num_seqs, Hq]}, or {@code null} for
         *     none
         * @return this builder
         */
        public Builder optAlibiSlopes(NDArray alibiSlopes) {
            if (alibiSlopes != null && alibiSlopes.getDataType() != DataType.FLOAT32) {
                throw new IllegalArgumentException(
                        "alibiSlopes: expected dtype float32, got " + alibiSlopes.getDataType());
            }
            this.alibiSlopes = alibiSlopes;
            return this;
        }

        /**
         * Sets a sliding window: the keys before each query's position it sees.
         *
         * @param windowLeft {@code >= 0}, or {@code -1} for all (the default)
         * @return this builder
         */
        public Builder optWindowLeft(int windowLeft) {
            AttentionOptions.checkWindowSize("windowLeft", windowLeft);
            this.windowLeft = windowLeft;
            return this;
        }

        /**
         * Sets the causal mask ({@code true}, the default) or FlashAttention's non-causal rows
         * ({@code false}): every query row of a prefill chunk sees all of its sequence's keys
         * (within the window). A decode query, the last position of its sequence, sees every key
         * either way.
         *
         * @param causal whether each query sees only the keys up to its position
         * @return this builder
         */
        public Builder optCausal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /**
         * Sets the right edge of a non-causal query's window: the keys after its position it
         * sees. No effect on causal calls (they see none).
         *
         * @param windowRight {@code >= 0}, or {@code -1} for all (the default)
         * @return this builder
         */
        public Builder optWindowRight(int windowRight) {
            AttentionOptions.checkWindowSize("windowRight", windowRight);
            this.windowRight = windowRight;
            return this;
        }

        /**
         * Sets the logit soft-cap.
         *
         * @param softcap the cap, finite and {@code >= 0} ({@code 0}: none, the default)
         * @return this builder
         */
        public Builder optSoftcap(float softcap) {
            AttentionOptions.checkSoftcap(softcap);
            this.softcap = softcap;
            return this;
        }

        /**
         * Sets the scales of an FP8 cache passed as arrays (uint8 caches of OCP e4m3fn bytes,
         * read as {@code byte·scale}). A {@link io.djlattention.paged.PagedKvCache} carries its
         * own scales: the cache forms of the operators reject options that set these.
         *
         * @param keyScale float32 {@code [1]} (per tensor) or {@code [Hkv]} (per head) on the
         *     cache's device, or {@code null} for 1
         * @param valueScale the value scales, likewise
         * @return this builder
         */
        public Builder optKvScales(NDArray keyScale, NDArray valueScale) {
            this.keyScale = keyScale;
            this.valueScale = valueScale;
            return this;
        }

        /**
         * Builds the options.
         *
         * @return the options
         */
        public PagedAttentionOptions build() {
            return new PagedAttentionOptions(this);
        }
    }
}
