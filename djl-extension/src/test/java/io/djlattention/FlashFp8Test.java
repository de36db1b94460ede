/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.nio.ByteBuffer;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link AttentionOps#flashAttentionFp8} on the CPU against a float64 reference computed here:
 * the e4m3fn bytes decoded in Java, times their descales, then attention in doubles. The CPU
 * path is exact attention of the dequantized inputs, so the output is held to its float16
 * rounding (native-ops/tests/test_flash_fp8.py has the full grid and the CUDA kernel's bound).
 */
class FlashFp8Test {

    /** Half an ulp of float16, relative: the output's rounding. */
    private static final double HALF_ULP_FP16 = 0x1p-11;

    private NDManager manager;

    @BeforeEach
    void setUp() {
        // The CPU: the CUDA kernel takes D = 128 on Hopper only, and this grid has other dims.
        manager = NDManager.newBaseManager(Device.cpu());
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    /** The descales of a case: none, one per tensor [1], one per batch row and KV head. */
    enum Descale {
        NONE,
        PER_TENSOR,
        PER_HEAD
    }

    /** B, Sq, Sk, Hq, Hkv, D, causal, kvLens (null: all), descale mode. */
    static Stream<Arguments> cases() {
        return Stream.of(
                Arguments.of(2, 5, 77, 4, 2, 64, true, new int[] {77, 30}, Descale.PER_HEAD),
                Arguments.of(1, 1, 129, 2, 1, 128, false, null, Descale.PER_TENSOR),
                // Sq > Sk, a row with no keys (output 0, lse -inf), MQA-like 2:1 groups.
                Arguments.of(3, 20, 9, 6, 3, 80, true, new int[] {0, 9, 4}, Descale.PER_HEAD),
                Arguments.of(2, 33, 33, 2, 2, 32, false, new int[] {1, 33}, Descale.NONE));
    }

    @ParameterizedTest(name = "B {0} Sq {1} Sk {2} Hq {3} Hkv {4} D {5} causal {6} {8}")
    @MethodSource("cases")
    void matchesTheFloat64ReferenceOfTheDequantizedInputs(
            int batch, int seqQ, int seqK, int heads, int kvHeads, int dim, boolean causal,
            int[] lens, Descale descale) {
        Random random = new Random(31L * batch + 7L * seqQ + seqK + dim);
        // Without descales the bytes stay below 4 (exponent field <= 8), with them they span
        // e4m3's range and the descales bring 448 down to a few units: scores of a few units.
        int maxExponent = descale == Descale.NONE ? 8 : 15;
        byte[] q = randomE4m3(random, batch * seqQ * heads * dim, maxExponent);
        byte[] k = randomE4m3(random, batch * seqK * kvHeads * dim, maxExponent);
        byte[] v = randomE4m3(random, batch * seqK * kvHeads * dim, maxExponent);
        float[][] descales = new float[3][];
        for (int i = 0; i < 3; ++i) {
            descales[i] = randomDescale(random, descale, batch * kvHeads);
        }
        float scale = (float) (0.5 / Math.sqrt(dim));
        AttentionOptions.Builder options = AttentionOptions.builder().optCausal(causal);
        options.optScale(scale);
        if (lens != null) {
            options.optKvLens(manager.create(lens));
        }
        NDList result =
                AttentionOps.flashAttentionFp8WithLogSumExp(
                        bytes(q, batch, seqQ, heads, dim),
                        bytes(k, batch, seqK, kvHeads, dim),
                        bytes(v, batch, seqK, kvHeads, dim),
                        descaleArray(descales[0], batch, kvHeads),
                        descaleArray(descales[1], batch, kvHeads),
                        descaleArray(descales[2], batch, kvHeads),
                        options.build());
        NDArray out = result.get(0);
        NDArray lse = result.get(1);
        assertEquals(DataType.FLOAT16, out.getDataType());
        assertEquals(new Shape(batch, seqQ, heads, dim), out.getShape());
        assertEquals(DataType.FLOAT32, lse.getDataType());
        assertEquals(new Shape(batch, heads, seqQ), lse.getShape());

        int[] shape = {batch, seqQ, seqK, heads, kvHeads, dim};
        double[][] expected = reference(q, k, v, descales, shape, scale, causal, lens);
        float[] ours = out.toType(DataType.FLOAT32, false).toFloatArray();
        float[] oursLse = lse.toFloatArray();
        double maxV = 0;
        for (int i = 0; i < v.length; ++i) {
            maxV = Math.max(maxV, Math.abs(e4m3(v[i])) * factor(descales[2], i / dim % kvHeads
                    + i / (dim * kvHeads * seqK) * kvHeads));
        }
        for (int i = 0; i < ours.length; ++i) {
            double want = expected[0][i];
            // The output's rounding, and float32 accumulation of values up to max|v|.
            double bound = HALF_ULP_FP16 * Math.abs(want) + 1e-5 * Math.max(1, maxV);
            int index = i;
            assertTrue(Math.abs(ours[i] - want) <= bound,
                    () -> "out[" + index + "] = " + ours[index] + ", expected " + want);
        }
        for (int i = 0; i < oursLse.length; ++i) {
            double want = expected[1][i];
            if (want == Double.NEGATIVE_INFINITY) {
                assertEquals(Float.NEGATIVE_INFINITY, oursLse[i], "lse[" + i + "]");
            } else {
                assertEquals(want, oursLse[i], 1e-5 * Math.max(1, Math.abs(want)), "lse[" + i + "]");
            }
        }
    }

    @Test
    void theOutputAloneIsTheSameCall() {
        Random random = new Random(5);
        byte[] q = randomE4m3(random, 2 * 3 * 2 * 16, 8);
        byte[] kv = randomE4m3(random, 2 * 7 * 1 * 16, 8);
        NDArray qa = bytes(q, 2, 3, 2, 16);
        NDArray kva = bytes(kv, 2, 7, 1, 16);
        NDArray vd = manager.create(new float[] {0.5f});
        AttentionOptions options = AttentionOptions.builder().optCausal(true).build();
        NDArray alone = AttentionOps.flashAttentionFp8(qa, kva, kva, null, null, vd, options);
        NDList both =
                AttentionOps.flashAttentionFp8WithLogSumExp(qa, kva, kva, null, null, vd, options);
        assertTrue(both.get(0).contentEquals(alone));
    }

    @Test
    void badInputsAreRejectedNamingTheArgument() {
        NDArray q = fp8(2, 5, 4, 128);
        NDArray k = fp8(2, 7, 2, 128);
        AttentionOptions options = AttentionOptions.defaults();
        assertRejected(
                "flash_attention_fp8: q: expected dtype in {float8_e4m3fn, uint8}, got float16",
                () -> AttentionOps.flashAttentionFp8(
                        q.toType(DataType.FLOAT16, false), k, k, null, null, null, options));
        assertRejected(
                "flash_attention_fp8: v: expected the dtype of q (uint8), got float32",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k.toType(DataType.FLOAT32, false), null, null, null, options));
        assertRejected(
                "flash_attention_fp8: q: expected a head dim D in [1, 256], got 300",
                () -> AttentionOps.flashAttentionFp8(
                        fp8(2, 5, 4, 300), fp8(2, 7, 2, 300), fp8(2, 7, 2, 300), null, null,
                        null, options));
        assertRejected(
                "flash_attention_fp8: k: expected a number of heads Hkv >= 1 that divides the"
                        + " query heads Hq = 4, got Hkv = 3",
                () -> AttentionOps.flashAttentionFp8(
                        q, fp8(2, 7, 3, 128), fp8(2, 7, 3, 128), null, null, null, options));
        assertRejected(
                "flash_attention_fp8: k_descale: expected shape [1] (per tensor) or [B, Hkv],"
                        + " got [3]",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, null, manager.ones(new Shape(3)), null, options));
        assertRejected(
                "flash_attention_fp8: q_descale: expected size 2 for Hkv (the heads of k), got 4",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, manager.ones(new Shape(2, 4)), null, null, options));
        assertRejected(
                "flash_attention_fp8: v_descale: expected dtype float32, got float64",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, null, null, manager.ones(new Shape(1), DataType.FLOAT64),
                        options));
        assertRejected(
                "flash_attention_fp8: kv_lens: expected values in [0, Sk = 7], got 8 at index 1",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, null, null, null,
                        AttentionOptions.builder().optKvLens(manager.create(new int[] {7, 8}))
                                .build()));
        assertRejected(
                "flash_attention_fp8: scale: expected a finite value > 0, got 0",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, null, null, null, AttentionOptions.builder().optScale(0f)
                                .build()));
        assertRejected(
                "flash_attention_fp8: scale: expected a finite value > 0, got -0.25",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, null, null, null, AttentionOptions.builder().optScale(-0.25f)
                                .build()));
        assertRejected(
                "options: flash_attention_fp8 takes a scale, the causal mask and kvLens only",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, null, null, null, AttentionOptions.builder().optSoftcap(5f)
                                .build()));
        assertRejected(
                "options: flash_attention_fp8 takes a scale, the causal mask and kvLens only",
                () -> AttentionOps.flashAttentionFp8(
                        q, k, k, null, null, null, AttentionOptions.builder().optWindow(3, -1)
                                .build()));
        NullPointerException e =
                assertThrows(
                        NullPointerException.class,
                        () -> AttentionOps.flashAttentionFp8(
                                q, null, k, null, null, null, options));
        assertEquals("k must not be null", e.getMessage());
    }

    /** The value of an OCP e4m3fn byte: bias 7, subnormals m/8 * 2^-6, S.1111.111 NaN. */
    static double e4m3(byte b) {
        int bits = b & 0xff;
        int exponent = (bits >> 3) & 0xf;
        int mantissa = bits & 0x7;
        if (exponent == 0xf && mantissa == 0x7) {
            return Double.NaN;
        }
        double magnitude =
                exponent == 0
                        ? mantissa / 8.0 * Math.pow(2, -6)
                        : (1 + mantissa / 8.0) * Math.pow(2, exponent - 7);
        return (bits & 0x80) != 0 ? -magnitude : magnitude;
    }

    /**
     * Random e4m3fn bytes of both signs with exponent fields up to {@code maxExponent} (15: every
     * code but the two NaNs, magnitudes 2^-9 .. 448; 8: below 4).
     */
    private static byte[] randomE4m3(Random random, int n, int maxExponent) {
        byte[] bytes = new byte[n];
        for (int i = 0; i < n; ++i) {
            int b;
            do {
                b = random.nextInt(256);
            } while ((b & 0x7f) == 0x7f || ((b >> 3) & 0xf) > maxExponent);
            bytes[i] = (byte) b;
        }
        return bytes;
    }

    /** Descales that bring the bytes' 448 down to a few units: 2^-7 .. 2^-6. */
    private static float[] randomDescale(Random random, Descale mode, int batchHeads) {
        if (mode == Descale.NONE) {
            return null;
        }
        float[] d = new float[mode == Descale.PER_TENSOR ? 1 : batchHeads];
        for (int i = 0; i < d.length; ++i) {
            d[i] = (float) ((1 + random.nextDouble()) / 128);
        }
        return d;
    }

    private NDArray descaleArray(float[] d, int batch, int kvHeads) {
        if (d == null) {
            return null;
        }
        return d.length == 1 ? manager.create(d) : manager.create(d, new Shape(batch, kvHeads));
    }

    /** The factor of (batch row, KV head) flattened as b * Hkv + h, 1 without descales. */
    private static double factor(float[] d, int batchHead) {
        return d == null ? 1 : d.length == 1 ? d[0] : d[batchHead];
    }

    private NDArray bytes(byte[] data, long... shape) {
        return manager.create(ByteBuffer.wrap(data), new Shape(shape), DataType.UINT8);
    }

    private NDArray fp8(long... shape) {
        Random random = new Random(shape.length + shape[shape.length - 1]);
        return bytes(randomE4m3(random, (int) new Shape(shape).size(), 8), shape);
    }

    /**
     * Attention in doubles of the dequantized inputs: out [B, Sq, Hq, D] and lse [B, Hq, Sq]
     * flattened; causal bottom-right aligned to each row's valid keys; a row that sees no key has
     * output 0 and lse -inf.
     */
    private static double[][] reference(
            byte[] q, byte[] k, byte[] v, float[][] descales, int[] shape, double scale,
            boolean causal, int[] lens) {
        int batch = shape[0];
        int seqQ = shape[1];
        int seqK = shape[2];
        int heads = shape[3];
        int kvHeads = shape[4];
        int dim = shape[5];
        int group = heads / kvHeads;
        double[] out = new double[batch * seqQ * heads * dim];
        double[] lse = new double[batch * heads * seqQ];
        double[] scores = new double[seqK];
        for (int b = 0; b < batch; ++b) {
            int kvLen = lens == null ? seqK : lens[b];
            for (int h = 0; h < heads; ++h) {
                int hk = h / group;
                double qf = factor(descales[0], b * kvHeads + hk);
                double kf = factor(descales[1], b * kvHeads + hk);
                double vf = factor(descales[2], b * kvHeads + hk);
                for (int i = 0; i < seqQ; ++i) {
                    int last = causal ? Math.min(kvLen - 1, i + kvLen - seqQ) : kvLen - 1;
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j <= last; ++j) {
                        double s = 0;
                        for (int d = 0; d < dim; ++d) {
                            s += e4m3(q[((b * seqQ + i) * heads + h) * dim + d]) * qf
                                    * e4m3(k[((b * seqK + j) * kvHeads + hk) * dim + d]) * kf;
                        }
                        scores[j] = s * scale;
                        max = Math.max(max, scores[j]);
                    }
                    int lseIndex = (b * heads + h) * seqQ + i;
                    if (last < 0) {
                        lse[lseIndex] = Double.NEGATIVE_INFINITY;
                        continue;
                    }
                    double sum = 0;
                    for (int j = 0; j <= last; ++j) {
                        scores[j] = Math.exp(scores[j] - max);
                        sum += scores[j];
                    }
                    lse[lseIndex] = max + Math.log(sum);
                    int o = ((b * seqQ + i) * heads + h) * dim;
                    for (int j = 0; j <= last; ++j) {
                        double p = scores[j] / sum;
                        for (int d = 0; d < dim; ++d) {
                            out[o + d] += p * e4m3(v[((b * seqK + j) * kvHeads + hk) * dim + d]) * vf;
                        }
                    }
                }
            }
        }
        return new double[][] {out, lse};
    }
}
