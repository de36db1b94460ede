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
 * The per-layer paged calls of a {@link PagedBatch} ({@code AttentionOps.reshapeAndCache/
 * pagedAttention/pagedPrefillAttention(..., cache, layer, batch, ...)}), whose index values were
 * checked once when the batch was built: they give the same results as the calls on raw arrays
 * (which check every time), and only take batches of their own, open cache.
 */
class PagedBatchPathTest {

    private static PagedKvCache cache(NDManager manager) {
        return PagedKvCache.builder()
                .setManager(manager)
                .setNumLayers(2)
                .setNumKvHeads(2)
                .setHeadDim(64)
                .optBlockSize(8)
                .optNumBlocks(16)
                .build();
    }

    @Test
    void batchPathEqualsRawPath() {
        try (NDManager manager = NDManager.newBaseManager();
                PagedKvCache cache = cache(manager)) {
            cache.allocate(0, 13);
            cache.allocate(1, 30);
            int layer = 1;
            try (PagedBatch prefill = cache.prepare(new long[] {0, 1}, new int[] {13, 30}, manager)) {
                NDArray k = manager.randomNormal(new Shape(43, 2, 64));
                NDArray v = manager.randomNormal(new Shape(43, 2, 64));
                AttentionOps.reshapeAndCache(k, v, cache, layer, prefill);
                NDArray q = manager.randomNormal(new Shape(43, 4, 64));
                NDArray batchOut =
                        AttentionOps.pagedPrefillAttention(
                                q,
                                cache,
                                layer,
                                prefill,
                                PagedAttentionOptions.builder().optScale(0.125f).build());
                NDArray rawOut =
                        AttentionOps.pagedPrefillAttention(
                                q,
                                cache.getKeyCache(layer),
                                cache.getValueCache(layer),
                                prefill.getBlockTables(),
                                prefill.getCuSeqlensQ(),
                                prefill.getContextLens(),
                                prefill.getMaxQueryLen(),
                                PagedAttentionOptions.builder().optScale(0.125f).build());
                assertArrayEquals(rawOut.toFloatArray(), batchOut.toFloatArray());
            }
            try (PagedBatch decode = cache.prepare(new long[] {0, 1}, new int[] {1, 1}, manager)) {
                NDArray q = manager.randomNormal(new Shape(2, 4, 64));
                NDArray batchOut =
                        AttentionOps.pagedAttention(
                                q,
                                cache,
                                layer,
                                decode,
                                PagedAttentionOptions.builder().optScale(0.125f).build());
                NDArray rawOut =
                        AttentionOps.pagedAttention(
                                q,
                                cache.getKeyCache(layer),
                                cache.getValueCache(layer),
                                decode.getBlockTables(),
                                decode.getContextLens(),
                                decode.getMaxContextLen(),
                                PagedAttentionOptions.builder().optScale(0.125f).build());
                assertArrayEquals(rawOut.toFloatArray(), batchOut.toFloatArray());
            }
        }
    }

    @Test
    void queryOffsetsAreMadeOnFirstUse() {
        // A decode step never reads the query offsets, so the batch uploads them only when asked;
        // asked, they are the prefix sums of the new tokens (computed here independently).
        try (NDManager manager = NDManager.newBaseManager();
                PagedKvCache cache = cache(manager)) {
            int[] lens = {13, 1, 30};
            for (int s = 0; s < lens.length; ++s) {
                cache.allocate(s, 40);
            }
            // What one array made from host values adds to the manager on this device, so that the
            // counts below hold on the CPU and the GPU alike.
            int base = manager.getManagedArrays().size();
            manager.create(new int[] {0});
            int perArray = manager.getManagedArrays().size() - base;
            int live = manager.getManagedArrays().size();
            long[] ids = {0, 1, 2};
            try (PagedBatch decode = cache.prepare(ids, new int[] {1, 1, 1}, manager)) {
                int withoutOffsets = manager.getManagedArrays().size();
                assertEquals(3 * perArray, withoutOffsets - live, "three index arrays, no offsets");
                NDArray cu = decode.getCuSeqlensQ();
                assertEquals(withoutOffsets + perArray, manager.getManagedArrays().size());
                // Read after counting: on a GPU the copy to the host is an array of its own.
                assertArrayEquals(new int[] {0, 1, 2, 3}, cu.toIntArray());
            }
            PagedBatch prefill = cache.prepare(ids, lens, manager);
            int[] expected = new int[lens.length + 1];
            for (int s = 0; s < lens.length; ++s) {
                expected[s + 1] = expected[s] + lens[s];
            }
            assertArrayEquals(expected, prefill.getCuSeqlensQ().toIntArray());
            prefill.close();
            assertThrows(IllegalStateException.class, prefill::getCuSeqlensQ);
        }
    }

    @Test
    void onlyOpenBatchesOfTheSameCache() {
        try (NDManager manager = NDManager.newBaseManager();
                PagedKvCache cache = cache(manager);
                PagedKvCache other = cache(manager)) {
            cache.allocate(0, 5);
            other.allocate(0, 5);
            NDArray q = manager.randomNormal(new Shape(1, 2, 64));
            try (PagedBatch foreign = other.prepare(new long[] {0}, new int[] {1}, manager)) {
                IllegalArgumentException e =
                        assertThrows(
                                IllegalArgumentException.class,
                                () ->
                                        AttentionOps.pagedAttention(
                                                q,
                                                cache,
                                                0,
                                                foreign,
                                                PagedAttentionOptions.builder()
                                                        .optScale(1f)
                                                        .build()));
                assertTrue(e.getMessage().contains("prepared by this cache"), e.getMessage());
            }
            PagedBatch closed = cache.prepare(new long[] {0}, new int[] {1}, manager);
            closed.close();
            IllegalArgumentException e =
                    assertThrows(
                            IllegalArgumentException.class,
                            () ->
                                    AttentionOps.pagedAttention(
                                            q,
                                            cache,
                                            0,
                                            closed,
                                            PagedAttentionOptions.builder().optScale(1f).build()));
            assertTrue(e.getMessage().contains("closed"), e.getMessage());
            // The operator's shape rules still apply on the batch path.
            try (PagedBatch batch = cache.prepare(new long[] {0}, new int[] {1}, manager)) {
                NDArray wrongDim = manager.randomNormal(new Shape(1, 2, 80));
                e =
                        assertThrows(
                                IllegalArgumentException.class,
                                () ->
                                        AttentionOps.pagedAttention(
                                                wrongDim,
                                                cache,
                                                0,
                                                batch,
                                                PagedAttentionOptions.builder()
                                                        .optScale(1f)
                                                        .build()));
                assertTrue(e.getMessage().startsWith("paged_attention: "), e.getMessage());
            }
        }
    }
}
