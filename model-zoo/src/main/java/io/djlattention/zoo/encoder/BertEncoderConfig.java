/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.MalformedModelException;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import io.djlattention.zoo.hf.HfCheckpoint;

import java.nio.file.Path;
import java.util.Locale;
import java.util.Set;

/**
 * The shape of a {@link BertEncoder}: BERT as Hugging Face's {@code BertModel} defines it (post-norm
 * LayerNorm, learned absolute positions, token types, erf GELU).
 *
 * <p>Read from a checkpoint's {@code config.json} with {@link #fromCheckpoint}, or built with
 * {@link #builder()} (the sizes are required, {@code setX}; the rest optional, {@code optX}, with
 * {@code BertConfig}'s defaults). all-MiniLM-L6-v2, for example, is {@code
 * builder().setVocabSize(30522).setHiddenSize(384).setNumLayers(6).setNumHeads(12)
 * .setIntermediateSize(1536).optMaxPositions(512).build()} (type vocabulary 2, eps 1e-12
 * are the defaults).
 */
public final class BertEncoderConfig {

    /** The architectures of {@code config.json} whose encoder (and MLM head) this model runs. */
    public static final Set<String> ARCHITECTURES =
            Set.of("BertModel", "BertForMaskedLM", "BertForPreTraining");

    private final int vocabSize;
    private final int hiddenSize;
    private final int numHiddenLayers;
    private final int numAttentionHeads;
    private final int intermediateSize;
    private final int maxPositionEmbeddings;
    private final int typeVocabSize;
    private final double layerNormEps;
    private final int padTokenId;
    private final boolean tieWordEmbeddings;

