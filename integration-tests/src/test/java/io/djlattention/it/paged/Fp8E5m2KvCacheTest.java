/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.AttentionOps;
import io.djlattention.PagedAttentionOptions;
import io.djlattention.it.TestDevice;
import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.Random;

/**
 * {@link KvCacheDtype#FP8_E5M2} caches (vLLM's {@code kv_cache_dtype="fp8_e5m2"}): the uint8
 * arrays hold OCP e5m2 bytes of {@code x / scale} (decoded here by an independent bit-level
 * reader), and paged decode and prefill over them match float64 attention over the decoded cache
 * and the float32 cache within e5m2's rounding.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class Fp8E5m2KvCacheTest {

    private NDManager manager;

    private NDManager manager() {
        if (manager == null) {
            manager = NDManager.newBaseManager(TestDevice.get());
        }
        return manager;
    }

    @AfterAll
    void close() {
        if (manager != null) {
            manager.close();
        }
    }

    /** OCP e5m2: sign, 5 exponent bits (bias 15), 2 mantissa bits; exponent 31 is inf / NaN. */
    static double e5m2(int b) {
        int sign = (b >> 7) & 1;
        int exp = (b >> 2) & 0x1F;
        int man = b & 3;
        double mag;
        if (exp == 31) {
            mag = man == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
        } else {
            mag = exp == 0 ? man / 4.0 * Math.pow(2, -14) : (1 + man / 4.0) * Math.pow(2, exp - 15);
        }
        return sign == 1 ? -mag : mag;
    }

    @Test
    void parsesVllmSpelling() {
        assertEquals(KvCacheDtype.FP8_E5M2, KvCacheDtype.fromString("fp8_e5m2"));
        assertEquals(KvCacheDtype.FP8_E5M2, KvCacheDtype.fromString("FP8_E5M2"));
        assertEquals(KvCacheDtype.FP8_E4M3, KvCacheDtype.fromString("fp8"));
        assertTrue(KvCacheDtype.FP8_E5M2.isFp8());
        assertFalse(KvCacheDtype.AUTO.isFp8());
        assertEquals(DataType.UINT8, KvCacheDtype.FP8_E5M2.storageType(DataType.FLOAT16));
    }

    /**
     * Hq 8, Hkv 2, D 64, contexts 1, 37 and 300, random N(0, 1) K/V with per-tensor or per-head
     * scales: every stored byte is the nearest e5m2 value of {@code x / scale}; prefill and decode
     * over the cache are float64 attention over the decoded cache (to float32 arithmetic), and
     * within e5m2's rounding of the float32 cache's outputs.
     */
    @ParameterizedTest(name = "per head {0}")
    @ValueSource(booleans = {false, true})
    void decodeAndPrefillAgainstFloat(boolean perHead) {
        int hq = 8;
        int hkv = 2;
        int dim = 64;
        int[] contexts = {1, 37, 300};
        long[] ids = {0, 1, 2};
        Random random = new Random(perHead ? 11 : 13);
        float[] kScales = new float[perHead ? hkv : 1];
        float[] vScales = new float[kScales.length];
        for (int i = 0; i < kScales.length; ++i) {
            // 2^-8 .. 2^-7: |x / scale| up to ~1300, and e5m2's subnormals below 2^-22.
            kScales[i] = (float) Math.pow(2, -8 + random.nextDouble());
            vScales[i] = (float) Math.pow(2, -8 + random.nextDouble());
        }
        NDManager m = manager().newSubManager();
        try (m;
                PagedKvCache fp8 =
                        Fp8KvCacheTest.layerCache(
                                m, hkv, dim, KvCacheDtype.FP8_E5M2, kScales, vScales);
                PagedKvCache f32 =
                        Fp8KvCacheTest.layerCache(m, hkv, dim, KvCacheDtype.AUTO, null, null)) {
            int total = 0;
            for (int s = 0; s < ids.length; ++s) {
                fp8.allocate(ids[s], contexts[s]);
                f32.allocate(ids[s], contexts[s]);
                total += contexts[s];
            }
            NDArray k = Fp8KvCacheTest.randn(m, random, new Shape(total, hkv, dim));
            NDArray v = Fp8KvCacheTest.randn(m, random, new Shape(total, hkv, dim));
            NDArray q = Fp8KvCacheTest.randn(m, random, new Shape(total, hq, dim));
            float scale = (float) (1 / Math.sqrt(dim));
            PagedAttentionOptions options = PagedAttentionOptions.builder().optScale(scale).build();
            float[] prefill8;
            float[] prefill32;
            try (PagedBatch b8 = fp8.prepare(ids, contexts, m);
                    PagedBatch b32 = f32.prepare(ids, contexts, m)) {
                AttentionOps.reshapeAndCache(k, v, fp8, 0, b8);
                AttentionOps.reshapeAndCache(k, v, f32, 0, b32);
                // Without the chunks' own rows: every key from the cache, as decode reads them.
                prefill8 = AttentionOps.pagedPrefillAttention(q, fp8, 0, b8, options).toFloatArray();
                prefill32 =
                        AttentionOps.pagedPrefillAttention(q, f32, 0, b32, options).toFloatArray();
            }
            assertEquals(DataType.UINT8, fp8.getKeyCache(0).getDataType());
            double[] keys = decode(fp8.getKeyCache(0), kScales, hkv, dim);
            double[] values = decode(fp8.getValueCache(0), vScales, hkv, dim);
            int[][] slots = Fp8KvCacheTest.slots(fp8, ids, contexts);
            float[] kIn = k.toFloatArray();
            float[] vIn = v.toFloatArray();
            int t = 0;
            for (int s = 0; s < ids.length; ++s) {
                for (int p = 0; p < contexts[s]; ++p, ++t) {
                    for (int i = 0; i < hkv * dim; ++i) {
                        int h = i / dim;
                        int at = slots[s][p] * hkv * dim + i;
                        assertRounded(kIn[t * hkv * dim + i], keys[at], kScales[perHead ? h : 0]);
                        assertRounded(vIn[t * hkv * dim + i], values[at], vScales[perHead ? h : 0]);
                    }
                }
            }
            float[] qIn = q.toFloatArray();
            double worstRef = 0;
            double worstVsF32 = 0;
            t = 0;
            for (int s = 0; s < ids.length; ++s) {
                for (int p = 0; p < contexts[s]; ++p, ++t) {
                    for (int h = 0; h < hq; ++h) {
                        double[] want =
                                Fp8KvCacheTest.attend(qIn, (t * hq + h) * dim, keys, values,
                                        slots[s], p + 1, h / (hq / hkv), hkv, dim, scale);
                        for (int d = 0; d < dim; ++d) {
                            int i = (t * hq + h) * dim + d;
                            worstRef = Math.max(worstRef, Math.abs(prefill8[i] - want[d]));
                            worstVsF32 = Math.max(worstVsF32, Math.abs(prefill8[i] - prefill32[i]));
                        }
                    }
                }
            }
            assertTrue(worstRef < 1e-4, "prefill vs float64 over the decoded cache: " + worstRef);
            // e5m2 keeps 3 significant bits (relative rounding <= 2^-3): a row attending to one
            // key is one value vector off by up to 2^-3 · |v| <= 0.7 (|v| < 5.5).
            assertTrue(worstVsF32 < 0.7, "prefill, e5m2 vs float32 cache: " + worstVsF32);

            // Decode: the last query row of each sequence attends its whole context.
            NDArray qDecode = Fp8KvCacheTest.randn(m, random, new Shape(ids.length, hq, dim));
            int[] ones = {1, 1, 1};
            float[] out8;
            float[] out32;
            try (PagedBatch d8 = fp8.prepare(ids, ones, m);
                    PagedBatch d32 = f32.prepare(ids, ones, m)) {
                out8 = AttentionOps.pagedAttention(qDecode, fp8, 0, d8, options).toFloatArray();
                out32 = AttentionOps.pagedAttention(qDecode, f32, 0, d32, options).toFloatArray();
            }
            float[] qd = qDecode.toFloatArray();
            double worstDecodeRef = 0;
            double worstDecodeVsF32 = 0;
            for (int s = 0; s < ids.length; ++s) {
                for (int h = 0; h < hq; ++h) {
                    double[] want =
                            Fp8KvCacheTest.attend(qd, (s * hq + h) * dim, keys, values, slots[s],
                                    contexts[s], h / (hq / hkv), hkv, dim, scale);
                    for (int d = 0; d < dim; ++d) {
                        int i = (s * hq + h) * dim + d;
                        worstDecodeRef = Math.max(worstDecodeRef, Math.abs(out8[i] - want[d]));
                        worstDecodeVsF32 = Math.max(worstDecodeVsF32, Math.abs(out8[i] - out32[i]));
                    }
                }
            }
            assertTrue(worstDecodeRef < 1e-4, "decode vs float64: " + worstDecodeRef);
            assertTrue(worstDecodeVsF32 < 0.7, "decode, e5m2 vs float32: " + worstDecodeVsF32);
            System.out.printf(
                    "fp8_e5m2 (%s scales): prefill max |e5m2 - float64 ref| %.2e, |e5m2 - float32"
                            + " cache| %.4f; decode %.2e, %.4f%n",
                    perHead ? "per-head" : "per-tensor", worstRef, worstVsF32, worstDecodeRef,
                    worstDecodeVsF32);
        }
    }

    /** The decoded cache {@code [numBlocks, blockSize, Hkv, D]} times the scales. */
    private static double[] decode(NDArray cache, float[] scales, int heads, int dim) {
        byte[] bytes = cache.toByteArray();
        double[] out = new double[bytes.length];
        for (int i = 0; i < bytes.length; ++i) {
            int h = (i / dim) % heads;
            out[i] = e5m2(bytes[i] & 0xFF) * scales[scales.length == 1 ? 0 : h];
        }
        return out;
    }

    /** {@code stored / scale} is the nearest e5m2 value of {@code x / scale} (or ±57344). */
    private static void assertRounded(float x, double stored, float scale) {
        double y = x / (double) scale;
        double ys = stored / scale;
        if (Math.abs(y) >= 57344) {
            assertEquals(Math.copySign(57344, y), ys, 0, x + " saturates");
            return;
        }
        double a = Math.abs(y);
        // Half the spacing: 2^(e - 3) in the binade [2^e, 2^(e+1)), 2^-17 among the subnormals.
        double half =
                a < Math.pow(2, -14)
                        ? Math.pow(2, -17)
                        : Math.pow(2, Math.floor(Math.log(a) / Math.log(2)) - 3);
        assertTrue(Math.abs(ys - y) <= half * (1 + 1e-6), x + " / " + scale + " stored as " + ys);
    }
}
