/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;

import java.util.Objects;

/**
 * One decoder layer's arrays in the layout {@link DecoderLayerOps#decoderLayer} reads, made once
 * at load (nothing is converted per call). Matrices are {@code [out, in]}, contiguous, in the
 * stream's dtype; vectors are float32. Holds references only: the caller owns and closes the
 * arrays.
 *
 * <ul>
 *   <li>{@code attnNorm} / {@code mlpNorm}: weight {@code [C]} (RMSNorm: the multiplier as
 *       applied, Gemma-2's {@code 1 + w}) and, for LayerNorm, bias {@code [C]};
 *   <li>{@code qkv}: {@code [(Hq + 2 Hkv) D, C]}, q rows then k then v; bias {@code [(Hq + 2
 *       Hkv) D]} (GPT-2, Qwen-2);
 *   <li>{@code ropeCosSin}: {@code [P, R]}, per position the cos of the {@code R/2} rotary
 *       frequencies then their sin ({@code R <= D}); any rope scaling (Llama-3's included) is a
 *       different table; absent: no RoPE;
 *   <li>{@code out}: {@code [C, Hq D]}, bias {@code [C]};
 *   <li>{@code attnOutNorm} / {@code mlpOutNorm}: Gemma-2's RMS gains {@code [C]} of the
 *       sub-layer outputs;
 *   <li>{@code up}: gated activations {@code [2 I, C]} (gate rows, then up rows), GELU {@code [I,
 *       C]}; bias; {@code down}: {@code [C, I]}, bias {@code [C]}.
 * </ul>
 */
public final class DecoderLayerWeights {

    final NDArray attnNormWeight;
    final NDArray attnNormBias;
    final NDArray qkvWeight;
    final NDArray qkvBias;
    final NDArray ropeCosSin;
    final NDArray outWeight;
    final NDArray outBias;
    final NDArray attnOutNormWeight;
    final NDArray mlpNormWeight;
    final NDArray mlpNormBias;
    final NDArray upWeight;
    final NDArray upBias;
    final NDArray downWeight;
    final NDArray downBias;
    final NDArray mlpOutNormWeight;

    private DecoderLayerWeights(Builder b) {
        attnNormWeight = b.attnNormWeight;
        attnNormBias = b.attnNormBias;
        qkvWeight = b.qkvWeight;
        qkvBias = b.qkvBias;
        ropeCosSin = b.ropeCosSin;
        outWeight = b.outWeight;
        outBias = b.outBias;
        attnOutNormWeight = b.attnOutNormWeight;
        mlpNormWeight = b.mlpNormWeight;
        mlpNormBias = b.mlpNormBias;
        upWeight = b.upWeight;
        upBias = b.upBias;
        downWeight = b.downWeight;
        downBias = b.downBias;
        mlpOutNormWeight = b.mlpOutNormWeight;
    }

    /**
     * Creates a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /** Builds {@link DecoderLayerWeights}: {@code setX} for required arrays, {@code optX} else. */
    public static final class Builder {
        private NDArray attnNormWeight;
        private NDArray attnNormBias;
        private NDArray qkvWeight;
        private NDArray qkvBias;
        private NDArray ropeCosSin;
        private NDArray outWeight;
        private NDArray outBias;
        private NDArray attnOutNormWeight;
        private NDArray mlpNormWeight;
        private NDArray mlpNormBias;
        private NDArray upWeight;
        private NDArray upBias;
        private NDArray downWeight;
        private NDArray downBias;
        private NDArray mlpOutNormWeight;

        private Builder() {}

        /**
         * Sets the attention's input norm.
         *
         * @param weight float32 {@code [C]}
         * @param bias float32 {@code [C]} for LayerNorm, or null
         * @return this builder
         */
        public Builder setAttentionNorm(NDArray weight, NDArray bias) {
            attnNormWeight = Objects.requireNonNull(weight, "attention norm weight");
            attnNormBias = bias;
            return this;
        }

        /**
         * Sets the stacked q|k|v projection.
         *
         * @param weight {@code [(Hq + 2 Hkv) D, C]}
         * @param bias float32 {@code [(Hq + 2 Hkv) D]}, or null
         * @return this builder
         */
        public Builder setQkv(NDArray weight, NDArray bias) {
            qkvWeight = Objects.requireNonNull(weight, "qkv weight");
            qkvBias = bias;
            return this;
        }

        /**
         * Sets the rotary table (absent: no RoPE).
         *
         * @param cosSin float32 {@code [P, R]}
         * @return this builder
         */
        public Builder optRope(NDArray cosSin) {
            ropeCosSin = cosSin;
            return this;
        }

        /**
         * Sets the attention's output projection.
         *
         * @param weight {@code [C, Hq D]}
         * @param bias float32 {@code [C]}, or null
         * @return this builder
         */
        public Builder setOut(NDArray weight, NDArray bias) {
            outWeight = Objects.requireNonNull(weight, "out weight");
            outBias = bias;
            return this;
        }

        /**
         * Sets Gemma-2's norm of the attention output (its {@code post_attention_layernorm}).
         *
         * @param gain float32 {@code [C]}, {@code 1 + w}
         * @return this builder
         */
        public Builder optAttentionOutNorm(NDArray gain) {
            attnOutNormWeight = gain;
            return this;
        }

        /**
         * Sets the MLP's input norm.
         *
         * @param weight float32 {@code [C]}
         * @param bias float32 {@code [C]} for LayerNorm, or null
         * @return this builder
         */
        public Builder setMlpNorm(NDArray weight, NDArray bias) {
            mlpNormWeight = Objects.requireNonNull(weight, "MLP norm weight");
            mlpNormBias = bias;
            return this;
        }

        /**
         * Sets the MLP's up (gated: gate|up) projection.
         *
         * @param weight {@code [2 I, C]} gated, {@code [I, C]} GELU
         * @param bias float32, or null
         * @return this builder
         */
        public Builder setUp(NDArray weight, NDArray bias) {
            upWeight = Objects.requireNonNull(weight, "up weight");
            upBias = bias;
            return this;
        }

        /**
         * Sets the MLP's down projection.
         *
         * @param weight {@code [C, I]}
         * @param bias float32 {@code [C]}, or null
         * @return this builder
         */
        public Builder setDown(NDArray weight, NDArray bias) {
            downWeight = Objects.requireNonNull(weight, "down weight");
            downBias = bias;
            return this;
        }

        /**
         * Sets Gemma-2's norm of the MLP output (its {@code post_feedforward_layernorm}).
         *
         * @param gain float32 {@code [C]}, {@code 1 + w}
         * @return this builder
         */
        public Builder optMlpOutNorm(NDArray gain) {
            mlpOutNormWeight = gain;
            return this;
        }

        /**
         * Builds the weights.
         *
         * @return the weights
         * @throws IllegalArgumentException if a required array was not set
         */
        public DecoderLayerWeights build() {
            String[] names = {"attention norm", "qkv", "out", "MLP norm", "up", "down"};
            NDArray[] required = {
                attnNormWeight, qkvWeight, outWeight, mlpNormWeight, upWeight, downWeight
            };
            for (int i = 0; i < names.length; ++i) {
                if (required[i] == null) {
                    throw new IllegalArgumentException(names[i] + " weights: required");
                }
            }
            return new DecoderLayerWeights(this);
        }
    }
}
