/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import ai.djl.engine.EngineException;

/**
 * The paged operators' rules on a batch's index values, checked on host arrays by the native
 * statement of them ({@code check_block_tables} and {@code check_slots} in {@code
 * native-ops/src/paged/paged_checks.h}, which {@code paged_attention}, {@code
 * paged_prefill_attention}, {@code reshape_and_cache} and {@code decoder_layer} run on their
 * tensors' values): every context length within {@code [0, maxBlocks * blockSize]}, every block a
 * sequence uses (its first {@code ceil(context / blockSize)} table entries) within {@code [0,
 * numBlocks)}, every slot below {@code numBlocks * blockSize} (negative ones are skipped). The
 * rules are written once, natively; the paged KV cache checks a step's batch here once, so that
 * the step's per-layer operator calls need not read the device back.
 */
public final class PagedIndexRules {

    private PagedIndexRules() {}

    /**
     * Returns the first rule the values break, or null when they keep every rule.
     *
     * @param op the name the message starts with
     * @param blockTables {@code [numSeqs, maxBlocks]} row-major (at least that many values)
     * @param maxBlocks the width of a table row
     * @param contextLens {@code [numSeqs]}: the array's length is the number of sequences
     * @param slotMapping {@code [numTokens]}: the array's length is the number of tokens
     * @param blockSize slots per block
     * @param numBlocks blocks of the cache
     * @return null, or the native message naming {@code op}, the argument ({@code context_lens},
     *     {@code block_tables}, {@code slot_mapping}) and the sequence or token
     * @throws IllegalArgumentException if {@code blockTables} holds fewer than {@code
     *     contextLens.length * maxBlocks} values, or a size is negative or {@code blockSize < 1}
     * @throws EngineException if the native library cannot be loaded
     */
    public static String violation(
            String op,
            int[] blockTables,
            int maxBlocks,
            int[] contextLens,
            long[] slotMapping,
            int blockSize,
            int numBlocks) {
        if (maxBlocks < 0 || blockSize < 1 || numBlocks < 0) {
            throw new IllegalArgumentException(
                    String.format(
                            "%s: expected maxBlocks >= 0, blockSize >= 1 and numBlocks >= 0, got"
                                    + " %d, %d and %d",
                            op, maxBlocks, blockSize, numBlocks));
        }
        long cells = (long) contextLens.length * maxBlocks;
        if (blockTables.length < cells) {
            throw new IllegalArgumentException(
                    String.format(
                            "%s: blockTables: expected at least %d values ([%d, %d]), got %d",
                            op, cells, contextLens.length, maxBlocks, blockTables.length));
        }
        LibraryLoader.load();
        int status =
                DjlAttnLibrary.checkPagedIndices(
                        op,
                        blockTables,
                        contextLens,
                        contextLens.length,
                        maxBlocks,
                        slotMapping,
                        slotMapping.length,
                        blockSize,
                        numBlocks);
        if (status == DjlAttnLibrary.OK) {
            return null;
        }
        String message = DjlAttnLibrary.lastErrorMessage();
        if (status == DjlAttnLibrary.INVALID_ARGUMENT) {
            return message;
        }
        throw new EngineException(message);
    }
}
