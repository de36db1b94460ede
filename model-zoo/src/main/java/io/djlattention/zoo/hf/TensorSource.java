/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.hf;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.Shape;

import java.io.IOException;

/**
 * Named tensors that are read into arrays the caller allocates, so a model's loader can place
 * each weight where it will live (its final device, type and layout, a row range of a stacked
 * matrix) with one copy and no intermediate array. {@link CheckpointWeights} is the one for a
 * Hugging Face checkpoint's safetensors files.
 */
public interface TensorSource {

    /**
     * Returns a tensor's shape.
     *
     * @param name the tensor's name
     * @return the shape
     * @throws IOException if the source lacks the tensor (naming the source and the tensor)
     */
    Shape shape(String name) throws IOException;

    /**
     * Reads a tensor into a destination, converted to its type.
     *
     * @param name the tensor's name
     * @param destination a contiguous array with the tensor's element count, on any device
     * @throws IOException if the source lacks the tensor, cannot convert it to the destination's
     *     type, or cannot be read
     */
    void readInto(String name, NDArray destination) throws IOException;
}
