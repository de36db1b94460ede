/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;

import com.google.protobuf.CodedOutputStream;

import io.djlattention.zoo.encoder.MiniLm;
import io.djlattention.zoo.onnx.OnnxInitializers;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

/**
 * The ONNX protobuf reader on small files written here with protobuf's own encoder (raw, packed
 * and unpacked float data, non-FLOAT and external tensors, truncation), and on a truncated copy of
 * the real MiniLM file.
 */
class OnnxInitializersTest {

    @TempDir Path tmp;

    private final Random random = new Random(20261124L);

    @Test
    void readsNodesAndFloatInitializersInEveryEncoding() throws IOException {
        float[] raw = randomFloats(3 * 5);
        float[] packed = randomFloats(7);
        float[] unpacked = randomFloats(4);
        byte[] graph =
                concat(
                        field(1, node("/enc/layer.0/q/MatMul", "MatMul", List.of("x", "w"), "y")),
                        field(1, node("", "Relu", List.of("y"), "z")),
                        field(5, tensor("w", new long[] {3, 5}, 1, raw, Encoding.RAW, false)),
                        field(5, tensor("p", new long[] {7}, 1, packed, Encoding.PACKED, false)),
                        field(5, tensor("u", new long[] {2, 2}, 1, unpacked, Encoding.UNPACKED,
                                false)),
                        field(5, tensor("ids", new long[] {2}, 7, null, Encoding.RAW, false)),
                        field(5, tensor("s", new long[0], 1, new float[] {2.5f}, Encoding.RAW,
                                false)));
        Path file = write("model.onnx", model(graph));

        OnnxInitializers onnx = OnnxInitializers.read(file);

        assertEquals(2, onnx.getNodes().size());
        OnnxInitializers.Node matMul = onnx.getNodes().get(0);
        assertEquals("/enc/layer.0/q/MatMul", matMul.getName());
        assertEquals("MatMul", matMul.getOpType());
        assertEquals(List.of("x", "w"), matMul.getInputs());
        assertEquals(List.of("y"), matMul.getOutputs());
        assertEquals("Relu", onnx.getNodes().get(1).getOpType());
        assertEquals(
                List.of("w", "p", "u", "ids", "s"), List.copyOf(onnx.getInitializers().keySet()));
        assertEquals(new Shape(3, 5), onnx.require("w").getShape());
        assertArrayEquals(raw, toArray(onnx.require("w").floats()));
        assertArrayEquals(packed, toArray(onnx.require("p").floats()));
        assertArrayEquals(unpacked, toArray(onnx.require("u").floats()));
        assertArrayEquals(new float[] {2.5f}, toArray(onnx.require("s").floats()));
        assertEquals(new Shape(), onnx.require("s").getShape());
        try (NDManager manager = NDManager.newBaseManager()) {
            NDArray w = onnx.require("w").toNDArray(manager);
            assertEquals(new Shape(3, 5), w.getShape());
            assertArrayEquals(raw, w.toFloatArray());
            NDArray wt = onnx.require("w").toTransposedNDArray(manager);
            assertEquals(new Shape(5, 3), wt.getShape());
            float[] expected = new float[raw.length];
            for (int r = 0; r < 3; ++r) {
                for (int c = 0; c < 5; ++c) {
                    expected[c * 3 + r] = raw[r * 5 + c];
                }
            }
            assertArrayEquals(expected, wt.toFloatArray());
        }
        // An INT64 tensor is listed and refused, by name, when its data is asked for.
        assertEquals(7, onnx.require("ids").getDataType());
        IOException e = assertThrows(IOException.class, () -> onnx.require("ids").floats());
        assertTrue(
                e.getMessage().contains("ids") && e.getMessage().contains("FLOAT"), e.getMessage());
        IOException missing = assertThrows(IOException.class, () -> onnx.require("nope"));
        assertTrue(missing.getMessage().contains(file.toString()), missing.getMessage());
    }

    @Test
    void refusesExternalData() throws IOException {
        byte[] graph = field(5, tensor("big", new long[] {4}, 1, null, Encoding.RAW, true));
        Path file = write("external.onnx", model(graph));
        IOException e = assertThrows(IOException.class, () -> OnnxInitializers.read(file));
        assertTrue(e.getMessage().contains("big") && e.getMessage().contains("external"),
                e.getMessage());
        assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
    }

    @Test
    void refusesDataOfTheWrongSize() throws IOException {
        byte[] t = tensor("w", new long[] {2, 3}, 1, randomFloats(5), Encoding.RAW, false);
        Path file = write("short.onnx", model(field(5, t)));
        IOException e = assertThrows(IOException.class, () -> OnnxInitializers.read(file));
        assertTrue(e.getMessage().contains("w") && e.getMessage().contains("24 bytes"),
                e.getMessage());
    }

