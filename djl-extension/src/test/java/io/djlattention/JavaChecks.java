/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.lang.reflect.Proxy;
import org.junit.jupiter.api.function.Executable;

/** Helpers for the tests of the argument checks every operator wrapper shares. */
final class JavaChecks {

    private JavaChecks() {}

    /** Asserts that {@code call} throws IllegalArgumentException with a message containing a part. */
    static void assertRejected(String expectedMessagePart, Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(
                e.getMessage().contains(expectedMessagePart),
                "message '" + e.getMessage() + "' lacks '" + expectedMessagePart + "'");
    }

    /**
     * An NDArray of no engine that reports the given dtype and shape. DJL 0.36.0 aborts the JVM
     * when it creates a bfloat16 array, so this stand-in is how tests reach the bfloat16 and
     * foreign-engine checks; any call beyond dtype, shape and manager fails the test.
     */
    static NDArray standIn(DataType dataType, Shape shape, NDManager manager) {
        return (NDArray)
                Proxy.newProxyInstance(
                        NDArray.class.getClassLoader(),
                        new Class<?>[] {NDArray.class},
                        (proxy, method, args) -> {
                            switch (method.getName()) {
                                case "getDataType":
                                    return dataType;
                                case "getShape":
                                    return shape;
                                case "getManager":
                                    return manager;
                                default:
                                    throw new AssertionError("unexpected call " + method);
                            }
                        });
    }
}
