/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.AttentionOps;
import io.djlattention.PagedAttentionOptions;
import io.djlattention.it.StockAttention;
import io.djlattention.it.TestDevice;
import io.djlattention.paged.BlockTable;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

/**
 * {@code reshape_and_cache}, {@code paged_attention} and {@code paged_prefill_attention} from Java
 * against the dense float64 reference ({@link StockAttention}) on each sequence's own K/V.
 *
 * <p>The block tables come from {@link PagedKvCache}'s allocator with sequences grown token by
 * token in random order, so their physical blocks interleave (non-contiguous, shuffled); contexts
 * include 1, whole blocks and partial last blocks; the caches start poisoned with NaN, so a kernel
 * that reads a slot its sequence does not own fails.
 *
 * <p>Tolerances, relative to max(1, |reference|): float32 1e-5 (float32 accumulation over at most a
 * few hundred terms, ~1e-6); float16 2e-3 (the reference sees the same float16 inputs; the output's
 * float16 rounding is 4.9e-4 at 1.0, plus float32 accumulation).
 */
class PagedAttentionParityTest {

    private static final int[] CONTEXTS = {1, 37, 96, 113, 8};

    static Stream<Arguments> grid() {
        List<Arguments> cases = new ArrayList<>();
        for (int blockSize : new int[] {8, 16, 32}) {
            for (int dim : new int[] {64, 80, 128}) {
                cases.add(Arguments.of(blockSize, dim, 8, 2, DataType.FLOAT32));
            }
            cases.add(Arguments.of(blockSize, 96, 4, 4, DataType.FLOAT16));
        }
        cases.add(Arguments.of(16, 256, 4, 1, DataType.FLOAT32)); // MQA
        cases.add(Arguments.of(16, 64, 6, 3, DataType.FLOAT16));
        return cases.stream();
    }