    @Test
    void truncatedFilesGiveAClearIOException() throws IOException {
        byte[] graph =
                concat(
                        field(1, node("n", "MatMul", List.of("x", "w"), "y")),
                        field(5, tensor("w", new long[] {64}, 1, randomFloats(64), Encoding.RAW,
                                false)));
        byte[] full = model(graph);
        // Every cut inside the graph: the reader names the file and never returns a partial model.
        for (int cut = 3; cut < full.length; cut += 7) {
            byte[] part = java.util.Arrays.copyOf(full, cut);
            Path file = write("cut" + cut + ".onnx", part);
            IOException e = assertThrows(IOException.class, () -> OnnxInitializers.read(file));
            assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
            assertTrue(e.getMessage().contains("malformed"), e.getMessage());
        }
        Path empty = write("empty.onnx", new byte[0]);
        IOException e = assertThrows(IOException.class, () -> OnnxInitializers.read(empty));
        assertTrue(e.getMessage().contains("no graph"), e.getMessage());
        byte[] notAModel = "not a model\n".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        Path text = write("text.onnx", notAModel);
        assertThrows(IOException.class, () -> OnnxInitializers.read(text));
    }

    @Test
    void truncatedMiniLmGivesAClearIOException() throws IOException {
        Path part = tmp.resolve("minilm-truncated.onnx");
        try (InputStream in = Files.newInputStream(MiniLm.onnxFile())) {
            Files.write(part, in.readNBytes(20_000_000)); // inside the word embeddings
        }
        IOException e = assertThrows(IOException.class, () -> OnnxInitializers.read(part));
        assertTrue(e.getMessage().contains(part.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("truncated"), e.getMessage());
    }

    @Test
    void missingFileGivesAnIOException() {
        assertThrows(IOException.class, () -> OnnxInitializers.read(tmp.resolve("absent.onnx")));
    }

    // ---- a tiny ONNX writer (independent of the reader: protobuf's CodedOutputStream) ----

    private enum Encoding {
        RAW,
        PACKED,
        UNPACKED
    }

    private static byte[] model(byte[] graph) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        out.writeInt64(1, 8); // ir_version
        out.writeString(2, "djl-attention-test"); // producer_name
        out.writeString(10, "a doc string"); // doc_string: skipped
        out.writeByteArray(7, graph); // last, so that every cut of the file cuts the graph
        out.flush();
        return bytes.toByteArray();
    }

    private static byte[] node(String name, String op, List<String> inputs, String output)
            throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        for (String input : inputs) {
            out.writeString(1, input);
        }
        out.writeString(2, output);
        if (!name.isEmpty()) {
            out.writeString(3, name);
        }
        out.writeString(4, op);
        out.writeString(7, "ignored doc"); // doc_string
        out.flush();
        return bytes.toByteArray();
    }

    private static byte[] tensor(
            String name, long[] dims, int type, float[] data, Encoding encoding, boolean external)
            throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        // dims unpacked for matrices, packed otherwise: the reader takes both.
        if (dims.length == 2) {
            for (long d : dims) {
                out.writeInt64(1, d);
            }
        } else if (dims.length > 0) {
            ByteArrayOutputStream packedDims = new ByteArrayOutputStream();
            CodedOutputStream p = CodedOutputStream.newInstance(packedDims);
            for (long d : dims) {
                p.writeInt64NoTag(d);
            }
            p.flush();
            out.writeByteArray(1, packedDims.toByteArray());
        }
        out.writeInt32(2, type);
        out.writeString(8, name);
        if (external) {
            ByteArrayOutputStream entry = new ByteArrayOutputStream();
            CodedOutputStream e = CodedOutputStream.newInstance(entry);
            e.writeString(1, "location");
            e.writeString(2, "weights.bin");
            e.flush();
            out.writeByteArray(13, entry.toByteArray());
            out.writeEnum(14, 1);
        } else if (type != 1) {
            ByteBuffer b = ByteBuffer.allocate(8 * 2).order(ByteOrder.LITTLE_ENDIAN);
            b.putLong(3).putLong(4);
            out.writeByteArray(9, b.array());
        } else if (encoding == Encoding.RAW) {
            ByteBuffer b = ByteBuffer.allocate(4 * data.length).order(ByteOrder.LITTLE_ENDIAN);
            b.asFloatBuffer().put(data);
            out.writeByteArray(9, b.array());
        } else if (encoding == Encoding.PACKED) {
            out.writeTag(4, com.google.protobuf.WireFormat.WIRETYPE_LENGTH_DELIMITED);
            out.writeUInt32NoTag(4 * data.length);
            for (float f : data) {
                out.writeFloatNoTag(f);
            }
        } else {
            for (float f : data) {
                out.writeFloat(4, f);
            }
        }
        out.flush();
        return bytes.toByteArray();
    }

    private static byte[] field(int number, byte[] message) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        out.writeByteArray(number, message);
        out.flush();
        return bytes.toByteArray();
    }

    private static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            bytes.writeBytes(p);
        }
        return bytes.toByteArray();
    }

    private Path write(String name, byte[] bytes) throws IOException {
        Path file = tmp.resolve(name);
        Files.write(file, bytes);
        return file;
    }

    private float[] randomFloats(int n) {
        float[] f = new float[n];
        for (int i = 0; i < n; ++i) {
            f[i] = (float) random.nextGaussian();
        }
        return f;
    }

    private static float[] toArray(FloatBuffer buffer) {
        float[] out = new float[buffer.remaining()];
        buffer.get(out);
        return out;
    }
}
