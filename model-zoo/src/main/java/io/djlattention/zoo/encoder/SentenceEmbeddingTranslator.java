/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
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
 * Sentence embeddings ({@code String → float[]}) from a {@link BertEncoder}, as sentence-transformers
 * computes them: tokens of the text ({@code [CLS] text [SEP]}), the encoder, mean pooling over the
 * attention mask, then (by default) L2 normalisation.
 *
 * <p>{@code batchPredict} tokenises the whole batch at once and pads it to its longest text; the
 * encoder's fused path then runs the valid tokens only. The model's block should output pooled
 * embeddings ({@link BertEncoder.Output#SENTENCE_EMBEDDING}, {@code (B, C)}; {@link EncoderModels}
 * builds it so); a block that outputs the last hidden state {@code (B, S, C)} is mean-pooled here
 * over the attention mask.
 *
 * <p>Input rules: a text longer than {@code maxLength} tokens (special tokens included; default and
 * upper bound {@code max_position_embeddings}) is truncated to {@code maxLength} tokens, as a
 * Hugging Face tokenizer with {@code truncation=True} does, and one warning is logged per call; the
 * empty string embeds {@code [CLS] [SEP]}, as transformers does; an empty batch gives an empty list;
 * a {@code null} text is refused ({@link IllegalArgumentException} inside DJL's {@code
 * TranslateException}).
 */
public final class SentenceEmbeddingTranslator implements Translator<String, float[]> {

    private static final Logger logger = LoggerFactory.getLogger(SentenceEmbeddingTranslator.class);
    private static final String MASK = "attentionMask";

    private final HuggingFaceTokenizer tokenizer;
    private final int maxLength;
    private final boolean normalize;
    private final long padId;

