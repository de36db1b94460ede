/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;

import io.djlattention.AttentionOps;
import io.djlattention.PagedAttentionOptions;
import io.djlattention.jni.PagedIndexRules;

import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.Random;

/**
 * The block-table, context and slot rules of the paged operators are written once, natively
 * ({@code check_block_tables} and {@code check_slots}, native-ops/src/paged/paged_checks.h); {@link
 * PagedBatch#checkIndices} runs them on a step's host arrays through {@link PagedIndexRules}. These
 * tests hold that host check to the rules: tables built by hand that break each rule are refused
 * with a message naming the argument and the sequence or token, and random ones (a fresh seed,
 * awkward sizes) get the verdict and the first broken rule of a plain Java statement of the rules
 * written here.
 */
class PagedIndexRulesTest {

    private static final int RANDOM_CASES = 2000;

    @Test
    void validValuesPass() {
        // Entries past the blocks a sequence uses are never read; negative slots are skipped;
        // an empty batch and a context of 0 use no block.
        int[] tables = {3, 0, 99, -7, 2, 1, 4, 5, 0, 0, -1, 12345};
        int[] contexts = {5, 12, 0};
        long[] slots = {-1, 0, 23, -100};
        PagedBatch.checkIndices(tables, contexts, slots, 4, 6, 4);
        PagedBatch.checkIndices(new int[0], new int[0], new long[0], 1, 0, 16);
        assertNull(PagedIndexRules.violation("t", tables, 4, contexts, slots, 4, 6));
    }

    @Test
    void eachBrokenRuleIsNamed() {
        int[] tables = {0, 1, 2, 3, 4, 5};
        // [3, 2] tables of 2-slot blocks over 6 blocks: contexts up to 4.
        assertRefused(
                "PagedBatch: context_lens: expected values in [0, max_blocks * block_size = 4],"
                        + " got 5 at index 1",
                tables, new int[] {4, 5, 1}, new long[0]);
        assertRefused(
                "PagedBatch: context_lens: expected values in [0, max_blocks * block_size = 4],"
                        + " got -1 at index 2",
                tables, new int[] {4, 4, -1}, new long[0]);
        assertRefused(
                "PagedBatch: block_tables: expected block ids in [0, num_blocks = 6) for the 2"
                        + " blocks sequence 1 uses, got 6 at [1, 1]",
                new int[] {0, 1, 2, 6, 4, 5}, new int[] {4, 3, 1}, new long[0]);
        assertRefused(
                "PagedBatch: block_tables: expected block ids in [0, num_blocks = 6) for the 1"
                        + " blocks sequence 2 uses, got -1 at [2, 0]",
                new int[] {0, 1, 2, 3, -1, 5}, new int[] {4, 3, 1}, new long[0]);
        assertRefused(
                "PagedBatch: slot_mapping: expected slots < num_blocks * block_size = 12 (or"
                        + " negative to skip), got 12 at index 3",
                tables, new int[] {4, 4, 4}, new long[] {0, 11, -1, 12, 13});
    }

    @Test
    void hostCheckAndOperatorStateTheSameRule() {
        // One statement: the host check's message after its op name is the operator's.
        int[] tables = {0, 1, 7};
        int[] contexts = {3};
        String host =
                PagedIndexRules.violation("PagedBatch", tables, 3, contexts, new long[0], 1, 4);
        try (NDManager m = NDManager.newBaseManager()) {
            int headDim = PagedKvCache.supportedHeadDims()[0];
            int blockSize = PagedKvCache.supportedBlockSizes()[0];
            NDArray cache = m.zeros(new Shape(4, blockSize, 1, headDim));
            int[] scaled = {blockSize * 3};
            String expected =
                    PagedIndexRules.violation("paged_attention", tables, 3, scaled, new long[0],
                            blockSize, 4);
            IllegalArgumentException e =
                    assertThrows(
                            IllegalArgumentException.class,
                            () ->
                                    AttentionOps.pagedAttention(
                                            m.zeros(new Shape(1, 1, headDim)),
                                            cache,
                                            cache,
                                            m.create(tables, new Shape(1, 3)),
                                            m.create(scaled),
                                            scaled[0],
                                            PagedAttentionOptions.defaults()));
            assertTrue(e.getMessage().contains(expected), e.getMessage() + " / " + expected);
        }
        assertEquals(
                "PagedBatch: block_tables: expected block ids in [0, num_blocks = 4) for the 3"
                        + " blocks sequence 0 uses, got 7 at [0, 2]",
                host);
    }

    @Test
    void malformedArraysAreRefusedBeforeTheNativeCall() {
        assertThrows(
                IllegalArgumentException.class,
                () -> PagedIndexRules.violation("t", new int[5], 3, new int[2], new long[0], 4, 4));
        assertThrows(
                IllegalArgumentException.class,
                () -> PagedIndexRules.violation("t", new int[0], 0, new int[0], new long[0], 0, 4));
        assertThrows(
                IllegalArgumentException.class,
                () ->
                        PagedIndexRules.violation(
                                "t", new int[0], -1, new int[0], new long[0], 4, 4));
    }

