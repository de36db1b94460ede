/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static io.djlattention.JavaChecks.standIn;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The Java wrappers of the fused BERT operators: results against the same function computed with
 * stock DJL ops in float64 on fresh random inputs, the checks Java owns (nulls, bfloat16, foreign
 * engines), and one operator rule each to show its message arrives as an {@link
 * IllegalArgumentException} (the operators' full rule sets are in the pytest suite).
 *
 * <p>Tolerance 1e-5 of max(1, |reference|) for float32: each output is a short float32 computation
 * (a sum of three terms, a mean and variance over C <= 1000, an erf, or attention over <= 37 keys),
 * ~1e-6 relative.
 */
class BertOpsTest {

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

    @ParameterizedTest(name = "C={0}")
    @ValueSource(ints = {1, 7, 768, 1000})
    void addBiasResidualAffineMatchesStockOps(int channels) {
        NDArray x = manager.randomNormal(new Shape(3, 5, channels));
        NDArray residual = manager.randomNormal(new Shape(3, 5, channels));
        NDArray bias = manager.randomNormal(new Shape(channels));
        NDArray scale = manager.randomNormal(new Shape(channels));
        NDArray shift = manager.randomNormal(new Shape(channels));
        NDArray expected = f64(x).add(f64(bias)).add(f64(residual)).mul(f64(scale)).add(f64(shift));
        assertClose(expected, AttentionOps.addBiasResidualAffine(x, bias, residual, scale, shift));
        NDArray noBias = f64(x).add(f64(residual)).mul(f64(scale)).add(f64(shift));
        assertClose(noBias, AttentionOps.addBiasResidualAffine(x, null, residual, scale, shift));
    }

    @ParameterizedTest(name = "C={0}")
    @ValueSource(ints = {1, 7, 768, 1000})
    void addBiasResidualLayerNormMatchesStockOps(int channels) {
        NDArray x = manager.randomNormal(new Shape(4, channels));
        NDArray residual = manager.randomNormal(new Shape(4, channels));
        NDArray bias = manager.randomNormal(new Shape(channels));
        NDArray gamma = manager.randomNormal(new Shape(channels));
        NDArray beta = manager.randomNormal(new Shape(channels));
        NDArray v = f64(x).add(f64(bias)).add(f64(residual));
        NDArray mean = v.mean(new int[] {1}, true);
        NDArray centered = v.sub(mean);
        NDArray var = centered.square().mean(new int[] {1}, true);
        NDArray expected = centered.div(var.add(1e-5).sqrt()).mul(f64(gamma)).add(f64(beta));
        assertClose(
                expected,
                AttentionOps.addBiasResidualLayerNorm(x, bias, residual, gamma, beta, 1e-5));
    }

    @ParameterizedTest(name = "tanh={0}")
    @ValueSource(booleans = {false, true})
    void addBiasGeluMatchesStockOps(boolean tanh) {
        NDArray x = manager.randomNormal(0, 3, new Shape(5, 100), DataType.FLOAT32);
        NDArray bias = manager.randomNormal(new Shape(100));
        NDArray v = f64(x).add(f64(bias));
        NDArray expected;
        if (tanh) {
            NDArray inner = v.add(v.pow(3).mul(0.044715)).mul(Math.sqrt(2 / Math.PI));
            expected = v.mul(0.5).mul(inner.tanh().add(1));
        } else {
            // DJL's gelu is PyTorch's exact erf form.
            expected = v.getNDArrayInternal().gelu();
        }
        assertClose(expected, AttentionOps.addBiasGelu(x, bias, tanh));
    }

    @Test
    void bertAttentionMatchesStockOps() {
        int batch = 3;
        int seqLen = 37;
        int heads = 2;
        int dim = 16;
        int[] lens = {37, 1, 20};
        NDArray qkv = manager.randomNormal(new Shape(batch, seqLen, 3 * heads * dim));
        NDArray bias = manager.randomNormal(new Shape(3 * heads * dim));
        NDArray out = AttentionOps.bertAttention(qkv, bias, manager.create(lens), heads);
        assertEquals(new Shape(batch, seqLen, heads * dim), out.getShape());
        // Reference: heads split with stock ops, softmax(q k^T / sqrt(D) + mask) v, in float64.
        NDArray biased = f64(qkv).add(f64(bias)).reshape(batch, seqLen, 3, heads, dim);
        NDArray q = biased.get(":, :, 0").transpose(0, 2, 1, 3);
        NDArray k = biased.get(":, :, 1").transpose(0, 2, 1, 3);
        NDArray v = biased.get(":, :, 2").transpose(0, 2, 1, 3);
        float[] maskValues = new float[batch * seqLen];
        for (int i = 0; i < maskValues.length; ++i) {
            maskValues[i] = i % seqLen < lens[i / seqLen] ? 0f : Float.NEGATIVE_INFINITY;
        }
        NDArray mask = f64(manager.create(maskValues, new Shape(batch, 1, 1, seqLen)));
        NDArray scores = q.matMul(k.transpose(0, 1, 3, 2)).mul(1 / Math.sqrt(dim)).add(mask);
        NDArray expected =
                scores.softmax(3)
                        .matMul(v)
                        .transpose(0, 2, 1, 3)
                        .reshape(batch, seqLen, heads * dim);
        assertClose(expected, out);
    }

    @Test
    void removeAndRestorePaddingRoundTrip() {
        NDArray x = manager.randomNormal(new Shape(4, 6, 5));
        int[] lens = {6, 1, 0, 3};
        NDList packed = AttentionOps.removePadding(x, manager.create(lens));
        assertEquals(new Shape(10, 5), packed.get(0).getShape());
        assertArrayEquals(new int[] {0, 6, 7, 7, 10}, packed.get(1).toIntArray());
        assertEquals(x.get("0, 0:6"), packed.get(0).get("0:6"));
        assertEquals(x.get("3, 0:3"), packed.get(0).get("7:10"));
        NDArray restored = AttentionOps.restorePadding(packed.get(0), packed.get(1), 6);
        for (int b = 0; b < lens.length; ++b) {
            NDIndex valid = new NDIndex("{}, 0:{}", b, lens[b]);
            NDIndex padding = new NDIndex("{}, {}:", b, lens[b]);
            assertEquals(x.get(valid), restored.get(valid));
            assertTrue(restored.get(padding).eq(0).all().getBoolean());
        }
    }

    @Test
    void operatorRulesArriveAsIllegalArgument() {
        NDArray x = manager.randomNormal(new Shape(4, 16));
        NDArray c = manager.randomNormal(new Shape(16));
        assertRejected(
                "add_bias_residual_affine: scale: expected size 16 for C",
                () -> AttentionOps.addBiasResidualAffine(x, null, x, c.get("0:8"), c));
        assertRejected(
                "add_bias_residual_layernorm: eps: expected a finite value >= 0",
                () -> AttentionOps.addBiasResidualLayerNorm(x, null, x, c, c, -1));
        assertRejected(
                "add_bias_gelu: bias: expected size 16 for C",
                () -> AttentionOps.addBiasGelu(x, c.get("0:8"), false));
        assertRejected(
                "bert_attention: qkv: expected 3 dims",
                () -> AttentionOps.bertAttention(x, null, null, 2));
        assertRejected(
                "remove_padding: lens: expected dtype int32",
                () ->
                        AttentionOps.removePadding(
                                x.reshape(2, 2, 16), manager.create(new long[] {1, 2})));
        assertRejected(
                "restore_padding: seqlen: expected a value >= 0",
                () -> AttentionOps.restorePadding(x, manager.create(new int[] {0, 4}), -1));
    }

    @Test
    void javaChecksNullsBfloat16AndForeignArrays() {
        NDArray x = manager.randomNormal(new Shape(4, 16));
        NDArray c = manager.randomNormal(new Shape(16));
        NDArray bf16 = standIn(DataType.BFLOAT16, new Shape(4, 16), manager);
        NDArray foreign = standIn(DataType.FLOAT32, new Shape(4, 16), manager);
        assertThrows(
                NullPointerException.class,
                () -> AttentionOps.addBiasResidualAffine(x, null, null, c, c));
        assertThrows(NullPointerException.class, () -> AttentionOps.addBiasGelu(null, c, false));
        assertThrows(
                NullPointerException.class,
                () -> AttentionOps.bertAttention(null, null, null, 2, 1.0));
        assertThrows(NullPointerException.class, () -> AttentionOps.removePadding(x, null));
        assertRejected(
                "x: bfloat16 is not supported from Java",
                () -> AttentionOps.addBiasResidualLayerNorm(bf16, null, x, c, c, 1e-5));
        assertRejected(
                "qkv: bfloat16 is not supported from Java",
                () -> AttentionOps.bertAttention(bf16, null, null, 2, 1.0));
        assertRejected(
                "packed: bfloat16 is not supported from Java",
                () -> AttentionOps.restorePadding(bf16, c, 4));
        assertRejected(
                "shift: expected an NDArray of the PyTorch engine",
                () -> AttentionOps.addBiasResidualAffine(x, null, x, c, foreign));
        assertRejected(
                "bias: expected an NDArray of the PyTorch engine",
                () -> AttentionOps.addBiasGelu(x, foreign, false));
    }

    private static NDArray f64(NDArray array) {
        return array.toType(DataType.FLOAT64, true);
    }

    private static void assertClose(NDArray expected, NDArray actual) {
        assertEquals(expected.getShape(), actual.getShape());
        double[] e = expected.toDoubleArray();
        double[] a = actual.toType(DataType.FLOAT64, true).toDoubleArray();
        for (int i = 0; i < e.length; ++i) {
            double err = Math.abs(a[i] - e[i]) / Math.max(1.0, Math.abs(e[i]));
            assertTrue(err <= TOLERANCE, "error " + err + " at " + i + ": " + a[i] + " vs " + e[i]);
        }
    }

}
