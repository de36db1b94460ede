/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.zoo.hf.TensorSource;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a decoder's parameters from a {@link TensorSource} into arrays allocated once, in their
 * final layout: each parameter on the manager's device in the configuration's data type, the
 * {@link DecoderParameters#stackedGroups} as one array each whose row ranges the members are read into
 * (the members' values are views of it). Nothing is converted, duplicated or concatenated
 * afterwards: what {@link Decoder#setWeights(NDManager, TensorSource)} installs is what was read.
 */
final class ParameterReader {

    private ParameterReader() {}

    /**
     * Reads every parameter of a configuration.
     *
     * @param config the configuration
     * @param manager the manager that owns the arrays
     * @param source the tensors, named as in {@link Decoder#parameterShapes}
     * @param stacked receives the stacked arrays by group name
     * @return the parameters by name, in model order
     * @throws IOException if the source lacks a tensor or cannot read it (nothing is kept)
     * @throws IllegalArgumentException if a tensor's shape is not the parameter's
     */
    static Map<String, NDArray> read(
            DecoderConfig config,
            NDManager manager,
            TensorSource source,
            Map<String, NDArray> stacked)
            throws IOException {
        Map<String, Shape> shapes = Decoder.parameterShapes(config);
        for (Map.Entry<String, Shape> e : shapes.entrySet()) {
            Shape got = source.shape(e.getKey());
            if (!got.equals(e.getValue())) {
                throw new IllegalArgumentException(
                        e.getKey() + ": expected shape " + e.getValue() + ", got " + got);
            }
        }
        Map<String, List<String>> groups = DecoderParameters.stackedGroups(config);
        Map<String, String> groupOf = new LinkedHashMap<>();
        for (Map.Entry<String, List<String>> g : groups.entrySet()) {
            for (String member : g.getValue()) {
                groupOf.put(member, g.getKey());
            }
        }
        DataType type = config.getDataType();
        Map<String, NDArray> values = new LinkedHashMap<>();
        List<NDArray> made = new ArrayList<>();
        try {
            for (Map.Entry<String, Shape> e : shapes.entrySet()) {
                String group = groupOf.get(e.getKey());
                if (group == null) {
                    NDArray value = own(manager.create(e.getValue(), type), made);
                    source.readInto(e.getKey(), value);
                    values.put(e.getKey(), value);
                } else if (!stacked.containsKey(group)) {
                    long rows = 0;
                    for (String member : groups.get(group)) {
                        rows += shapes.get(member).get(0);
                    }
                    Shape stackShape = new Shape(rows, e.getValue().get(1));
                    NDArray stack = own(manager.create(stackShape, type), made);
                    stacked.put(group, stack);
                    long row = 0;
                    for (String member : groups.get(group)) {
                        long n = shapes.get(member).get(0);
                        NDArray view = own(stack.get(new NDIndex("{}:{}", row, row + n)), made);
                        source.readInto(member, view);
                        values.put(member, view);
                        row += n;
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            for (NDArray a : made) {
                a.close();
            }
            stacked.clear();
            throw e;
        }
        // Model order, as setWeights(Map) installs them.
        Map<String, NDArray> ordered = new LinkedHashMap<>();
        for (String name : shapes.keySet()) {
            ordered.put(name, values.get(name));
        }
        return ordered;
    }

    private static NDArray own(NDArray array, List<NDArray> made) {
        NDScope.unregister(array);
        made.add(array);
        return array;
    }
}
