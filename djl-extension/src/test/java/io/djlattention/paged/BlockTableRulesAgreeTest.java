/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.PagedAttentionOptions;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The block-table rules are stated twice: by the operators ({@code check_block_tables} and the slot
 * check of {@code reshape_and_cache}, the authority, for callers that keep their own tables) and by
 * {@link PagedBatch#checkIndices} (once per step on the host, so that the per-layer calls of a
 * cache's batch read nothing back from the device). This test holds the two to the same verdict on
 * random block tables, context lengths and slots, most of them valid, the rest just outside a rule
 * (a block id of -1 or {@code numBlocks}, a context one past its table, a slot one past the cache).
 */
class BlockTableRulesAgreeTest {

    private static final int CASES = 300;

    @Test
    void javaAndNativeRulesGiveTheSameVerdict() {
        Random random = new Random(20261127L ^ System.nanoTime());
        int headDim = PagedKvCache.supportedHeadDims()[0];
        int[] blockSizes = PagedKvCache.supportedBlockSizes();
        int rejected = 0;
        for (int c = 0; c < CASES; ++c) {
            int numBlocks = 1 + random.nextInt(6);
            int blockSize = blockSizes[random.nextInt(blockSizes.length)];
            int maxBlocks = 1 + random.nextInt(4);
            int numSeqs = 1 + random.nextInt(3);
            int[] contexts = new int[numSeqs];
            int[] tables = new int[numSeqs * maxBlocks];
            for (int s = 0; s < numSeqs; ++s) {
                contexts[s] = pick(random, 0, maxBlocks * blockSize);
                for (int i = 0; i < maxBlocks; ++i) {
                    tables[s * maxBlocks + i] = pick(random, 0, numBlocks - 1);
                }
            }
            long[] slots = new long[1 + random.nextInt(4)];
            for (int t = 0; t < slots.length; ++t) {
                // Negative slots are skipped by both rules.
                slots[t] = pick(random, -1, numBlocks * blockSize - 1);
            }
            String where =
                    String.format(
                            "numBlocks %d, blockSize %d, tables %s, contexts %s, slots %s",
                            numBlocks,
                            blockSize,
                            Arrays.toString(tables),
                            Arrays.toString(contexts),
                            Arrays.toString(slots));
            try (NDManager m = NDManager.newBaseManager()) {
                NDArray cache = m.zeros(new Shape(numBlocks, blockSize, 1, headDim));
                boolean javaTables =
                        accepts(
                                () ->
                                        PagedBatch.checkIndices(
                                                tables,
                                                contexts,
                                                new long[0],
                                                maxBlocks,
                                                numBlocks,
                                                blockSize));
                boolean nativeTables =
                        accepts(
                                () ->
                                        AttentionOps.pagedAttention(
                                                m.zeros(new Shape(numSeqs, 1, headDim)),
                                                cache,
                                                cache,
                                                m.create(tables, new Shape(numSeqs, maxBlocks)),
                                                m.create(contexts),
                                                Math.max(
                                                        1, Arrays.stream(contexts).max().orElse(1)),
                                                PagedAttentionOptions.defaults()));
                assertEquals(javaTables, nativeTables, "block tables: " + where);
                boolean javaSlots =
                        accepts(
                                () ->
                                        PagedBatch.checkIndices(
                                                new int[0],
                                                new int[0],
                                                slots,
                                                maxBlocks,
                                                numBlocks,
                                                blockSize));
                NDArray key = m.zeros(new Shape(slots.length, 1, headDim));
                boolean nativeSlots =
                        accepts(
                                () ->
                                        AttentionOps.reshapeAndCache(
                                                key, key, cache, cache, m.create(slots)));
                assertEquals(javaSlots, nativeSlots, "slots: " + where);
                rejected += (javaTables ? 0 : 1) + (javaSlots ? 0 : 1);
            }
        }
        // Both verdicts were exercised (about a third of the cases break a rule).
        assertTrue(rejected > CASES / 10 && rejected < 2 * CASES - CASES / 10, "" + rejected);
    }

    /** A value in {@code [lo, hi]} nine times in ten, else one just outside. */
    private static int pick(Random random, int lo, int hi) {
        int roll = random.nextInt(20);
        if (roll == 0) {
            return lo - 1;
        }
        if (roll == 1) {
            return hi + 1;
        }
        return lo + random.nextInt(hi - lo + 1);
    }

    /**
     * Whether a rule accepts: the Java copy throws {@link IllegalStateException}, the operators
     * {@link IllegalArgumentException}; anything else fails the test.
     */
    private static boolean accepts(Runnable call) {
        try {
            call.run();
            return true;
        } catch (IllegalStateException | IllegalArgumentException e) {
            return false;
        }
    }
}
