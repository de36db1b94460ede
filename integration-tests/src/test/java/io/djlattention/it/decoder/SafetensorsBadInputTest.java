/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.HfDecoderLoader;
import io.djlattention.zoo.hf.CheckpointWeights;
import io.djlattention.zoo.hf.HfCheckpoint;
import io.djlattention.zoo.hf.SafetensorsFile;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;

/**
 * Malformed safetensors files and checkpoints fail with an {@link IOException} (or, from the
 * decoder loader, a {@link MalformedModelException}) naming the file and the tensor: on opening
 * for what the header gets wrong, on reading for a tensor that is absent or of a dtype that cannot
 * be converted.
 */
class SafetensorsBadInputTest {

    @TempDir Path dir;

    @ParameterizedTest
    @CsvSource(
            delimiter = '|',
            value = {
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}} | 8 | bad data_offsets",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}} | 8 | bad data_offsets",
                "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,2]}} | 8 | bad data_offsets",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}} | 8 | negative dimension",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}} | 8 | malformed header entry",
                "{\"a\": | 8 | malformed safetensors header",
                "[1, 2] | 8 | malformed safetensors header"
            })
    void malformedHeadersFailOnOpeningNamingTheFile(String header, int dataBytes, String message)
            throws IOException {
        Path file = write("bad.safetensors", header, new byte[dataBytes]);
        IOException e = assertThrows(IOException.class, () -> SafetensorsFile.open(file));
        assertTrue(e.getMessage().startsWith(file.toString()), e.getMessage());
        assertTrue(e.getMessage().contains(message), e.getMessage());
    }

    @Test
    void absentAndUnsupportedTensorsFailOnReading() throws IOException {
        Path file =
                write(
                        "ok.safetensors",
                        "{\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                                + "\"b\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[8,10]}}",
                        new byte[10]);
        try (SafetensorsFile f = SafetensorsFile.open(file);
                NDManager manager = NDManager.newBaseManager(Device.cpu())) {
            IOException missing =
                    assertThrows(
                            IOException.class, () -> f.read("nope", manager, DataType.FLOAT32));
            assertTrue(
                    missing.getMessage().equals(file + ": missing tensor nope"),
                    missing.getMessage());
            IOException f64 =
                    assertThrows(IOException.class, () -> f.read("d", manager, DataType.FLOAT32));
            assertTrue(
                    f64.getMessage().contains("tensor d has unsupported dtype F64"),
                    f64.getMessage());
        }
    }

    @Test
    void aShardedIndexMustMatchItsShards() throws IOException {
        Files.writeString(dir.resolve("config.json"), "{\"architectures\": [\"GPT2LMHeadModel\"]}");
        write(
                "s1.safetensors",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                new byte[4]);
        Path index = dir.resolve(HfCheckpoint.WEIGHTS_INDEX);
        Files.writeString(
                index, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\"}}");
        HfCheckpoint checkpoint = HfCheckpoint.open(dir);
        IOException lacks = assertThrows(IOException.class, checkpoint::openWeights);
        assertTrue(lacks.getMessage().startsWith(index.toString()), lacks.getMessage());
        assertTrue(lacks.getMessage().contains("tensor b is placed in"), lacks.getMessage());

        Files.writeString(index, "{\"weight_map\": {\"a\": \"s2.safetensors\"}}");
        IOException absent = assertThrows(IOException.class, checkpoint::openWeights);
        assertTrue(
                absent.getMessage().contains("s2.safetensors: shard named by"), absent.getMessage());

        Files.writeString(index, "{\"weight_map\": {\"a\": \"s1.safetensors\"}}");
        try (CheckpointWeights weights = checkpoint.openWeights()) {
            assertTrue(weights.contains("a") && !weights.contains("b"));
        }
    }

    /** A decoder weight stored as integers is refused before anything is read, naming it. */
    @Test
    void aDecoderWeightOfAnotherDtypeIsRefused() throws Exception {
        Files.writeString(
                dir.resolve("config.json"),
                "{\"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 10, \"n_embd\": 8,"
                        + " \"n_layer\": 1, \"n_head\": 2, \"n_positions\": 4}");
        HfCheckpoint checkpoint = HfCheckpoint.open(dir);
        Map<String, Shape> shapes =
                Decoder.parameterShapes(HfDecoderLoader.readConfig(checkpoint, DataType.FLOAT32));
        StringBuilder header = new StringBuilder("{");
        long offset = 0;
        for (Map.Entry<String, Shape> e : shapes.entrySet()) {
            String dtype = e.getKey().equals("wte.weight") ? "I32" : "F32";
            long bytes = e.getValue().size() * 4;
            header.append(header.length() > 1 ? "," : "")
                    .append('"')
                    .append(e.getKey())
                    .append("\":{\"dtype\":\"")
                    .append(dtype)
                    .append("\",\"shape\":")
                    .append(Arrays.toString(e.getValue().getShape()))
                    .append(",\"data_offsets\":[")
                    .append(offset)
                    .append(',')
                    .append(offset + bytes)
                    .append("]}");
            offset += bytes;
        }
        write(HfCheckpoint.WEIGHTS, header.append('}').toString(), new byte[(int) offset]);
        try (NDManager manager = NDManager.newBaseManager(Device.cpu())) {
            MalformedModelException e =
                    assertThrows(
                            MalformedModelException.class,
                            () -> HfDecoderLoader.load(checkpoint, manager, DataType.FLOAT32));
            assertTrue(
                    e.getMessage().contains("tensor wte.weight has dtype I32"), e.getMessage());
            assertTrue(e.getMessage().startsWith(dir.resolve(HfCheckpoint.WEIGHTS).toString()));
        }
    }

    private Path write(String name, String header, byte[] data) throws IOException {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(h.length).array());
        out.write(h);
        out.write(data);
        Path file = dir.resolve(name);
        Files.write(file, out.toByteArray());
        return file;
    }
}
