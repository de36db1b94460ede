/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;

import io.djlattention.jni.PagedIndexRules;

import java.util.Arrays;
import java.util.List;

/**
 * The index tensors the paged kernels read for one step over a batch of sequences, built from their
 * block tables after the step's new tokens were given slots ({@link BlockManager#appendSlots} or
 * {@link BlockManager#allocate}). Sequence {@code s} has {@code queryLens[s]} new tokens, its last
 * ones: positions {@code contextLens[s] - queryLens[s] .. contextLens[s] - 1}; new tokens are
 * packed in sequence order.
 *
 * <ul>
 *   <li>{@code blockTables} int32 {@code [numSeqs, maxBlocks]}: row {@code s} holds the physical
 *       blocks of sequence {@code s} in logical order; the rest of the row is 0 (never read).
 *   <li>{@code contextLens} int32 {@code [numSeqs]}: cached tokens of each sequence, new ones
 *       included.
 *   <li>{@code slotMapping} int64 {@code [numTokens]}: where each new token's K/V goes, {@code
 *       block * blockSize + offset} ({@code reshape_and_cache}).
 *   <li>{@code cuSeqlensQ} int32 {@code [numSeqs + 1]}: prefix sums of {@code queryLens}, the
 *       packed query rows of each sequence ({@code paged_prefill_attention}).
 * </ul>
 *
 * <p>This is the layout of docs/operators.md ("Paged KV cache") and of {@code
 * native-ops/src/paged/paged_params.h}. Owns its arrays: close it after the step (closing twice
 * is harmless).
 */
public final class PagedBatch implements AutoCloseable {

    private final long[] sequenceIds;
    private final int[] queryLens;
    private final int[] contextLensHost;
    private final NDArray blockTables;
    private final NDArray contextLens;
    private final NDArray slotMapping;
    // Made on first use: only prefill reads the query offsets, so a decode step (one token per
    // sequence) uploads three index arrays instead of four.
    private final int[] cuSeqlensQHost;
    private final NDManager manager;
    private NDArray cuSeqlensQ;
    private final int maxContextLen;
    private final int maxQueryLen;
    private final int numTokens;
    private final BlockManager owner;
    private boolean closed;

    private PagedBatch(
            BlockManager owner,
            long[] sequenceIds,
            int[] queryLens,
            int[] contextLensHost,
            NDArray blockTables,
            NDArray contextLens,
            NDArray slotMapping,
            int[] cuSeqlensQHost,
            NDManager manager) {
        this.owner = owner;
        this.sequenceIds = sequenceIds;
        this.queryLens = queryLens;
        this.contextLensHost = contextLensHost;
        this.blockTables = blockTables;
        this.contextLens = contextLens;
        this.slotMapping = slotMapping;
        this.cuSeqlensQHost = cuSeqlensQHost;
        this.manager = manager;
        this.maxContextLen = Arrays.stream(contextLensHost).max().orElse(0);
        this.maxQueryLen = Arrays.stream(queryLens).max().orElse(0);
        this.numTokens = Arrays.stream(queryLens).sum();
    }

    /**
     * Builds the batch tensors for sequences whose last {@code queryLens[s]} tokens are new.
     *
     * @param blocks the block tables
     * @param sequenceIds the sequences, in batch order
     * @param queryLens the new tokens of each, at most its token count
     * @param manager where the arrays are created (the cache's device)
     * @return the batch
     */
    static PagedBatch of(
            BlockManager blocks, long[] sequenceIds, int[] queryLens, NDManager manager) {
        if (sequenceIds.length != queryLens.length) {
            throw new IllegalArgumentException(
                    "queryLens: expected "
                            + sequenceIds.length
                            + " values (one per sequence), got "
                            + queryLens.length);
        }
        int numSeqs = sequenceIds.length;
        int maxBlocks = 1;
        int numTokens = 0;
        int[] contexts = new int[numSeqs];
        for (int s = 0; s < numSeqs; ++s) {
            BlockTable table = blocks.getTable(sequenceIds[s]);
            contexts[s] = table.getNumTokens();
            if (queryLens[s] < 0 || queryLens[s] > contexts[s]) {
                throw new IllegalArgumentException(
                        "queryLens: expected values in [0, context length "
                                + contexts[s]
                                + "] for sequence "
                                + sequenceIds[s]
                                + ", got "
                                + queryLens[s]);
            }
            maxBlocks = Math.max(maxBlocks, table.getBlocks().size());
            numTokens += queryLens[s];
        }
        int[] tables = new int[numSeqs * maxBlocks];
        long[] slots = new long[numTokens];
        int[] cu = new int[numSeqs + 1];
        int t = 0;
        for (int s = 0; s < numSeqs; ++s) {
            BlockTable table = blocks.getTable(sequenceIds[s]);
            int i = 0;
            for (int block : table.getBlocks()) {
                tables[s * maxBlocks + i++] = block;
            }
            for (int p = contexts[s] - queryLens[s]; p < contexts[s]; ++p) {
                slots[t++] = table.slotOf(p);
            }
            cu[s + 1] = cu[s] + queryLens[s];
        }
        checkIndices(
                tables,
                contexts,
                slots,
                maxBlocks,
                blocks.getAllocator().getNumBlocks(),
                blocks.getBlockSize());
        NDManager sub = manager;
        return new PagedBatch(
                blocks,
                sequenceIds.clone(),
                queryLens.clone(),
                contexts,
                sub.create(tables, new ai.djl.ndarray.types.Shape(numSeqs, maxBlocks)),
                sub.create(contexts),
                sub.create(slots),
                cu,
                sub);
    }

