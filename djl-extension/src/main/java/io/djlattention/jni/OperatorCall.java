/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import ai.djl.engine.EngineException;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;

/**
 * One call of a {@code djl_attn} operator through PyTorch's dispatcher: the arguments in schema
 * order, then {@link #invoke}. Internal to djl-attention; users call {@code AttentionOps}.
 *
 * <p>Inputs are borrowed for the duration of the call. Outputs are new arrays attached to the
 * given manager, so closing that manager frees them. Errors come back as the operator's own
 * message: {@link IllegalArgumentException} for invalid arguments, {@link EngineException} for
 * anything else.
 */
public final class OperatorCall {

    private final String operator;
    private final int[] kinds;
    private final long[] values;
    private int count;

    private OperatorCall(String operator, int numArgs) {
        this.operator = operator;
        this.kinds = new int[numArgs];
        this.values = new long[numArgs];
    }

    /**
     * Starts a call of {@code djl_attn::<operator>} with {@code numArgs} schema arguments.
     *
     * @param operator the operator name without namespace, for example {@code flash_attention}
     * @param numArgs the number of arguments in its schema
     * @return the call, to be given its arguments in order
     */
    public static OperatorCall of(String operator, int numArgs) {
        LibraryLoader.load();
        return new OperatorCall(operator, numArgs);
    }

    /**
     * Adds a {@code Tensor} argument.
     *
     * @param array the array
     * @return this call
     */
    public OperatorCall tensor(PtNDArray array) {
        return add(DjlAttnLibrary.ARG_TENSOR, array.getHandle());
    }

    /**
     * Adds a {@code Tensor?} argument.
     *
     * @param array the array, or {@code null} for None
     * @return this call
     */
    public OperatorCall optionalTensor(PtNDArray array) {
        return add(DjlAttnLibrary.ARG_OPTIONAL_TENSOR, array == null ? 0L : array.getHandle());
    }

    /**
     * Adds an {@code int} argument.
     *
     * @param value the value
     * @return this call
     */
    public OperatorCall intArg(long value) {
        return add(DjlAttnLibrary.ARG_INT, value);
    }

    /**
     * Adds a {@code float} argument (a double in PyTorch's schemas).
     *
     * @param value the value
     * @return this call
     */
    public OperatorCall floatArg(double value) {
        return add(DjlAttnLibrary.ARG_FLOAT, Double.doubleToRawLongBits(value));
    }

    /**
     * Adds a {@code bool} argument.
     *
     * @param value the value
     * @return this call
     */
    public OperatorCall boolArg(boolean value) {
        return add(DjlAttnLibrary.ARG_BOOL, value ? 1L : 0L);
    }

    /**
     * Runs the operator.
     *
     * @param manager the manager the outputs are attached to
     * @param numOutputs the number of tensors the schema returns
     * @return the outputs, in schema order
     * @throws IllegalArgumentException if the operator rejected its arguments
     * @throws EngineException on any other native failure
     */
    public PtNDArray[] invoke(PtNDManager manager, int numOutputs) {
        if (count != kinds.length) {
            throw new IllegalStateException(
                    operator + " takes " + kinds.length + " arguments, " + count + " were given");
        }
        long[] handles = new long[numOutputs];
        int status =
                DjlAttnLibrary.call(operator, count, kinds, values, numOutputs, handles);
        if (status == DjlAttnLibrary.INVALID_ARGUMENT) {
            throw new IllegalArgumentException(DjlAttnLibrary.lastErrorMessage());
        }
        if (status != DjlAttnLibrary.OK) {
            throw new EngineException(DjlAttnLibrary.lastErrorMessage());
        }
        PtNDArray[] outputs = new PtNDArray[numOutputs];
        for (int i = 0; i < numOutputs; ++i) {
            outputs[i] = new PtNDArray(manager, handles[i]);
        }
        return outputs;
    }

    private OperatorCall add(int kind, long value) {
        if (count == kinds.length) {
            throw new IllegalStateException(
                    operator + " takes " + kinds.length + " arguments, more were given");
        }
        kinds[count] = kind;
        values[count] = value;
        ++count;
        return this;
    }
}
