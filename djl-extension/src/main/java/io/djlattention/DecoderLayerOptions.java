/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import java.util.Objects;

/**
 * The settings of one {@link DecoderLayerOps#decoderLayer} call that are not arrays: heads, norm,
 * activation, attention scale, sliding window, soft-cap and RoPE pairing. Immutable; made once
 * per layer at load.
 */
public final class DecoderLayerOptions {

    /** The norm before each sub-layer (and the extra norms, which are always RMS). */
    public enum Norm {
        /** RMSNorm (LLaMA, Mistral, Gemma-2): {@code x / rms(x) · weight}. */
        RMS,
        /** LayerNorm (GPT-2): {@code (x - mean) / std · weight + bias}. */
        LAYER
    }

    /** The MLP's activation. */
    public enum Activation {
        /** {@code silu(gate) · up}; the up weight holds gate rows then up rows. */
        SWIGLU,
        /** {@code gelu_tanh(gate) · up} (Gemma-2's {@code gelu_pytorch_tanh}). */
        GEGLU_TANH,
        /** {@code gelu_tanh(x)} (GPT-2's {@code gelu_new}); not gated. */
        GELU_TANH
    }

    private final int numHeads;
    private final Norm norm;
    private final Activation activation;
    private final float normEps;
    private final float scale;
    private final int windowLeft;
    private final float softcap;
    private final boolean ropeInterleaved;

    private DecoderLayerOptions(Builder b) {
        numHeads = b.numHeads;
        norm = b.norm;
        activation = b.activation;
        normEps = b.normEps;
        scale = b.scale;
        windowLeft = b.windowLeft;
        softcap = b.softcap;
        ropeInterleaved = b.ropeInterleaved;
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
     * Returns the query heads Hq.
     *
     * @return the heads
     */
    public int getNumHeads() {
        return numHeads;
    }

    /**
     * Returns the norm.
     *
     * @return the norm
     */
    public Norm getNorm() {
        return norm;
    }

    /**
     * Returns the activation.
     *
     * @return the activation
     */
    public Activation getActivation() {
        return activation;
    }

    /**
     * Returns the norms' epsilon.
     *
     * @return epsilon
     */
    public float getNormEps() {
        return normEps;
    }

    /**
     * Returns the factor on {@code q·k}.
     *
     * @return the scale
     */
    public float getScale() {
        return scale;
    }

    /**
     * Returns the keys before a row's position it sees, or -1 for all.
     *
     * @return the window
     */
    public int getWindowLeft() {
        return windowLeft;
    }

    /**
     * Returns the score soft-cap (0: none).
     *
     * @return the cap
     */
    public float getSoftcap() {
        return softcap;
    }

    /**
     * Returns whether RoPE pairs {@code (2i, 2i+1)} (GPT-J, llama2.c) rather than {@code (i, i +
     * R/2)} (Hugging Face LLaMA).
     *
     * @return the pairing
     */
    public boolean isRopeInterleaved() {
        return ropeInterleaved;
    }

    /** Builds {@link DecoderLayerOptions}. */
    public static final class Builder {
        private int numHeads;
        private Norm norm = Norm.RMS;
        private Activation activation = Activation.SWIGLU;
        private float normEps = 1e-5f;
        private Float scale;
        private int windowLeft = -1;
        private float softcap;
        private boolean ropeInterleaved;

        private Builder() {}

        /**
         * Sets the query heads Hq (required); the KV heads and head dim come from the cache.
         *
         * @param numHeads {@code >= 1}, a multiple of the cache's KV heads
         * @return this builder
         */
        public Builder setNumHeads(int numHeads) {
            if (numHeads < 1) {
                throw new IllegalArgumentException("numHeads: expected >= 1, got " + numHeads);
            }
            this.numHeads = numHeads;
            return this;
        }

        /**
         * Sets the norm (default RMS).
         *
         * @param norm the norm
         * @return this builder
         */
        public Builder optNorm(Norm norm) {
            this.norm = Objects.requireNonNull(norm, "norm");
            return this;
        }

        /**
         * Sets the activation (default SwiGLU).
         *
         * @param activation the activation
         * @return this builder
         */
        public Builder optActivation(Activation activation) {
            this.activation = Objects.requireNonNull(activation, "activation");
            return this;
        }

        /**
         * Sets the norms' epsilon (default 1e-5).
         *
         * @param normEps finite, {@code >= 0}
         * @return this builder
         */
        public Builder optNormEps(float normEps) {
            if (!Float.isFinite(normEps) || normEps < 0) {
                throw new IllegalArgumentException(
                        "normEps: expected a finite value >= 0, got " + normEps);
            }
            this.normEps = normEps;
            return this;
        }

        /**
         * Sets the factor on {@code q·k} (required).
         *
         * @param scale finite, usually {@code 1/sqrt(D)}
         * @return this builder
         */
        public Builder setScale(float scale) {
            if (!Float.isFinite(scale)) {
                throw new IllegalArgumentException("scale: expected a finite value, got " + scale);
            }
            this.scale = scale;
            return this;
        }

        /**
         * Sets the sliding window: the keys before a row's position it sees (default -1: all).
         *
         * @param windowLeft {@code >= -1}
         * @return this builder
         */
        public Builder optWindowLeft(int windowLeft) {
            AttentionOptions.checkWindowSize("windowLeft", windowLeft);
            this.windowLeft = windowLeft;
            return this;
        }

        /**
         * Sets the score soft-cap (default 0: none).
         *
         * @param softcap finite, {@code >= 0}
         * @return this builder
         */
        public Builder optSoftcap(float softcap) {
            AttentionOptions.checkSoftcap(softcap);
            this.softcap = softcap;
            return this;
        }

        /**
         * Sets the RoPE pairing (default false: Hugging Face's halves).
         *
         * @param ropeInterleaved true for pairs {@code (2i, 2i+1)}
         * @return this builder
         */
        public Builder optRopeInterleaved(boolean ropeInterleaved) {
            this.ropeInterleaved = ropeInterleaved;
            return this;
        }

        /**
         * Builds the options.
         *
         * @return the options
         * @throws IllegalArgumentException if the heads or the scale were not set
         */
        public DecoderLayerOptions build() {
            if (numHeads == 0) {
                throw new IllegalArgumentException("numHeads: required (setNumHeads)");
            }
            if (scale == null) {
                throw new IllegalArgumentException("scale: required (setScale)");
            }
            return new DecoderLayerOptions(this);
        }
    }
}
