/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.PagedAttentionOptions;
import org.junit.jupiter.api.Test;

/**
 * {@link PagedKvCache.Builder} takes exactly the head dims and block sizes the paged attention
 * operator takes: the lists come from the native library, and each is held here against the
 * operator itself (a call per supported value runs, a call with a value next to the list is
 * rejected by the operator and by the builder with the same rule).
 */
class PagedKvCacheBuilderTest {

    private static PagedKvCache.Builder builder(NDManager manager, int headDim, int blockSize) {
        return PagedKvCache.builder()
                .setManager(manager)
                .setNumLayers(1)
                .setNumKvHeads(1)
                .setHeadDim(headDim)
                .optBlockSize(blockSize)
                .optNumBlocks(2);
    }

    /** Runs paged_attention on a cache of this shape; returns the operator's rejection or null. */
    private static String operatorVerdict(NDManager manager, int headDim, int blockSize) {
        try (NDManager m = manager.newSubManager()) {
            NDArray cache = m.randomNormal(new Shape(2, blockSize, 1, headDim));
            NDArray query = m.randomNormal(new Shape(1, 2, headDim));
            NDArray tables = m.create(new int[][] {{1}});
            NDArray lens = m.create(new int[] {1});
            try {
                NDArray out =
                        AttentionOps.pagedAttention(
                                query,
                                cache,
                                cache,
                                tables,
                                lens,
                                1,
                                PagedAttentionOptions.builder().optScale(0.5f).build());
                assertEquals(new Shape(1, 2, headDim), out.getShape());
                return null;
            } catch (IllegalArgumentException e) {
                return e.getMessage();
            }
        }
    }

    @Test
    void supportedValuesAreTheOperatorsOwn() {
        int[] headDims = PagedKvCache.supportedHeadDims();
        int[] blockSizes = PagedKvCache.supportedBlockSizes();
        assertTrue(headDims.length > 0 && blockSizes.length > 0);
        try (NDManager manager = NDManager.newBaseManager()) {
            for (int d : headDims) {
                assertEquals(null, operatorVerdict(manager, d, blockSizes[0]), "D = " + d);
                builder(manager, d, blockSizes[0]).build().close();
            }
            for (int b : blockSizes) {
                assertEquals(null, operatorVerdict(manager, headDims[0], b), "block size " + b);
                builder(manager, headDims[0], b).build().close();
            }
        }
    }

    @Test
    void unsupportedValuesAreRejectedAtBuildWithTheOperatorsRule() {
        int[] headDims = PagedKvCache.supportedHeadDims();
        int[] blockSizes = PagedKvCache.supportedBlockSizes();
        // Above the largest head dim, or between two of an older library's list (72).
        int badDim = headDims[headDims.length - 1] == headDims.length
                ? headDims.length + 1
                : headDims[0] + 8;
        int badBlock = blockSizes[0] + 4; // 12 today
        try (NDManager manager = NDManager.newBaseManager()) {
            String opDim = operatorVerdict(manager, badDim, blockSizes[0]);
            String opBlock = operatorVerdict(manager, headDims[0], badBlock);
            IllegalArgumentException dim =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> builder(manager, badDim, blockSizes[0]).build());
            IllegalArgumentException block =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> builder(manager, headDims[0], badBlock).build());
            // The rule after "<who>: <argument>: " is the same text in both.
            assertEquals(rule(opDim), rule(dim.getMessage()));
            assertEquals(rule(opBlock), rule(block.getMessage()));
            assertTrue(dim.getMessage().startsWith("PagedKvCache: setHeadDim: expected a head dim D in "));
            assertTrue(block.getMessage().startsWith("PagedKvCache: optBlockSize: expected a block size in {"));
        }
    }

    @Test
    void paddedHeadDimIsTheSmallestSupportedOneThatHoldsIt() {
        int[] headDims = PagedKvCache.supportedHeadDims();
        assertEquals(headDims[0], PagedKvCache.paddedHeadDim(1));
        for (int i = 0; i < headDims.length; ++i) {
            assertEquals(headDims[i], PagedKvCache.paddedHeadDim(headDims[i]));
            if (i > 0) {
                assertEquals(headDims[i], PagedKvCache.paddedHeadDim(headDims[i - 1] + 1));
            }
        }
        int max = headDims[headDims.length - 1];
        assertThrows(IllegalArgumentException.class, () -> PagedKvCache.paddedHeadDim(max + 1));
        assertArrayEquals(headDims, PagedKvCache.supportedHeadDims());
    }

    private static String rule(String message) {
        int at = message.indexOf(": expected ");
        assertTrue(at >= 0, message);
        return message.substring(at);
    }
}
