/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.engine.PtNDManager;
import org.junit.jupiter.api.Test;

/** The bridge itself: loading, registration, and how failures reach Java. */
class OperatorCallTest {

    @Test
    void loadingTwiceIsHarmless() {
        LibraryLoader.load();
        LibraryLoader.load();
        assertEquals(DjlAttnLibrary.OK, DjlAttnLibrary.registrationStatus());
    }

    @Test
    void threadPoolFollowsDjlsIntraOpSetting() {
        LibraryLoader.load();
        assertEquals(
                ai.djl.pytorch.jni.JniUtils.getNumThreads(), DjlAttnLibrary.getNumThreads());
    }

    @Test
    void failuresOutsideTheOperatorBecomeEngineExceptions() {
        try (NDManager manager = NDManager.newBaseManager()) {
            EngineException e =
                    assertThrows(
                            EngineException.class,
                            () ->
                                    OperatorCall.of("no_such_operator", 0)
                                            .invoke((PtNDManager) manager, 1));
            assertTrue(e.getMessage().contains("djl_attn::no_such_operator"), e.getMessage());
        }
    }

    @Test
    void argumentCountIsChecked() {
        try (NDManager manager = NDManager.newBaseManager()) {
            assertThrows(
                    IllegalStateException.class,
                    () -> OperatorCall.of("flash_attention", 6).invoke((PtNDManager) manager, 2));
        }
    }
}
