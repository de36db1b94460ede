/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.it.HfFixtures;
import io.djlattention.zoo.encoder.EncoderModels;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The transformers references of {@code src/test/python/make_bert.py}: the checkpoints {@code
 * bert}, {@code bert-mlm}, {@code bert-fp16}, {@code bert-bf16} and {@code reference.json}
 * (float64, eager attention).
 */
final class BertReference {

    private static JsonObject json;

    private BertReference() {}

    /** The fixture folder. */
    static Path dir() {
        return HfFixtures.dir("bert");
    }

    /** One checkpoint of the fixture. */
    static Path checkpoint(String name) {
        return dir().resolve(name);
    }

    static synchronized JsonObject json() {
        if (json == null) {
            try {
                json =
                        JsonParser.parseString(
                                        Files.readString(
                                                dir().resolve("reference.json"),
                                                StandardCharsets.UTF_8))
                                .getAsJsonObject();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return json;
    }

    static List<String> sentences() {
        List<String> out = new ArrayList<>();
        for (JsonElement e : json().getAsJsonArray("sentences")) {
            out.add(e.getAsString());
        }
        return out;
    }

    static long[] ids(int sentence) {
        return longs(
                json().getAsJsonArray("encodings")
                        .get(sentence)
                        .getAsJsonObject()
                        .getAsJsonArray("ids"));
    }

    static long[] longs(JsonArray a) {
        long[] out = new long[a.size()];
        for (int i = 0; i < out.length; ++i) {
            out[i] = a.get(i).getAsLong();
        }
        return out;
    }

    /** A nested JSON array of numbers, flattened. */
    static double[] doubles(JsonElement e) {
        List<Double> out = new ArrayList<>();
        flatten(e, out);
        double[] d = new double[out.size()];
        for (int i = 0; i < d.length; ++i) {
            d[i] = out.get(i);
        }
        return d;
    }

    private static void flatten(JsonElement e, List<Double> out) {
        if (e.isJsonArray()) {
            for (JsonElement c : e.getAsJsonArray()) {
                flatten(c, out);
            }
        } else {
            out.add(e.getAsDouble());
        }
    }

    /** A nested JSON array of integers as a {@code (rows, cols)} int64 array. */
    static NDArray matrix(NDManager manager, JsonArray rows) {
        int b = rows.size();
        int s = rows.get(0).getAsJsonArray().size();
        long[] flat = new long[b * s];
        for (int i = 0; i < b; ++i) {
            long[] row = longs(rows.get(i).getAsJsonArray());
            System.arraycopy(row, 0, flat, i * s, s);
        }
        return manager.create(flat, new Shape(b, s));
    }

    /** Loads a checkpoint of the fixture through the zoo's encoder loader. */
    static <I, O> ZooModel<I, O> load(
            String name, Class<I> in, Class<O> out, Map<String, String> arguments)
            throws Exception {
        Criteria.Builder<I, O> b =
                Criteria.builder().setTypes(in, out).optEngine("PyTorch");
        for (Map.Entry<String, String> e : arguments.entrySet()) {
            b.optArgument(e.getKey(), e.getValue());
        }
        return EncoderModels.load(name == null ? null : checkpoint(name), b.build());
    }

    static void assertClose(double[] expected, float[] actual, double tolerance, String what) {
        assertEquals(expected.length, actual.length, what + ": length");
        double worst = 0;
        for (int i = 0; i < expected.length; ++i) {
            worst = Math.max(worst, Math.abs(expected[i] - actual[i]));
        }
        assertTrue(worst <= tolerance, what + ": max |diff| " + worst + " > " + tolerance);
    }

    static double cosine(double[] a, float[] b) {
        double dot = 0;
        double na = 0;
        double nb = 0;
        for (int i = 0; i < a.length; ++i) {
            dot += a[i] * b[i];
            na += a[i] * a[i];
            nb += (double) b[i] * b[i];
        }
        return dot / Math.sqrt(na * nb);
    }
}
