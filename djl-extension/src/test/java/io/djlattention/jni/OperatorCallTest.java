/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.engine.PtNDManager;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;
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
    void failuresOutsideTheOperatorAreNativeErrors() {
        LibraryLoader.load();
        long[] outputs = new long[1];
        assertEquals(
                DjlAttnLibrary.NATIVE_ERROR,
                DjlAttnLibrary.call("no_such_operator", 0, new int[0], new long[0], 1, outputs));
        assertTrue(
                DjlAttnLibrary.lastErrorMessage().contains("no operator named 'no_such_operator'"),
                DjlAttnLibrary.lastErrorMessage());
    }

    @Test
    void argumentCountAndKindsAreChecked() {
        try (NDManager manager = NDManager.newBaseManager()) {
            assertThrows(
                    IllegalStateException.class,
                    () -> OperatorCall.of(Operator.FLASH_ATTENTION).invoke((PtNDManager) manager));
            assertThrows(
                    IllegalStateException.class,
                    () -> OperatorCall.of(Operator.FLASH_ATTENTION).intArg(1));
        }
    }

    @Test
    void operatorListMatchesTheRegisteredSchemas() {
        LibraryLoader.load();
        Operator.verifyAgainstNative();
        // Every operator the library defines is in the Java list, and no other.
        Set<String> nativeNames = new HashSet<>();
        for (int i = 0; i < DjlAttnLibrary.operatorCount(); ++i) {
            nativeNames.add(DjlAttnLibrary.operatorName(i));
        }
        Set<String> javaNames = new HashSet<>();
        for (Operator op : Operator.values()) {
            javaNames.add(op.schemaName());
        }
        assertEquals(nativeNames, javaNames);
        // The kinds Java states, read independently from each schema's text.
        for (int i = 0; i < DjlAttnLibrary.operatorCount(); ++i) {
            String schema = DjlAttnLibrary.operatorSchema(i);
            Operator op = Operator.valueOf(DjlAttnLibrary.operatorName(i).toUpperCase(Locale.ROOT));
            String args = schema.substring(schema.indexOf('(') + 1, schema.lastIndexOf(") ->"));
            String[] parts = args.split(",");
            assertEquals(parts.length, op.argKinds().length, schema);
            for (int a = 0; a < parts.length; ++a) {
                String type = parts[a].trim().split(" ")[0];
                int expected =
                        type.equals("Tensor?")
                                ? DjlAttnLibrary.ARG_OPTIONAL_TENSOR
                                : type.startsWith("Tensor")
                                        ? DjlAttnLibrary.ARG_TENSOR
                                        : type.equals("int")
                                                ? DjlAttnLibrary.ARG_INT
                                                : type.equals("float")
                                                        ? DjlAttnLibrary.ARG_FLOAT
                                                        : DjlAttnLibrary.ARG_BOOL;
                assertEquals(expected, op.argKinds()[a], schema + " argument " + a);
            }
        }
    }
}