    @ParameterizedTest(name = "block {0} D={1} Hq={2} Hkv={3} {4}")
    @MethodSource("grid")
    void decodeMatchesDenseReference(
            int blockSize, int dim, int headsQ, int headsKv, DataType dtype) {
        Random random = new Random(blockSize * 1000L + dim);
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get());
                PagedKvCache cache = poisonedCache(manager, blockSize, headsKv, dim, dtype)) {
            int n = CONTEXTS.length;
            long[] ids = new long[n];
            for (int s = 0; s < n; ++s) {
                ids[s] = s;
                cache.allocate(s, 0);
            }
            growInterleaved(cache, CONTEXTS, random);
            List<NDArray> keys = new ArrayList<>();
            List<NDArray> values = new ArrayList<>();
            int[] all = CONTEXTS.clone();
            try (PagedBatch batch = cache.prepare(ids, all, manager)) {
                NDArray k = randn(manager, random, new Shape(sum(all), headsKv, dim), dtype);
                NDArray v = randn(manager, random, new Shape(sum(all), headsKv, dim), dtype);
                AttentionOps.reshapeAndCache(k, v, cache, 0, batch);
                int start = 0;
                for (int s = 0; s < n; ++s) {
                    NDIndex rows = new NDIndex("{}:{}", start, start + CONTEXTS[s]);
                    keys.add(k.get(rows));
                    values.add(v.get(rows));
                    start += CONTEXTS[s];
                }
                assertBlocksAreShuffled(cache, ids);
                // reshape_and_cache put every token where its block table says.
                for (int s = 0; s < n; ++s) {
                    assertEquals(keys.get(s), gather(cache.getKeyCache(0), cache, ids[s]));
                    assertEquals(values.get(s), gather(cache.getValueCache(0), cache, ids[s]));
                }
            }
            int[] ones = new int[n];
            java.util.Arrays.fill(ones, 1);
            try (PagedBatch decode = cache.prepare(ids, ones, manager)) {
                NDArray q = randn(manager, random, new Shape(n, headsQ, dim), dtype);
                float scale = (float) (1 / Math.sqrt(dim));
                NDArray out =
                        AttentionOps.pagedAttention(
                                q,
                                cache.getKeyCache(0),
                                cache.getValueCache(0),
                                decode.getBlockTables(),
                                decode.getContextLens(),
                                decode.getMaxContextLen(),
                                PagedAttentionOptions.builder().optScale(scale).build());
                assertEquals(new Shape(n, headsQ, dim), out.getShape());
                assertEquals(dtype, out.getDataType());
                for (int s = 0; s < n; ++s) {
                    NDArray expected =
                            StockAttention.attention(
                                            q.get(s).reshape(1, 1, headsQ, dim),
                                            keys.get(s).expandDims(0),
                                            values.get(s).expandDims(0),
                                            false,
                                            scale,
                                            null)
                                    .get(0);
                    assertWithin(expected, out.get(s), tolerance(dtype), "sequence " + s);
                }
            }
        }
    }

    @ParameterizedTest(name = "block {0} {1}")
    @MethodSource("prefillGrid")
    void chunkedPrefillMatchesDenseCausal(int blockSize, DataType dtype) {
        int headsQ = 4;
        int headsKv = 2;
        int dim = 80;
        int[] lengths = {1, 7, 113, 70};
        int[] chunks = {1, 3, 50, 70};
        Random random = new Random(blockSize);
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get());
                PagedKvCache cache = poisonedCache(manager, blockSize, headsKv, dim, dtype)) {
            int n = lengths.length;
            long[] ids = new long[n];
            List<NDArray> qs = new ArrayList<>();
            List<NDArray> ks = new ArrayList<>();
            List<NDArray> vs = new ArrayList<>();
            List<List<NDArray>> outs = new ArrayList<>();
            for (int s = 0; s < n; ++s) {
                ids[s] = s;
                cache.allocate(s, 0);
                qs.add(randn(manager, random, new Shape(lengths[s], headsQ, dim), dtype));
                ks.add(randn(manager, random, new Shape(lengths[s], headsKv, dim), dtype));
                vs.add(randn(manager, random, new Shape(lengths[s], headsKv, dim), dtype));
                outs.add(new ArrayList<>());
            }
            int[] done = new int[n];
            float scale = (float) (1 / Math.sqrt(dim));
            while (sum(done) < sum(lengths)) {
                int[] step = new int[n];
                NDList q = new NDList();
                NDList k = new NDList();
                NDList v = new NDList();
                for (int s = 0; s < n; ++s) {
                    step[s] = Math.min(chunks[s], lengths[s] - done[s]);
                    cache.appendSlots(s, step[s]);
                    NDIndex rows = new NDIndex("{}:{}", done[s], done[s] + step[s]);
                    q.add(qs.get(s).get(rows));
                    k.add(ks.get(s).get(rows));
                    v.add(vs.get(s).get(rows));
                }
                try (PagedBatch batch = cache.prepare(ids, step, manager)) {
                    AttentionOps.reshapeAndCache(NDArrays(k), NDArrays(v), cache, 0, batch);
                    NDArray out =
                            AttentionOps.pagedPrefillAttention(
                                    NDArrays(q),
                                    cache.getKeyCache(0),
                                    cache.getValueCache(0),
                                    batch.getBlockTables(),
                                    batch.getCuSeqlensQ(),
                                    batch.getContextLens(),
                                    batch.getMaxQueryLen(),
                                    PagedAttentionOptions.builder().optScale(scale).build());
                    int start = 0;
                    for (int s = 0; s < n; ++s) {
                        if (step[s] > 0) {
                            outs.get(s).add(out.get(new NDIndex("{}:{}", start, start + step[s])));
                        }
                        start += step[s];
                        done[s] += step[s];
                    }
                }
            }
            for (int s = 0; s < n; ++s) {
                NDArray expected =
                        StockAttention.attention(
                                        qs.get(s).expandDims(0),
                                        ks.get(s).expandDims(0),
                                        vs.get(s).expandDims(0),
                                        true,
                                        scale,
                                        null)
                                .get(0)
                                .squeeze(0);
                NDArray got = NDArrays(new NDList(outs.get(s)));
                assertWithin(expected, got, tolerance(dtype), "sequence " + s);
            }
        }
    }

    static Stream<Arguments> prefillGrid() {
        return Stream.of(
                Arguments.of(8, DataType.FLOAT32),
                Arguments.of(16, DataType.FLOAT16),
                Arguments.of(32, DataType.FLOAT32));
    }

    @Test
    void copyOnWriteKeepsTheParentsCache() {
        // A forked child appending to the shared partial block gets a copy holding the parent's
        // tokens; the parent's block is untouched by the child's write.
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get());
                PagedKvCache cache = poisonedCache(manager, 8, 1, 64, DataType.FLOAT32)) {
            Random random = new Random(7);
            cache.allocate(0, 11);
            NDArray k = randn(manager, random, new Shape(11, 1, 64), DataType.FLOAT32);
            try (PagedBatch batch = cache.prepare(new long[] {0}, new int[] {11}, manager)) {
                AttentionOps.reshapeAndCache(k, k, cache, 0, batch);
            }
            cache.fork(0, 1);
            cache.appendSlots(1, 1);
            NDArray extra = randn(manager, random, new Shape(1, 1, 64), DataType.FLOAT32);
            try (PagedBatch batch = cache.prepare(new long[] {1}, new int[] {1}, manager)) {
                AttentionOps.reshapeAndCache(extra, extra, cache, 0, batch);
            }
            assertEquals(k, gather(cache.getKeyCache(0), cache, 0));
            assertEquals(k.concat(extra, 0), gather(cache.getKeyCache(0), cache, 1));
            assertEquals(
                    cache.getBlockTable(0).getBlocks().get(0),
                    cache.getBlockTable(1).getBlocks().get(0));
            cache.free(0);
            cache.free(1);
            assertEquals(cache.getNumBlocks(), cache.getNumFreeBlocks());
        }
    }

    private static NDArray NDArrays(NDList list) {
        return list.size() == 1 ? list.get(0) : ai.djl.ndarray.NDArrays.concat(list, 0);
    }

    private static PagedKvCache poisonedCache(
            NDManager manager, int blockSize, int headsKv, int dim, DataType dtype) {
        PagedKvCache cache =
                PagedKvCache.builder()
                        .setManager(manager)
                        .setNumLayers(1)
                        .setNumKvHeads(headsKv)
                        .setHeadDim(dim)
                        .optBlockSize(blockSize)
                        .optNumBlocks(200 / blockSize + 12)
                        .optDataType(dtype)
                        .build();
        cache.getKeyCache(0).set(new NDIndex("..."), Float.NaN);
        cache.getValueCache(0).set(new NDIndex("..."), Float.NaN);
        return cache;
    }

    /** Grows sequences to their lengths one token at a time, in random order. */
    private static void growInterleaved(PagedKvCache cache, int[] lengths, Random random) {
        int[] have = new int[lengths.length];
        while (true) {
            List<Integer> open = new ArrayList<>();
            for (int s = 0; s < lengths.length; ++s) {
                if (have[s] < lengths[s]) {
                    open.add(s);
                }
            }
            if (open.isEmpty()) {
                return;
            }
            int s = open.get(random.nextInt(open.size()));
            cache.appendSlots(s, 1);
            ++have[s];
        }
    }

    private static void assertBlocksAreShuffled(PagedKvCache cache, long[] ids) {
        boolean gap = false;
        for (long id : ids) {
            List<Integer> blocks = cache.getBlockTable(id).getBlocks();
            for (int i = 1; i < blocks.size(); ++i) {
                gap |= blocks.get(i) != blocks.get(i - 1) + 1;
            }
        }
        assertTrue(gap, "the test needs non-contiguous block tables");
    }

    /** A sequence's tokens read from a cache through its block table: {@code [ctx, Hkv, D]}. */
    private static NDArray gather(NDArray cacheArray, PagedKvCache cache, long id) {
        BlockTable table = cache.getBlockTable(id);
        long[] slots = new long[table.getNumTokens()];
        for (int p = 0; p < slots.length; ++p) {
            slots[p] = table.slotOf(p);
        }
        Shape s = cacheArray.getShape();
        NDArray flat = cacheArray.reshape(s.get(0) * s.get(1), s.get(2), s.get(3));
        return flat.get(cacheArray.getManager().create(slots));
    }

    private static NDArray randn(NDManager m, Random random, Shape shape, DataType dtype) {
        float[] v = new float[Math.toIntExact(shape.size())];
        for (int i = 0; i < v.length; ++i) {
            v[i] = (float) random.nextGaussian();
        }
        return m.create(v, shape).toType(dtype, false);
    }

    private static int sum(int[] v) {
        int s = 0;
        for (int x : v) {
            s += x;
        }
        return s;
    }

    private static double tolerance(DataType dtype) {
        return dtype == DataType.FLOAT16 ? 2e-3 : 1e-5;
    }

    /** Max error relative to max(1, |expected|) within tolerance; no NaN. */
    static void assertWithin(NDArray expected, NDArray actual, double tolerance, String what) {
        double[] want = expected.toType(DataType.FLOAT64, false).toDoubleArray();
        double[] got = actual.toType(DataType.FLOAT64, false).toDoubleArray();
        assertEquals(want.length, got.length, what + ": sizes differ");
        double worst = 0;
        for (int i = 0; i < want.length; ++i) {
            assertTrue(!Double.isNaN(got[i]), what + ": NaN at " + i);
            worst = Math.max(worst, Math.abs(got[i] - want[i]) / Math.max(1, Math.abs(want[i])));
        }
        assertTrue(worst <= tolerance, what + ": max error " + worst + " > " + tolerance);
    }
}
