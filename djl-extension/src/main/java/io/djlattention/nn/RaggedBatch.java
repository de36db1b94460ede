/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.nn;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;

/**
 * How the tokens of one right-padded batch {@code [B, S]} are laid out as rows {@code [N, E]} for
 * the fused encoder layers, with the valid lengths that attention needs.
 *
 * <p>Padded layout: {@code N = B * S}, row {@code b * S + s} is position {@code (b, s)}; padding
 * rows are computed (they attend to the valid keys, as in stock DJL). Packed layout (padding
 * removal): the {@code T} valid tokens, sequence after sequence ({@code cuSeqlens[b]} is the first
 * row of sequence {@code b}), then {@code X} extra rows. An extra row stands for a padding position
 * that an output still needs (position 1 of a sequence of length 1, which BertBlock's pooled output
 * reads): it attends to the single valid key of its sequence, so its attention output equals that
 * of the sequence's token 0, row {@code extraSources[i]}.
 *
 * <p>Host arrays are kept alongside the device arrays: the block needs them to build gathers, and
 * reading them back would cost a device synchronisation.
 */
final class RaggedBatch {

    final int batch;
    final int seqLen;
    final int[] lens;
    final boolean padded;

    /** Rows of real tokens: T packed, or B * S padded. */
    final int realRows;

    /** Row of token 0 of the sequence of each extra row. */
    final int[] extraSources;

    /** First row of each sequence in the packed layout, {@code [B + 1]}. */
    final int[] cuSeqlens;

    final boolean allFull;

    private final NDManager manager;
    private NDArray lensArray;
    private NDArray cuSeqlensArray;
    private NDArray extraSourcesArray;

    private RaggedBatch(
            NDManager manager, int seqLen, int[] lens, boolean padded, int[] extraSources) {
        this.manager = manager;
        this.batch = lens.length;
        this.seqLen = seqLen;
        this.lens = lens;
        this.padded = padded;
        this.extraSources = padded ? new int[0] : extraSources;
        this.cuSeqlens = new int[batch + 1];
        boolean full = true;
        for (int b = 0; b < batch; ++b) {
            cuSeqlens[b + 1] = cuSeqlens[b] + lens[b];
            full &= lens[b] == seqLen;
        }
        this.allFull = full;
        this.realRows = padded ? batch * seqLen : cuSeqlens[batch];
    }

    /** The padded layout: every position is a row. */
    static RaggedBatch padded(NDManager manager, int seqLen, int[] lens) {
        return new RaggedBatch(manager, seqLen, lens, true, null);
    }

    /**
     * The packed layout.
     *
     * @param keepSecondToken whether position 1 of each sequence must be computed (as an extra row
     *     when it is padding)
     */
    static RaggedBatch packed(NDManager manager, int seqLen, int[] lens, boolean keepSecondToken) {
        int extras = 0;
        if (keepSecondToken && seqLen >= 2) {
            for (int len : lens) {
                extras += len == 1 ? 1 : 0;
            }
        }
        int[] sources = new int[extras];
        int offset = 0;
        int i = 0;
        for (int len : lens) {
            if (keepSecondToken && seqLen >= 2 && len == 1) {
                sources[i++] = offset;
            }
            offset += len;
        }
        return new RaggedBatch(manager, seqLen, lens, false, sources);
    }

    /** All rows: real rows then extra rows. */
    int rows() {
        return realRows + extraSources.length;
    }

    /** Whether the rows are exactly the padded batch, nothing removed and nothing added. */
    boolean isDense() {
        return padded || (allFull && extraSources.length == 0);
    }

    /**
     * For each batch row, the row holding position 1 (BertBlock's pooled token).
     *
     * @return row indices {@code [B]}
     */
    long[] secondTokenRows() {
        long[] rows = new long[batch];
        int extra = 0;
        for (int b = 0; b < batch; ++b) {
            if (padded) {
                rows[b] = (long) b * seqLen + 1;
            } else if (lens[b] >= 2) {
                rows[b] = cuSeqlens[b] + 1L;
            } else {
                rows[b] = realRows + extra++;
            }
        }
        return rows;
    }

    /**
     * For each row, its flat position {@code b * S + s} in the padded batch.
     *
     * @return positions {@code [N]}
     */
    long[] flatPositions() {
        long[] positions = new long[rows()];
        int row = 0;
        for (int b = 0; b < batch; ++b) {
            int count = padded ? seqLen : lens[b];
            for (int s = 0; s < count; ++s) {
                positions[row++] = (long) b * seqLen + s;
            }
        }
        for (int b = 0; b < batch && !padded; ++b) {
            if (seqLen >= 2 && lens[b] == 1 && row < positions.length) {
                positions[row++] = (long) b * seqLen + 1;
            }
        }
        return positions;
    }

    NDArray lensArray() {
        if (lensArray == null) {
            lensArray = manager.create(lens);
        }
        return lensArray;
    }

    NDArray cuSeqlensArray() {
        if (cuSeqlensArray == null) {
            cuSeqlensArray = manager.create(cuSeqlens);
        }
        return cuSeqlensArray;
    }

    NDArray extraSourcesArray() {
        if (extraSourcesArray == null) {
            long[] sources = new long[extraSources.length];
            for (int i = 0; i < sources.length; ++i) {
                sources[i] = extraSources[i];
            }
            extraSourcesArray = manager.create(sources);
        }
        return extraSourcesArray;
    }

    int maxLen() {
        int max = 0;
        for (int len : lens) {
            max = Math.max(max, len);
        }
        return max;
    }
}
