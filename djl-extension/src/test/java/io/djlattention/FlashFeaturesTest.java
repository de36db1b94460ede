/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
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
 * FlashAttention-2's sliding window, soft-capping and ALiBi through {@link AttentionOptions}, on
 * the CPU, against a float64 reference built from stock NDArray ops (the grid mirrors
 * native-ops/tests/test_flash_features.py).
 */
class FlashFeaturesTest {

    private static final double TOLERANCE = 1e-5;

    private NDManager manager;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager();
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    /** ALiBi slopes: none, one per query head [Hq], one per batch row and head [B, Hq]. */
    enum Slopes {
        NONE,
        PER_HEAD,
        PER_BATCH_ROW
    }

    /** windowLeft, windowRight, softcap, ALiBi slopes, causal, name. */
    static Stream<Arguments> features() {
        return Stream.of(
                Arguments.of(-1, -1, 0f, Slopes.NONE, false, "none"),
                Arguments.of(7, -1, 0f, Slopes.NONE, false, "window left"),
                Arguments.of(-1, 9, 0f, Slopes.NONE, false, "window right"),
                Arguments.of(20, 3, 0f, Slopes.NONE, true, "window both, causal"),
                Arguments.of(0, 0, 0f, Slopes.NONE, false, "window zero"),
                Arguments.of(5000, 5000, 0f, Slopes.NONE, false, "window wider than the sequence"),
                Arguments.of(-1, -1, 1.5f, Slopes.NONE, false, "softcap"),
                Arguments.of(-1, -1, 0f, Slopes.PER_HEAD, true, "alibi [Hq], causal"),
                Arguments.of(-1, -1, 0f, Slopes.PER_BATCH_ROW, false, "alibi [B, Hq]"),
                Arguments.of(20, 5, 2f, Slopes.PER_BATCH_ROW, true, "combined, causal"));
    }

    @ParameterizedTest(name = "{5}")
    @MethodSource("features")
    void matchesTheFloat64Reference(
            int left, int right, float softcap, Slopes kind, boolean causal, String what) {
        // Sk = 70 (not a multiple of the 64-key tile), GQA 4:2, kv_lens leaving row 1 short;
        // Sq <= every row's keys, so every row sees at least its own position.
        int batch = 2;
        int seqQ = 6;
        int seqK = 70;
        int heads = 4;
        int kvHeads = 2;
        int dim = 40;
        NDArray q = manager.randomNormal(new Shape(batch, seqQ, heads, dim));
        NDArray k = manager.randomNormal(new Shape(batch, seqK, kvHeads, dim));
        NDArray v = manager.randomNormal(new Shape(batch, seqK, kvHeads, dim));
        int[] lens = {70, 33};
        NDArray slopes = null;
        if (kind == Slopes.PER_HEAD) {
            slopes = manager.create(new float[] {0.5f, 0.25f, 0.125f, 0.0625f});
        } else if (kind == Slopes.PER_BATCH_ROW) {
            slopes = manager.randomUniform(0f, 1f, new Shape(batch, heads));
        }
        float scale = 0.3f;
        AttentionOptions options =
                AttentionOptions.builder()
                        .optCausal(causal)
                        .optScale(scale)
                        .optKvLens(manager.create(lens))
                        .optWindow(left, right)
                        .optSoftcap(softcap)
                        .optAlibiSlopes(slopes)
                        .build();
        NDList result = AttentionOps.flashAttentionWithLogSumExp(q, k, v, options);

        NDList expected = reference(q, k, v, lens, scale, causal, left, right, softcap, slopes);
        assertClose(expected.get(0), result.get(0), "out");
        assertClose(expected.get(1), result.get(1), "lse");
    }

    @Test
    void varlenMatchesTheBatchedCallPerSequence() {
        // Two sequences (5 queries of 40 keys, 1 query of 9 keys), [B, Hq] slopes: sequence b
        // reads row b, and its window and ALiBi positions are its own.
        NDArray q = manager.randomNormal(new Shape(6, 2, 32));
        NDArray k = manager.randomNormal(new Shape(49, 1, 32));
        NDArray v = manager.randomNormal(new Shape(49, 1, 32));
        NDArray slopes = manager.create(new float[] {0.5f, 0.25f, 0.1f, 0.3f}, new Shape(2, 2));
        AttentionOptions.Builder options =
                AttentionOptions.builder().optCausal(true).optWindow(6, -1).optSoftcap(3f);
        NDList packed =
                AttentionOps.flashAttentionVarlen(
                        q, k, v, manager.create(new int[] {0, 5, 6}),
                        manager.create(new int[] {0, 40, 49}), 5, 40,
                        options.optAlibiSlopes(slopes).build());
        int[][] rows = {{0, 5, 0, 40}, {5, 6, 40, 49}};
        for (int b = 0; b < 2; ++b) {
            int[] r = rows[b];
            NDArray one =
                    AttentionOps.flashAttention(
                            q.get(r[0] + ":" + r[1]).expandDims(0),
                            k.get(r[2] + ":" + r[3]).expandDims(0),
                            v.get(r[2] + ":" + r[3]).expandDims(0),
                            options.optAlibiSlopes(slopes.get(b)).build());
            assertClose(
                    one.squeeze(0).toType(DataType.FLOAT64, false),
                    packed.get(0).get(r[0] + ":" + r[1]),
                    "sequence " + b);
        }
    }

