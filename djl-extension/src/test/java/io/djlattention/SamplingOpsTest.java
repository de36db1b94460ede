/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.JavaChecks.assertRejected;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.Random;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link SamplingOps#sampleTokens} on the CPU against a plain Java reference of the operator's
 * rules (docs/operators.md, "sample_tokens"): torch.argmax for greedy rows; for sampled rows the
 * same Philox4x32-10 number, the same fixed-point weights (Java's float arithmetic is IEEE single
 * precision, as the kernels' is) and the same top-k, nucleus and draw, written independently here.
 * The ids must be equal, not merely close.
 */
class SamplingOpsTest {

    private NDManager manager;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager();
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    @ParameterizedTest(name = "V {0}, B {1}, {2}")
    @CsvSource({
        "1, 3, float32",
        "7, 16, float32",
        "1000, 24, float16",
        "1000, 24, float32",
        "50257, 6, float32"
    })
    void idsEqualTheJavaReference(int vocab, int batch, String dtype) {
        Random random = new Random(vocab * 31L + batch);
        float[] logits = new float[batch * vocab];
        for (int i = 0; i < logits.length; ++i) {
            // A few exact ties: integers and halves.
            logits[i] =
                    i % 3 == 0
                            ? Math.round(random.nextGaussian() * 4) / 2f
                            : (float) (random.nextGaussian() * 3);
        }
        float[] temperature = new float[batch];
        int[] topK = new int[batch];
        float[] topP = new float[batch];
        long[] seeds = new long[batch];
        long[] offsets = new long[batch];
        for (int b = 0; b < batch; ++b) {
            temperature[b] = b % 5 == 0 ? 0f : 0.3f + 1.7f * random.nextFloat();
            topK[b] = b % 3 == 1 ? 0 : 1 + random.nextInt(Math.max(1, vocab / 3));
            topP[b] = b % 4 == 2 ? 1f : 0.05f + 0.9f * random.nextFloat();
            seeds[b] = random.nextLong();
            offsets[b] = random.nextInt(1 << 20);
        }
        NDArray x = manager.create(logits, new Shape(batch, vocab));
        if ("float16".equals(dtype)) {
            x = x.toType(DataType.FLOAT16, false);
        }
        float[] asRead = x.toType(DataType.FLOAT32, false).toFloatArray();
        long[] ids =
                SamplingOps.sampleTokens(
                                x,
                                manager.create(temperature),
                                manager.create(topK),
                                manager.create(topP),
                                manager.create(seeds),
                                manager.create(offsets))
                        .toLongArray();
        long[] expected = new long[batch];
        for (int b = 0; b < batch; ++b) {
            float[] row = Arrays.copyOfRange(asRead, b * vocab, (b + 1) * vocab);
            expected[b] =
                    Reference.sample(row, temperature[b], topK[b], topP[b], seeds[b], offsets[b]);
        }
        assertArrayEquals(expected, ids);
    }

    @Test
    void theInPlaceFormWritesIdsAndSamplingVaries() {
        int batch = 64;
        int vocab = 500;
        NDArray logits = manager.zeros(new Shape(batch, vocab));
        NDArray ids = manager.zeros(new Shape(batch), DataType.INT64);
        long[] offsets = IntStream.range(0, batch).asLongStream().toArray();
        SamplingOps.sampleTokens(
                ids,
                logits,
                manager.full(new Shape(batch), 1f),
                manager.zeros(new Shape(batch), DataType.INT32),
                manager.ones(new Shape(batch)),
                manager.create(IntStream.range(0, batch).mapToLong(b -> 42L).toArray()),
                manager.create(offsets));
        long[] got = ids.toLongArray();
        Set<Long> distinct = new HashSet<>();
        for (int b = 0; b < batch; ++b) {
            // Equal logits: the draw is floor(u * V), u = Philox(seed, offset) / 2^64.
            assertEquals(Reference.unsignedHigh(Reference.philox(42L, b), vocab), got[b]);
            distinct.add(got[b]);
        }
        assertTrue(distinct.size() > 40, distinct.toString());
    }

    @Test
    void badArgumentsAreNamed() {
        NDArray logits = manager.randomNormal(new Shape(2, 10));
        NDArray temperature = manager.create(new float[] {1f, -1f});
        NDArray topK = manager.zeros(new Shape(2), DataType.INT32);
        NDArray topP = manager.ones(new Shape(2));
        NDArray seeds = manager.zeros(new Shape(2), DataType.INT64);
        NDArray offsets = manager.zeros(new Shape(2), DataType.INT64);
        assertRejected(
                "sample_tokens: temperature: expected finite values >= 0 (0: greedy), got -1 at"
                        + " index 1",
                () -> SamplingOps.sampleTokens(logits, temperature, topK, topP, seeds, offsets));
        NDArray goodTemperature = manager.ones(new Shape(2));
        assertRejected(
                "sample_tokens: top_p: expected values in (0, 1]",
                () ->
                        SamplingOps.sampleTokens(
                                logits, goodTemperature, topK, topP.mul(2), seeds, offsets));
        assertRejected(
                "sample_tokens: top_k: expected dtype int32, got int64",
                () ->
                        SamplingOps.sampleTokens(
                                logits, goodTemperature, seeds, topP, seeds, offsets));
        assertRejected(
                "sample_tokens: logits: expected 2 dims [B, V], got 1 dims",
                () ->
                        SamplingOps.sampleTokens(
                                manager.zeros(new Shape(2)), goodTemperature, topK, topP, seeds,
                                offsets));
        assertEquals(
                "logits must not be null",
                assertThrows(
                                NullPointerException.class,
                                () ->
                                        SamplingOps.sampleTokens(
                                                null, goodTemperature, topK, topP, seeds, offsets))
                        .getMessage());
    }

    /** The operator's rules, in plain Java. */
    static final class Reference {

        private static final long ONE = 1L << 40;

        private Reference() {}

        static long sample(float[] x, float t, int topK, float topP, long seed, long offset) {
            int vocab = x.length;
            int argmax = 0;
            float max = Float.NEGATIVE_INFINITY;
            boolean anyNumber = false;
            for (int i = 0; i < vocab; ++i) {
                boolean nan = Float.isNaN(x[i]);
                if ((nan && !Float.isNaN(x[argmax])) || x[i] > x[argmax]) {
                    argmax = i;
                }
                if (!nan) {
                    max = Math.max(max, x[i]);
                    anyNumber = true;
                }
            }
            if (!(t > 0) || !anyNumber) {
                return argmax;
            }
            int k = topK <= 0 || topK >= vocab ? vocab : topK;
            long threshold = 0;
            if (k < vocab) {
                long[] keys = new long[vocab];
                for (int i = 0; i < vocab; ++i) {
                    keys[i] = key(x[i]);
                }
                Arrays.sort(keys);
                threshold = keys[vocab - k];
            }
            long[] w = new long[vocab];
            long total = 0;
            for (int i = 0; i < vocab; ++i) {
                w[i] = key(x[i]) >= threshold ? weight(x[i], max, t) : 0;
                total += w[i];
            }
            if (topP < 1f) {
                long need =
                        new BigDecimal(topP)
                                .multiply(new BigDecimal(total))
                                .setScale(0, RoundingMode.CEILING)
                                .longValueExact();
                Integer[] order =
                        IntStream.range(0, vocab)
                                .filter(i -> w[i] > 0)
                                .boxed()
                                .toArray(Integer[]::new);
                // The largest logits first, equal logits by the lower id.
                Arrays.sort(
                        order,
                        Comparator.<Integer>comparingLong(i -> -key(x[i]))
                                .thenComparingInt(i -> i));
                long kept = 0;
                int n = 0;
                while (n < order.length && kept < need) {
                    kept += w[order[n++]];
                }
                for (int j = n; j < order.length; ++j) {
                    w[order[j]] = 0;
                }
                total = kept;
            }
            long target = unsignedHigh(philox(seed, offset), total);
            long running = 0;
            for (int i = 0; i < vocab; ++i) {
                running += w[i];
                if (running > target) {
                    return i;
                }
            }
            throw new AssertionError("no token drawn");
        }

        /** The logit's place in the float order as a non-negative long; NaN lowest, -0 = +0. */
        static long key(float x) {
            if (Float.isNaN(x)) {
                return 0;
            }
            int b = Float.floatToRawIntBits(x == 0f ? 0f : x);
            int k = b < 0 ? ~b : b | 0x80000000;
            return k & 0xFFFFFFFFL;
        }

        static long weight(float x, float max, float t) {
            if (Float.isNaN(x)) {
                return 0;
            }
            if (x == max) {
                return ONE;
            }
            float z = (x - max) / t;
            if (!(z >= -28f)) {
                return 0;
            }
            float k = (float) Math.rint(z * 1.44269504088896341f);
            float r = z - k * 0.693145751953125f;
            r = r - k * 1.42860682030941723e-6f;
            float e = 1f / 5040f;
            e = e * r + 1f / 720f;
            e = e * r + 1f / 120f;
            e = e * r + 1f / 24f;
            e = e * r + 1f / 6f;
            e = e * r + 0.5f;
            e = e * r + 1f;
            e = e * r + 1f;
            float w = e * Float.intBitsToFloat((127 + (int) k) << 23);
            return (long) (w * (float) ONE);
        }

        static long philox(long seed, long offset) {
            int c0 = (int) offset;
            int c1 = (int) (offset >>> 32);
            int c2 = 0;
            int c3 = 0;
            int k0 = (int) seed;
            int k1 = (int) (seed >>> 32);
            for (int round = 0; round < 10; ++round) {
                long p0 = 0xD2511F53L * (c0 & 0xFFFFFFFFL);
                long p1 = 0xCD9E8D57L * (c2 & 0xFFFFFFFFL);
                int n0 = (int) (p1 >>> 32) ^ c1 ^ k0;
                int n2 = (int) (p0 >>> 32) ^ c3 ^ k1;
                c1 = (int) p1;
                c3 = (int) p0;
                c0 = n0;
                c2 = n2;
                k0 += 0x9E3779B9;
                k1 += 0xBB67AE85;
            }
            return (c0 & 0xFFFFFFFFL) | ((long) c1 << 32);
        }

        /** floor(bits * total / 2^64), bits unsigned, total >= 0. */
        static long unsignedHigh(long bits, long total) {
            return Math.multiplyHigh(bits, total) + ((bits >> 63) & total);
        }
    }
}
