/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import ai.djl.ndarray.types.DataType;

import java.util.Locale;

/**
 * What a {@link PagedKvCache} stores its keys and values as (vLLM's {@code kv_cache_dtype}).
 *
 * <ul>
 *   <li>{@link #AUTO}: the model's data type ({@link PagedKvCache.Builder#optDataType}, float32 or
 *       float16), exact;
 *   <li>{@link #FP8_E4M3}: one byte per element, OCP e4m3fn (4 exponent bits, 3 mantissa bits,
 *       largest finite 448, no infinities) in a uint8 array, each layer's keys and values with
 *       their own scales ({@link KvCacheScales}): stored {@code = sat(round(x / scale))}, read
 *       {@code = byte · scale}. Half the bytes of float16, a quarter of float32; relative rounding
 *       error at most 2<sup>-4</sup> per element in e4m3's normal range.
 *   <li>{@link #FP8_E5M2}: the same with OCP e5m2 bytes (5 exponent bits, 2 mantissa bits,
 *       largest finite 57344; the upper byte of an IEEE float16): 2<sup>15</sup> times e4m3's
 *       range at half its resolution (relative rounding error at most 2<sup>-3</sup>), so unit
 *       scales suit almost any model.
 * </ul>
 *
 * <p>Keys, values and queries given to the cache and the paged operators stay in the model's data
 * type either way; only the cache's storage differs.
 */
public enum KvCacheDtype {
    /** The model's data type. */
    AUTO,
    /** OCP e4m3fn bytes with per-tensor or per-head scales (vLLM's {@code fp8_e4m3}). */
    FP8_E4M3,
    /** OCP e5m2 bytes with per-tensor or per-head scales (vLLM's {@code fp8_e5m2}). */
    FP8_E5M2;

    /**
     * Returns whether the cache stores FP8 bytes (with scales).
     *
     * @return true for {@link #FP8_E4M3} and {@link #FP8_E5M2}
     */
    public boolean isFp8() {
        return this != AUTO;
    }

    /**
     * Returns the element type of the cache arrays.
     *
     * @param modelType the model's data type (the keys and values written)
     * @return {@code modelType} for {@link #AUTO}, uint8 for the FP8 ones
     */
    public DataType storageType(DataType modelType) {
        return isFp8() ? DataType.UINT8 : modelType;
    }

    /**
     * Parses vLLM's spelling: {@code auto}, {@code fp8} or {@code fp8_e4m3}, {@code fp8_e5m2}
     * (case-insensitive).
     *
     * @param name the name
     * @return the cache dtype
     * @throws IllegalArgumentException naming the accepted spellings
     */
    public static KvCacheDtype fromString(String name) {
        switch (name == null ? "" : name.toLowerCase(Locale.ROOT)) {
            case "auto":
                return AUTO;
            case "fp8":
            case "fp8_e4m3":
                return FP8_E4M3;
            case "fp8_e5m2":
                return FP8_E5M2;
            default:
                throw new IllegalArgumentException(
                        "kv cache dtype: expected auto, fp8, fp8_e4m3 or fp8_e5m2, got " + name);
        }
    }
}