    private SentenceEmbeddingTranslator(Builder b) {
        tokenizer = b.tokenizer;
        maxLength = b.maxLength;
        normalize = b.normalize;
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
     * Returns whether embeddings are L2-normalised.
     *
     * @return whether embeddings have norm 1
     */
    public boolean isNormalize() {
        return normalize;
    }

    /**
     * Returns the tokenizer, which does not truncate (this translator cuts to {@link
     * #getMaxLength}): callers count a text's tokens with it, e.g. to refuse texts the model would
     * truncate.
     *
     * @return the tokenizer
     */
    public HuggingFaceTokenizer getTokenizer() {
        return tokenizer;
    }

    /**
     * Returns the most tokens a text keeps (special tokens included).
     *
     * @return the maximum length
     */
    public int getMaxLength() {
        return maxLength;
    }

    /**
     * Returns {@link Batchifier#STACK}: the predictor then hands whole batches to {@link
     * #batchProcessInput}, which pads them itself.
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
     * @param input the text
     * @return {@code [inputIds, tokenTypeIds, attentionMask]}, each {@code (1, S)} int64
     */
    @Override
    public NDList processInput(TranslatorContext ctx, String input) {
        return batchProcessInput(ctx, Collections.singletonList(input));
    }

    /**
     * Tokenises a batch, padded to its longest text.
     *
     * @param ctx the context
     * @param inputs the texts
     * @return {@code [inputIds, tokenTypeIds, attentionMask]}, each {@code (B, S)} int64; empty for
     *     an empty batch (the predictor then skips the model)
     */
    @Override
    public NDList batchProcessInput(TranslatorContext ctx, List<String> inputs) {
        NDList list = encode(ctx.getNDManager(), inputs);
        if (!list.isEmpty()) {
            ctx.setAttachment(MASK, list.get(2));
        }
        return list;
    }

    /**
     * Tokenises texts as {@link #batchProcessInput} does (truncation, padding to the longest).
     *
     * @param manager the manager the arrays attach to
     * @param texts the texts
     * @return {@code [inputIds, tokenTypeIds, attentionMask]}, each {@code (B, S)} int64; empty
     *     for no texts
     */
    public NDList encode(NDManager manager, List<String> texts) {
        if (texts.isEmpty()) {
            return new NDList();
        }
        return TextBatch.encode(tokenizer, texts, maxLength, logger).toNDList(manager, padId);
    }

    /**
     * Returns the embedding of one text.
     *
     * @param ctx the context
     * @param list the block's output
     * @return the embedding {@code [C]}
     */
    @Override
    public float[] processOutput(TranslatorContext ctx, NDList list) {
        return batchProcessOutput(ctx, list).get(0);
    }

    /**
     * Returns the embeddings of a batch.
     *
     * @param ctx the context
     * @param list the block's output: {@code (B, C)} pooled, or {@code (B, S, C)} hidden states
     * @return one embedding per text
     */
    @Override
    public List<float[]> batchProcessOutput(TranslatorContext ctx, NDList list) {
        if (list.isEmpty()) {
            return new ArrayList<>();
        }
        NDArray out = list.head().toType(DataType.FLOAT32, false);
        Shape shape = out.getShape();
        if (shape.dimension() == 3) {
            NDArray mask =
                    ((NDArray) ctx.getAttachment(MASK))
                            .toType(DataType.FLOAT32, false)
                            .expandDims(2);
            out =
                    out.mul(mask)
                            .sum(new int[] {1})
                            .div(mask.sum(new int[] {1}).clip(1e-9, Float.MAX_VALUE));
        } else if (shape.dimension() != 2) {
            throw new IllegalArgumentException(
                    "expected the block to output (B, C) embeddings or (B, S, C) hidden states,"
                            + " got "
                            + shape);
        }
        if (normalize) {
            out = out.normalize(2, 1, 1e-12);
        }
        int batch = (int) out.getShape().get(0);
        int width = (int) out.getShape().get(1);
        float[] flat = out.toFloatArray();
        List<float[]> result = new ArrayList<>(batch);
        for (int i = 0; i < batch; ++i) {
            float[] row = new float[width];
            System.arraycopy(flat, i * width, row, 0, width);
            result.add(row);
        }
        return result;
    }

    /** Builds a {@link SentenceEmbeddingTranslator}. */
    public static final class Builder {

        private HuggingFaceTokenizer tokenizer;
        private int maxLength;
        private boolean normalize = true;
        private long padId;

        Builder() {}

        /**
         * Sets the tokenizer (required); it should add the special tokens and neither truncate
         * nor pad ({@link EncoderModels} creates it so).
         *
         * @param tokenizer the tokenizer of the checkpoint
         * @return this builder
         */
        public Builder setTokenizer(HuggingFaceTokenizer tokenizer) {
            this.tokenizer = tokenizer;
            return this;
        }

        /**
         * Sets the most tokens a text keeps, special tokens included (required; at most the
         * model's {@code max_position_embeddings}).
         *
         * @param maxLength the maximum length, {@code >= 2}
         * @return this builder
         */
        public Builder setMaxLength(int maxLength) {
            this.maxLength = maxLength;
            return this;
        }

        /**
         * Sets whether embeddings are L2-normalised (default true).
         *
         * @param normalize whether to normalise
         * @return this builder
         */
        public Builder optNormalize(boolean normalize) {
            this.normalize = normalize;
            return this;
        }

        /**
         * Sets the id padding positions carry (default 0; the attention mask hides them).
         *
         * @param padId the padding token id
         * @return this builder
         */
        public Builder optPadTokenId(long padId) {
            this.padId = padId;
            return this;
        }

        /**
         * Builds the translator.
         *
         * @return the translator
         */
        public SentenceEmbeddingTranslator build() {
            if (tokenizer == null) {
                throw new IllegalArgumentException("tokenizer: required (setTokenizer)");
            }
            if (maxLength < 2) {
                throw new IllegalArgumentException(
                        "maxLength: expected >= 2 (room for [CLS] and [SEP]), got " + maxLength);
            }
            return new SentenceEmbeddingTranslator(this);
        }
    }
}
