/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import static io.djlattention.it.FlashAttentionParityTest.assertWithin;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link AttentionOps#causalLinearAttention} (the {@code causal_dot_product} operator plus the
 * Java feature map and normaliser) and {@link AttentionOps#linearAttention} against the quadratic
 * form computed with stock DJL ops in float64 ({@link StockLinearAttention}), on fresh random
 * inputs.
 *
 * <p>Tolerances, relative to max(1, |reference|): every output row is a weighted mean of value
 * rows with positive weights, so its size is that of v (about 1 to 4 here). float32 1e-5: the
 * numerator and normaliser are sums of at most a few thousand positive-weighted float32 terms
 * (relative error a few 1e-7), and dividing them keeps that size. float16 2e-3: the reference
 * sees the same float16-rounded inputs and the computation runs in float32, so the error is the
 * final rounding to float16 (half an ulp, 4.9e-4 relative) plus the float32 error.
 */
class LinearAttentionParityTest {

    private static final double FLOAT32_TOLERANCE = 1e-5;
    private static final double FLOAT16_TOLERANCE = 2e-3;

    static Stream<Arguments> shapes() {
        List<Arguments> cases = new ArrayList<>();
        int[][] dims = {{16, 24}, {64, 80}, {128, 33}, {256, 256}, {1, 7}};
        for (int length : new int[] {1, 7, 129, 1000}) {
            for (int[] dim : dims) {
                for (boolean causal : new boolean[] {false, true}) {
                    cases.add(Arguments.of(length, dim[0], dim[1], causal));
                }
            }
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "L={0} E={1} M={2} causal={3}")
    @MethodSource("shapes")
    void matchesStockDjlInFloat32(int length, int dimQk, int dimV, boolean causal) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            int batch = length >= 1000 ? 1 : 2;
            check(
                    manager,
                    batch,
                    3,
                    length,
                    length,
                    dimQk,
                    dimV,
                    causal,
                    1e-6f,
                    0f,
                    DataType.FLOAT32);
        }
    }

    @ParameterizedTest(name = "L={0} E={1} M={2} causal={3} v+{4}")
    @MethodSource("float16Shapes")
    void matchesStockDjlInFloat16(
            int length, int dimQk, int dimV, boolean causal, float valueOffset) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            check(
                    manager,
                    1,
                    2,
                    length,
                    length,
                    dimQk,
                    dimV,
                    causal,
                    1e-6f,
                    valueOffset,
                    DataType.FLOAT16);
        }
    }

    static Stream<Arguments> float16Shapes() {
        return Stream.of(
                Arguments.of(1, 64, 32, true, 0f),
                Arguments.of(7, 16, 24, false, 0f),
                Arguments.of(129, 128, 33, true, 0f),
                Arguments.of(129, 64, 80, false, 0f),
                // Values centred at 2: the un-normalised numerator Σ (φ(q)·φ(k_i)) v_i reaches
                // about L·1.7·E·2 ≈ 4e5, past float16's 65504; the result stays finite and within
                // tolerance only because the computation runs in float32.
                Arguments.of(2048, 64, 64, true, 2f),
                Arguments.of(2048, 64, 64, false, 2f));
    }

    @ParameterizedTest(name = "L={0} S={1}")
    @MethodSource("crossLengths")
    void nonCausalQueryAndKeyLengthsMayDiffer(int seqQ, int seqK) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            check(manager, 2, 3, seqQ, seqK, 48, 40, false, 1e-6f, 0f, DataType.FLOAT32);
        }
    }

    static Stream<Arguments> crossLengths() {
        return Stream.of(Arguments.of(7, 129), Arguments.of(129, 1), Arguments.of(1, 1000));
    }

    @ParameterizedTest(name = "causal={0}")
    @MethodSource("causalities")
    void epsIsAddedToTheNormaliser(boolean causal) {
        // With E = 2 the normaliser of the first rows is a few units, so eps = 3 changes the
        // output by tens of percent: a misplaced eps cannot pass.
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            check(manager, 2, 2, 33, 33, 2, 5, causal, 3f, 0f, DataType.FLOAT32);
        }
    }

    static Stream<Arguments> causalities() {
        return Stream.of(Arguments.of(false), Arguments.of(true));
    }

    @Test
    void headMajorViewsOfSequenceMajorTensorsAreAccepted() {
        // [B, L, H, E] tensors passed as transposed views, as the Javadoc tells such callers.
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            NDArray q = manager.randomNormal(new Shape(2, 65, 4, 32)).transpose(0, 2, 1, 3);
            NDArray k = manager.randomNormal(new Shape(2, 65, 4, 32)).transpose(0, 2, 1, 3);
            NDArray v = manager.randomNormal(new Shape(2, 65, 4, 48)).transpose(0, 2, 1, 3);
            assertWithin(
                    StockLinearAttention.attention(q, k, v, true, 1e-6),
                    AttentionOps.causalLinearAttention(q, k, v),
                    FLOAT32_TOLERANCE,
                    "causal out");
            assertWithin(
                    StockLinearAttention.attention(q, k, v, false, 1e-6),
                    AttentionOps.linearAttention(q, k, v),
                    FLOAT32_TOLERANCE,
                    "out");
        }
    }

    @Test
    void oneTensorAsQueriesKeysAndValues() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            NDArray x = manager.randomNormal(new Shape(1, 2, 17, 8));
            assertWithin(
                    StockLinearAttention.attention(x, x, x, true, 1e-6),
                    AttentionOps.causalLinearAttention(x, x, x),
                    FLOAT32_TOLERANCE,
                    "causal out");
            // The input is untouched and still belongs to its manager.
            assertEquals(manager, x.getManager());
            assertEquals(new Shape(1, 2, 17, 8), x.add(1).getShape());
        }
    }

    @Test
    void concurrentCallsMayShareTheirInputs() throws Exception {
        // The calls never move an input between managers, so threads may read the same arrays.
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            NDArray q = manager.randomNormal(new Shape(2, 2, 65, 16));
            NDArray k = manager.randomNormal(new Shape(2, 2, 65, 16));
            NDArray v = manager.randomNormal(new Shape(2, 2, 65, 24));
            NDArray causal = StockLinearAttention.attention(q, k, v, true, 1e-6);
            NDArray full = StockLinearAttention.attention(q, k, v, false, 1e-6);
            ExecutorService pool = Executors.newFixedThreadPool(4);
            try {
                List<Future<?>> calls = new ArrayList<>();
                for (int i = 0; i < 16; ++i) {
                    boolean isCausal = i % 2 == 0;
                    calls.add(
                            pool.submit(
                                    () -> {
                                        try (NDManager local = manager.newSubManager()) {
                                            NDArray out =
                                                    isCausal
                                                            ? AttentionOps.causalLinearAttention(
                                                                    q, k, v)
                                                            : AttentionOps.linearAttention(q, k, v);
                                            out.attach(local);
                                            assertWithin(
                                                    isCausal ? causal : full,
                                                    out,
                                                    FLOAT32_TOLERANCE,
                                                    "out");
                                        }
                                    }));
                }
                for (Future<?> call : calls) {
                    call.get();
                }
            } finally {
                pool.shutdownNow();
            }
            assertEquals(manager, q.getManager());
        }
    }

    @Test
    void intermediatesAreFreedAndTheResultBelongsToTheCaller() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            NDArray q = manager.randomNormal(new Shape(1, 2, 9, 8));
            NDArray k = manager.randomNormal(new Shape(1, 2, 9, 8));
            NDArray v = manager.randomNormal(new Shape(1, 2, 9, 4));
            int before = manager.getManagedArrays().size();
            NDArray causalOut = AttentionOps.causalLinearAttention(q, k, v);
            NDArray out = AttentionOps.linearAttention(q, k, v);
            assertEquals(manager, causalOut.getManager());
            assertEquals(manager, out.getManager());
            assertEquals(before + 2, manager.getManagedArrays().size());
        }
    }

    @Test
    void emptyBatchReturnsEmptyResult() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            NDArray q = manager.randomNormal(new Shape(0, 2, 5, 8));
            NDArray v = manager.randomNormal(new Shape(0, 2, 5, 3));
            Shape expected = new Shape(0, 2, 5, 3);
            assertEquals(expected, AttentionOps.causalLinearAttention(q, q, v).getShape());
            assertEquals(expected, AttentionOps.linearAttention(q, q, v).getShape());
        }
    }

    private static void check(
            NDManager manager,
            int batch,
            int heads,
            int seqQ,
            int seqK,
            int dimQk,
            int dimV,
            boolean causal,
            float eps,
            float valueOffset,
            DataType dtype) {
        NDArray q = manager.randomNormal(new Shape(batch, heads, seqQ, dimQk)).toType(dtype, false);
        NDArray k = manager.randomNormal(new Shape(batch, heads, seqK, dimQk)).toType(dtype, false);
        NDArray v =
                manager.randomNormal(new Shape(batch, heads, seqK, dimV))
                        .add(valueOffset)
                        .toType(dtype, false);
        NDArray out =
                causal
                        ? AttentionOps.causalLinearAttention(q, k, v, eps)
                        : AttentionOps.linearAttention(q, k, v, eps);
        assertEquals(new Shape(batch, heads, seqQ, dimV), out.getShape());
        assertEquals(dtype, out.getDataType());
        NDArray expected = StockLinearAttention.attention(q, k, v, causal, eps);
        double tolerance = dtype == DataType.FLOAT16 ? FLOAT16_TOLERANCE : FLOAT32_TOLERANCE;
        assertWithin(expected, out, tolerance, "out");
    }
}
