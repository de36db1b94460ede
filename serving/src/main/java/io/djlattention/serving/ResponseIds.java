/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import java.security.SecureRandom;

/**
 * Response ids ({@code cmpl-…}, {@code chatcmpl-…}): 128 random bits each, so ids stay unique
 * across restarts and across replicas behind one load balancer (a counter restarts at 1 and
 * repeats on every replica). At 2^64 responses the chance of any repeat is about 2^-1.
 */
final class ResponseIds {

    private static final SecureRandom RANDOM = new SecureRandom();
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private ResponseIds() {}

    static String next(String prefix) {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        StringBuilder s = new StringBuilder(prefix.length() + 32).append(prefix);
        for (byte v : b) {
            s.append(HEX[(v >> 4) & 15]).append(HEX[v & 15]);
        }
        return s.toString();
    }
}
