/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.zoo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.it.HfFixtures;
import io.djlattention.it.paged.Stories260k;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.DelegatingTranslator;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Decoders through DJL's front door, as a user writes it: {@code optModelUrls("djl://...")}, {@code
 * optGroupId}/{@code optArtifactId}, and {@code optModelPath} on a llama2.c file and on Hugging Face
 * directories. Each reproduces an independent reference: llama2.c's greedy ids for stories260K,
 * transformers' greedy ids (and decoded text) for the LLaMA and GPT-2 fixtures.
 */
class DecoderRoutesTest {

    @TempDir Path tmp;

    private static int[] ints(JsonArray a) {
        int[] v = new int[a.size()];
        for (int i = 0; i < v.length; ++i) {
            v[i] = a.get(i).getAsInt();
        }
        return v;
    }

    /** Checks the stories260K reference through a criteria builder that names the model. */
    private static void assertStories(Criteria.Builder<int[], int[]> builder) throws Exception {
        JsonArray cases = Stories260k.reference();
        List<int[]> prompts = new ArrayList<>();
        List<int[]> expected = new ArrayList<>();
        int maxNew = 0;
        for (JsonElement e : cases) {
            prompts.add(ints(e.getAsJsonObject().getAsJsonArray("prompt")));
            int[] want = ints(e.getAsJsonObject().getAsJsonArray("generated"));
            expected.add(want);
            maxNew = Math.max(maxNew, want.length);
        }
        Criteria<int[], int[]> criteria =
                builder.optEngine("PyTorch").optArgument("maxNewTokens", maxNew).build();
        try (ZooModel<int[], int[]> model = criteria.loadModel();
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            List<int[]> got = predictor.batchPredict(prompts);
            assertEquals(prompts.size(), got.size());
            for (int i = 0; i < prompts.size(); ++i) {
                int[] want = expected.get(i);
                // The reference stops some cases early (llama2.c's BOS); its ids must agree.
                assertArrayEquals(want, Arrays.copyOf(got.get(i), want.length), "case " + i);
            }
            // A single predict is a batch of one through the same delegate.
            int[] one = predictor.predict(prompts.get(0));
            assertArrayEquals(expected.get(0), Arrays.copyOf(one, expected.get(0).length));
        }
    }

    @Test
    void stories260kByUrl() throws Exception {
        assertStories(
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelUrls("djl://io.djlattention/stories260K"));
    }

    @Test
    void stories260kByGroupAndArtifact() throws Exception {
        assertStories(
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optGroupId("io.djlattention")
                        .optArtifactId("stories260K"));
    }

    @Test
    void llama2cFileByPath() throws Exception {
        Path bin = tmp.resolve("stories260K.bin");
        try (InputStream in = DecoderModels.class.getResourceAsStream(DecoderModels.STORIES260K)) {
            Files.copy(in, bin);
        }
        assertStories(Criteria.builder().setTypes(int[].class, int[].class).optModelPath(bin));
    }

    @ParameterizedTest
    @ValueSource(strings = {"llama", "gpt2"})
    void huggingFaceDirectoryByPath(String name) throws Exception {
        Path dir = HfFixtures.dir("decoders").resolve(name);
        JsonObject ref =
                JsonParser.parseString(
                                Files.readString(dir.resolve("reference.json"), StandardCharsets.UTF_8))
                        .getAsJsonObject();
        List<int[]> prompts = new ArrayList<>();
        List<int[]> expectedIds = new ArrayList<>();
        List<String> texts = new ArrayList<>();
        List<String> expectedTexts = new ArrayList<>();
        for (JsonElement e : ref.getAsJsonArray("cases")) {
            JsonObject c = e.getAsJsonObject();
            prompts.add(ints(c.getAsJsonArray("prompt")));
            expectedIds.add(ints(c.getAsJsonArray("generated")));
            texts.add(c.get("text").getAsString());
            expectedTexts.add(c.get("generated_text").getAsString());
        }
        int maxNew = ref.get("max_new_tokens").getAsInt();
        Criteria<int[], int[]> ids =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelPath(dir)
                        .optEngine("PyTorch")
                        .optArgument("maxNewTokens", maxNew)
                        .build();
        try (ZooModel<int[], int[]> model = ids.loadModel();
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            DelegatingTranslator<?, ?> translator =
                    assertInstanceOf(DelegatingTranslator.class, model.getTranslator());
            assertEquals(
                    ref.get("eos_token_id").getAsLong(),
                    Long.parseLong(translator.getDelegate().getProperty("eosTokenId")));
            List<int[]> got = predictor.batchPredict(prompts);
            for (int i = 0; i < prompts.size(); ++i) {
                assertArrayEquals(expectedIds.get(i), got.get(i), name + " case " + i);
            }
        }
        Criteria<String, String> text =
                Criteria.builder()
                        .setTypes(String.class, String.class)
                        .optModelPath(dir)
                        .optArgument("maxNewTokens", maxNew)
                        .build();
        try (ZooModel<String, String> model = text.loadModel();
                Predictor<String, String> predictor = model.newPredictor()) {
            assertEquals(expectedTexts, predictor.batchPredict(texts), name);
        }
    }

    @Test
    void typesADecoderHasNoTaskForEndInDjlsModelNotFound() throws IOException {
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls("djl://io.djlattention/stories260K")
                        .build();
        ModelNotFoundException e = assertThrows(ModelNotFoundException.class, criteria::loadModel);
        StringBuilder chain = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            chain.append(t.getMessage()).append('\n');
        }
        assertTrue(chain.toString().contains("int[]"), chain.toString());
    }
}
