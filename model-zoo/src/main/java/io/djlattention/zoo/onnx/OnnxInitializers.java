/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.onnx;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.WireFormat;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The graph nodes and initializers (stored weights) of an ONNX model file, read straight from its
 * protobuf encoding with {@link CodedInputStream}: no generated classes and no ONNX Runtime.
 *
 * <p>Only the fields needed to take weights out of an exported model are read:
 *
 * <ul>
 *   <li>{@code ModelProto}: {@code graph} (7);
 *   <li>{@code GraphProto}: {@code node} (1), {@code initializer} (5);
 *   <li>{@code NodeProto}: {@code input} (1), {@code output} (2), {@code name} (3), {@code op_type}
 *       (4);
 *   <li>{@code TensorProto}: {@code dims} (1), {@code data_type} (2), {@code segment} (3, refused),
 *       {@code float_data} (4, packed or not), {@code name} (8), {@code raw_data} (9), {@code
 *       external_data} (13) and {@code data_location} (14) (external data is refused).
 * </ul>
 *
 * Every other field is skipped. The file is memory-mapped, so a {@code raw_data} tensor is a view
 * of the file ({@link Tensor#floats()}) and its bytes reach the Java heap at most once, when they
 * are copied into an {@link NDArray}. Only FLOAT (ONNX data type 1) tensors give data; other types
 * are listed with their type and refused, naming the tensor, when their data is asked for. Files
 * of 2 GiB or more (which need external data anyway) are refused.
 */
public final class OnnxInitializers {

    /** ONNX {@code TensorProto.DataType.FLOAT}. */
    public static final int FLOAT = 1;

    private static final int MODEL_GRAPH = 7;
    private static final int GRAPH_NODE = 1;
    private static final int GRAPH_INITIALIZER = 5;
    private static final int NODE_INPUT = 1;
    private static final int NODE_OUTPUT = 2;
    private static final int NODE_NAME = 3;
    private static final int NODE_OP_TYPE = 4;
    private static final int TENSOR_DIMS = 1;
    private static final int TENSOR_DATA_TYPE = 2;
    private static final int TENSOR_SEGMENT = 3;
    private static final int TENSOR_FLOAT_DATA = 4;
    private static final int TENSOR_NAME = 8;
    private static final int TENSOR_RAW_DATA = 9;
    private static final int TENSOR_EXTERNAL_DATA = 13;
    private static final int TENSOR_DATA_LOCATION = 14;

    private final Path file;
    private final List<Node> nodes;
    private final Map<String, Tensor> initializers;

    private OnnxInitializers(Path file, List<Node> nodes, Map<String, Tensor> initializers) {
        this.file = file;
        this.nodes = Collections.unmodifiableList(nodes);
        this.initializers = Collections.unmodifiableMap(initializers);
    }

    /**
     * Reads the nodes and initializers of an ONNX model file.
     *
     * @param file the {@code .onnx} file
     * @return its nodes (graph order) and initializers (file order, by name)
     * @throws IOException if the file cannot be read, is not a well-formed ONNX model (the message
     *     names the file and what is malformed), or keeps a tensor's data outside the file
     */
    public static OnnxInitializers read(Path file) throws IOException {
        Objects.requireNonNull(file, "file");
        MappedByteBuffer map;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size >= Integer.MAX_VALUE) {
                throw new IOException(
                        file + ": " + size
                                + " bytes; ONNX files of 2 GiB or more are not supported");
            }
            // The mapping outlives the channel; tensors are views of it.
            map = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
        }
        List<Node> nodes = new ArrayList<>();
        Map<String, Tensor> initializers = new LinkedHashMap<>();
        boolean sawGraph = false;
        try {
            CodedInputStream in = CodedInputStream.newInstance(map);
            for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
                if (WireFormat.getTagFieldNumber(tag) == MODEL_GRAPH
                        && WireFormat.getTagWireType(tag) == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                    if (sawGraph) {
                        throw new IOException(file + ": malformed ONNX model: two graphs");
                    }
                    sawGraph = true;
                    int limit = pushMessage(in, file, "ModelProto.graph");
                    readGraph(in, map, file, nodes, initializers);
                    in.popLimit(limit);
                } else if (!in.skipField(tag)) {
                    break; // end-group tag at top level: protobuf's own end of message
                }
            }
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
            throw new IOException(
                    file + ": malformed ONNX model (truncated or not a protobuf): "
                            + e.getMessage(),
                    e);
        }
        if (!sawGraph) {
            throw new IOException(file + ": malformed ONNX model: no graph (ModelProto field 7)");
        }
        return new OnnxInitializers(file, nodes, initializers);
    }

    /**
     * Returns the file these were read from.
     *
     * @return the file
     */
    public Path getFile() {
        return file;
    }

    /**
     * Returns the graph's nodes in file (topological) order.
     *
     * @return the nodes, unmodifiable
     */
    public List<Node> getNodes() {
        return nodes;
    }

    /**
     * Returns the graph's initializers by name, in file order.
     *
     * @return the initializers, unmodifiable
     */
    public Map<String, Tensor> getInitializers() {
        return initializers;
    }

    /**
     * Returns one initializer.
     *
     * @param name the initializer's name
     * @return the tensor
     * @throws IOException if there is no initializer of that name (the message names the file)
     */
    public Tensor require(String name) throws IOException {
        Tensor t = initializers.get(name);
        if (t == null) {
            throw new IOException(file + ": no initializer named " + name);
        }
        return t;
    }

    private static void readGraph(
            CodedInputStream in,
            ByteBuffer map,
            Path file,
            List<Node> nodes,
            Map<String, Tensor> initializers)
            throws IOException {
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
            int field = WireFormat.getTagFieldNumber(tag);
            boolean delimited =
                    WireFormat.getTagWireType(tag) == WireFormat.WIRETYPE_LENGTH_DELIMITED;
            if (field == GRAPH_NODE && delimited) {
                int limit = pushMessage(in, file, "GraphProto.node");
                nodes.add(readNode(in));
                in.popLimit(limit);
            } else if (field == GRAPH_INITIALIZER && delimited) {
                int limit = pushMessage(in, file, "GraphProto.initializer");
                Tensor t = readTensor(in, map, file);
                in.popLimit(limit);
                if (initializers.putIfAbsent(t.getName(), t) != null) {
                    throw new IOException(
                            file + ": malformed ONNX model: two initializers named " + t.getName());
                }
            } else {
                in.skipField(tag);
            }
        }
    }

    private static Node readNode(CodedInputStream in) throws IOException {
        List<String> inputs = new ArrayList<>();
        List<String> outputs = new ArrayList<>();
        String name = "";
        String opType = "";
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
            boolean delimited =
                    WireFormat.getTagWireType(tag) == WireFormat.WIRETYPE_LENGTH_DELIMITED;
            switch (delimited ? WireFormat.getTagFieldNumber(tag) : -1) {
                case NODE_INPUT:
                    inputs.add(in.readString());
                    break;
                case NODE_OUTPUT:
                    outputs.add(in.readString());
                    break;
                case NODE_NAME:
                    name = in.readString();
                    break;
                case NODE_OP_TYPE:
                    opType = in.readString();
                    break;
                default:
                    in.skipField(tag);
            }
        }
        return new Node(name, opType, List.copyOf(inputs), List.copyOf(outputs));
    }

    private static Tensor readTensor(CodedInputStream in, ByteBuffer map, Path file)
            throws IOException {
        List<Long> dims = new ArrayList<>();
        int dataType = 0;
        String name = null;
        int rawOffset = -1;
        int rawLength = 0;
        float[] floatData = null;
        int floatCount = 0;
        boolean external = false;
        boolean segmented = false;
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
            int field = WireFormat.getTagFieldNumber(tag);
            int wire = WireFormat.getTagWireType(tag);
            if (field == TENSOR_DIMS && wire == WireFormat.WIRETYPE_VARINT) {
                dims.add(in.readInt64());
            } else if (field == TENSOR_DIMS && wire == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                int limit = pushMessage(in, file, "TensorProto.dims");
                while (in.getBytesUntilLimit() > 0) {
                    dims.add(in.readInt64());
                }
                in.popLimit(limit);
            } else if (field == TENSOR_DATA_TYPE && wire == WireFormat.WIRETYPE_VARINT) {
                dataType = in.readInt32();
            } else if (field == TENSOR_SEGMENT) {
                segmented = true;
                in.skipField(tag);
            } else if (field == TENSOR_FLOAT_DATA && wire == WireFormat.WIRETYPE_FIXED32) {
                floatData = grow(floatData, floatCount + 1);
                floatData[floatCount++] = in.readFloat();
            } else if (field == TENSOR_FLOAT_DATA && wire == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                int length = in.readRawVarint32();
                if (length < 0 || length % Float.BYTES != 0) {
                    throw new IOException(
                            file + ": malformed ONNX model: packed float_data of " + length
                                    + " bytes" + (name == null ? "" : " in tensor " + name));
                }
                int limit = in.pushLimit(length);
                floatData = grow(floatData, floatCount + length / Float.BYTES);
                while (in.getBytesUntilLimit() > 0) {
                    floatData[floatCount++] = in.readFloat();
                }
                in.popLimit(limit);
            } else if (field == TENSOR_NAME && wire == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                name = in.readString();
            } else if (field == TENSOR_RAW_DATA && wire == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                rawLength = in.readRawVarint32();
                if (rawLength < 0) {
                    throw new IOException(
                            file + ": malformed ONNX model: negative raw_data length");
                }
                rawOffset = in.getTotalBytesRead();
                in.skipRawBytes(rawLength); // throws if the file ends inside the data
            } else if (field == TENSOR_EXTERNAL_DATA) {
                external = true;
                in.skipField(tag);
            } else if (field == TENSOR_DATA_LOCATION && wire == WireFormat.WIRETYPE_VARINT) {
                external |= in.readEnum() == 1; // DataLocation.EXTERNAL
            } else {
                in.skipField(tag);
            }
        }
        if (name == null || name.isEmpty()) {
            throw new IOException(file + ": malformed ONNX model: an initializer without a name");
        }
        if (external) {
            throw new IOException(
                    file + ": initializer " + name + " keeps its data in an external file;"
                            + " external data is not supported");
        }
        if (segmented) {
            throw new IOException(
                    file + ": initializer " + name + " is a segment; segmented tensors are not"
                            + " supported");
        }
        long[] shape = new long[dims.size()];
        long count = 1;
        for (int i = 0; i < shape.length; ++i) {
            shape[i] = dims.get(i);
            if (shape[i] < 0) {
                throw new IOException(
                        file + ": malformed ONNX model: initializer " + name + " has dims "
                                + dims);
            }
            count = Math.multiplyExact(count, shape[i]);
        }
        FloatBuffer data = null;
        if (dataType == FLOAT) {
            if (rawOffset >= 0 && floatData != null) {
                throw new IOException(
                        file + ": malformed ONNX model: initializer " + name
                                + " has both raw_data and float_data");
            }
            long got = rawOffset >= 0 ? rawLength : (long) floatCount * Float.BYTES;
            if (got != count * Float.BYTES) {
                throw new IOException(
                        file + ": malformed ONNX model: initializer " + name + " of dims " + dims
                                + " needs " + count * Float.BYTES + " bytes of FLOAT data, got "
                                + got);
            }
            if (rawOffset >= 0) {
                ByteBuffer bytes = map.duplicate();
                bytes.position(rawOffset).limit(rawOffset + rawLength);
                data = bytes.slice().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
            } else {
                float[] values = floatData == null ? new float[0] : floatData;
                data = FloatBuffer.wrap(values, 0, floatCount);
            }
        }
        return new Tensor(file, name, shape, dataType, data);
    }

    private static int pushMessage(CodedInputStream in, Path file, String what)
            throws IOException {
        int length = in.readRawVarint32();
        if (length < 0) {
            throw new IOException(file + ": malformed ONNX model: negative length of " + what);
        }
        if (length > in.getBytesUntilLimit()) {
            throw new IOException(
                    file + ": malformed ONNX model (truncated?): " + what + " of " + length
                            + " bytes runs past the end of its enclosing message ("
                            + in.getBytesUntilLimit() + " bytes left)");
        }
        return in.pushLimit(length);
    }

    private static float[] grow(float[] data, int needed) {
        if (data == null) {
            return new float[Math.max(needed, 16)];
        }
        if (needed <= data.length) {
            return data;
        }
        return Arrays.copyOf(data, Math.max(needed, 2 * data.length));
    }

    /** A graph node: its name, operator and the names of its inputs and outputs. */
    public static final class Node {

        private final String name;
        private final String opType;
        private final List<String> inputs;
        private final List<String> outputs;

        Node(String name, String opType, List<String> inputs, List<String> outputs) {
            this.name = name;
            this.opType = opType;
            this.inputs = inputs;
            this.outputs = outputs;
        }

        /**
         * Returns the node's name (for example {@code
         * /encoder/layer.0/attention/self/query/MatMul}).
         *
         * @return the name; empty if the file gives none
         */
        public String getName() {
            return name;
        }

        /**
         * Returns the operator type (for example {@code MatMul}).
         *
         * @return the operator type
         */
        public String getOpType() {
            return opType;
        }

        /**
         * Returns the names of the node's inputs (values or initializers), in order.
         *
         * @return the inputs, unmodifiable
         */
        public List<String> getInputs() {
            return inputs;
        }

        /**
         * Returns the names of the node's outputs, in order.
         *
         * @return the outputs, unmodifiable
         */
        public List<String> getOutputs() {
            return outputs;
        }

        /** {@inheritDoc} */
        @Override
        public String toString() {
            return opType + " " + name + " " + inputs + " -> " + outputs;
        }
    }

    /** An initializer: name, dims, ONNX data type and, for FLOAT tensors, the data. */
    public static final class Tensor {

        private final Path file;
        private final String name;
        private final long[] dims;
        private final int dataType;
        private final FloatBuffer data;

        Tensor(Path file, String name, long[] dims, int dataType, FloatBuffer data) {
            this.file = file;
            this.name = name;
            this.dims = dims;
            this.dataType = dataType;
            this.data = data;
        }

        /**
         * Returns the tensor's name.
         *
         * @return the name
         */
        public String getName() {
            return name;
        }

        /**
         * Returns the tensor's shape (row-major, as stored).
         *
         * @return the shape
         */
        public Shape getShape() {
            return new Shape(dims);
        }

        /**
         * Returns the ONNX data type ({@code TensorProto.DataType}: 1 FLOAT, 7 INT64, ...).
         *
         * @return the data type number
         */
        public int getDataType() {
            return dataType;
        }

        /**
         * Returns the data of a FLOAT tensor: a read-only view of the mapped file (or of the
         * decoded {@code float_data}), row-major, little-endian.
         *
         * @return a fresh read-only buffer over the data, positioned at 0
         * @throws IOException if the tensor is not FLOAT (the message names the tensor and type)
         */
        public FloatBuffer floats() throws IOException {
            if (data == null) {
                throw new IOException(
                        file + ": initializer " + name + " has ONNX data type " + dataType
                                + "; only FLOAT (1) is supported");
            }
            return data.asReadOnlyBuffer();
        }

        /**
         * Copies a FLOAT tensor into a float32 {@link NDArray} of its shape.
         *
         * @param manager the manager the array attaches to
         * @return the array
         * @throws IOException if the tensor is not FLOAT
         */
        public NDArray toNDArray(NDManager manager) throws IOException {
            return manager.create(floats(), getShape());
        }

        /**
         * Copies a FLOAT matrix stored {@code [rows, cols]} into a float32 {@link NDArray} of
         * shape {@code [cols, rows]} (contiguous): ONNX MatMul weights are stored {@code [in,
         * out]}, DJL and Hugging Face linear weights are {@code [out, in]}.
         *
         * @param manager the manager the array attaches to
         * @return the transposed array
         * @throws IOException if the tensor is not a FLOAT matrix
         */
        public NDArray toTransposedNDArray(NDManager manager) throws IOException {
            FloatBuffer src = floats();
            if (dims.length != 2) {
                throw new IOException(
                        file + ": initializer " + name + " has dims " + Arrays.toString(dims)
                                + "; a matrix (2 dims) was expected");
            }
            int rows = Math.toIntExact(dims[0]);
            int cols = Math.toIntExact(dims[1]);
            float[] out = new float[Math.multiplyExact(rows, cols)];
            float[] row = new float[cols];
            for (int r = 0; r < rows; ++r) {
                src.get(row);
                for (int c = 0; c < cols; ++c) {
                    out[c * rows + r] = row[c];
                }
            }
            return manager.create(out, new Shape(cols, rows));
        }

        /** {@inheritDoc} */
        @Override
        public String toString() {
            return name + " " + Arrays.toString(dims) + " type " + dataType;
        }
    }
}
