/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.hf;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;

/**
 * Element-wise conversions between the floating-point types a safetensors file stores (F32, F16,
 * BF16) and the types a model holds (float32, float16), with the results libtorch's {@code
 * Tensor.to} gives: exact widening, and narrowing to float16 rounded to nearest even, values from
 * 65520 up becoming infinity, float16 subnormals kept, NaN staying NaN. Java 17 has no {@code
 * Float.floatToFloat16} (added in Java 20), hence the bit arithmetic here.
 */
final class ElementConversion {

    private ElementConversion() {}

    /**
     * Converts {@code count} elements from {@code src} (little-endian, at its position) into
     * {@code dst} (native order, at its position); advances neither buffer's position.
     *
     * @param src the source bytes
     * @param from F32, F16 or BF16
     * @param dst the destination bytes
     * @param toHalf float16 when true, else float32
     * @param count the number of elements
     */
    static void convert(ByteBuffer src, String from, ByteBuffer dst, boolean toHalf, int count) {
        ByteBuffer s = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer d = dst.duplicate().order(ByteOrder.nativeOrder());
        if ("F32".equals(from)) {
            FloatBuffer in = s.asFloatBuffer();
            if (toHalf) {
                ShortBuffer out = d.asShortBuffer();
                for (int i = 0; i < count; ++i) {
                    out.put(i, floatToHalf(in.get(i)));
                }
            } else {
                FloatBuffer out = d.asFloatBuffer();
                for (int i = 0; i < count; ++i) {
                    out.put(i, in.get(i));
                }
            }
            return;
        }
        ShortBuffer in = s.asShortBuffer();
        boolean bf16 = "BF16".equals(from);
        if (toHalf) {
            ShortBuffer out = d.asShortBuffer();
            for (int i = 0; i < count; ++i) {
                short v = in.get(i);
                out.put(i, bf16 ? floatToHalf(bf16ToFloat(v)) : v);
            }
        } else {
            FloatBuffer out = d.asFloatBuffer();
            for (int i = 0; i < count; ++i) {
                short v = in.get(i);
                out.put(i, bf16 ? bf16ToFloat(v) : halfToFloat(v));
            }
        }
    }

    /** A bfloat16's value: its bits are the top half of a float32's (exact). */
    static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xffff) << 16);
    }

    /** A float16's value (exact); NaN keeps its payload, as libtorch's conversion does. */
    static float halfToFloat(short bits) {
        int h = bits & 0xffff;
        int sign = (h & 0x8000) << 16;
        int exponent = (h >>> 10) & 0x1f;
        int mantissa = h & 0x3ff;
        if (exponent == 0x1f) {
            return Float.intBitsToFloat(sign | 0x7f800000 | (mantissa << 13));
        }
        if (exponent == 0) {
            // Zero or subnormal: mantissa * 2^-24, exact in float32.
            float v = mantissa * 0x1p-24f;
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
    }

    /** A float32 rounded to the nearest float16, ties to even. */
    static short floatToHalf(float value) {
        int x = Float.floatToRawIntBits(value);
        int sign = (x >>> 16) & 0x8000;
        int abs = x & 0x7fffffff;
        if (abs > 0x7f800000) {
            return (short) (sign | 0x7e00); // NaN: the quiet NaN libtorch writes
        }
        if (abs >= 0x477ff000) {
            // 65520 and up (and infinity): halfway between 65504 and 2^16 ties to the even
            // 2^16, which float16 cannot hold.
            return (short) (sign | 0x7c00);
        }
        if (abs < 0x38800000) {
            // Below float16's smallest normal 2^-14: a multiple of 2^-24, rounded to nearest even
            // (scaling by 2^24 is exact; 1024 is the smallest normal's encoding, as it should be).
            int m = (int) Math.rint(Float.intBitsToFloat(abs) * 0x1p24f);
            return (short) (sign | m);
        }
        int h = (((abs >>> 23) - 112) << 10) | ((abs >>> 13) & 0x3ff);
        int rest = abs & 0x1fff;
        if (rest > 0x1000 || (rest == 0x1000 && (h & 1) != 0)) {
            ++h; // a carry into the exponent is the right result
        }
        return (short) (sign | h);
    }
}
