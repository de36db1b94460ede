/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.types.DataType;

/**
 * The shape of a {@link Decoder}: one of two architectures over the same attention paths.
 *
 * <ul>
 *   <li>{@link Architecture#LLAMA}: pre-norm RMSNorm, rotary position embeddings, SwiGLU MLP {@code
 *       down(silu(gate x) * up x)}, grouped-query attention, no biases.
 *   <li>{@link Architecture#GPT2}: pre-norm LayerNorm with biases, learned absolute positions,
 *       fused QKV projection, GELU (tanh approximation) MLP, multi-head attention.
 * </ul>
 *
 * <p>Built with {@link #builder()}: the sizes are required ({@code setX}), the rest optional
 * ({@code optX}) with the defaults of the architecture.
 */
public final class DecoderConfig {

    /** The architecture family. */
    public enum Architecture {
        /** RMSNorm, RoPE, SwiGLU, GQA. */
        LLAMA,
        /** LayerNorm, learned positions, GELU, MHA; HF GPT-2 parameter names. */
        GPT2
    }

    /** How rotary embeddings pair the elements of a head (LLaMA only). */
    public enum RopeStyle {
        /** Pairs (2i, 2i+1): Meta's and llama2.c's checkpoints. */
        INTERLEAVED,
        /** Pairs (i, i + D/2): Hugging Face's {@code rotate_half} layout. */
        HALF
    }

    private final Architecture architecture;
    private final int vocabSize;
    private final int hiddenSize;
    private final int intermediateSize;
    private final int numLayers;
    private final int numHeads;
    private final int numKvHeads;
    private final int headDim;
    private final int maxPositions;
    private final float normEps;
    private final double ropeTheta;
    private final RopeStyle ropeStyle;
    private final boolean tieEmbeddings;
    private final DataType dataType;

    private DecoderConfig(Builder b) {
        architecture = b.architecture;
        vocabSize = b.vocabSize;
        hiddenSize = b.hiddenSize;
        intermediateSize = b.intermediateSize;
        numLayers = b.numLayers;
        numHeads = b.numHeads;
        numKvHeads = b.numKvHeads == 0 ? b.numHeads : b.numKvHeads;
        headDim = b.headDim == 0 ? b.hiddenSize / b.numHeads : b.headDim;
        maxPositions = b.maxPositions;
        normEps = b.normEps;
        ropeTheta = b.ropeTheta;
        ropeStyle = b.ropeStyle;
        tieEmbeddings = b.tieEmbeddings;
        dataType = b.dataType;
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
     * Returns a builder holding this configuration's values.
     *
     * @return a builder
     */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.architecture = architecture;
        b.vocabSize = vocabSize;
        b.hiddenSize = hiddenSize;
        b.intermediateSize = intermediateSize;
        b.numLayers = numLayers;
        b.numHeads = numHeads;
        b.numKvHeads = numKvHeads;
        b.headDim = headDim;
        b.maxPositions = maxPositions;
        b.normEps = normEps;
        b.ropeTheta = ropeTheta;
        b.ropeStyle = ropeStyle;
        b.tieEmbeddings = tieEmbeddings;
        b.dataType = dataType;
        return b;
    }

    /**
     * Returns the architecture.
     *
     * @return the architecture
     */
    public Architecture getArchitecture() {
        return architecture;
    }

    /**
     * Returns the vocabulary size V.
     *
     * @return V
     */
    public int getVocabSize() {
        return vocabSize;
    }

    /**
     * Returns the model width C.
     *
     * @return C
     */
    public int getHiddenSize() {
        return hiddenSize;
    }

    /**
     * Returns the MLP width.
     *
     * @return the intermediate size
     */
    public int getIntermediateSize() {
        return intermediateSize;
    }

    /**
     * Returns the number of layers.
     *
     * @return the layers
     */
    public int getNumLayers() {
        return numLayers;
    }

    /**
     * Returns the query heads Hq.
     *
     * @return Hq
     */
    public int getNumHeads() {
        return numHeads;
    }

