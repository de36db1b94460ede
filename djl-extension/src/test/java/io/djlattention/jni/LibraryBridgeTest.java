/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The bridge itself: loading, registration, and how failures reach Java. */
class LibraryBridgeTest {

    @Test
    void loadingTwiceIsHarmless() {
        LibraryLoader.load();
        LibraryLoader.load();
        assertEquals(DjlAttnLibrary.OK, DjlAttnLibrary.registrationStatus());
    }

    @Test
    void threadPoolFollowsDjlsIntraOpSetting() {
        LibraryLoader.load();
        int before = ai.djl.pytorch.jni.JniUtils.getNumThreads();
        assertEquals(before, DjlAttnLibrary.getNumThreads());
        try {
            // Changed after loading (as EncoderVsOrtBenchmark and the thread tests do): followed.
            for (int n : new int[] {1, 3}) {
                ai.djl.pytorch.jni.JniUtils.setNumThreads(n);
                assertEquals(n, DjlAttnLibrary.getNumThreads());
            }
        } finally {
            ai.djl.pytorch.jni.JniUtils.setNumThreads(before);
        }
    }
}
