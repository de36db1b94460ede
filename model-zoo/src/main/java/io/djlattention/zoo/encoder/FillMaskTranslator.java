/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.modality.Classifications;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.translate.Batchifier;
import ai.djl.translate.Translator;
import ai.djl.translate.TranslatorContext;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Fill-mask ({@code String → Classifications}) with a {@link BertEncoder} that has the masked-LM
 * head: the text must contain the tokenizer's mask token (for BERT {@code [MASK]}) exactly once;
 * the result holds the {@code topK} most probable tokens at that position (softmax over the
 * vocabulary), each named by the tokenizer's decoding of that one token (special tokens decode to
 * the empty string), as transformers' fill-mask pipeline names them.
 *
 * <p>The model's block must output masked-LM logits ({@link BertEncoder.Output#MASKED_LM}); {@link
 * EncoderModels} builds it so. Input rules as {@link SentenceEmbeddingTranslator}: texts longer than
 * {@code maxLength} tokens are truncated with one warning per call (a mask cut off by the
 * truncation is then an error), an empty batch gives an empty list; a text without the mask token,
 * or with more than one, is refused ({@link IllegalArgumentException} inside DJL's {@code
 * TranslateException}).
 */
public final class FillMaskTranslator implements Translator<String, Classifications> {

    private static final Logger logger = LoggerFactory.getLogger(FillMaskTranslator.class);

    private final HuggingFaceTokenizer tokenizer;
    private final int maxLength;
    private final String maskToken;
    private final long maskId;
    private final int topK;
    private final long padId;