    /**
     * Returns the key/value heads Hkv.
     *
     * @return Hkv
     */
    public int getNumKvHeads() {
        return numKvHeads;
    }

    /**
     * Returns the head dim D: {@code C / Hq} unless set otherwise ({@link Builder#optHeadDim}).
     *
     * @return D
     */
    public int getHeadDim() {
        return headDim;
    }

    /**
     * Returns the width of the attention: {@code Hq * D} (the rows of the query projection and
     * the columns of the output projection; C unless the head dim was set otherwise).
     *
     * @return {@code Hq * D}
     */
    public int getAttentionSize() {
        return numHeads * headDim;
    }

    /**
     * Returns the longest sequence (learned positions of GPT-2; a limit for LLaMA).
     *
     * @return max positions
     */
    public int getMaxPositions() {
        return maxPositions;
    }

    /**
     * Returns the epsilon of the norms.
     *
     * @return eps
     */
    public float getNormEps() {
        return normEps;
    }

    /**
     * Returns the RoPE base.
     *
     * @return theta
     */
    public double getRopeTheta() {
        return ropeTheta;
    }

    /**
     * Returns the RoPE pairing.
     *
     * @return the rope style
     */
    public RopeStyle getRopeStyle() {
        return ropeStyle;
    }

    /**
     * Returns whether the output projection is the token embedding.
     *
     * @return true if tied
     */
    public boolean isTieEmbeddings() {
        return tieEmbeddings;
    }

    /**
     * Returns the parameter and activation type (float32 or float16).
     *
     * @return the data type
     */
    public DataType getDataType() {
        return dataType;
    }

    /** Builds a {@link DecoderConfig}. */
    public static final class Builder {

        private Architecture architecture;
        private int vocabSize;
        private int hiddenSize;
        private int intermediateSize;
        private int numLayers;
        private int numHeads;
        private int numKvHeads;
        private int headDim;
        private int maxPositions = 2048;
        private float normEps = 1e-5f;
        private double ropeTheta = 10000.0;
        private RopeStyle ropeStyle = RopeStyle.INTERLEAVED;
        private boolean tieEmbeddings = true;
        private DataType dataType = DataType.FLOAT32;

        Builder() {}

        /**
         * Sets the architecture (required).
         *
         * @param architecture LLAMA or GPT2
         * @return this builder
         */
        public Builder setArchitecture(Architecture architecture) {
            this.architecture = architecture;
            return this;
        }

        /**
         * Sets the vocabulary size (required).
         *
         * @param vocabSize V
         * @return this builder
         */
        public Builder setVocabSize(int vocabSize) {
            this.vocabSize = vocabSize;
            return this;
        }

        /**
         * Sets the model width (required).
         *
         * @param hiddenSize C
         * @return this builder
         */
        public Builder setHiddenSize(int hiddenSize) {
            this.hiddenSize = hiddenSize;
            return this;
        }

        /**
         * Sets the MLP width (required).
         *
         * @param intermediateSize the MLP width (GPT-2: usually 4C)
         * @return this builder
         */
        public Builder setIntermediateSize(int intermediateSize) {
            this.intermediateSize = intermediateSize;
            return this;
        }

        /**
         * Sets the number of layers (required).
         *
         * @param numLayers the layers
         * @return this builder
         */
        public Builder setNumLayers(int numLayers) {
            this.numLayers = numLayers;
            return this;
        }

        /**
         * Sets the query heads (required).
         *
         * @param numHeads Hq
         * @return this builder
         */
        public Builder setNumHeads(int numHeads) {
            this.numHeads = numHeads;
            return this;
        }

        /**
         * Sets the key/value heads (default: Hq; GPT-2 requires Hq).
         *
         * @param numKvHeads Hkv, dividing Hq
         * @return this builder
         */
        public Builder optNumKvHeads(int numKvHeads) {
            this.numKvHeads = numKvHeads;
            return this;
        }

