/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * FlashAttention's {@code flash_attn_with_kvcache} semantics through the table-level paged
 * overloads of {@link AttentionOps}, on the CPU, against a float64 reference computed here from
 * the cache arrays: ALiBi slopes per sequence ({@code [numSeqs, Hq]}), non-causal prefill rows
 * with a two-sided window, and chunks longer than their context (bottom-right aligned). The grid
 * mirrors native-ops/tests/test_paged_kvcache.py: GQA 4:2, block size 8, contexts of 0, 1 and not
 * a multiple of the block, shuffled blocks.
 */
class PagedKvCacheSemanticsTest {

    private static final double TOLERANCE = 1e-5;
    private static final int HEADS = 4;
    private static final int KV_HEADS = 2;
    private static final int DIM = 16;
    private static final int BLOCK = 8;
    private static final float SCALE = 0.4f;
    // (context, chunk) per sequence: a chunk inside its context, a whole context, a chunk longer
    // than its context (9 rows, 5 keys), a chunk over an empty context.
    private static final int[] CONTEXTS = {21, 13, 5, 0};
    private static final int[] CHUNKS = {4, 13, 9, 3};
    private static final int MAX_BLOCKS = 3;
    // Sequence s owns blocks TABLE[s][0..): shuffled over 12 blocks.
    private static final int[][] TABLE = {{7, 2, 10}, {4, 0, 0}, {9, 0, 0}, {0, 0, 0}};

    private NDManager manager;
    private NDArray keyCache;
    private NDArray valueCache;
    private float[] keys;
    private float[] values;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager();
        keyCache = manager.randomNormal(new Shape(12, BLOCK, KV_HEADS, DIM));
        valueCache = manager.randomNormal(new Shape(12, BLOCK, KV_HEADS, DIM));
        keys = keyCache.toFloatArray();
        values = valueCache.toFloatArray();
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    /** causal, windowLeft, windowRight, softcap, slopes per sequence, name. */
    static Stream<Arguments> prefillCases() {
        return Stream.of(
                Arguments.of(true, -1, -1, 0f, true, "causal, slopes per sequence"),
                Arguments.of(false, -1, -1, 0f, false, "non-causal"),
                Arguments.of(false, -1, -1, 0f, true, "non-causal, slopes per sequence"),
                Arguments.of(false, 3, 2, 0f, true, "non-causal, two-sided window"),
                Arguments.of(false, 0, 0, 0f, false, "non-causal, only itself"),
                Arguments.of(false, -1, 1, 2f, true, "non-causal, right window, softcap"),
                Arguments.of(true, 4, -1, 2f, true, "causal, window, softcap"));
    }

    @ParameterizedTest(name = "{5}")
    @MethodSource("prefillCases")
    void prefillMatchesTheFloat64Reference(
            boolean causal,
            int windowLeft,
            int windowRight,
            float softcap,
            boolean perSequence,
            String what) {
        int tokens = 0;
        int[] cu = new int[CHUNKS.length + 1];
        for (int s = 0; s < CHUNKS.length; ++s) {
            tokens += CHUNKS[s];
            cu[s + 1] = tokens;
        }
        NDArray q = manager.randomNormal(new Shape(tokens, HEADS, DIM));
        float[][] slopes = slopes(perSequence);
        NDArray out =
                AttentionOps.pagedPrefillAttention(
                        q,
                        keyCache,
                        valueCache,
                        manager.create(flatTable()).reshape(CONTEXTS.length, MAX_BLOCKS),
                        manager.create(cu),
                        manager.create(CONTEXTS),
                        13,
                        PagedAttentionOptions.builder()
                                .optScale(SCALE)
                                .optCausal(causal)
                                .optWindowLeft(windowLeft)
                                .optWindowRight(windowRight)
                                .optSoftcap(softcap)
                                .optAlibiSlopes(slopeArray(slopes, perSequence))
                                .build());
        double[] expected =
                reference(q.toFloatArray(), CHUNKS, causal, windowLeft, windowRight, softcap,
                        slopes);
        assertClose(expected, out, what);
    }

    @Test
    void decodeTakesSlopesPerSequence() {
        NDArray q = manager.randomNormal(new Shape(CONTEXTS.length, HEADS, DIM));
        float[][] slopes = slopes(true);
        NDArray out =
                AttentionOps.pagedAttention(
                        q,
                        keyCache,
                        valueCache,
                        manager.create(flatTable()).reshape(CONTEXTS.length, MAX_BLOCKS),
                        manager.create(CONTEXTS),
                        21,
                        PagedAttentionOptions.builder()
                                .optScale(SCALE)
                                .optWindowLeft(6)
                                .optAlibiSlopes(slopeArray(slopes, true))
                                .build());
        int[] ones = {1, 1, 1, 1};
        assertClose(reference(q.toFloatArray(), ones, true, 6, -1, 0f, slopes), out, "decode");
    }

