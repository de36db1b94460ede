/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import io.djlattention.jni.SupportedValues;

/**
 * What the loaded library's paged kernels take (head dims, block sizes), read from it through
 * {@link SupportedValues} rather than restated in Java; {@link PagedKvCache} publishes it.
 */
final class PagedKernelSupport {

    private static volatile int[] headDims;

    private PagedKernelSupport() {}

    /** The head dims of {@link PagedKvCache#supportedHeadDims}, read once. */
    static int[] headDims() {
        int[] supported = headDims;
        if (supported == null) {
            // Read on first use, not in a static initialiser: a library that fails to load
            // then fails every call with its own message, not a NoClassDefFoundError.
            supported = readHeadDims();
            headDims = supported;
        }
        return supported.clone();
    }

    private static int[] readHeadDims() {
        int max;
        try {
            max = SupportedValues.of("paged.max_head_dim")[0];
        } catch (IllegalArgumentException olderLibrary) {
            return SupportedValues.of("paged.head_dims");
        }
        int[] all = new int[max];
        for (int d = 1; d <= max; ++d) {
            all[d - 1] = d;
        }
        return all;
    }

    /**
     * Formats the supported head dims as the operators' messages do: {@code [1, 256]} for every
     * head dim up to a maximum, else the list {@code {64, 80, 96, 128, 256}}.
     */
    static String describeHeadDims(int[] supported) {
        int n = supported.length;
        if (n > 1 && supported[0] == 1 && supported[n - 1] == n) {
            return "[1, " + n + "]";
        }
        return SupportedValues.format(supported);
    }

    /** The block sizes of {@link PagedKvCache#supportedBlockSizes}. */
    static int[] blockSizes() {
        return SupportedValues.of("paged.block_sizes");
    }

    /** {@link PagedKvCache#paddedHeadDim}. */
    static int paddedHeadDim(int headDim) {
        int[] supported = headDims();
        for (int d : supported) {
            if (d >= headDim) {
                return d;
            }
        }
        throw new IllegalArgumentException(
                "PagedKvCache: head dim "
                        + headDim
                        + " is larger than the paged kernels support ("
                        + supported[supported.length - 1]
                        + ")");
    }
}