        /**
         * Sets the head dim (default {@code C / Hq}; LLaMA only: some checkpoints, for example
         * those with a {@code head_dim} in their {@code config.json}, project to {@code Hq * D !=
         * C}).
         *
         * @param headDim D, even
         * @return this builder
         */
        public Builder optHeadDim(int headDim) {
            this.headDim = headDim;
            return this;
        }

        /**
         * Sets the longest sequence (default 2048).
         *
         * @param maxPositions max positions
         * @return this builder
         */
        public Builder optMaxPositions(int maxPositions) {
            this.maxPositions = maxPositions;
            return this;
        }

        /**
         * Sets the norm epsilon (default 1e-5).
         *
         * @param normEps eps
         * @return this builder
         */
        public Builder optNormEps(float normEps) {
            this.normEps = normEps;
            return this;
        }

        /**
         * Sets the RoPE base (default 10000).
         *
         * @param ropeTheta theta
         * @return this builder
         */
        public Builder optRopeTheta(double ropeTheta) {
            this.ropeTheta = ropeTheta;
            return this;
        }

        /**
         * Sets the RoPE pairing (default interleaved, as llama2.c).
         *
         * @param ropeStyle the style
         * @return this builder
         */
        public Builder optRopeStyle(RopeStyle ropeStyle) {
            this.ropeStyle = ropeStyle;
            return this;
        }

        /**
         * Sets whether logits use the token embedding (default true).
         *
         * @param tieEmbeddings tie
         * @return this builder
         */
        public Builder optTieEmbeddings(boolean tieEmbeddings) {
            this.tieEmbeddings = tieEmbeddings;
            return this;
        }

        /**
         * Sets the parameter and activation type (default float32; float16 also).
         *
         * @param dataType the type
         * @return this builder
         */
        public Builder optDataType(DataType dataType) {
            this.dataType = dataType;
            return this;
        }

        /**
         * Builds the configuration.
         *
         * @return the configuration
         */
        public DecoderConfig build() {
            if (architecture == null) {
                throw new IllegalArgumentException("DecoderConfig: setArchitecture is required");
            }
            positive(vocabSize, "setVocabSize");
            positive(hiddenSize, "setHiddenSize");
            positive(intermediateSize, "setIntermediateSize");
            positive(numLayers, "setNumLayers");
            positive(numHeads, "setNumHeads");
            positive(maxPositions, "optMaxPositions");
            boolean gpt2Default =
                    architecture != Architecture.GPT2
                            || headDim == 0
                            || headDim * numHeads == hiddenSize;
            if (headDim < 0 || !gpt2Default) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optHeadDim: expected a positive head dim (GPT-2: C / Hq),"
                                + " got "
                                + headDim);
            }
            if (headDim == 0 && hiddenSize % numHeads != 0) {
                throw new IllegalArgumentException(
                        "DecoderConfig: hiddenSize "
                                + hiddenSize
                                + " is not a multiple of numHeads "
                                + numHeads);
            }
            int kv = numKvHeads == 0 ? numHeads : numKvHeads;
            if (kv < 1 || numHeads % kv != 0) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optNumKvHeads: expected a divisor of numHeads "
                                + numHeads
                                + ", got "
                                + kv);
            }
            if (architecture == Architecture.GPT2 && kv != numHeads) {
                throw new IllegalArgumentException(
                        "DecoderConfig: GPT-2 uses multi-head attention: numKvHeads must equal"
                                + " numHeads");
            }
            int dim = headDim == 0 ? hiddenSize / numHeads : headDim;
            if (architecture == Architecture.LLAMA && dim % 2 != 0) {
                throw new IllegalArgumentException(
                        "DecoderConfig: RoPE needs an even head dim, got " + dim);
            }
            if (dataType != DataType.FLOAT32 && dataType != DataType.FLOAT16) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optDataType: expected float32 or float16 (DJL 0.35.1"
                                + " cannot hold bfloat16), got "
                                + dataType);
            }
            return new DecoderConfig(this);
        }

        private static void positive(int value, String setter) {
            if (value < 1) {
                throw new IllegalArgumentException(
                        "DecoderConfig: " + setter + " is required and must be >= 1, got " + value);
            }
        }
    }
}
