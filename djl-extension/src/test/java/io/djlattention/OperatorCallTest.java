/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.engine.PtNDManager;
import io.djlattention.jni.LibraryLoader;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The operator list against the registered schemas, and what a call checks on the Java side. */
class OperatorCallTest {

    @Test
    void failuresOutsideTheOperatorAreNativeErrors() {
        LibraryLoader.load();
        OperatorCall.of(Operator.FLASH_ATTENTION); // loads the operator library
        long[] outputs = new long[1];
        int count = OperatorLibrary.operatorCount();
        assertEquals(
                OperatorLibrary.NATIVE_ERROR,
                OperatorLibrary.callOperator(count, new long[0], 1, outputs));
        assertTrue(
                OperatorLibrary.lastErrorMessage().contains("no operator at index " + count),
                OperatorLibrary.lastErrorMessage());
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
        OperatorCall.of(Operator.FLASH_ATTENTION); // loads and verifies
        // Every operator the library defines is in the Java list, and no other.
        Set<String> nativeNames = new HashSet<>();
        for (int i = 0; i < OperatorLibrary.operatorCount(); ++i) {
            nativeNames.add(OperatorLibrary.operatorName(i));
        }
        Set<String> javaNames = new HashSet<>();
        for (Operator op : Operator.values()) {
            javaNames.add(op.schemaName());
        }
        assertEquals(nativeNames, javaNames);
        // The kinds Java states, read independently from each schema's text.
        for (int i = 0; i < OperatorLibrary.operatorCount(); ++i) {
            String schema = OperatorLibrary.operatorSchema(i);
            Operator op = Operator.valueOf(OperatorLibrary.operatorName(i).toUpperCase(Locale.ROOT));
            String args = schema.substring(schema.indexOf('(') + 1, schema.lastIndexOf(") ->"));
            String[] parts = args.split(",");
            assertEquals(parts.length, op.argKinds().length, schema);
            for (int a = 0; a < parts.length; ++a) {
                String type = parts[a].trim().split(" ")[0];
                int expected =
                        type.equals("Tensor?")
                                ? OperatorLibrary.ARG_OPTIONAL_TENSOR
                                : type.startsWith("Tensor")
                                        ? OperatorLibrary.ARG_TENSOR
                                        : type.equals("int")
                                                ? OperatorLibrary.ARG_INT
                                                : type.equals("float")
                                                        ? OperatorLibrary.ARG_FLOAT
                                                        : OperatorLibrary.ARG_BOOL;
                assertEquals(expected, op.argKinds()[a], schema + " argument " + a);
            }
        }
    }
}
