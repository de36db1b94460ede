/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.zoo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.it.HfFixtures;
import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.MiniLm;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/**
 * Encoders through DJL's front door: the built-in MiniLM by {@code djl://} URL and by group and
 * artifact against ONNX Runtime running the same ONNX file, and a Hugging Face {@code BertModel}
 * directory by {@code optModelPath} against transformers' float64 embeddings.
 */
class EncoderRoutesTest {

    /** Very different lengths in one padded batch: one word to well over 200 tokens. */
    private static final List<String> SENTENCES =
            List.of(
                    "Hi",
                    "A man is playing a guitar.",
                    "",
                    "The orchestra performed Beethoven's ninth symphony last night in Vienna.",
                    "Quantum computers use qubits; 2 + 2 = 4, and ünïcödé is fine.",
                    "word ".repeat(230).trim());

    private static double cosine(float[] a, float[] b) {
        double dot = 0;
        double na = 0;
        double nb = 0;
        for (int i = 0; i < a.length; ++i) {
            dot += (double) a[i] * b[i];
            na += (double) a[i] * a[i];
            nb += (double) b[i] * b[i];
        }
        return dot / Math.sqrt(na * nb);
    }

    private static float[][] onnxRuntime(List<String> sentences) throws Exception {
        try (HuggingFaceTokenizer tokenizer =
                        HuggingFaceTokenizer.newInstance(
                                MiniLm.tokenizerFile(),
                                Map.of("padding", "false", "truncation", "true", "maxLength", "512"));
                OrtMiniLm ort = OrtMiniLm.create(1)) {
            Encoding[] enc = tokenizer.batchEncode(sentences);
            int len = Arrays.stream(enc).mapToInt(e -> e.getIds().length).max().orElse(1);
            long[][] ids = new long[enc.length][len];
            long[][] mask = new long[enc.length][len];
            for (int b = 0; b < enc.length; ++b) {
                long[] id = enc[b].getIds();
                System.arraycopy(id, 0, ids[b], 0, id.length);
                Arrays.fill(mask[b], 0, id.length, 1);
            }
            assertTrue(len > 200, "the long sentence has " + len + " tokens");
            return ort.embed(ids, mask);
        }
    }

    private static void assertMatchesOnnxRuntime(Criteria.Builder<String, float[]> builder)
            throws Exception {
        float[][] want = onnxRuntime(SENTENCES);
        Criteria<String, float[]> criteria =
                builder.optEngine("PyTorch").optDevice(Device.cpu()).build();
        try (ZooModel<String, float[]> model = criteria.loadModel();
                Predictor<String, float[]> predictor = model.newPredictor()) {
            List<float[]> got = predictor.batchPredict(SENTENCES);
            assertEquals(SENTENCES.size(), got.size());
            for (int i = 0; i < SENTENCES.size(); ++i) {
                assertEquals(384, got.get(i).length);
                double c = cosine(want[i], got.get(i));
                assertTrue(c >= 0.99999, "sentence " + i + ": cosine " + c);
            }
            assertEquals(0, predictor.batchPredict(List.of()).size());
        }
    }

    @Test
    void miniLmByUrlMatchesOnnxRuntime() throws Exception {
        assertMatchesOnnxRuntime(
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls("djl://io.djlattention/all-MiniLM-L6-v2"));
    }

    @Test
    void miniLmByGroupAndArtifactMatchesOnnxRuntime() throws Exception {
        assertMatchesOnnxRuntime(
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optArtifactId("io.djlattention:all-MiniLM-L6-v2"));
    }

    @Test
    void bertDirectoryByPathMatchesTransformers() throws Exception {
        Path root = HfFixtures.dir("bert");
        JsonObject ref =
                JsonParser.parseString(
                                Files.readString(root.resolve("reference.json"), StandardCharsets.UTF_8))
                        .getAsJsonObject();
        List<String> sentences = new ArrayList<>();
        for (var s : ref.getAsJsonArray("sentences")) {
            sentences.add(s.getAsString());
        }
        JsonArray want = ref.getAsJsonArray("embeddings_mean");
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelPath(root.resolve("bert"))
                        .optEngine("PyTorch")
                        .optDevice(Device.cpu())
                        .build();
        try (ZooModel<String, float[]> model = criteria.loadModel();
                Predictor<String, float[]> predictor = model.newPredictor()) {
            List<float[]> got = predictor.batchPredict(sentences);
            for (int i = 0; i < sentences.size(); ++i) {
                JsonArray w = want.get(i).getAsJsonArray();
                assertEquals(w.size(), got.get(i).length);
                for (int d = 0; d < w.size(); ++d) {
                    assertEquals(
                            w.get(d).getAsDouble(),
                            got.get(i)[d],
                            1e-4,
                            "sentence " + i + " dim " + d);
                }
            }
        }
    }
}
