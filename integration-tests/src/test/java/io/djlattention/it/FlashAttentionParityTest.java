/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link AttentionOps#flashAttention} against stock DJL ops computing {@code softmax(q·kᵀ·scale
 * + mask)·v} in float64 ({@link StockAttention}), on fresh random inputs.
 *
 * <p>Tolerances: float32 inputs 1e-5 of max(1, |reference|): the kernel accumulates in float32
 * over at most a few thousand terms, which costs ~1e-6. float16 inputs 2e-3: the reference sees
 * the same float16-rounded inputs, so the error is the float16 rounding of the output (half an
 * ulp, 4.9e-4 at 1.0) plus float32 accumulation.
 */
class FlashAttentionParityTest {

    private static final double FLOAT32_TOLERANCE = 1e-5;
    private static final double FLOAT16_TOLERANCE = 2e-3;

    static Stream<Arguments> denseShapes() {
        List<Arguments> cases = new ArrayList<>();
        int[][] lengths = {{1, 1}, {7, 7}, {129, 129}, {7, 129}, {129, 7}, {1, 1000}, {1000, 1000}};
        for (int[] len : lengths) {
            for (int dim : new int[] {32, 64, 80, 128}) {
                for (boolean causal : new boolean[] {false, true}) {
                    cases.add(Arguments.of(len[0], len[1], dim, causal));
                }
            }
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "Sq={0} Sk={1} D={2} causal={3}")
    @MethodSource("denseShapes")
    void matchesStockDjlInFloat32(int seqQ, int seqK, int dim, boolean causal) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            int batch = seqQ * seqK > 100_000 ? 1 : 2;
            check(manager, batch, seqQ, seqK, 4, 4, dim, causal, null, DataType.FLOAT32);
        }
    }

    @ParameterizedTest(name = "Hq={0} Hkv={1} causal={2}")
    @MethodSource("groupedShapes")
    void matchesStockDjlWithGqaMqaAndRaggedKvLens(int headsQ, int headsKv, boolean causal) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            int[] kvLens = {129, 1, 0, 64};
            check(manager, 4, 37, 129, headsQ, headsKv, 64, causal, kvLens, DataType.FLOAT32);
        }
    }

    static Stream<Arguments> groupedShapes() {
        return Stream.of(
                Arguments.of(8, 2, false), // GQA 4:1
                Arguments.of(8, 2, true),
                Arguments.of(8, 1, false), // MQA
                Arguments.of(8, 1, true),
                Arguments.of(4, 4, true));
    }

    @ParameterizedTest(name = "Sq={0} Sk={1} D={2} causal={3}")
    @MethodSource("float16Shapes")
    void matchesStockDjlInFloat16(int seqQ, int seqK, int dim, boolean causal) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            int[] kvLens = {seqK, Math.max(1, seqK / 3)};
            check(manager, 2, seqQ, seqK, 8, 2, dim, causal, kvLens, DataType.FLOAT16);
        }
    }

    static Stream<Arguments> float16Shapes() {
        return Stream.of(
                Arguments.of(1, 1000, 128, false),
                Arguments.of(129, 129, 80, true),
                Arguments.of(7, 129, 32, true),
                Arguments.of(129, 7, 64, false));
    }

    @Test
    void viewsOfAFusedProjectionNeedOnlyAContiguousLastDim() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            // [B, S, 3, H, D] split into three strided views, as from one fused QKV GEMM.
            NDArray qkv = manager.randomNormal(new Shape(2, 50, 3, 4, 64));
            NDArray q = qkv.get(":, :, 0");
            NDArray k = qkv.get(":, :, 1");
            NDArray v = qkv.get(":, :, 2");
            NDArray out =
                    AttentionOps.flashAttention(
                            q, k, v, AttentionOptions.builder().optCausal(true).build());
            NDArray expected = StockAttention.attention(q, k, v, true, 0.125, null).get(0);
            assertWithin(expected, out, FLOAT32_TOLERANCE, "out");
        }
    }

    @Test
    void customScaleIsApplied() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            NDArray q = manager.randomNormal(new Shape(1, 9, 2, 32));
            NDArray k = manager.randomNormal(new Shape(1, 9, 2, 32));
            NDArray v = manager.randomNormal(new Shape(1, 9, 2, 32));
            NDArray out =
                    AttentionOps.flashAttention(
                            q, k, v, AttentionOptions.builder().optScale(0.37f).build());
            NDArray expected = StockAttention.attention(q, k, v, false, 0.37f, null).get(0);
            assertWithin(expected, out, FLOAT32_TOLERANCE, "out");
        }
    }

    private static void check(
            NDManager manager,
            int batch,
            int seqQ,
            int seqK,
            int headsQ,
            int headsKv,
            int dim,
            boolean causal,
            int[] kvLens,
            DataType dtype) {
        NDArray q = manager.randomNormal(new Shape(batch, seqQ, headsQ, dim)).toType(dtype, false);
        NDArray k = manager.randomNormal(new Shape(batch, seqK, headsKv, dim)).toType(dtype, false);
        NDArray v = manager.randomNormal(new Shape(batch, seqK, headsKv, dim)).toType(dtype, false);
        AttentionOptions.Builder options = AttentionOptions.builder().optCausal(causal);
        if (kvLens != null) {
            options.optKvLens(manager.create(kvLens));
        }
        NDList result = AttentionOps.flashAttentionWithLogSumExp(q, k, v, options.build());
        assertEquals(new Shape(batch, seqQ, headsQ, dim), result.get(0).getShape());
        assertEquals(dtype, result.get(0).getDataType());
        assertEquals(new Shape(batch, headsQ, seqQ), result.get(1).getShape());
        assertEquals(DataType.FLOAT32, result.get(1).getDataType());

        NDList expected = StockAttention.attention(q, k, v, causal, 1 / Math.sqrt(dim), kvLens);
        double tolerance = dtype == DataType.FLOAT16 ? FLOAT16_TOLERANCE : FLOAT32_TOLERANCE;
        assertWithin(expected.get(0), result.get(0), tolerance, "out");
        assertWithin(expected.get(1), result.get(1), tolerance, "logsumexp");
    }

    @ParameterizedTest(name = "causal={0}")
    @ValueSource(booleans = {false, true})
    void varlenMatchesStockDjlPerSequence(boolean causal) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            // Packed sequences of different lengths, queries shorter than keys in one of them
            // (bottom-right causal alignment), GQA 4:2.
            int[] lensQ = {5, 1, 33, 17};
            int[] lensK = {5, 9, 33, 40};
            int[] cuQ = new int[lensQ.length + 1];
            int[] cuK = new int[lensK.length + 1];
            for (int b = 0; b < lensQ.length; ++b) {
                cuQ[b + 1] = cuQ[b] + lensQ[b];
                cuK[b + 1] = cuK[b] + lensK[b];
            }
            NDArray q = manager.randomNormal(new Shape(cuQ[lensQ.length], 4, 64));
            NDArray k = manager.randomNormal(new Shape(cuK[lensK.length], 2, 64));
            NDArray v = manager.randomNormal(new Shape(cuK[lensK.length], 2, 64));
            NDList result =
                    AttentionOps.flashAttentionVarlen(
                            q,
                            k,
                            v,
                            manager.create(cuQ),
                            manager.create(cuK),
                            33,
                            40,
                            AttentionOptions.builder().optCausal(causal).build());
            for (int b = 0; b < lensQ.length; ++b) {
                String rowsQ = cuQ[b] + ":" + cuQ[b + 1];
                String rowsK = cuK[b] + ":" + cuK[b + 1];
                NDArray expected =
                        StockAttention.attention(
                                        q.get(rowsQ).expandDims(0),
                                        k.get(rowsK).expandDims(0),
                                        v.get(rowsK).expandDims(0),
                                        causal,
                                        0.125,
                                        null)
                                .get(0)
                                .squeeze(0);
                assertWithin(expected, result.get(0).get(rowsQ), FLOAT32_TOLERANCE, "out " + b);
            }
            assertEquals(new Shape(4, cuQ[lensQ.length]), result.get(1).getShape());
        }
    }

    /** Max error relative to max(1, |expected|) within tolerance; infinities must match. */
    static void assertWithin(NDArray expected, NDArray actual, double tolerance, String what) {
        double[] want = expected.toType(DataType.FLOAT64, false).toDoubleArray();
        double[] got = actual.toType(DataType.FLOAT64, false).toDoubleArray();
        assertEquals(want.length, got.length, what + ": sizes differ");
        double worst = 0;
        for (int i = 0; i < want.length; ++i) {
            assertTrue(!Double.isNaN(got[i]), what + ": NaN at " + i);
            if (Double.isInfinite(want[i]) || Double.isInfinite(got[i])) {
                assertEquals(want[i], got[i], what + ": infinities differ at " + i);
                continue;
            }
            worst = Math.max(worst, Math.abs(got[i] - want[i]) / Math.max(1, Math.abs(want[i])));
        }
        assertTrue(worst <= tolerance, what + ": max error " + worst + " > " + tolerance);
    }
}
