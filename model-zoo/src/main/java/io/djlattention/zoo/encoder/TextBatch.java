/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;

import org.slf4j.Logger;

import java.util.Arrays;
import java.util.List;

/**
 * Tokenised texts as the encoder's inputs: one right-padded batch (padded to the longest text of
 * the batch) of token ids, token types and the attention mask, each {@code (B, S)} int64.
 *
 * <p>Texts longer than {@code maxLength} tokens (special tokens included) are cut to {@code
 * maxLength} tokens: the first {@code maxLength - 1} and the last one (the closing {@code [SEP]}),
 * which is what a Hugging Face tokenizer with {@code truncation=True, max_length=maxLength} gives
 * for one BERT sentence ({@code [CLS] text [SEP]}); one warning is logged per call that cut any.
 */
final class TextBatch {

    final long[][] ids;
    final long[][] types;
    final int seqLen;
    final int truncated;

    private TextBatch(long[][] ids, long[][] types, int truncated) {
        this.ids = ids;
        this.types = types;
        this.truncated = truncated;
        int longest = 0;
        for (long[] row : ids) {
            longest = Math.max(longest, row.length);
        }
        seqLen = longest;
    }

    /**
     * Tokenises texts.
     *
     * @param tokenizer the tokenizer (adds the special tokens; should neither truncate nor pad)
     * @param texts the texts, none null
     * @param maxLength the most tokens per text, {@code >= 2}
     * @param logger where the truncation warning goes
     * @return the batch
     */
    static TextBatch encode(
            HuggingFaceTokenizer tokenizer, List<String> texts, int maxLength, Logger logger) {
        for (int i = 0; i < texts.size(); ++i) {
            if (texts.get(i) == null) {
                throw new IllegalArgumentException("texts: element " + i + " is null");
            }
        }
        Encoding[] encodings = tokenizer.batchEncode(texts);
        long[][] ids = new long[encodings.length][];
        long[][] types = new long[encodings.length][];
        int truncated = 0;
        int longest = 0;
        for (int i = 0; i < encodings.length; ++i) {
            long[] id = encodings[i].getIds();
            long[] type = encodings[i].getTypeIds();
            // A tokenizer.json that pads: keep the tokens its own mask marks valid.
            long[] mask = encodings[i].getAttentionMask();
            int valid = 0;
            while (valid < mask.length && mask[valid] != 0) {
                ++valid;
            }
            if (valid > maxLength) {
                longest = Math.max(longest, valid);
                ++truncated;
                long[] cutIds = Arrays.copyOf(id, maxLength);
                long[] cutTypes = Arrays.copyOf(type, maxLength);
                cutIds[maxLength - 1] = id[valid - 1];
                cutTypes[maxLength - 1] = type[valid - 1];
                id = cutIds;
                type = cutTypes;
            } else if (valid < id.length) {
                id = Arrays.copyOf(id, valid);
                type = Arrays.copyOf(type, valid);
            }
            ids[i] = id;
            types[i] = type;
        }
        if (truncated > 0) {
            logger.warn(
                    "{} of {} texts had more than {} tokens (up to {}) and were truncated to {}",
                    truncated,
                    texts.size(),
                    maxLength,
                    longest,
                    maxLength);
        }
        return new TextBatch(ids, types, truncated);
    }

    /**
     * Returns the number of texts.
     *
     * @return the batch size
     */
    int size() {
        return ids.length;
    }

    /**
     * Returns the batch as arrays: {@code [inputIds, tokenTypeIds, attentionMask]}, each {@code
     * (B, S)} int64, right-padded with {@code padId} (type 0, mask 0).
     *
     * @param manager the manager the arrays attach to
     * @param padId the padding token id
     * @return the arrays
     */
    NDList toNDList(NDManager manager, long padId) {
        int b = ids.length;
        long[] flatIds = new long[b * seqLen];
        long[] flatTypes = new long[b * seqLen];
        long[] flatMask = new long[b * seqLen];
        Arrays.fill(flatIds, padId);
        for (int i = 0; i < b; ++i) {
            int len = ids[i].length;
            System.arraycopy(ids[i], 0, flatIds, i * seqLen, len);
            System.arraycopy(types[i], 0, flatTypes, i * seqLen, len);
            Arrays.fill(flatMask, i * seqLen, i * seqLen + len, 1L);
        }
        Shape shape = new Shape(b, seqLen);
        return new NDList(
                manager.create(flatIds, shape),
                manager.create(flatTypes, shape),
                manager.create(flatMask, shape));
    }
}