    @Test
    void badSlopeShapesAndWindowsAreRejected() {
        NDArray q = manager.randomNormal(new Shape(CONTEXTS.length, HEADS, DIM));
        NDArray tables = manager.create(flatTable()).reshape(CONTEXTS.length, MAX_BLOCKS);
        NDArray lens = manager.create(CONTEXTS);
        Object[][] cases = {
            {new Shape(HEADS + 1), "alibi_slopes: expected size 4 for Hq (the heads of query), got 5"},
            {
                new Shape(CONTEXTS.length + 1, HEADS),
                "alibi_slopes: expected size 4 for num_seqs (the sequences), got 5"
            },
            {
                new Shape(CONTEXTS.length, HEADS - 1),
                "alibi_slopes: expected size 4 for Hq (the heads of query), got 3"
            },
            {
                new Shape(1, CONTEXTS.length, HEADS),
                "alibi_slopes: expected 1 dim [Hq] or 2 dims [num_seqs, Hq], got 3"
            },
        };
        for (Object[] c : cases) {
            PagedAttentionOptions options =
                    PagedAttentionOptions.builder()
                            .optAlibiSlopes(manager.ones((Shape) c[0]))
                            .build();
            assertRejected(
                    "paged_attention: " + c[1],
                    () ->
                            AttentionOps.pagedAttention(
                                    q, keyCache, valueCache, tables, lens, 21, options));
            assertRejected(
                    "paged_prefill_attention: " + c[1],
                    () ->
                            AttentionOps.pagedPrefillAttention(
                                    q,
                                    keyCache,
                                    valueCache,
                                    tables,
                                    manager.create(new int[] {0, 1, 2, 3, 4}),
                                    lens,
                                    1,
                                    options));
        }
        assertRejected(
                "windowRight: expected -1 (unbounded) or a value >= 0, got -2",
                () -> PagedAttentionOptions.builder().optWindowRight(-2));
        assertRejected(
                "alibiSlopes: expected dtype float32, got float16",
                () ->
                        PagedAttentionOptions.builder()
                                .optAlibiSlopes(manager.ones(new Shape(HEADS), DataType.FLOAT16)));
    }

    @Test
    void theDefaultsAreCausalWithoutAWindow() {
        PagedAttentionOptions options = PagedAttentionOptions.defaults();
        assertTrue(options.isCausal());
        assertEquals(-1, options.getWindowRight());
        assertEquals(-1, options.getWindowLeft());
    }

    /** Slopes of each sequence's query heads: one row for all, or rows far apart. */
    private static float[][] slopes(boolean perSequence) {
        float[][] slopes = new float[CONTEXTS.length][HEADS];
        for (int s = 0; s < CONTEXTS.length; ++s) {
            for (int h = 0; h < HEADS; ++h) {
                slopes[s][h] = 0.5f / (h + 1) + (perSequence ? 0.3f * s : 0f);
            }
        }
        return slopes;
    }

    private NDArray slopeArray(float[][] slopes, boolean perSequence) {
        if (!perSequence) {
            return manager.create(slopes[0]);
        }
        float[] flat = new float[CONTEXTS.length * HEADS];
        for (int s = 0; s < CONTEXTS.length; ++s) {
            System.arraycopy(slopes[s], 0, flat, s * HEADS, HEADS);
        }
        return manager.create(flat).reshape(CONTEXTS.length, HEADS);
    }

    private static int[] flatTable() {
        int[] flat = new int[CONTEXTS.length * MAX_BLOCKS];
        for (int s = 0; s < CONTEXTS.length; ++s) {
            System.arraycopy(TABLE[s], 0, flat, s * MAX_BLOCKS, MAX_BLOCKS);
        }
        return flat;
    }

    /** Element d of key (or value) j of sequence s, kv head g, read through the block table. */
    private static double at(float[] cache, int s, int j, int g, int d) {
        int block = TABLE[s][j / BLOCK];
        return cache[((block * BLOCK + j % BLOCK) * KV_HEADS + g) * DIM + d];
    }

    /**
     * The outputs {@code [T, Hq, D]} in float64: row t of sequence s's n rows sits at {@code p =
     * context - n + t} and sees the keys j of its context with {@code j <= p} when causal (else
     * all, or {@code j <= p + windowRight} when {@code windowRight >= 0}) and {@code j >= p -
     * windowLeft} when {@code windowLeft >= 0}; scores {@code softcap·tanh(s / softcap)} of
     * {@code s = scale·q·k_j}, minus {@code slope·|j - p|}; rows that see nothing give 0.
     */
    private double[] reference(
            float[] q,
            int[] chunks,
            boolean causal,
            int windowLeft,
            int windowRight,
            float softcap,
            float[][] slopes) {
        double[] out = new double[q.length];
        int group = HEADS / KV_HEADS;
        int row = 0;
        for (int s = 0; s < chunks.length; ++s) {
            int context = CONTEXTS[s];
            for (int t = 0; t < chunks[s]; ++t, ++row) {
                int p = context - chunks[s] + t;
                int first = windowLeft < 0 ? 0 : Math.max(0, p - windowLeft);
                int last = causal ? p : (windowRight < 0 ? context - 1 : p + windowRight);
                last = Math.min(last, context - 1);
                if (last < first) {
                    continue;
                }
                for (int h = 0; h < HEADS; ++h) {
                    int g = h / group;
                    int qOffset = (row * HEADS + h) * DIM;
                    double[] score = new double[last + 1 - first];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = first; j <= last; ++j) {
                        double dot = 0;
                        for (int d = 0; d < DIM; ++d) {
                            dot += (double) q[qOffset + d] * at(keys, s, j, g, d);
                        }
                        double x = SCALE * dot;
                        if (softcap > 0) {
                            x = softcap * Math.tanh(x / softcap);
                        }
                        x -= slopes[s][h] * (double) Math.abs(j - p);
                        score[j - first] = x;
                        max = Math.max(max, x);
                    }
                    double sum = 0;
                    for (int i = 0; i < score.length; ++i) {
                        score[i] = Math.exp(score[i] - max);
                        sum += score[i];
                    }
                    for (int j = first; j <= last; ++j) {
                        double w = score[j - first] / sum;
                        for (int d = 0; d < DIM; ++d) {
                            out[qOffset + d] += w * at(values, s, j, g, d);
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
