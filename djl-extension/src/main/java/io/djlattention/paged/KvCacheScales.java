/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import java.util.Arrays;

/**
 * The scales of an {@link KvCacheDtype#FP8_E4M3} cache: per layer, one key scale and one value
 * scale per tensor ({@code [1]}) or per KV head ({@code [Hkv]}). A value {@code x} is stored as the
 * e4m3 byte nearest to {@code x / scale} (saturated at ±448) and read back as {@code byte · scale},
 * so a scale trades range ({@code 448 · scale}) for resolution (e4m3's subnormals start below
 * {@code 2^-6 · scale}).
 *
 * <p>How to pick them:
 *
 * <ul>
 *   <li>{@link #unit()} (the default; vLLM's default without calibration): scale 1, range ±448.
 *       Right for models whose keys and values are of order 0.02 .. 400, which most are (the
 *       relative error of a normal e4m3 value is then at most 2<sup>-4</sup>).
 *   <li>{@link PagedKvCache#measureFp8Scales}: run representative prompts through a float cache
 *       (the default {@link KvCacheDtype#AUTO}) and take each layer's (each head's) largest
 *       magnitude, with headroom; for keys or values far from order 1.
 *   <li>{@link #perTensor} or {@link #of}: scales from elsewhere (a quantised checkpoint's
 *       {@code k_scale} / {@code v_scale}).
 * </ul>
 *
 * <p>Immutable.
 */
public final class KvCacheScales {

    /** The largest finite OCP e4m3fn value. */
    public static final float FP8_E4M3_MAX = 448f;

    private static final KvCacheScales UNIT = new KvCacheScales(null, null, 1f, 1f);

    private final float[][] key; // per layer [1] or [Hkv]; null: the uniform scales below
    private final float[][] value;
    private final float uniformKey;
    private final float uniformValue;

    private KvCacheScales(float[][] key, float[][] value, float uniformKey, float uniformValue) {
        this.key = key;
        this.value = value;
        this.uniformKey = uniformKey;
        this.uniformValue = uniformValue;
    }

    /**
     * Returns scale 1 for every layer's keys and values (the default).
     *
     * @return the unit scales
     */
    public static KvCacheScales unit() {
        return UNIT;
    }

    /**
     * Returns one key scale and one value scale, the same in every layer.
     *
     * @param keyScale the key scale, finite and {@code > 0}
     * @param valueScale the value scale, finite and {@code > 0}
     * @return the scales
     * @throws IllegalArgumentException if a scale is not finite and positive
     */
    public static KvCacheScales perTensor(float keyScale, float valueScale) {
        checkScale(keyScale, "keyScale");
        checkScale(valueScale, "valueScale");
        return new KvCacheScales(null, null, keyScale, valueScale);
    }

    /**
     * Returns per-layer scales: {@code keyScales[layer]} of length 1 (per tensor) or {@code Hkv}
     * (per KV head), likewise {@code valueScales}. The lengths are checked against the cache in
     * {@link PagedKvCache.Builder#build()}.
     *
     * @param keyScales the key scales {@code [numLayers][1 or Hkv]}, finite and {@code > 0}
     * @param valueScales the value scales, same shape
     * @return the scales (copies of the arrays)
     * @throws IllegalArgumentException if an array is null or empty, the two differ in layers, or
     *     a scale is not finite and positive
     */
    public static KvCacheScales of(float[][] keyScales, float[][] valueScales) {
        float[][] k = copy(keyScales, "keyScales");
        float[][] v = copy(valueScales, "valueScales");
        if (k.length != v.length) {
            throw new IllegalArgumentException(
                    "KvCacheScales: keyScales has "
                            + k.length
                            + " layers, valueScales "
                            + v.length);
        }
        return new KvCacheScales(k, v, 0f, 0f);
    }

    /**
     * Returns the key scales of a layer.
     *
     * @param layer the layer
     * @return {@code [1]} or {@code [Hkv]} (a copy)
     */
    public float[] keyScales(int layer) {
        return key == null ? new float[] {uniformKey} : key[layer].clone();
    }

    /**
     * Returns the value scales of a layer.
     *
     * @param layer the layer
     * @return {@code [1]} or {@code [Hkv]} (a copy)
     */
    public float[] valueScales(int layer) {
        return value == null ? new float[] {uniformValue} : value[layer].clone();
    }

    /**
     * Checks the scales against a cache's layers and KV heads.
     *
     * @param setter the class and builder method the message starts with
     * @param numLayers the layers
     * @param numKvHeads Hkv
     * @throws IllegalArgumentException naming the layer and the length that does not fit
     */
    public void checkFits(String setter, int numLayers, int numKvHeads) {
        if (key == null) {
            return;
        }
        if (key.length != numLayers) {
            throw new IllegalArgumentException(
                    setter
                            + ": expected scales for "
                            + numLayers
                            + " layers, got "
                            + key.length);
        }
        for (int l = 0; l < numLayers; ++l) {
            checkLength(key[l], l, numKvHeads, setter, "key");
            checkLength(value[l], l, numKvHeads, setter, "value");
        }
    }

    private static void checkLength(float[] s, int layer, int numKvHeads, String setter, String w) {
        if (s.length != 1 && s.length != numKvHeads) {
            throw new IllegalArgumentException(
                    setter
                            + ": the "
                            + w
                            + " scales of layer "
                            + layer
                            + ": expected 1 (per tensor) or Hkv = "
                            + numKvHeads
                            + " (per head), got "
                            + s.length);
        }
    }

    private static float[][] copy(float[][] scales, String name) {
        if (scales == null || scales.length == 0) {
            throw new IllegalArgumentException(
                    "KvCacheScales: " + name + ": expected one array per layer, got none");
        }
        float[][] out = new float[scales.length][];
        for (int l = 0; l < scales.length; ++l) {
            if (scales[l] == null || scales[l].length == 0) {
                throw new IllegalArgumentException(
                        "KvCacheScales: " + name + "[" + l + "]: expected 1 or Hkv scales, got none");
            }
            out[l] = scales[l].clone();
            for (float s : out[l]) {
                checkScale(s, name + "[" + l + "]");
            }
        }
        return out;
    }

    private static void checkScale(float s, String name) {
        if (!(s > 0) || Float.isInfinite(s)) {
            throw new IllegalArgumentException(
                    "KvCacheScales: " + name + ": expected a finite scale > 0, got " + s);
        }
    }

    @Override
    public String toString() {
        if (key == null) {
            return "KvCacheScales{key " + uniformKey + ", value " + uniformValue + "}";
        }
        return "KvCacheScales{key "
                + Arrays.deepToString(key)
                + ", value "
                + Arrays.deepToString(value)
                + "}";
    }
}
