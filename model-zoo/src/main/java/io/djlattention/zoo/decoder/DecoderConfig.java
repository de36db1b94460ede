/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.types.DataType;

import java.util.Arrays;

/**
 * The shape of a {@link Decoder}: one of three architectures over the same attention paths.
 *
 * <ul>
 *   <li>{@link Architecture#LLAMA}: pre-norm RMSNorm, rotary position embeddings, SwiGLU MLP {@code
 *       down(silu(gate x) * up x)}, grouped-query attention, no biases (also Mistral: LLaMA with a
 *       sliding window).
 *   <li>{@link Architecture#GEMMA2}: LLaMA's layout with Gemma-2's differences: RMSNorm gains
 *       stored as {@code w} and applied as {@code 1 + w}, four norms per layer (the attention and
 *       MLP outputs are normed before the residual add), GeGLU MLP {@code down(gelu_tanh(gate x) *
 *       up x)}, token embeddings scaled by {@code sqrt(C)} (rounded to the data type).
 *   <li>{@link Architecture#GPT2}: pre-norm LayerNorm with biases, learned absolute positions,
 *       fused QKV projection, GELU (tanh approximation) MLP, multi-head attention.
 * </ul>
 *
 * <p>Built with {@link #builder()}: the sizes are required ({@code setX}), the rest optional
 * ({@code optX}) with the defaults of the architecture.
 *
 * <p>Attention options, the same on every attention path of the decoder: a sliding window ({@link
 * Builder#optSlidingWindow}: each query sees itself and the {@code W - 1} keys before it) on all
 * layers or on the layers {@link Builder#optSlidingLayers} names, a score scale other than {@code
 * D^-1/2} ({@link Builder#optAttentionScale}), soft-capping of the attention scores and of the
 * final logits ({@link Builder#optAttentionSoftcap}, {@link Builder#optFinalSoftcap}: {@code s ->
 * cap · tanh(s / cap)}).
 */
public final class DecoderConfig {

    /** The architecture family. */
    public enum Architecture {
        /** RMSNorm, RoPE, SwiGLU, GQA. */
        LLAMA,
        /** LayerNorm, learned positions, GELU, MHA; HF GPT-2 parameter names. */
        GPT2,
        /** Gemma-2: RMSNorm (1 + w) before and after each sub-layer, GeGLU, scaled embeddings. */
        GEMMA2
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
    /** Llama-3 rope scaling: factor (0: none), low and high frequency factors, original context. */
    private final double[] llama3RopeScaling;
    private final boolean tieEmbeddings;
    private final DataType dataType;
    private final int slidingWindow;
    private final boolean[] slidingLayers;
    private final double attentionScale;
    private final float attentionSoftcap;
    private final float finalSoftcap;

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
        llama3RopeScaling = b.llama3RopeScaling == null ? null : b.llama3RopeScaling.clone();
        tieEmbeddings = b.tieEmbeddings;
        dataType = b.dataType;
        slidingWindow = b.slidingWindow;
        slidingLayers = b.slidingLayers == null ? null : b.slidingLayers.clone();
        attentionScale = b.attentionScale;
        attentionSoftcap = b.attentionSoftcap;
        finalSoftcap = b.finalSoftcap;
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
        b.llama3RopeScaling = llama3RopeScaling == null ? null : llama3RopeScaling.clone();
        b.tieEmbeddings = tieEmbeddings;
        b.dataType = dataType;
        b.slidingWindow = slidingWindow;
        b.slidingLayers = slidingLayers == null ? null : slidingLayers.clone();
        b.attentionScale = attentionScale;
        b.attentionSoftcap = attentionSoftcap;
        b.finalSoftcap = finalSoftcap;
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
     * Returns whether RoPE's frequencies are Llama-3's scaled ones ({@code rope_type: llama3}).
     *
     * @return true with Llama-3 rope scaling
     */
    public boolean hasLlama3RopeScaling() {
        return llama3RopeScaling != null;
    }

