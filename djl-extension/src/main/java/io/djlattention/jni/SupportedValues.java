/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The supported-values lists of the native kernels (head dims, block sizes, ...), read from the
 * loaded library ({@code djl_attn_supported_values} of {@code native-ops/include/djl_attn/c_api.h})
 * rather than restated in Java, so builders reject what the kernels would reject with the same
 * list. Internal to djl-attention; the public API exposes the lists where they matter (for
 * example {@code PagedKvCache.supportedHeadDims()}).
 */
public final class SupportedValues {

    private static final Map<String, int[]> CACHE = new ConcurrentHashMap<>();

    private SupportedValues() {}

    /**
     * Returns one integer list of the native library.
     *
     * @param key a key of {@code djl_attn_supported_values}, for example {@code paged.head_dims}
     * @return the values, in the library's order (a copy)
     * @throws IllegalArgumentException if the library has no such list
     */
    public static int[] of(String key) {
        return CACHE.computeIfAbsent(key, SupportedValues::read).clone();
    }

    /**
     * Formats a list as the native messages do: {@code {64, 80, 96}}.
     *
     * @param values the values
     * @return the list in braces
     */
    public static String format(int[] values) {
        String s = Arrays.toString(values);
        return "{" + s.substring(1, s.length() - 1) + "}";
    }

    private static int[] read(String key) {
        LibraryLoader.load();
        String csv = DjlAttnLibrary.supportedValues(key);
        if (csv == null) {
            throw new IllegalArgumentException("djl_attn: no supported-values list named " + key);
        }
        return Arrays.stream(csv.split(",")).mapToInt(Integer::parseInt).toArray();
    }
}