    @Test
    void builderRejectsBadValues() {
        assertRejected(
                "window left: expected -1 (unbounded) or a value >= 0, got -2",
                () -> AttentionOptions.builder().optWindow(-2, 0));
        assertRejected(
                "window right: expected -1 (unbounded) or a value >= 0, got -3",
                () -> AttentionOptions.builder().optWindow(4, -3));
        assertRejected(
                "softcap: expected a finite value >= 0 (0: none), got -1.0",
                () -> AttentionOptions.builder().optSoftcap(-1f));
        assertRejected(
                "softcap: expected a finite value >= 0 (0: none), got NaN",
                () -> AttentionOptions.builder().optSoftcap(Float.NaN));
        assertRejected(
                "alibiSlopes: expected dtype float32, got float64",
                () -> AttentionOptions.builder().optAlibiSlopes(manager.zeros(new Shape(4),
                        DataType.FLOAT64)));
        assertRejected(
                "alibiSlopes: expected 1 dim [Hq] or 2 dims [B, Hq], got 3",
                () -> AttentionOptions.builder().optAlibiSlopes(manager.zeros(new Shape(1, 2, 4))));
    }

    @Test
    void theOperatorChecksTheSlopesAgainstTheCall() {
        NDArray q = manager.randomNormal(new Shape(2, 3, 4, 32));
        NDArray k = manager.randomNormal(new Shape(2, 5, 2, 32));
        AttentionOptions options =
                AttentionOptions.builder().optAlibiSlopes(manager.zeros(new Shape(3))).build();
        assertRejected(
                "flash_attention: alibi_slopes: expected size 4 for Hq (the heads of q), got 3",
                () -> AttentionOps.flashAttention(q, k, k, options));
    }

    @Test
    void defaultsAreUnbounded() {
        AttentionOptions options = AttentionOptions.defaults();
        assertEquals(-1, options.getWindowLeft());
        assertEquals(-1, options.getWindowRight());
        assertEquals(0f, options.getSoftcap());
        assertNull(options.getAlibiSlopes());
    }

    /**
     * softmax(mask(alibi(softcap(scale·q·kᵀ))))·v and its logsumexp in float64: out {@code [B,
     * Sq, Hq, D]}, lse {@code [B, Hq, Sq]}.
     */
    private NDList reference(
            NDArray q,
            NDArray k,
            NDArray v,
            int[] lens,
            float scale,
            boolean causal,
            int left,
            int right,
            float softcap,
            NDArray slopes) {
        Shape qs = q.getShape();
        int batch = (int) qs.get(0);
        int seqQ = (int) qs.get(1);
        int heads = (int) qs.get(2);
        int seqK = (int) k.getShape().get(1);
        long group = heads / k.getShape().get(2);
        NDArray qd = q.toType(DataType.FLOAT64, false).transpose(0, 2, 1, 3);
        NDArray kd = k.toType(DataType.FLOAT64, false).transpose(0, 2, 1, 3).repeat(1, group);
        NDArray vd = v.toType(DataType.FLOAT64, false).transpose(0, 2, 1, 3).repeat(1, group);
        NDArray scores = qd.matMul(kd.transpose(0, 1, 3, 2)).mul(scale);
        if (softcap > 0) {
            scores = scores.div(softcap).tanh().mul(softcap);
        }
        float[] slope =
                slopes == null
                        ? new float[batch * heads]
                        : slopes.broadcast(new Shape(batch, heads)).toFloatArray();
        double[] bias = new double[batch * heads * seqQ * seqK];
        int at = 0;
        for (int b = 0; b < batch; ++b) {
            for (int h = 0; h < heads; ++h) {
                for (int i = 0; i < seqQ; ++i) {
                    int pos = i + lens[b] - seqQ;
                    for (int j = 0; j < seqK; ++j, ++at) {
                        boolean visible =
                                j < lens[b]
                                        && (!causal || j <= pos)
                                        && (left < 0 || j >= pos - left)
                                        && (right < 0 || j <= pos + right);
                        bias[at] =
                                visible
                                        ? -slope[b * heads + h] * Math.abs(pos - j)
                                        : Double.NEGATIVE_INFINITY;
                    }
                }
            }
        }
        scores = scores.add(manager.create(bias, new Shape(batch, heads, seqQ, seqK)));
        NDArray max = scores.max(new int[] {-1}, true);
        NDArray sum = scores.sub(max).exp().sum(new int[] {-1}, true);
        NDArray probs = scores.sub(max).exp().div(sum);
        NDArray out = probs.matMul(vd).transpose(0, 2, 1, 3);
        NDArray lse = max.add(sum.log()).squeeze(-1);
        return new NDList(out, lse);
    }

    /** Max error relative to max(1, |expected|) within the float32 tolerance. */
    private static void assertClose(NDArray expected, NDArray actual, String what) {
        assertEquals(expected.getShape(), actual.getShape(), what + ": shape");
        double[] e = expected.toType(DataType.FLOAT64, false).toDoubleArray();
        double[] a = actual.toType(DataType.FLOAT64, false).toDoubleArray();
        double worst = 0;
        for (int i = 0; i < e.length; ++i) {
            assertTrue(Double.isFinite(a[i]), what + ": non-finite element " + i);
            worst = Math.max(worst, Math.abs(a[i] - e[i]) / Math.max(1, Math.abs(e[i])));
        }
        assertTrue(worst <= TOLERANCE, what + ": max error " + worst + " > " + TOLERANCE);
    }
}