    @Test
    void randomValuesGetTheReferenceVerdict() {
        long seed = System.nanoTime();
        Random random = new Random(seed);
        int refused = 0;
        for (int c = 0; c < RANDOM_CASES; ++c) {
            int numBlocks = random.nextInt(9); // 0 .. 8: an empty cache too
            int blockSize = 1 + random.nextInt(random.nextBoolean() ? 3 : 33); // 1 .. 33
            int maxBlocks = random.nextInt(6);
            int numSeqs = random.nextInt(5);
            int[] contexts = new int[numSeqs];
            // A row may hold more than the entries its sequence uses; the rest is anything.
            int[] tables = new int[numSeqs * maxBlocks + random.nextInt(3)];
            for (int s = 0; s < numSeqs; ++s) {
                contexts[s] = pick(random, 0, maxBlocks * blockSize);
            }
            for (int i = 0; i < tables.length; ++i) {
                tables[i] = pick(random, 0, numBlocks - 1);
            }
            long[] slots = new long[random.nextInt(7)];
            for (int t = 0; t < slots.length; ++t) {
                slots[t] = random.nextInt(25) == 0 ? -1 - random.nextInt(1000)
                        : pick(random, 0, numBlocks * blockSize - 1);
            }
            String where =
                    String.format(
                            "seed %d, case %d: numBlocks %d, blockSize %d, maxBlocks %d, tables"
                                    + " %s, contexts %s, slots %s",
                            seed,
                            c,
                            numBlocks,
                            blockSize,
                            maxBlocks,
                            Arrays.toString(tables),
                            Arrays.toString(contexts),
                            Arrays.toString(slots));
            String expected =
                    firstBrokenRule(tables, contexts, slots, maxBlocks, numBlocks, blockSize);
            String got = null;
            try {
                PagedBatch.checkIndices(tables, contexts, slots, maxBlocks, numBlocks, blockSize);
            } catch (IllegalStateException e) {
                got = e.getMessage();
            }
            if (expected == null) {
                assertNull(got, where);
            } else {
                refused++;
                assertTrue(got != null && got.startsWith("PagedBatch: "), where + ": " + got);
                assertTrue(
                        got.contains(expected), where + ": expected " + expected + ", got " + got);
            }
        }
        // Both verdicts were exercised many times.
        assertTrue(refused > RANDOM_CASES / 10 && refused < RANDOM_CASES - RANDOM_CASES / 10,
                "seed " + seed + ": " + refused + " refused");
    }

    private static void assertRefused(String message, int[] tables, int[] contexts, long[] slots) {
        IllegalStateException e =
                assertThrows(
                        IllegalStateException.class,
                        () -> PagedBatch.checkIndices(tables, contexts, slots, 2, 6, 2));
        assertEquals(message, e.getMessage());
    }

    /**
     * The rules, stated plainly: sequence by sequence, its context within its table and then each
     * block it uses within the cache; then each slot below the cache's slots (negative: skipped).
     * Returns the part of the message that names the first broken rule, or null.
     */
    private static String firstBrokenRule(
            int[] tables, int[] contexts, long[] slots, int maxBlocks, int numBlocks,
            int blockSize) {
        for (int s = 0; s < contexts.length; ++s) {
            if (contexts[s] < 0 || contexts[s] > maxBlocks * blockSize) {
                return "context_lens: expected values in [0, max_blocks * block_size = "
                        + maxBlocks * blockSize + "], got " + contexts[s] + " at index " + s;
            }
            int used = (contexts[s] + blockSize - 1) / blockSize;
            for (int i = 0; i < used; ++i) {
                int id = tables[s * maxBlocks + i];
                if (id < 0 || id >= numBlocks) {
                    return "block_tables: expected block ids in [0, num_blocks = " + numBlocks
                            + ") for the " + used + " blocks sequence " + s + " uses, got " + id
                            + " at [" + s + ", " + i + "]";
                }
            }
        }
        for (int t = 0; t < slots.length; ++t) {
            if (slots[t] >= (long) numBlocks * blockSize) {
                return "slot_mapping: expected slots < num_blocks * block_size = "
                        + (long) numBlocks * blockSize + " (or negative to skip), got " + slots[t]
                        + " at index " + t;
            }
        }
        return null;
    }

    /** A value in {@code [lo, hi]} most of the time, else one just outside. */
    private static int pick(Random random, int lo, int hi) {
        int roll = random.nextInt(40);
        if (roll == 0) {
            return lo - 1;
        }
        if (roll == 1) {
            return hi + 1;
        }
        if (hi < lo) {
            return lo - 1 - random.nextInt(3);
        }
        return lo + random.nextInt(hi - lo + 1);
    }
}
