/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads the tensors of a {@code .safetensors} file (Hugging Face's format: an 8-byte little-endian
 * header length, a JSON header mapping each name to its {@code dtype}, {@code shape} and {@code
 * data_offsets} within the data section, then the raw little-endian data).
 *
 * <p>F32 and F16 tensors keep their type; BF16 becomes float32 (DJL 0.35.1 cannot hold bfloat16);
 * I64 and I32 are read as such. A {@link Decoder} takes the result through {@link
 * Decoder#setWeights}, so a Hugging Face GPT-2 {@code model.safetensors} loads into a GPT-2-style
 * decoder of the same sizes.
 */
public final class SafetensorsReader {

    private SafetensorsReader() {}

    /**
     * Reads every tensor of a file.
     *
     * @param file the file
     * @param manager the manager the arrays attach to
     * @return the tensors by name, in file order
     * @throws IOException if the file cannot be read or is malformed
     */
    public static Map<String, NDArray> read(Path file, NDManager manager) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            ByteBuffer lengthBytes = readFully(ch, 0, 8, file);
            long headerLength = lengthBytes.order(ByteOrder.LITTLE_ENDIAN).getLong();
            if (headerLength <= 0 || headerLength > Math.min(ch.size() - 8, 100_000_000)) {
                throw new IOException(file + ": bad safetensors header length " + headerLength);
            }
            ByteBuffer headerBytes = readFully(ch, 8, (int) headerLength, file);
            JsonObject header =
                    JsonParser.parseString(StandardCharsets.UTF_8.decode(headerBytes).toString())
                            .getAsJsonObject();
            long dataStart = 8 + headerLength;
            Map<String, NDArray> tensors = new LinkedHashMap<>();
            for (Map.Entry<String, JsonElement> e : header.entrySet()) {
                if ("__metadata__".equals(e.getKey())) {
                    continue;
                }
                JsonObject info = e.getValue().getAsJsonObject();
                String dtype = info.get("dtype").getAsString();
                JsonArray dims = info.getAsJsonArray("shape");
                long[] shape = new long[dims.size()];
                for (int i = 0; i < shape.length; ++i) {
                    shape[i] = dims.get(i).getAsLong();
                }
                JsonArray offsets = info.getAsJsonArray("data_offsets");
                long begin = offsets.get(0).getAsLong();
                long end = offsets.get(1).getAsLong();
                Shape s = new Shape(shape);
                long bytes = end - begin;
                if (begin < 0
                        || end < begin
                        || dataStart + end > ch.size()
                        || bytes != s.size() * elementSize(dtype, e.getKey(), file)) {
                    throw new IOException(
                            file + ": tensor " + e.getKey() + " has bad data_offsets " + offsets);
                }
                ByteBuffer data = readFully(ch, dataStart + begin, Math.toIntExact(bytes), file);
                data.order(ByteOrder.LITTLE_ENDIAN);
                tensors.put(e.getKey(), toArray(manager, data, s, dtype));
            }
            return tensors;
        }
    }

    private static int elementSize(String dtype, String name, Path file) throws IOException {
        switch (dtype) {
            case "F32":
            case "I32":
                return 4;
            case "F16":
            case "BF16":
                return 2;
            case "I64":
                return 8;
            default:
                throw new IOException(
                        file + ": tensor " + name + " has unsupported dtype " + dtype);
        }
    }

    private static NDArray toArray(NDManager manager, ByteBuffer data, Shape shape, String dtype) {
        switch (dtype) {
            case "F32":
                float[] f = new float[Math.toIntExact(shape.size())];
                data.asFloatBuffer().get(f);
                return manager.create(f, shape);
            case "BF16":
                float[] widened = new float[Math.toIntExact(shape.size())];
                for (int i = 0; i < widened.length; ++i) {
                    widened[i] = Float.intBitsToFloat((data.getShort() & 0xffff) << 16);
                }
                return manager.create(widened, shape);
            case "F16":
                ByteBuffer direct = ByteBuffer.allocateDirect(data.remaining());
                direct.order(ByteOrder.nativeOrder());
                while (data.hasRemaining()) {
                    direct.putShort(data.getShort());
                }
                direct.flip();
                return manager.create(direct, shape, DataType.FLOAT16).duplicate();
            case "I32":
                int[] i32 = new int[Math.toIntExact(shape.size())];
                data.asIntBuffer().get(i32);
                return manager.create(i32, shape);
            default: // I64
                long[] i64 = new long[Math.toIntExact(shape.size())];
                data.asLongBuffer().get(i64);
                return manager.create(i64, shape);
        }
    }

    private static ByteBuffer readFully(FileChannel ch, long position, int length, Path file)
            throws IOException {
        ByteBuffer b = ByteBuffer.allocate(length);
        while (b.hasRemaining()) {
            if (ch.read(b, position + b.position()) < 0) {
                throw new IOException(file + ": truncated safetensors file");
            }
        }
        b.flip();
        return b;
    }
}
