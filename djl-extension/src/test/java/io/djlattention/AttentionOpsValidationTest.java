/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static io.djlattention.JavaChecks.standIn;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Every argument rule of {@code flash_attention} as a Java caller meets it: the native operator
 * validates (so Java and Python get the same rules) and its message arrives as an {@link
 * IllegalArgumentException}; Java itself checks only nulls, bfloat16 and foreign engines.
 */
class AttentionOpsValidationTest {

    private NDManager manager;
    private NDArray q;
    private NDArray k;
    private NDArray v;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager();
        q = manager.randomNormal(new Shape(2, 5, 4, 32));
        k = manager.randomNormal(new Shape(2, 7, 2, 32));
        v = manager.randomNormal(new Shape(2, 7, 2, 32));
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    @Test
    void validInputsPass() {
        NDList out = AttentionOps.flashAttentionWithLogSumExp(q, k, v, AttentionOptions.defaults());
        assertEquals(new Shape(2, 5, 4, 32), out.get(0).getShape());
        assertEquals(new Shape(2, 4, 5), out.get(1).getShape());
    }

    @Test
    void wrongRank() {
        assertRejected(
                "flash_attention: q: expected 4 dims [B, Sq, Hq, D], got 3 dims with shape [5, 4, 32]",
                () -> AttentionOps.flashAttention(q.get(0), k, v));
        assertRejected(
                "flash_attention: v: expected 4 dims [B, Sk, Hkv, D], got 5 dims",
                () -> AttentionOps.flashAttention(q, k, v.expandDims(0)));
    }

    @Test
    void mismatchedBatchAndHeadDim() {
        assertRejected(
                "k: expected size 2 for B (the batch of q), got 1",
                () -> AttentionOps.flashAttention(q, k.get("0:1"), v));
        assertRejected(
                "k: expected size 32 for D (the head dim of q), got 16",
                () -> AttentionOps.flashAttention(q, k.get(":, :, :, 0:16"), v));
        assertRejected(
                "v: expected size 7 for Sk (the sequence length of k), got 6",
                () -> AttentionOps.flashAttention(q, k, v.get(":, 0:6")));
    }

    @Test
    void queryHeadsNotAMultipleOfKeyHeads() {
        NDArray k3 = manager.randomNormal(new Shape(2, 7, 3, 32));
        assertRejected(
                "Hkv >= 1 that divides the query heads Hq = 4, got Hkv = 3",
                () -> AttentionOps.flashAttention(q, k3, k3));
    }

    @Test
    void unsupportedAndMixedDtypes() {
        assertRejected(
                "q: expected dtype in {float32, float16, bfloat16}, got float64",
                () ->
                        AttentionOps.flashAttention(
                                q.toType(DataType.FLOAT64, false),
                                k.toType(DataType.FLOAT64, false),
                                v.toType(DataType.FLOAT64, false)));
        assertRejected(
                "k: expected the dtype of q (float32), got float16",
                () -> AttentionOps.flashAttention(q, k.toType(DataType.FLOAT16, false), v));
    }

    @Test
    void bfloat16IsRejectedInJava() {
        // DJL 0.36.0 aborts the JVM when it creates a bfloat16 array, so a stand-in array that
        // reports bfloat16 checks that the rejection happens before any native call.
        NDArray bf16 = standIn(DataType.BFLOAT16, new Shape(2, 7, 2, 32), manager);
        assertRejected(
                "q: bfloat16 is not supported from Java",
                () -> AttentionOps.flashAttention(bf16, k, v));
    }

    @Test
    void arraysOfAnotherEngineAreRejected() {
        NDArray foreign = standIn(DataType.FLOAT32, new Shape(2, 7, 2, 32), manager);
        assertRejected(
                "k: expected an NDArray of the PyTorch engine",
                () -> AttentionOps.flashAttention(q, foreign, v));
    }

    @Test
    void nullsAreRejected() {
        NullPointerException e =
                assertThrows(
                        NullPointerException.class, () -> AttentionOps.flashAttention(q, k, null));
        assertEquals("v must not be null", e.getMessage());
        assertThrows(NullPointerException.class, () -> AttentionOps.flashAttention(q, k, v, null));
    }

    @Test
    void nonContiguousLastDim() {
        NDArray wide = manager.randomNormal(new Shape(2, 5, 4, 64));
        NDArray strided = wide.get(":, :, :, ::2");
        assertRejected(
                "q: expected a contiguous last dim (stride 1), got stride 2",
                () -> AttentionOps.flashAttention(strided, k, v));
    }

    @Test
    void kvLensOfWrongLengthDtypeOrRange() {
        assertRejected(
                "kv_lens: expected size 2 for B (the batch of q), got 3",
                () -> flashWithKvLens(manager.create(new int[] {7, 7, 7})));
        assertRejected(
                "kv_lens: expected dtype int32, got int64",
                () -> flashWithKvLens(manager.create(new long[] {7, 7})));
        assertRejected(
                "kv_lens: expected values in [0, Sk = 7], got 8 at index 1",
                () -> flashWithKvLens(manager.create(new int[] {7, 8})));
        assertRejected(
                "kv_lens: expected values in [0, Sk = 7], got -1 at index 0",
                () -> flashWithKvLens(manager.create(new int[] {-1, 2})));
    }

    @Test
    void emptyBatchReturnsEmptyResult() {
        NDArray q0 = manager.randomNormal(new Shape(0, 5, 4, 32));
        NDArray k0 = manager.randomNormal(new Shape(0, 7, 2, 32));
        NDList out = AttentionOps.flashAttentionWithLogSumExp(q0, k0, k0, AttentionOptions.defaults());
        assertEquals(new Shape(0, 5, 4, 32), out.get(0).getShape());
        assertEquals(new Shape(0, 4, 5), out.get(1).getShape());
    }

    @Test
    void nonFiniteScaleIsRejected() {
        assertThrows(
                IllegalArgumentException.class,
                () -> AttentionOptions.builder().optScale(Float.NaN));
    }

    private void flashWithKvLens(NDArray kvLens) {
        AttentionOps.flashAttention(q, k, v, AttentionOptions.builder().optKvLens(kvLens).build());
    }
}
