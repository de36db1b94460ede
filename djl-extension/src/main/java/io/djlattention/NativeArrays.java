/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import ai.djl.pytorch.engine.PtNDArray;

/**
 * The checks Java owns before an array crosses to a native operator: nulls, bfloat16 (DJL 0.36.0's
 * PyTorch engine cannot hold it) and arrays of another engine. Everything else the operator
 * itself checks.
 */
final class NativeArrays {

    private NativeArrays() {}

    /**
     * Returns {@code array} as a PyTorch-engine array, or throws naming the argument.
     *
     * @param array the argument
     * @param name its name in the messages
     * @return the same array
     */
    static PtNDArray pytorchArray(NDArray array, String name) {
        if (array == null) { // not requireNonNull(array, name + ...): no string built per call
            throw new NullPointerException(name + " must not be null");
        }
        if (array.getDataType() == DataType.BFLOAT16) {
            throw new IllegalArgumentException(
                    name
                            + ": bfloat16 is not supported from Java (DJL 0.36.0's PyTorch engine"
                            + " cannot hold bfloat16 arrays); use float16 or float32");
        }
        if (!(array instanceof PtNDArray)) {
            throw new IllegalArgumentException(
                    name
                            + ": expected an NDArray of the PyTorch engine, got one of "
                            + array.getManager().getEngine().getEngineName());
        }
        return (PtNDArray) array;
    }

    /** {@link #pytorchArray} of a {@code Tensor?} argument: null stays null (None). */
    static PtNDArray optionalArray(NDArray array, String name) {
        return array == null ? null : pytorchArray(array, name);
    }
}
