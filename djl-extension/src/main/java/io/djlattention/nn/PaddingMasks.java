/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.nn;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

/**
 * Recognises right-padding masks in the forms stock DJL's BERT blocks take, and returns the valid
 * length of every batch row, or {@code null} when the mask is anything else (the blocks then run
 * the stock computation).
 *
 * <p>A row of length 0 is not accepted: stock DJL gives such a row uniform attention over all of
 * its (masked) keys, which the fused kernels do not reproduce.
 */
final class PaddingMasks {

    /**
     * The offset stock DJL adds to masked scores. With it, {@code exp} of a masked score underflows
     * to exactly 0 in float32 unless the unmasked scores exceed about 1e5, so a key with this
     * offset (or a lower one) contributes nothing, as in a masked kernel.
     */
    static final float MASK_OFFSET = -100000f;

    private PaddingMasks() {}

    /**
     * Reads an input mask {@code [B, S]} (1 = keep, 0 = padding, any numeric dtype).
     *
     * @return the lengths, or {@code null} unless every row is {@code L >= 1} ones then zeros
     */
    static int[] fromInputMask(NDArray mask, long batch, long seqLen) {
        Shape shape = mask.getShape();
        if (shape.dimension() != 2 || shape.get(0) != batch || shape.get(1) != seqLen) {
            return null;
        }
        float[] values = toFloats(mask);
        int[] lens = new int[(int) batch];
        for (int b = 0; b < batch; ++b) {
            int len = keepPrefix(values, (long) b * seqLen, seqLen, false);
            if (len <= 0) {
                return null;
            }
            lens[b] = len;
        }
        return lens;
    }

    /**
     * Reads the mask input of {@code ScaledDotProductAttentionBlock}: a 4-D additive offset {@code
     * [B, 1, S, S]} (0 = keep, {@code <= -100000} = masked) as BertBlock makes it, or any other
     * rank holding {@code B * S * S} values 1 = keep, 0 = masked, which the stock block reshapes to
     * {@code [B, 1, S, S]}. Every query row of a batch row must see the same keys.
     *
     * @return the lengths, or {@code null} unless the mask is a right-padding mask of lengths >= 1
     */
    static int[] fromAttentionMask(NDArray mask, long batch, long seqLen) {
        Shape shape = mask.getShape();
        if (shape.size() != batch * seqLen * seqLen) {
            return null;
        }
        boolean offsets = shape.dimension() == 4;
        if (offsets && (shape.get(0) != batch || shape.get(1) != 1)) {
            return null;
        }
        float[] values = toFloats(mask);
        int[] lens = new int[(int) batch];
        for (int b = 0; b < batch; ++b) {
            long rowStart = (long) b * seqLen * seqLen;
            int len = keepPrefix(values, rowStart, seqLen, offsets);
            if (len <= 0) {
                return null;
            }
            for (int t = 1; t < seqLen; ++t) {
                long start = rowStart + (long) t * seqLen;
                for (int s = 0; s < seqLen; ++s) {
                    if (values[(int) (start + s)] != values[(int) (rowStart + s)]) {
                        return null;
                    }
                }
            }
            lens[b] = len;
        }
        return lens;
    }

    /** Number of leading kept positions of a row that is keep* then masked*, else -1. */
    private static int keepPrefix(float[] values, long start, long length, boolean offsets) {
        int len = 0;
        while (len < length && isKeep(values[(int) (start + len)], offsets)) {
            ++len;
        }
        for (long s = len; s < length; ++s) {
            if (!isMasked(values[(int) (start + s)], offsets)) {
                return -1;
            }
        }
        return len;
    }

    private static boolean isKeep(float value, boolean offsets) {
        return offsets ? value == 0f : value == 1f;
    }

    private static boolean isMasked(float value, boolean offsets) {
        return offsets ? value <= MASK_OFFSET : value == 0f;
    }

    private static float[] toFloats(NDArray mask) {
        if (mask.getDataType() == DataType.FLOAT32) {
            return mask.toFloatArray();
        }
        try (NDArray converted = mask.toType(DataType.FLOAT32, false)) {
            return converted.toFloatArray();
        }
    }
}