    /**
     * Returns RoPE's {@code D/2} inverse frequencies in float32, as transformers computes them:
     * {@code theta^(-2i/D)}, and with Llama-3 rope scaling ({@code _compute_llama3_parameters})
     * the low frequencies (wavelength above {@code original / low_freq_factor}) divided by the
     * factor and the band between {@code original / high_freq_factor} and that smoothly
     * interpolated. The one place both of the decoder's RoPE tables read them from.
     *
     * @return the frequencies
     */
    public float[] getRopeInverseFrequencies() {
        int d = headDim;
        float[] inv = new float[d / 2];
        for (int i = 0; i < inv.length; ++i) {
            inv[i] = (float) (1.0 / Math.pow(ropeTheta, 2.0 * i / d));
        }
        if (llama3RopeScaling == null) {
            return inv;
        }
        float factor = (float) llama3RopeScaling[0];
        float low = (float) llama3RopeScaling[1];
        float high = (float) llama3RopeScaling[2];
        float original = (float) llama3RopeScaling[3];
        float lowWavelen = original / low;
        float highWavelen = original / high;
        for (int i = 0; i < inv.length; ++i) {
            float wavelen = (float) (2 * Math.PI) / inv[i];
            if (wavelen > lowWavelen) {
                inv[i] = inv[i] / factor;
            } else if (wavelen >= highWavelen) {
                float smooth = (original / wavelen - low) / (high - low);
                inv[i] = (1 - smooth) * inv[i] / factor + smooth * inv[i];
            }
        }
        return inv;
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

    /**
     * Returns the sliding window W: the keys a query of a local layer sees, itself included.
     *
     * @return W, or 0 for no window
     */
    public int getSlidingWindow() {
        return slidingWindow;
    }

    /**
     * Returns whether a layer attends through the sliding window.
     *
     * @param layer the layer index
     * @return true if the window applies to the layer
     */
    public boolean isSlidingLayer(int layer) {
        return slidingWindow > 0 && (slidingLayers == null || slidingLayers[layer]);
    }

    /**
     * Returns a layer's left window as the attention operators take it ({@code
     * AttentionOptions.optWindow}, {@code paged_attention}'s {@code window_left}): the query at
     * position p sees keys {@code p - windowLeft ... p}, that is {@code W - 1} for a window of W
     * keys. The one place that maps the checkpoint's window to the operators'.
     *
     * @param layer the layer index
     * @return {@code W - 1} on a local layer, {@code -1} (unbounded) otherwise
     */
    public int getWindowLeft(int layer) {
        return isSlidingLayer(layer) ? slidingWindow - 1 : -1;
    }

    /**
     * Returns the factor of the attention scores {@code q·k}: {@code D^-1/2} unless set otherwise
     * (Gemma-2: {@code query_pre_attn_scalar^-1/2}).
     *
     * @return the scale
     */
    public double getAttentionScale() {
        return attentionScale > 0 ? attentionScale : 1.0 / Math.sqrt(headDim);
    }

    /**
     * Returns the soft-cap of the scaled attention scores.
     *
     * @return the cap, or 0 for none
     */
    public float getAttentionSoftcap() {
        return attentionSoftcap;
    }

    /**
     * Returns the soft-cap of the output logits.
     *
     * @return the cap, or 0 for none
     */
    public float getFinalSoftcap() {
        return finalSoftcap;
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
        private double[] llama3RopeScaling;
        private boolean tieEmbeddings = true;
        private DataType dataType = DataType.FLOAT32;
        private int slidingWindow;
        private boolean[] slidingLayers;
        private double attentionScale;
        private float attentionSoftcap;
        private float finalSoftcap;

        Builder() {}

        /**
         * Sets the architecture (required).
         *
         * @param architecture LLAMA, GPT2 or GEMMA2
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
         * Sets the head dim (default {@code C / Hq}; not GPT-2: some checkpoints, for example
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
         * Sets Llama-3's rope scaling ({@code rope_type: llama3}; default none).
         *
         * @param factor the low frequencies' divisor, {@code >= 1}
         * @param lowFreqFactor {@code > 0}
         * @param highFreqFactor {@code > lowFreqFactor}
         * @param originalMaxPositions the context the frequencies were trained for, {@code >= 1}
         * @return this builder
         * @throws IllegalArgumentException if a value is out of range
         */
        public Builder optLlama3RopeScaling(
                double factor,
                double lowFreqFactor,
                double highFreqFactor,
                int originalMaxPositions) {
            if (!(factor >= 1)
                    || !(lowFreqFactor > 0)
                    || !(highFreqFactor > lowFreqFactor)
                    || originalMaxPositions < 1
                    || !Double.isFinite(factor)
                    || !Double.isFinite(highFreqFactor)) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optLlama3RopeScaling: expected factor >= 1, 0 <"
                                + " low_freq_factor < high_freq_factor, original context >= 1, got "
                                + factor
                                + ", "
                                + lowFreqFactor
                                + ", "
                                + highFreqFactor
                                + ", "
                                + originalMaxPositions);
            }
            llama3RopeScaling =
                    new double[] {factor, lowFreqFactor, highFreqFactor, originalMaxPositions};
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
         * Sets a sliding window (local attention; Mistral's and Gemma-2's {@code sliding_window}):
         * a query at position p sees the keys at {@code p - W + 1 ... p}, W keys with itself.
         *
         * @param window W, {@code >= 1}; 0 (the default) for none
         * @return this builder
         */
        public Builder optSlidingWindow(int window) {
            this.slidingWindow = window;
            return this;
        }

        /**
         * Sets which layers the sliding window applies to (default: every layer). Gemma-2
         * alternates local and global layers.
         *
         * @param layers one entry per layer, true for a local (windowed) layer
         * @return this builder
         */
        public Builder optSlidingLayers(boolean... layers) {
            this.slidingLayers = layers == null ? null : layers.clone();
            return this;
        }

        /**
         * Sets the factor of the attention scores (default {@code D^-1/2}).
         *
         * @param scale the scale, positive
         * @return this builder
         */
        public Builder optAttentionScale(double scale) {
            this.attentionScale = scale;
            return this;
        }

        /**
         * Sets the soft-cap of the scaled attention scores (Gemma-2's {@code
         * attn_logit_softcapping}): {@code s -> cap · tanh(s / cap)} before the mask and softmax.
         *
         * @param cap the cap, positive; 0 (the default) for none
         * @return this builder
         */
        public Builder optAttentionSoftcap(float cap) {
            this.attentionSoftcap = cap;
            return this;
        }

        /**
         * Sets the soft-cap of the output logits (Gemma-2's {@code final_logit_softcapping}).
         *
         * @param cap the cap, positive; 0 (the default) for none
         * @return this builder
         */
        public Builder optFinalSoftcap(float cap) {
            this.finalSoftcap = cap;
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
            if (architecture != Architecture.GPT2 && dim % 2 != 0) {
                throw new IllegalArgumentException(
                        "DecoderConfig: RoPE needs an even head dim, got " + dim);
            }
            if (dataType != DataType.FLOAT32 && dataType != DataType.FLOAT16) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optDataType: expected float32 or float16 (DJL 0.36.0"
                                + " cannot hold bfloat16), got "
                                + dataType);
            }
            if (slidingWindow < 0) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optSlidingWindow: expected a window >= 1 (0: none), got "
                                + slidingWindow);
            }
            if (slidingLayers != null && slidingLayers.length != numLayers) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optSlidingLayers: expected one entry per layer ("
                                + numLayers
                                + "), got "
                                + slidingLayers.length
                                + ": "
                                + Arrays.toString(slidingLayers));
            }
            if (!(attentionScale >= 0) || Double.isInfinite(attentionScale)) {
                throw new IllegalArgumentException(
                        "DecoderConfig: optAttentionScale: expected a finite scale > 0 (0: the"
                                + " default), got "
                                + attentionScale);
            }
            softcap(attentionSoftcap, "optAttentionSoftcap");
            softcap(finalSoftcap, "optFinalSoftcap");
            return new DecoderConfig(this);
        }

        private static void softcap(float cap, String setter) {
            if (!Float.isFinite(cap) || cap < 0) {
                throw new IllegalArgumentException(
                        "DecoderConfig: "
                                + setter
                                + ": expected a finite cap > 0 (0: none), got "
                                + cap);
            }
        }

        private static void positive(int value, String setter) {
            if (value < 1) {
                throw new IllegalArgumentException(
                        "DecoderConfig: " + setter + " is required and must be >= 1, got " + value);
            }
        }
    }
}
