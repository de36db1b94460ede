/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.engine.EngineException;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import io.djlattention.jni.LibraryLoader;
import org.bytedeco.javacpp.Loader;

/**
 * One call of a {@code djl_attn} operator through PyTorch's dispatcher: the arguments in schema
 * order, then {@link #invoke}. Package-private, the one entry from the operator classes of this
 * package to the native library; users call {@link AttentionOps} and its siblings.
 *
 * <p>Inputs are borrowed for the duration of the call. Outputs are new arrays attached to the
 * given manager, so closing that manager frees them. Errors come back as the operator's own
 * message: {@link IllegalArgumentException} for invalid arguments, {@link EngineException} for
 * anything else. The native side runs the operator's checks before it dispatches, so a rejected
 * call leaves nothing on stderr.
 */
final class OperatorCall {

    private static final long[] NO_HANDLES = new long[0];

    private static volatile boolean verified;

    private final Operator operator;
    private final long[] values;
    private int count;

    private OperatorCall(Operator operator) {
        this.operator = operator;
        this.values = new long[operator.numArgs()];
    }

    /**
     * Starts a call of an operator. The first call in a process loads the native libraries and
     * checks {@link Operator}'s list against the schemas they registered.
     *
     * @param operator the operator
     * @return the call, to be given its arguments in schema order
     * @throws IllegalStateException if {@link Operator} disagrees with the native schemas
     */
    static OperatorCall of(Operator operator) {
        ensureLoaded();
        return new OperatorCall(operator);
    }

    /**
     * Adds a {@code Tensor} argument.
     *
     * @param array the array
     * @return this call
     */
    OperatorCall tensor(PtNDArray array) {
        return add(OperatorLibrary.ARG_TENSOR, array.getHandle());
    }

    /**
     * Adds a {@code Tensor?} argument.
     *
     * @param array the array, or {@code null} for None
     * @return this call
     */
    OperatorCall optionalTensor(PtNDArray array) {
        return add(OperatorLibrary.ARG_OPTIONAL_TENSOR, array == null ? 0L : array.getHandle());
    }

    /**
     * Adds an {@code int} argument.
     *
     * @param value the value
     * @return this call
     */
    OperatorCall intArg(long value) {
        return add(OperatorLibrary.ARG_INT, value);
    }

    /**
     * Adds a {@code float} argument (a double in PyTorch's schemas).
     *
     * @param value the value
     * @return this call
     */
    OperatorCall floatArg(double value) {
        return add(OperatorLibrary.ARG_FLOAT, Double.doubleToRawLongBits(value));
    }

    /**
     * Adds a {@code bool} argument.
     *
     * @param value the value
     * @return this call
     */
    OperatorCall boolArg(boolean value) {
        return add(OperatorLibrary.ARG_BOOL, value ? 1L : 0L);
    }

    /**
     * Runs the operator.
     *
     * @param manager the manager the outputs are attached to
     * @return the outputs, in schema order ({@link Operator#numOutputs()} of them)
     * @throws IllegalArgumentException if the operator rejected its arguments
     * @throws EngineException on any other native failure
     */
    PtNDArray[] invoke(PtNDManager manager) {
        return invoke(manager, operator.numOutputs());
    }

    /**
     * Runs the operator and keeps only its first outputs: the others are freed natively, never
     * wrapped as arrays (for example {@code flash_attention}'s logsumexp when only the output is
     * wanted).
     *
     * @param manager the manager the kept outputs are attached to
     * @param numOutputs how many of the outputs to keep, in {@code [0, numOutputs()]}
     * @return the first {@code numOutputs} outputs, in schema order
     * @throws IllegalArgumentException if the operator rejected its arguments
     * @throws EngineException on any other native failure
     */
    PtNDArray[] invoke(PtNDManager manager, int numOutputs) {
        if (count != values.length) {
            throw new IllegalStateException(
                    operator.schemaName()
                            + " takes "
                            + values.length
                            + " arguments, "
                            + count
                            + " were given");
        }
        if (numOutputs < 0 || numOutputs > operator.numOutputs()) {
            throw new IllegalStateException(
                    operator.schemaName()
                            + " returns "
                            + operator.numOutputs()
                            + " tensors, "
                            + numOutputs
                            + " were asked for");
        }
        long[] handles = numOutputs == 0 ? NO_HANDLES : new long[numOutputs];
        int status =
                OperatorLibrary.callOperator(operator.nativeIndex(), values, numOutputs, handles);
        if (status == OperatorLibrary.INVALID_ARGUMENT) {
            throw new IllegalArgumentException(OperatorLibrary.lastErrorMessage());
        }
        if (status != OperatorLibrary.OK) {
            throw new EngineException(
                    LibraryLoader.describeFailure(
                            operator.schemaName(), OperatorLibrary.lastErrorMessage()));
        }
        PtNDArray[] outputs = new PtNDArray[numOutputs];
        for (int i = 0; i < numOutputs; ++i) {
            outputs[i] = new PtNDArray(manager, handles[i]);
        }
        return outputs;
    }

    private OperatorCall add(int kind, long value) {
        if (count == values.length) {
            throw new IllegalStateException(
                    operator.schemaName()
                            + " takes "
                            + values.length
                            + " arguments, more were given");
        }
        if (operator.argKind(count) != kind) {
            throw new IllegalStateException(
                    operator.schemaName()
                            + ": argument "
                            + count
                            + " is of kind "
                            + operator.argKind(count)
                            + ", given kind "
                            + kind);
        }
        values[count] = value;
        ++count;
        return this;
    }

    /** Loads the libraries, then checks {@link Operator} against their schemas once. */
    private static void ensureLoaded() {
        if (!verified) { // one volatile read per call once loaded
            synchronized (OperatorCall.class) {
                if (!verified) {
                    LibraryLoader.load();
                    // This package's JNI library, which links the libdjl_attn.so just loaded.
                    try {
                        Loader.load(OperatorLibrary.class);
                    } catch (UnsatisfiedLinkError e) {
                        throw new EngineException(
                                "Failed to load djl-attention's operator bridge: "
                                        + e.getMessage(),
                                e);
                    }
                    Operator.verifyAgainstNative();
                    verified = true;
                }
            }
        }
    }
}
