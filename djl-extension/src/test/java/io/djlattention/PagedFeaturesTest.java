/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The sliding window and logit soft-cap of the paged operators through the cache-level and the
 * table-level overloads of {@link AttentionOps} ({@code pagedPrefillAttention} / {@code
 * pagedAttention} with {@code windowLeft, softcap}), on the CPU, against a float64 reference computed here from the keys and
 * values written (the grid mirrors native-ops/tests/test_paged.py's feature tests): a prefill
 * step, a chunked step (chunks of 5, 1 and 9 rows on cached prefixes) and a decode step, GQA 4:2,
 * block size 8, contexts not a multiple of it.
 */
class PagedFeaturesTest {

    private static final double TOLERANCE = 1e-5;
    private static final int HEADS = 4;
    private static final int KV_HEADS = 2;
    private static final int DIM = 64;
    private static final float SCALE = 0.3f;

    private NDManager manager;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager();
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    /** windowLeft, softcap, with ALiBi, name. */
    static Stream<Arguments> features() {
        return Stream.of(
                Arguments.of(-1, 0f, false, "none"),
                Arguments.of(0, 0f, false, "window zero: only itself"),
                Arguments.of(1, 0f, false, "window one"),
                Arguments.of(5, 0f, false, "window inside a block"),
                Arguments.of(8, 0f, false, "window of a block"),
                Arguments.of(100, 0f, false, "window wider than every context"),
                Arguments.of(-1, 1.5f, false, "softcap"),
                Arguments.of(11, 2f, true, "window, softcap and alibi"));
    }

    @ParameterizedTest(name = "{3}")
    @MethodSource("features")
    void matchesTheFloat64Reference(int windowLeft, float softcap, boolean alibi, String what) {
        NDArray slopes =
                alibi ? manager.create(new float[] {0.5f, 0.25f, 0.125f, 0.0625f}) : null;
        float[] slope = alibi ? slopes.toFloatArray() : new float[HEADS];
        long[] ids = {0, 1, 2};
        List<List<float[]>> keys = new ArrayList<>();
        List<List<float[]>> values = new ArrayList<>();
        for (int s = 0; s < ids.length; ++s) {
            keys.add(new ArrayList<>());
            values.add(new ArrayList<>());
        }
        try (PagedKvCache cache =
                PagedKvCache.builder()
                        .setManager(manager)
                        .setNumLayers(1)
                        .setNumKvHeads(KV_HEADS)
                        .setHeadDim(DIM)
                        .optBlockSize(8)
                        .optNumBlocks(24)
                        .build()) {
            // Prefill of 13, 30 and 1 tokens, then chunks of 5, 1 and 9 on those prefixes.
            int[][] steps = {{13, 30, 1}, {5, 1, 9}};
            for (int step = 0; step < steps.length; ++step) {
                int[] lens = steps[step];
                for (int s = 0; s < ids.length; ++s) {
                    if (step == 0) {
                        cache.allocate(ids[s], lens[s]);
                    } else {
                        cache.appendSlots(ids[s], lens[s]);
                    }
                }
                try (PagedBatch batch = cache.prepare(ids, lens, manager)) {
                    int tokens = write(cache, batch, lens, keys, values);
                    NDArray q = manager.randomNormal(new Shape(tokens, HEADS, DIM));
                    NDArray out =
                            AttentionOps.pagedPrefillAttention(
                                    q,
                                    cache,
                                    0,
                                    batch,
                                    PagedAttentionOptions.builder()
                                            .optScale(SCALE)
                                            .optAlibiSlopes(slopes)
                                            .optWindowLeft(windowLeft)
                                            .optSoftcap(softcap)
                                            .build());
                    double[] expected =
                            reference(q.toFloatArray(), lens, keys, values, windowLeft, softcap,
                                    slope);
                    assertClose(expected, out, what + ", prefill step " + step);
                    // The table-level overload on the batch's own tables (indices checked).
                    NDArray table =
                            AttentionOps.pagedPrefillAttention(
                                    q,
                                    cache.getKeyCache(0),
                                    cache.getValueCache(0),
                                    batch.getBlockTables(),
                                    batch.getCuSeqlensQ(),
                                    batch.getContextLens(),
                                    batch.getMaxQueryLen(),
                                    PagedAttentionOptions.builder()
                                            .optScale(SCALE)
                                            .optAlibiSlopes(slopes)
                                            .optWindowLeft(windowLeft)
                                            .optSoftcap(softcap)
                                            .build());
                    assertClose(expected, table, what + ", prefill step " + step + ", tables");
                }
            }
            // A decode step: one new token per sequence.
            int[] ones = {1, 1, 1};
            for (long id : ids) {
                cache.appendSlots(id, 1);
            }
            try (PagedBatch batch = cache.prepare(ids, ones, manager)) {
                write(cache, batch, ones, keys, values);
                NDArray q = manager.randomNormal(new Shape(ids.length, HEADS, DIM));
                NDArray out =
                        AttentionOps.pagedAttention(
                                q,
                                cache,
                                0,
                                batch,
                                PagedAttentionOptions.builder()
                                        .optScale(SCALE)
                                        .optAlibiSlopes(slopes)
                                        .optWindowLeft(windowLeft)
                                        .optSoftcap(softcap)
                                        .build());
                double[] expected =
                        reference(q.toFloatArray(), ones, keys, values, windowLeft, softcap,
                                slope);
                assertClose(expected, out, what + ", decode");
                NDArray table =
                        AttentionOps.pagedAttention(
                                q,
                                cache.getKeyCache(0),
                                cache.getValueCache(0),
                                batch.getBlockTables(),
                                batch.getContextLens(),
                                batch.getMaxContextLen(),
                                PagedAttentionOptions.builder()
                                        .optScale(SCALE)
                                        .optAlibiSlopes(slopes)
                                        .optWindowLeft(windowLeft)
                                        .optSoftcap(softcap)
                                        .build());
                assertClose(expected, table, what + ", decode, tables");
            }
        }
    }

    @Test
    void theSixArgumentOverloadsAreTheUnboundedOnes() {
        try (PagedKvCache cache =
                        PagedKvCache.builder()
                                .setManager(manager)
                                .setNumLayers(1)
                                .setNumKvHeads(KV_HEADS)
                                .setHeadDim(DIM)
                                .optBlockSize(8)
                                .optNumBlocks(8)
                                .build()) {
            cache.allocate(0, 20);
            try (PagedBatch batch = cache.prepare(new long[] {0}, new int[] {20}, manager)) {
                NDArray k = manager.randomNormal(new Shape(20, KV_HEADS, DIM));
                AttentionOps.reshapeAndCache(k, k, cache, 0, batch);
                NDArray q = manager.randomNormal(new Shape(20, HEADS, DIM));
                assertArrayEquals(
                        AttentionOps.pagedPrefillAttention(
                                        q,
                                        cache,
                                        0,
                                        batch,
                                        PagedAttentionOptions.builder().optScale(SCALE).build())
                                .toFloatArray(),
                        AttentionOps.pagedPrefillAttention(
                                        q,
                                        cache,
                                        0,
                                        batch,
                                        PagedAttentionOptions.builder().optScale(SCALE).build())
                                .toFloatArray());
                NDArray one = q.get("19:20");
                try (PagedBatch decode = cache.prepare(new long[] {0}, new int[] {1}, manager)) {
                    assertArrayEquals(
                            AttentionOps.pagedAttention(
                                            one,
                                            cache,
                                            0,
                                            decode,
                                            PagedAttentionOptions.builder().optScale(SCALE).build())
                                    .toFloatArray(),
                            AttentionOps.pagedAttention(
                                            one,
                                            cache,
                                            0,
                                            decode,
                                            PagedAttentionOptions.builder().optScale(SCALE).build())
                                    .toFloatArray());
                }
            }
        }
    }

    @Test
    void badWindowAndSoftcapAreRejected() {
        try (PagedKvCache cache =
                        PagedKvCache.builder()
                                .setManager(manager)
                                .setNumLayers(1)
                                .setNumKvHeads(KV_HEADS)
                                .setHeadDim(DIM)
                                .optBlockSize(8)
                                .optNumBlocks(4)
                                .build()) {
            cache.allocate(0, 3);
            try (PagedBatch batch = cache.prepare(new long[] {0}, new int[] {3}, manager)) {
                NDArray q = manager.randomNormal(new Shape(3, HEADS, DIM));
                NDArray one = q.get("0:1");
                Object[][] cases = {
                    {-2, 0f, "windowLeft: expected -1 (unbounded) or a value >= 0, got -2"},
                    {-1, -1f, "softcap: expected a finite value >= 0 (0: none), got -1.0"},
                    {4, Float.NaN, "softcap: expected a finite value >= 0 (0: none), got NaN"},
                    {
                        -1,
                        Float.POSITIVE_INFINITY,
                        "softcap: expected a finite value >= 0 (0: none), got Infinity"
                    }
                };
                for (Object[] c : cases) {
                    int left = (Integer) c[0];
                    float cap = (Float) c[1];
                    String message = (String) c[2];
                    assertRejected(
                            message,
                            () ->
                                    AttentionOps.pagedPrefillAttention(
                                            q,
                                            cache,
                                            0,
                                            batch,
                                            PagedAttentionOptions.builder()
                                                    .optScale(SCALE)
                                                    .optWindowLeft(left)
                                                    .optSoftcap(cap)
                                                    .build()));
                    assertRejected(
                            message,
                            () ->
                                    AttentionOps.pagedAttention(
                                            one,
                                            cache,
                                            0,
                                            batch,
                                            PagedAttentionOptions.builder()
                                                    .optScale(SCALE)
                                                    .optWindowLeft(left)
                                                    .optSoftcap(cap)
                                                    .build()));
                    assertRejected(
                            message,
                            () ->
                                    AttentionOps.pagedPrefillAttention(
                                            q,
                                            cache.getKeyCache(0),
                                            cache.getValueCache(0),
                                            batch.getBlockTables(),
                                            batch.getCuSeqlensQ(),
                                            batch.getContextLens(),
                                            3,
                                            PagedAttentionOptions.builder()
                                                    .optScale(SCALE)
                                                    .optWindowLeft(left)
                                                    .optSoftcap(cap)
                                                    .build()));
                    assertRejected(
                            message,
                            () ->
                                    AttentionOps.pagedAttention(
                                            one,
                                            cache.getKeyCache(0),
                                            cache.getValueCache(0),
                                            batch.getBlockTables(),
                                            batch.getContextLens(),
                                            3,
                                            PagedAttentionOptions.builder()
                                                    .optScale(SCALE)
                                                    .optWindowLeft(left)
                                                    .optSoftcap(cap)
                                                    .build()));
                }
            }
        }
    }

    /**
     * Writes fresh random keys and values for the step's new tokens into the cache and appends
     * them to each sequence's host copy; returns the step's tokens.
     */
    private int write(
            PagedKvCache cache,
            PagedBatch batch,
            int[] lens,
            List<List<float[]>> keys,
            List<List<float[]>> values) {
        int tokens = 0;
        for (int n : lens) {
            tokens += n;
        }
        NDArray k = manager.randomNormal(new Shape(tokens, KV_HEADS, DIM));
        NDArray v = manager.randomNormal(new Shape(tokens, KV_HEADS, DIM));
        AttentionOps.reshapeAndCache(k, v, cache, 0, batch);
        float[] kh = k.toFloatArray();
        float[] vh = v.toFloatArray();
        int row = 0;
        int width = KV_HEADS * DIM;
        for (int s = 0; s < lens.length; ++s) {
            for (int t = 0; t < lens[s]; ++t, ++row) {
                float[] kr = new float[width];
                float[] vr = new float[width];
                System.arraycopy(kh, row * width, kr, 0, width);
                System.arraycopy(vh, row * width, vr, 0, width);
                keys.get(s).add(kr);
                values.get(s).add(vr);
            }
        }
        return tokens;
    }

    /**
     * The step's outputs {@code [T, Hq, D]} in float64: row t of sequence s's n new rows sits at
     * {@code p = context - n + t} and sees keys {@code max(0, p - windowLeft) <= j <= p} (all
     * {@code j <= p} when windowLeft is -1), scored {@code softcap·tanh(s / softcap)} (when
     * softcap > 0) of {@code s = scale·q·k_j}, plus {@code slope_h·(j - p)}.
     */
    private static double[] reference(
            float[] q,
            int[] lens,
            List<List<float[]>> keys,
            List<List<float[]>> values,
            int windowLeft,
            float softcap,
            float[] slope) {
        int tokens = q.length / (HEADS * DIM);
        double[] out = new double[tokens * HEADS * DIM];
        int group = HEADS / KV_HEADS;
        int row = 0;
        for (int s = 0; s < lens.length; ++s) {
            int context = keys.get(s).size();
            for (int t = 0; t < lens[s]; ++t, ++row) {
                int p = context - lens[s] + t;
                int first = windowLeft < 0 ? 0 : Math.max(0, p - windowLeft);
                for (int h = 0; h < HEADS; ++h) {
                    int kvOffset = (h / group) * DIM;
                    int qOffset = (row * HEADS + h) * DIM;
                    double[] score = new double[p + 1 - first];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = first; j <= p; ++j) {
                        float[] k = keys.get(s).get(j);
                        double dot = 0;
                        for (int d = 0; d < DIM; ++d) {
                            dot += (double) q[qOffset + d] * k[kvOffset + d];
                        }
                        double x = SCALE * dot;
                        if (softcap > 0) {
                            x = softcap * Math.tanh(x / softcap);
                        }
                        x += slope[h] * (double) (j - p);
                        score[j - first] = x;
                        max = Math.max(max, x);
                    }
                    double sum = 0;
                    for (int i = 0; i < score.length; ++i) {
                        score[i] = Math.exp(score[i] - max);
                        sum += score[i];
                    }
                    for (int j = first; j <= p; ++j) {
                        float[] v = values.get(s).get(j);
                        double w = score[j - first] / sum;
                        for (int d = 0; d < DIM; ++d) {
                            out[qOffset + d] += w * v[kvOffset + d];
                        }
                    }
                }
            }
        }
        return out;
    }

    /** Max error relative to max(1, |expected|) within the float32 tolerance. */
    private static void assertClose(double[] expected, NDArray actual, String what) {
        assertEquals(expected.length, actual.getShape().size(), what + ": size");
        double[] a = actual.toType(DataType.FLOAT64, false).toDoubleArray();
        double worst = 0;
        for (int i = 0; i < expected.length; ++i) {
            assertTrue(Double.isFinite(a[i]), what + ": non-finite element " + i);
            worst = Math.max(worst, Math.abs(a[i] - expected[i]) / Math.max(1, Math.abs(expected[i])));
        }
        assertTrue(worst <= TOLERANCE, what + ": max error " + worst + " > " + TOLERANCE);
    }
}