    private BertEncoderConfig(Builder b) {
        vocabSize = b.vocabSize;
        hiddenSize = b.hiddenSize;
        numHiddenLayers = b.numHiddenLayers;
        numAttentionHeads = b.numAttentionHeads;
        intermediateSize = b.intermediateSize;
        maxPositionEmbeddings = b.maxPositionEmbeddings;
        typeVocabSize = b.typeVocabSize;
        layerNormEps = b.layerNormEps;
        padTokenId = b.padTokenId;
        tieWordEmbeddings = b.tieWordEmbeddings;
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
     * Reads the configuration from a checkpoint's {@code config.json}. Keys it does not name take
     * the defaults of transformers' {@code BertConfig} (vocabulary 30522, hidden 768, 12 layers, 12
     * heads, intermediate 3072, 512 positions, 2 token types, eps 1e-12, pad id 0, tied word
     * embeddings), as transformers itself does.
     *
     * <p>Refused, with the file and the key in the message: an architecture that is not BERT
     * ({@code architectures} other than {@code BertModel}, {@code BertForMaskedLM}, {@code
     * BertForPreTraining} and {@code model_type} not {@code bert}), {@code hidden_act} other than
     * {@code "gelu"} (the erf form), {@code position_embedding_type} other than {@code absolute},
     * {@code is_decoder: true}, a {@code hidden_size} not divisible by {@code
     * num_attention_heads}, and non-positive sizes.
     *
     * @param checkpoint the checkpoint
     * @return the configuration
     * @throws MalformedModelException if the configuration is not a supported BERT encoder
     */
    public static BertEncoderConfig fromCheckpoint(HfCheckpoint checkpoint)
            throws MalformedModelException {
        JsonObject json = checkpoint.getConfig();
        Path file = checkpoint.getDirectory().resolve("config.json");
        String modelType = string(json, file, "model_type", "");
        JsonElement archs = json.get("architectures");
        boolean bertArch = false;
        String named = null;
        if (archs != null && archs.isJsonArray() && !archs.getAsJsonArray().isEmpty()) {
            named = archs.getAsJsonArray().get(0).getAsString();
            bertArch = ARCHITECTURES.contains(named);
        }
        if (!bertArch && !"bert".equals(modelType)) {
            throw new MalformedModelException(
                    file
                            + ": architectures "
                            + (named == null ? "(absent)" : '"' + named + '"')
                            + " with model_type \""
                            + modelType
                            + "\" is not a BERT encoder (expected architectures "
                            + ARCHITECTURES
                            + " or model_type \"bert\")");
        }
        String act = string(json, file, "hidden_act", "gelu");
        if (!"gelu".equals(act)) {
            throw new MalformedModelException(
                    file
                            + ": hidden_act \""
                            + act
                            + "\" is not supported (the BERT encoder runs the erf GELU,"
                            + " hidden_act \"gelu\")");
        }
        String positions = string(json, file, "position_embedding_type", "absolute");
        if (!"absolute".equals(positions)) {
            throw new MalformedModelException(
                    file
                            + ": position_embedding_type \""
                            + positions
                            + "\" is not supported (only learned absolute positions, \"absolute\")");
        }
        JsonElement decoder = json.get("is_decoder");
        if (decoder != null && decoder.isJsonPrimitive() && decoder.getAsBoolean()) {
            throw new MalformedModelException(
                    file + ": is_decoder true is not supported (a bidirectional encoder only)");
        }
        Builder b =
                builder()
                        .setVocabSize(integer(json, file, "vocab_size", 30522))
                        .setHiddenSize(integer(json, file, "hidden_size", 768))
                        .setNumLayers(integer(json, file, "num_hidden_layers", 12))
                        .setNumHeads(integer(json, file, "num_attention_heads", 12))
                        .setIntermediateSize(integer(json, file, "intermediate_size", 3072))
                        .optMaxPositions(
                                integer(json, file, "max_position_embeddings", 512))
                        .optTypeVocabSize(integer(json, file, "type_vocab_size", 2))
                        .optLayerNormEps(number(json, file, "layer_norm_eps", 1e-12))
                        .optPadTokenId(integer(json, file, "pad_token_id", 0))
                        .optTieWordEmbeddings(bool(json, file, "tie_word_embeddings", true));
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new MalformedModelException(file + ": " + e.getMessage(), e);
        }
    }

    private static JsonElement value(JsonObject json, String key) {
        JsonElement e = json.get(key);
        return e == null || e.isJsonNull() ? null : e;
    }

    private static String string(JsonObject json, Path file, String key, String fallback)
            throws MalformedModelException {
        JsonElement e = value(json, key);
        if (e == null) {
            return fallback;
        }
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isString()) {
            throw new MalformedModelException(file + ": " + key + ": expected a string, got " + e);
        }
        return e.getAsString();
    }

    private static int integer(JsonObject json, Path file, String key, int fallback)
            throws MalformedModelException {
        JsonElement e = value(json, key);
        if (e == null) {
            return fallback;
        }
        if (e.isJsonPrimitive() && e.getAsJsonPrimitive().isNumber()) {
            double d = e.getAsDouble();
            if (d == Math.rint(d) && Math.abs(d) <= Integer.MAX_VALUE) {
                return (int) d;
            }
        }
        throw new MalformedModelException(file + ": " + key + ": expected an integer, got " + e);
    }

    private static double number(JsonObject json, Path file, String key, double fallback)
            throws MalformedModelException {
        JsonElement e = value(json, key);
        if (e == null) {
            return fallback;
        }
        if (e.isJsonPrimitive() && e.getAsJsonPrimitive().isNumber()) {
            return e.getAsDouble();
        }
        throw new MalformedModelException(file + ": " + key + ": expected a number, got " + e);
    }

    private static boolean bool(JsonObject json, Path file, String key, boolean fallback)
            throws MalformedModelException {
        JsonElement e = value(json, key);
        if (e == null) {
            return fallback;
        }
        if (e.isJsonPrimitive() && e.getAsJsonPrimitive().isBoolean()) {
            return e.getAsBoolean();
        }
        throw new MalformedModelException(file + ": " + key + ": expected true or false, got " + e);
    }

    /**
     * Returns the size of the token vocabulary {@code V} (rows of the word embedding).
     *
     * @return {@code vocab_size}
     */
    public int getVocabSize() {
        return vocabSize;
    }

    /**
     * Returns the hidden size {@code C}.
     *
     * @return {@code hidden_size}
     */
    public int getHiddenSize() {
        return hiddenSize;
    }

    /**
     * Returns the number of encoder layers.
     *
     * @return {@code num_hidden_layers}
     */
    public int getNumLayers() {
        return numHiddenLayers;
    }

    /**
     * Returns the number of attention heads {@code H}.
     *
     * @return {@code num_attention_heads}
     */
    public int getNumHeads() {
        return numAttentionHeads;
    }

    /**
     * Returns the head dim {@code D = C / H}.
     *
     * @return the head dim
     */
    public int getHeadDim() {
        return hiddenSize / numAttentionHeads;
    }

    /**
     * Returns the width of the feed-forward block.
     *
     * @return {@code intermediate_size}
     */
    public int getIntermediateSize() {
        return intermediateSize;
    }

    /**
     * Returns the number of learned positions: the longest sequence, special tokens included.
     *
     * @return {@code max_position_embeddings}
     */
    public int getMaxPositions() {
        return maxPositionEmbeddings;
    }

    /**
     * Returns the number of token types (segment ids).
     *
     * @return {@code type_vocab_size}
     */
    public int getTypeVocabSize() {
        return typeVocabSize;
    }

    /**
     * Returns the epsilon of every LayerNorm.
     *
     * @return {@code layer_norm_eps}
     */
    public double getLayerNormEps() {
        return layerNormEps;
    }

    /**
     * Returns the id of the padding token.
     *
     * @return {@code pad_token_id}
     */
    public int getPadTokenId() {
        return padTokenId;
    }

    /**
     * Returns whether the masked-LM decoder reuses the word embedding as its weight.
     *
     * @return {@code tie_word_embeddings}
     */
    public boolean isTieWordEmbeddings() {
        return tieWordEmbeddings;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return String.format(
                Locale.ROOT,
                "BertEncoderConfig{vocab_size=%d, hidden_size=%d, num_hidden_layers=%d,"
                        + " num_attention_heads=%d, intermediate_size=%d,"
                        + " max_position_embeddings=%d, type_vocab_size=%d, layer_norm_eps=%g,"
                        + " pad_token_id=%d}",
                vocabSize,
                hiddenSize,
                numHiddenLayers,
                numAttentionHeads,
                intermediateSize,
                maxPositionEmbeddings,
                typeVocabSize,
                layerNormEps,
                padTokenId);
    }

    /** Builds a {@link BertEncoderConfig}. */
    public static final class Builder {

        private int vocabSize;
        private int hiddenSize;
        private int numHiddenLayers;
        private int numAttentionHeads;
        private int intermediateSize;
        private int maxPositionEmbeddings = 512;
        private int typeVocabSize = 2;
        private double layerNormEps = 1e-12;
        private int padTokenId;
        private boolean tieWordEmbeddings = true;

        Builder() {}

        /**
         * Sets the size of the token vocabulary (required).
         *
         * @param vocabSize {@code vocab_size}
         * @return this builder
         */
        public Builder setVocabSize(int vocabSize) {
            this.vocabSize = vocabSize;
            return this;
        }

        /**
         * Sets the hidden size (required).
         *
         * @param hiddenSize {@code hidden_size}, divisible by the number of heads
         * @return this builder
         */
        public Builder setHiddenSize(int hiddenSize) {
            this.hiddenSize = hiddenSize;
            return this;
        }

        /**
         * Sets the number of encoder layers (required).
         *
         * @param numHiddenLayers {@code num_hidden_layers}
         * @return this builder
         */
        public Builder setNumLayers(int numHiddenLayers) {
            this.numHiddenLayers = numHiddenLayers;
            return this;
        }

        /**
         * Sets the number of attention heads (required).
         *
         * @param numAttentionHeads {@code num_attention_heads}
         * @return this builder
         */
        public Builder setNumHeads(int numAttentionHeads) {
            this.numAttentionHeads = numAttentionHeads;
            return this;
        }

        /**
         * Sets the width of the feed-forward block (required).
         *
         * @param intermediateSize {@code intermediate_size}
         * @return this builder
         */
        public Builder setIntermediateSize(int intermediateSize) {
            this.intermediateSize = intermediateSize;
            return this;
        }

        /**
         * Sets the number of learned positions (default 512).
         *
         * @param maxPositionEmbeddings {@code max_position_embeddings}
         * @return this builder
         */
        public Builder optMaxPositions(int maxPositionEmbeddings) {
            this.maxPositionEmbeddings = maxPositionEmbeddings;
            return this;
        }

        /**
         * Sets the number of token types (default 2).
         *
         * @param typeVocabSize {@code type_vocab_size}
         * @return this builder
         */
        public Builder optTypeVocabSize(int typeVocabSize) {
            this.typeVocabSize = typeVocabSize;
            return this;
        }

        /**
         * Sets the LayerNorm epsilon (default 1e-12).
         *
         * @param layerNormEps {@code layer_norm_eps}, finite and {@code >= 0}
         * @return this builder
         */
        public Builder optLayerNormEps(double layerNormEps) {
            this.layerNormEps = layerNormEps;
            return this;
        }

        /**
         * Sets the padding token id (default 0).
         *
         * @param padTokenId {@code pad_token_id}
         * @return this builder
         */
        public Builder optPadTokenId(int padTokenId) {
            this.padTokenId = padTokenId;
            return this;
        }

        /**
         * Sets whether the masked-LM decoder reuses the word embedding (default true).
         *
         * @param tieWordEmbeddings {@code tie_word_embeddings}
         * @return this builder
         */
        public Builder optTieWordEmbeddings(boolean tieWordEmbeddings) {
            this.tieWordEmbeddings = tieWordEmbeddings;
            return this;
        }

        /**
         * Builds the configuration.
         *
         * @return the configuration
         * @throws IllegalArgumentException naming the key of a missing or invalid value
         */
        public BertEncoderConfig build() {
            positive("vocab_size", vocabSize);
            positive("hidden_size", hiddenSize);
            positive("num_hidden_layers", numHiddenLayers);
            positive("num_attention_heads", numAttentionHeads);
            positive("intermediate_size", intermediateSize);
            positive("max_position_embeddings", maxPositionEmbeddings);
            positive("type_vocab_size", typeVocabSize);
            if (hiddenSize % numAttentionHeads != 0) {
                throw new IllegalArgumentException(
                        "hidden_size "
                                + hiddenSize
                                + " is not divisible by num_attention_heads "
                                + numAttentionHeads);
            }
            if (!(layerNormEps >= 0) || Double.isInfinite(layerNormEps)) {
                throw new IllegalArgumentException(
                        "layer_norm_eps: expected a finite value >= 0, got " + layerNormEps);
            }
            if (padTokenId < 0 || padTokenId >= vocabSize) {
                throw new IllegalArgumentException(
                        "pad_token_id: expected a value in [0, vocab_size = "
                                + vocabSize
                                + "), got "
                                + padTokenId);
            }
            return new BertEncoderConfig(this);
        }

        private static void positive(String key, int value) {
            if (value <= 0) {
                throw new IllegalArgumentException(
                        key + ": expected a positive value (required), got " + value);
            }
        }
    }
}
