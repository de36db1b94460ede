/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import java.util.Arrays;
import java.util.Objects;

/**
 * A batch read to the host once: the inputs checked, and the packing of its valid tokens
 * (row-major), which both paths and the poolings share.
 */
final class EncoderBatch {
    int batch;
    int seqLen;
    long[] ids;
    long[] types;
    long[] mask;
    boolean rightPadded = true;
    int tokens;
    int maxLen;
    int[] cuSeqlens;
    /** Flat {@code b * S + t} of each packed token. */
    int[] flatIndex;
    /** Packed row of each flat position, -1 for padding. */
    int[] rowOf;
    long[] packedIds;
    long[] packedTypes;
    long[] packedPositions;

    static EncoderBatch of(
            BertEncoderConfig config,
            Device device,
            NDArray inputIds,
            NDArray tokenTypeIds,
            NDArray attentionMask) {
        Objects.requireNonNull(inputIds, "inputIds must not be null");
        Objects.requireNonNull(attentionMask, "attentionMask must not be null");
        Shape shape = inputIds.getShape();
        if (shape.dimension() != 2 || shape.get(0) < 1 || shape.get(1) < 1) {
            throw new IllegalArgumentException(
                    "inputIds: expected (B, S) with B >= 1 and S >= 1, got " + shape);
        }
        for (NDArray a : new NDArray[] {inputIds, tokenTypeIds, attentionMask}) {
            if (a != null && !a.getDevice().equals(device)) {
                throw new IllegalArgumentException(
                        "inputs on "
                                + a.getDevice()
                                + ", but the encoder's weights are on "
                                + device);
            }
        }
        EncoderBatch b = new EncoderBatch();
        b.batch = Math.toIntExact(shape.get(0));
        b.seqLen = Math.toIntExact(shape.get(1));
        int max = config.getMaxPositions();
        if (b.seqLen > max) {
            throw new IllegalArgumentException(
                    "inputIds: sequence length "
                            + b.seqLen
                            + " exceeds max_position_embeddings = "
                            + max
                            + " (truncate the input; the translators do)");
        }
        if (!attentionMask.getShape().equals(shape)) {
            throw new IllegalArgumentException(
                    "attentionMask: expected shape " + shape + ", got "
                            + attentionMask.getShape());
        }
        if (tokenTypeIds != null && !tokenTypeIds.getShape().equals(shape)) {
            throw new IllegalArgumentException(
                    "tokenTypeIds: expected shape " + shape + ", got "
                            + tokenTypeIds.getShape());
        }
        b.ids = toLongs(inputIds, "inputIds");
        b.types =
                tokenTypeIds == null
                        ? new long[b.ids.length]
                        : toLongs(tokenTypeIds, "tokenTypeIds");
        b.mask = toLongs(attentionMask, "attentionMask");
        check(b.ids, config.getVocabSize(), "inputIds", "vocab_size");
        check(b.types, config.getTypeVocabSize(), "tokenTypeIds", "type_vocab_size");
        check(b.mask, 2, "attentionMask", "1 = token, 0 = padding");
        b.cuSeqlens = new int[b.batch + 1];
        b.rowOf = new int[b.ids.length];
        Arrays.fill(b.rowOf, -1);
        int n = 0;
        for (int r = 0; r < b.batch; ++r) {
            int len = 0;
            boolean ended = false;
            for (int t = 0; t < b.seqLen; ++t) {
                int flat = r * b.seqLen + t;
                if (b.mask[flat] != 0) {
                    b.rowOf[flat] = n + len;
                    ++len;
                    if (ended) {
                        b.rightPadded = false;
                    }
                } else {
                    ended = true;
                }
            }
            if (len == 0) {
                throw new IllegalArgumentException(
                        "attentionMask: row " + r + " has no token (all zeros)");
            }
            n += len;
            b.cuSeqlens[r + 1] = n;
            b.maxLen = Math.max(b.maxLen, len);
        }
        b.tokens = n;
        b.flatIndex = new int[n];
        b.packedIds = new long[n];
        b.packedTypes = new long[n];
        b.packedPositions = new long[n];
        for (int flat = 0; flat < b.rowOf.length; ++flat) {
            int row = b.rowOf[flat];
            if (row >= 0) {
                b.flatIndex[row] = flat;
                b.packedIds[row] = b.ids[flat];
                b.packedTypes[row] = b.types[flat];
                // transformers' position ids are the absolute index, whatever the mask.
                b.packedPositions[row] = flat % b.seqLen;
            }
        }
        return b;
    }

    private static void check(long[] values, long bound, String name, String what) {
        for (int i = 0; i < values.length; ++i) {
            if (values[i] < 0 || values[i] >= bound) {
                throw new IllegalArgumentException(
                        name
                                + ": value "
                                + values[i]
                                + " at flat index "
                                + i
                                + " is outside [0, "
                                + bound
                                + ") ("
                                + what
                                + ")");
            }
        }
    }

    static long[] toLongs(NDArray array, String name) {
        DataType type = array.getDataType();
        if (!type.isInteger()) {
            throw new IllegalArgumentException(
                    name + ": expected an integer array (int64 or int32), got " + type);
        }
        if (type == DataType.INT64) {
            return array.toLongArray();
        }
        try (NDArray cast = array.toType(DataType.INT64, false)) {
            return cast.toLongArray();
        }
    }
}
