/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static io.djlattention.JavaChecks.standIn;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

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
 * The argument rules of {@link AttentionOps#causalLinearAttention} and {@link
 * AttentionOps#linearAttention} as a Java caller meets them. The causal form's shape, dtype and
 * stride rules are the {@code causal_dot_product} operator's, whose message arrives as an {@link
 * IllegalArgumentException}; Java checks nulls, bfloat16, foreign engines and eps. The non-causal
 * form has no native operator, so Java checks all of its rules, in the operators' style.
 */
class LinearAttentionValidationTest {

    /** One of the two operators, for rules they share. */
    interface LinearOp {
        NDArray apply(NDArray q, NDArray k, NDArray v, float eps);
    }

    private NDManager manager;
    private NDArray q;
    private NDArray k;
    private NDArray v;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager();
        q = manager.randomNormal(new Shape(2, 3, 7, 16));
        k = manager.randomNormal(new Shape(2, 3, 7, 16));
        v = manager.randomNormal(new Shape(2, 3, 7, 24));
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    static Stream<Arguments> operators() {
        return Stream.of(
                Arguments.of("causal", (LinearOp) AttentionOps::causalLinearAttention),
                Arguments.of("non-causal", (LinearOp) AttentionOps::linearAttention));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("operators")
    void validInputsPass(String name, LinearOp op) {
        NDArray out = op.apply(q, k, v, 1e-6f);
        assertEquals(new Shape(2, 3, 7, 24), out.getShape());
        assertEquals(DataType.FLOAT32, out.getDataType());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("operators")
    void nullsAreRejected(String name, LinearOp op) {
        assertEquals(
                "q must not be null",
                assertThrows(NullPointerException.class, () -> op.apply(null, k, v, 1e-6f))
                        .getMessage());
        assertEquals(
                "k must not be null",
                assertThrows(NullPointerException.class, () -> op.apply(q, null, v, 1e-6f))
                        .getMessage());
        assertEquals(
                "v must not be null",
                assertThrows(NullPointerException.class, () -> op.apply(q, k, null, 1e-6f))
                        .getMessage());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("operators")
    void bfloat16IsRejectedBeforeAnyNativeCall(String name, LinearOp op) {
        // DJL 0.36.0 aborts the JVM when it creates a bfloat16 array: a stand-in that reports
        // bfloat16, and fails the test on any other call, shows the rejection comes first.
        assertRejected(
                "k: bfloat16 is not supported from Java",
                () -> op.apply(q, standIn(DataType.BFLOAT16, new Shape(2, 3, 7, 16), manager), v, 1e-6f));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("operators")
    void arraysOfAnotherEngineAreRejected(String name, LinearOp op) {
        assertRejected(
                "v: expected an NDArray of the PyTorch engine",
                () -> op.apply(q, k, standIn(DataType.FLOAT32, new Shape(2, 3, 7, 16), manager), 1e-6f));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("operators")
    void epsMustBeFiniteAndNonNegative(String name, LinearOp op) {
        assertRejected("eps: expected a finite value >= 0, got -1.0", () -> op.apply(q, k, v, -1));
        assertRejected(
                "eps: expected a finite value >= 0, got NaN", () -> op.apply(q, k, v, Float.NaN));
        assertRejected(
                "eps: expected a finite value >= 0, got Infinity",
                () -> op.apply(q, k, v, Float.POSITIVE_INFINITY));
    }

    @Test
    void causalRulesComeFromTheOperator() {
        assertRejected(
                "causal_dot_product: q: expected 4 dims [B, H, L, E], got 3 dims",
                () -> AttentionOps.causalLinearAttention(q.get(0), k, v));
        assertRejected(
                "causal_dot_product: v: expected 4 dims [B, H, L, M], got 5 dims",
                () -> AttentionOps.causalLinearAttention(q, k, v.expandDims(0)));
        assertRejected(
                "causal_dot_product: k: expected size 7 for L (the length of q), got 6",
                () -> AttentionOps.causalLinearAttention(q, k.get(":, :, 0:6"), v));
        assertRejected(
                "causal_dot_product: k: expected size 16 for E (the feature dim of q), got 8",
                () -> AttentionOps.causalLinearAttention(q, k.get(":, :, :, 0:8"), v));
        assertRejected(
                "causal_dot_product: v: expected size 3 for H (the heads of q), got 2",
                () -> AttentionOps.causalLinearAttention(q, k, v.get(":, 0:2")));
        NDArray wide = manager.randomNormal(new Shape(1, 1, 3, 257));
        assertRejected(
                "causal_dot_product: q: expected a feature dim E in [1, 256], got 257",
                () -> AttentionOps.causalLinearAttention(wide, wide, wide.get(":, :, :, 0:4")));
        assertRejected(
                "causal_dot_product: v: expected a feature dim M in [1, 256], got 257",
                () -> {
                    NDArray narrow = wide.get(":, :, :, 0:4");
                    AttentionOps.causalLinearAttention(narrow, narrow, wide);
                });
    }

    @Test
    void causalDtypeRulesComeFromTheOperator() {
        assertRejected(
                "causal_dot_product: q: expected dtype in {float32, float16, bfloat16}",
                () ->
                        AttentionOps.causalLinearAttention(
                                q.toType(DataType.FLOAT64, false),
                                k.toType(DataType.FLOAT64, false),
                                v.toType(DataType.FLOAT64, false)));
        assertRejected(
                "causal_dot_product: k: expected the dtype of q (float32), got float16",
                () -> AttentionOps.causalLinearAttention(q, k.toType(DataType.FLOAT16, false), v));
        NDArray q16 = q.toType(DataType.FLOAT16, false);
        NDArray k16 = k.toType(DataType.FLOAT16, false);
        assertRejected(
                "causal_dot_product: v: expected the dtype of q (float16), got float32",
                () -> AttentionOps.causalLinearAttention(q16, k16, v));
    }

    @Test
    void causalStridedValuesComeFromTheOperator() {
        NDArray strided = manager.randomNormal(new Shape(2, 3, 7, 48)).get(":, :, :, ::2");
        assertRejected(
                "causal_dot_product: v: expected a contiguous last dim (stride 1), got stride 2",
                () -> AttentionOps.causalLinearAttention(q, k, strided));
    }

    @Test
    void nonCausalRulesAreCheckedInJava() {
        assertRejected(
                "linear_attention: q: expected 4 dims [B, H, L, E], got 3 dims with shape"
                        + " [3, 7, 16]",
                () -> AttentionOps.linearAttention(q.get(0), k, v));
        assertRejected(
                "linear_attention: k: expected size 2 for B (the batch of q), got 1",
                () -> AttentionOps.linearAttention(q, k.get("0:1"), v));
        assertRejected(
                "linear_attention: k: expected size 16 for E (the feature dim of q), got 8",
                () -> AttentionOps.linearAttention(q, k.get(":, :, :, 0:8"), v));
        assertRejected(
                "linear_attention: v: expected size 3 for H (the heads of q), got 2",
                () -> AttentionOps.linearAttention(q, k, v.get(":, 0:2")));
        assertRejected(
                "linear_attention: v: expected size 7 for S (the length of k), got 5",
                () -> AttentionOps.linearAttention(q, k, v.get(":, :, 0:5")));
        assertRejected(
                "linear_attention: q: expected dtype in {float32, float16}, got float64",
                () ->
                        AttentionOps.linearAttention(
                                q.toType(DataType.FLOAT64, false),
                                k.toType(DataType.FLOAT64, false),
                                v.toType(DataType.FLOAT64, false)));
        assertRejected(
                "linear_attention: k: expected the dtype of q (float32), got float16",
                () -> AttentionOps.linearAttention(q, k.toType(DataType.FLOAT16, false), v));
    }
}