    /**
     * Writes a decode step's host arrays for sequences that each cached their one new token (the
     * slot given by {@code appendSlots}): row {@code s} of {@code tables} holds sequence s's
     * blocks, zero-padded to {@code width}; {@code contexts[s]} its cached tokens; {@code
     * slots[s]} the new token's slot. The checks are {@link #of}'s, on the same host arrays.
     *
     * @throws IllegalArgumentException if a sequence's context needs more than {@code width}
     *     blocks
     */
    static void writeDecode(
            BlockManager blocks,
            long[] sequenceIds,
            int width,
            int[] tables,
            int[] contexts,
            long[] slots) {
        int numSeqs = sequenceIds.length;
        int blockSize = blocks.getBlockSize();
        for (int s = 0; s < numSeqs; ++s) {
            BlockTable table = blocks.getTable(sequenceIds[s]);
            List<Integer> ids = table.getBlocks();
            contexts[s] = table.getNumTokens();
            if (contexts[s] < 1) {
                throw new IllegalArgumentException(
                        "sequenceIds: sequence " + sequenceIds[s] + " has no cached token to decode");
            }
            int used = (contexts[s] + blockSize - 1) / blockSize;
            if (used > width) {
                throw new IllegalArgumentException(
                        "width: sequence "
                                + sequenceIds[s]
                                + " uses "
                                + used
                                + " blocks, more than the "
                                + width
                                + " of the step's tables");
            }
            for (int i = 0; i < width; ++i) {
                tables[s * width + i] = i < used ? ids.get(i) : 0;
            }
            slots[s] = table.slotOf(contexts[s] - 1);
        }
        checkIndices(
                Arrays.copyOf(tables, numSeqs * width),
                Arrays.copyOf(contexts, numSeqs),
                Arrays.copyOf(slots, numSeqs),
                width,
                blocks.getAllocator().getNumBlocks(),
                blockSize);
    }

    /**
     * Checks a step's index values on the host, once per step, by the paged operators' own rules
     * ({@link PagedIndexRules}: every block a sequence uses in {@code [0, numBlocks)}, every
     * context within its table, {@code <= maxBlocks * blockSize}, every slot below {@code
     * numBlocks * blockSize}), so that the step's per-layer operator calls skip them
     * ({@code check_indices = false}, the fused decoder layer too) and on a GPU read nothing back
     * from the device. The block manager's bookkeeping guarantees them; a failure here is a bug in
     * it, reported before any kernel could read out of bounds.
     *
     * @throws IllegalStateException naming the argument ({@code context_lens}, {@code
     *     block_tables}, {@code slot_mapping}) and the sequence or token, if a rule is broken
     */
    static void checkIndices(
            int[] tables,
            int[] contexts,
            long[] slots,
            int maxBlocks,
            int numBlocks,
            int blockSize) {
        String violation =
                PagedIndexRules.violation(
                        "PagedBatch", tables, maxBlocks, contexts, slots, blockSize, numBlocks);
        if (violation != null) {
            throw new IllegalStateException(violation);
        }
    }

    boolean isOf(BlockManager blocks) {
        return owner == blocks;
    }

    boolean isClosed() {
        return closed;
    }

    /**
     * Returns the sequences, in batch order.
     *
     * @return the sequence ids
     */
    public long[] getSequenceIds() {
        return sequenceIds.clone();
    }

    /**
     * Returns the number of sequences.
     *
     * @return numSeqs
     */
    public int getNumSeqs() {
        return sequenceIds.length;
    }

    /**
     * Returns the new tokens of each sequence.
     *
     * @return queryLens {@code [numSeqs]}
     */
    public int[] getQueryLens() {
        return queryLens.clone();
    }

    /**
     * Returns the context length of each sequence, on the host.
     *
     * @return contextLens {@code [numSeqs]}
     */
    public int[] getContextLensHost() {
        return contextLensHost.clone();
    }

    /**
     * Returns the block tables, int32 {@code [numSeqs, maxBlocks]}.
     *
     * @return the block tables
     */
    public NDArray getBlockTables() {
        return blockTables;
    }

    /**
     * Returns the context lengths, int32 {@code [numSeqs]}.
     *
     * @return the context lengths
     */
    public NDArray getContextLens() {
        return contextLens;
    }

    /**
     * Returns the slot of each new token, int64 {@code [numTokens]}.
     *
     * @return the slot mapping
     */
    public NDArray getSlotMapping() {
        return slotMapping;
    }

    /**
     * Returns the packed query offsets, int32 {@code [numSeqs + 1]}, created on the batch's device
     * at the first call (decode steps never need them).
     *
     * @return cuSeqlensQ
     * @throws IllegalStateException if the batch is closed
     */
    public NDArray getCuSeqlensQ() {
        if (closed) {
            throw new IllegalStateException("PagedBatch: getCuSeqlensQ after close");
        }
        if (cuSeqlensQ == null) {
            cuSeqlensQ = manager.create(cuSeqlensQHost);
        }
        return cuSeqlensQ;
    }

    /**
     * Returns the largest context length (0 for an empty batch).
     *
     * @return maxContextLen
     */
    public int getMaxContextLen() {
        return maxContextLen;
    }

    /**
     * Returns the largest number of new tokens of one sequence.
     *
     * @return maxSeqlenQ
     */
    public int getMaxQueryLen() {
        return maxQueryLen;
    }

    /**
     * Returns the total number of new tokens.
     *
     * @return numTokens
     */
    public int getNumTokens() {
        return numTokens;
    }

    /**
     * Returns whether every sequence has exactly one new token (a decode step).
     *
     * @return true for a decode batch
     */
    public boolean isDecode() {
        return numTokens == sequenceIds.length;
    }

    /** Frees the arrays; closing twice is harmless. */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            blockTables.close();
            contextLens.close();
            slotMapping.close();
            if (cuSeqlensQ != null) {
                cuSeqlensQ.close();
            }
        }
    }
}