    private FillMaskTranslator(Builder b, long maskId) {
        tokenizer = b.tokenizer;
        maxLength = b.maxLength;
        maskToken = b.maskToken;
        this.maskId = maskId;
        topK = b.topK;
        padId = b.padId;
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
     * Returns the mask token.
     *
     * @return the mask token, e.g. {@code [MASK]}
     */
    public String getMaskToken() {
        return maskToken;
    }

    /**
     * Returns the mask token's id.
     *
     * @return the id
     */
    public long getMaskTokenId() {
        return maskId;
    }

    /**
     * Returns {@link Batchifier#STACK}: the predictor hands whole batches to {@link
     * #batchProcessInput}.
     *
     * @return the batchifier
     */
    @Override
    public Batchifier getBatchifier() {
        return Batchifier.STACK;
    }

    /**
     * Tokenises one text.
     *
     * @param ctx the context
     * @param input the text with one mask token
     * @return {@code [inputIds, tokenTypeIds, attentionMask, maskedPositions]}
     */
    @Override
    public NDList processInput(TranslatorContext ctx, String input) {
        return batchProcessInput(ctx, Collections.singletonList(input));
    }

    /**
     * Tokenises a batch, padded to its longest text, and finds each text's mask position.
     *
     * @param ctx the context
     * @param inputs the texts, each with one mask token
     * @return {@code [inputIds (B, S), tokenTypeIds (B, S), attentionMask (B, S),
     *     maskedPositions (B, 1)]} int64; empty for an empty batch
     */
    @Override
    public NDList batchProcessInput(TranslatorContext ctx, List<String> inputs) {
        return encode(ctx.getNDManager(), inputs);
    }

    /**
     * Tokenises texts as {@link #batchProcessInput} does.
     *
     * @param manager the manager the arrays attach to
     * @param texts the texts, each with one mask token
     * @return {@code [inputIds (B, S), tokenTypeIds (B, S), attentionMask (B, S),
     *     maskedPositions (B, 1)]} int64; empty for no texts
     */
    public NDList encode(NDManager manager, List<String> texts) {
        if (texts.isEmpty()) {
            return new NDList();
        }
        TextBatch batch = TextBatch.encode(tokenizer, texts, maxLength, logger);
        long[] positions = new long[batch.size()];
        for (int i = 0; i < batch.size(); ++i) {
            int found = -1;
            long[] ids = batch.ids[i];
            for (int t = 0; t < ids.length; ++t) {
                if (ids[t] == maskId) {
                    if (found >= 0) {
                        throw new IllegalArgumentException(
                                "text "
                                        + i
                                        + ": expected one "
                                        + maskToken
                                        + " token, found more than one");
                    }
                    found = t;
                }
            }
            if (found < 0) {
                throw new IllegalArgumentException(
                        "text "
                                + i
                                + ": no "
                                + maskToken
                                + " token"
                                + (batch.truncated > 0
                                        ? " within the first " + maxLength + " tokens"
                                        : ""));
            }
            positions[i] = found;
        }
        NDList list = batch.toNDList(manager, padId);
        list.add(manager.create(positions, new Shape(positions.length, 1)));
        return list;
    }

    /**
     * Returns the top tokens for one text.
     *
     * @param ctx the context
     * @param list the block's output
     * @return the classifications
     */
    @Override
    public Classifications processOutput(TranslatorContext ctx, NDList list) {
        return batchProcessOutput(ctx, list).get(0);
    }

    /**
     * Returns the top tokens for each text.
     *
     * @param ctx the context
     * @param list the block's output: logits {@code (B, 1, V)}
     * @return one classifications per text, the {@code topK} most probable tokens, best first
     */
    @Override
    public List<Classifications> batchProcessOutput(TranslatorContext ctx, NDList list) {
        if (list.isEmpty()) {
            return new ArrayList<>();
        }
        NDArray logits = list.head();
        Shape shape = logits.getShape();
        if (shape.dimension() != 3 || shape.get(1) != 1) {
            throw new IllegalArgumentException(
                    "expected the block to output masked-LM logits (B, 1, V), got " + shape);
        }
        int batch = (int) shape.get(0);
        NDArray probs = logits.toType(DataType.FLOAT32, false).reshape(batch, -1).softmax(1);
        int k = (int) Math.min(topK, shape.get(2));
        NDList top = probs.topK(k, 1, true, true);
        float[] values = top.get(0).toFloatArray();
        long[] indices = top.get(1).toType(DataType.INT64, false).toLongArray();
        List<Classifications> result = new ArrayList<>(batch);
        for (int b = 0; b < batch; ++b) {
            List<String> names = new ArrayList<>(k);
            List<Double> p = new ArrayList<>(k);
            for (int j = 0; j < k; ++j) {
                names.add(tokenizer.decode(new long[] {indices[b * k + j]}, true));
                p.add((double) values[b * k + j]);
            }
            Classifications c = new Classifications(names, p);
            c.setTopK(k);
            result.add(c);
        }
        return result;
    }

    /** Builds a {@link FillMaskTranslator}. */
    public static final class Builder {

        private HuggingFaceTokenizer tokenizer;
        private int maxLength;
        private String maskToken = "[MASK]";
        private int topK = 5;
        private long padId;

        Builder() {}

        /**
         * Sets the tokenizer (required); it should add the special tokens and neither truncate
         * nor pad.
         *
         * @param tokenizer the tokenizer of the checkpoint
         * @return this builder
         */
        public Builder setTokenizer(HuggingFaceTokenizer tokenizer) {
            this.tokenizer = tokenizer;
            return this;
        }

        /**
         * Sets the most tokens a text keeps, special tokens included (required).
         *
         * @param maxLength the maximum length, {@code >= 2}
         * @return this builder
         */
        public Builder setMaxLength(int maxLength) {
            this.maxLength = maxLength;
            return this;
        }

        /**
         * Sets the mask token (default {@code [MASK]}); it must be one token of the tokenizer.
         *
         * @param maskToken the mask token
         * @return this builder
         */
        public Builder optMaskToken(String maskToken) {
            this.maskToken = maskToken;
            return this;
        }

        /**
         * Sets how many tokens each result holds (default 5).
         *
         * @param topK the number of tokens, {@code >= 1}
         * @return this builder
         */
        public Builder optTopK(int topK) {
            this.topK = topK;
            return this;
        }

        /**
         * Sets the id padding positions carry (default 0).
         *
         * @param padId the padding token id
         * @return this builder
         */
        public Builder optPadTokenId(long padId) {
            this.padId = padId;
            return this;
        }

        /**
         * Builds the translator, finding the mask token's id with the tokenizer.
         *
         * @return the translator
         * @throws IllegalArgumentException if the mask token is not one token of the tokenizer
         */
        public FillMaskTranslator build() {
            if (tokenizer == null) {
                throw new IllegalArgumentException("tokenizer: required (setTokenizer)");
            }
            if (maxLength < 2) {
                throw new IllegalArgumentException(
                        "maxLength: expected >= 2 (room for [CLS] and [SEP]), got " + maxLength);
            }
            if (topK < 1) {
                throw new IllegalArgumentException("topK: expected >= 1, got " + topK);
            }
            if (maskToken == null || maskToken.isEmpty()) {
                throw new IllegalArgumentException("maskToken: expected a token, got none");
            }
            Encoding encoding = tokenizer.encode(maskToken, false, false);
            long[] ids = encoding.getIds();
            if (ids.length != 1 || !maskToken.equals(encoding.getTokens()[0])) {
                throw new IllegalArgumentException(
                        "maskToken: "
                                + maskToken
                                + " is not one token of the tokenizer (it encodes to "
                                + java.util.Arrays.toString(encoding.getTokens())
                                + ")");
            }
            return new FillMaskTranslator(this, ids[0]);
        }
    }
}
