/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.it.TestDevice;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.hf.SafetensorsFile;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A GPT-2-style decoder saved as a Hugging Face style {@code .safetensors} file (names with the
 * {@code transformer.} prefix, the {@code attn.bias} mask buffers GPT-2 checkpoints carry, a
 * metadata entry) loads back into a fresh decoder that gives bit-identical logits; F16 and BF16
 * tensors decode to the right values.
 */
class SafetensorsGpt2Test {

    @TempDir Path dir;

    @Test
    void gpt2RoundTripGivesIdenticalLogits() throws IOException {
        DecoderConfig config =
                DecoderConfig.builder()
                        .setArchitecture(DecoderConfig.Architecture.GPT2)
                        .setVocabSize(100)
                        .setHiddenSize(64)
                        .setIntermediateSize(256)
                        .setNumLayers(2)
                        .setNumHeads(1)
                        .optMaxPositions(32)
                        .build();
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            Decoder original = new Decoder(config);
            original.initializeRandom(manager, 11, 0.1f);
            Map<String, Tensor> file = new LinkedHashMap<>();
            for (String name : Decoder.parameterShapes(config).keySet()) {
                NDArray w = original.weight(name);
                file.put("transformer." + name, Tensor.f32(w.getShape(), w.toFloatArray()));
                if (name.endsWith("ln_1.weight")) {
                    String layer = name.substring(0, name.length() - "ln_1.weight".length());
                    file.put(
                            "transformer." + layer + "attn.bias",
                            Tensor.f32(new Shape(1, 1, 4, 4), new float[16]));
                }
            }
            Path path = dir.resolve("model.safetensors");
            write(path, file);
            Decoder loaded = new Decoder(config);
            loaded.setWeights(manager, SafetensorsFile.readAll(path, manager));
            assertArrayEquals(logits(original, manager), logits(loaded, manager));
        }
    }

    @Test
    void halfPrecisionTensorsDecode() throws IOException {
        Map<String, Tensor> file = new LinkedHashMap<>();
        // 1.5 = 0x3E00 in float16 and 0x3FC0 in bfloat16; -2 = 0xC000 and 0xC000.
        file.put("h", new Tensor("F16", new Shape(2), new short[] {0x3E00, (short) 0xC000}));
        file.put("b", new Tensor("BF16", new Shape(2), new short[] {0x3FC0, (short) 0xC000}));
        Path path = dir.resolve("half.safetensors");
        write(path, file);
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            Map<String, NDArray> read = SafetensorsFile.readAll(path, manager);
            assertEquals(DataType.FLOAT16, read.get("h").getDataType());
            assertArrayEquals(
                    new float[] {1.5f, -2f},
                    read.get("h").toType(DataType.FLOAT32, false).toFloatArray());
            assertEquals(DataType.FLOAT32, read.get("b").getDataType());
            assertArrayEquals(new float[] {1.5f, -2f}, read.get("b").toFloatArray());
        }
    }

    @Test
    void malformedFilesAreRejected() throws IOException {
        Path path = dir.resolve("bad.safetensors");
        Files.write(path, new byte[] {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'});
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            IOException e =
                    assertThrows(IOException.class, () -> SafetensorsFile.readAll(path, manager));
            assertTrue(e.getMessage().contains("bad safetensors header length"), e.getMessage());
        }
    }

    private static float[] logits(Decoder decoder, NDManager parent) {
        try (NDManager m = parent.newSubManager()) {
            long[] ids = {3, 14, 15, 92, 65};
            NDList out =
                    decoder.forward(
                            null,
                            new NDList(
                                    m.create(ids, new Shape(1, 5)),
                                    m.arange(0, 5, 1, DataType.INT64).reshape(1, 5),
                                    m.ones(new Shape(1, 5), DataType.INT64)),
                            false);
            return out.get(0).toFloatArray();
        }
    }

    /** One tensor to write: dtype, shape and little-endian bytes. */
    private static final class Tensor {
        final String dtype;
        final Shape shape;
        final byte[] bytes;

        Tensor(String dtype, Shape shape, short[] values) {
            this.dtype = dtype;
            this.shape = shape;
            ByteBuffer b = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
            for (short v : values) {
                b.putShort(v);
            }
            this.bytes = b.array();
        }

        Tensor(Shape shape, float[] values) {
            this.dtype = "F32";
            this.shape = shape;
            ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
            for (float v : values) {
                b.putFloat(v);
            }
            this.bytes = b.array();
        }

        static Tensor f32(Shape shape, float[] values) {
            return new Tensor(shape, values);
        }
    }

    private static void write(Path path, Map<String, Tensor> tensors) throws IOException {
        StringBuilder header = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
            Tensor t = e.getValue();
            header.append(",\"")
                    .append(e.getKey())
                    .append("\":{\"dtype\":\"")
                    .append(t.dtype)
                    .append("\",\"shape\":[");
            long[] dims = t.shape.getShape();
            for (int i = 0; i < dims.length; ++i) {
                header.append(i == 0 ? "" : ",").append(dims[i]);
            }
            header.append("],\"data_offsets\":[")
                    .append(data.size())
                    .append(',')
                    .append(data.size() + t.bytes.length)
                    .append("]}");
            data.write(t.bytes);
        }
        header.append('}');
        byte[] h = header.toString().getBytes(StandardCharsets.UTF_8);
        ByteBuffer length = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        length.putLong(h.length);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(length.array());
        out.write(h);
        out.write(data.toByteArray());
        Files.write(path, out.toByteArray());
    }
}
