/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.it.HfFixtures;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.generate.GenerationBlock;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The generation arguments of {@link DecoderModels} and the {@code config.json} variants older
 * transformers versions write: sampling gives the same tokens on every path and in any batch (one
 * seeded generator per request), {@code eosTokenId} stops a request after that token, a list of
 * EOS ids in {@code generation_config.json} takes the first, and a {@code config.json} with the
 * pre-5.0 {@code rope_theta} / {@code rope_scaling: null} keys generates what transformers 5.18
 * generated from {@code rope_parameters}, and a Gemma-2 {@code config.json} without {@code
 * layer_types} alternates local and global layers as transformers' Gemma2Config does. Sampling is
 * checked on LLaMA and on the windowed, soft-capped Mistral and Gemma-2 checkpoints.
 */
class DecoderArgumentsTest {

    @TempDir Path temp;

    private static Path dir(String name) {
        return HfFixtures.dir("decoders").resolve(name);
    }

    private static JsonObject reference(String name) throws IOException {
        return JsonParser.parseString(
                        Files.readString(dir(name).resolve("reference.json"), StandardCharsets.UTF_8))
                .getAsJsonObject();
    }

    private static List<int[]> field(JsonObject ref, String key) {
        List<int[]> out = new ArrayList<>();
        for (var e : ref.getAsJsonArray("cases")) {
            JsonArray a = e.getAsJsonObject().getAsJsonArray(key);
            int[] v = new int[a.size()];
            for (int i = 0; i < v.length; ++i) {
                v[i] = a.get(i).getAsInt();
            }
            out.add(v);
        }
        return out;
    }

    private static List<int[]> generate(Path checkpoint, Map<String, Object> args, List<int[]> in)
            throws Exception {
        Criteria.Builder<int[], int[]> b = Criteria.builder().setTypes(int[].class, int[].class);
        args.forEach(b::optArgument);
        try (ZooModel<int[], int[]> model = DecoderModels.load(checkpoint, b.build());
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            return predictor.batchPredict(in);
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama", "mistral", "gemma2"})
    void samplingIsTheSameOnEveryPathAndInAnyBatch(String name) throws Exception {
        List<int[]> prompts = field(reference(name), "prompt");
        List<int[]> greedy = field(reference(name), "generated");
        Map<String, Object> sampling =
                Map.of("temperature", 1.5f, "topK", 40, "seed", 11, "maxNewTokens", 12);
        List<int[]> stock = new ArrayList<>();
        for (int[] p : prompts) {
            stock.add(
                    generate(dir(name), merge(sampling, "attention", "stock"), List.of(p)).get(0));
        }
        // 4 blocks of 16 for requests needing 11: requests wait for blocks and running ones may
        // be preempted and recomputed, which must not change a sample (nor, for the windowed
        // checkpoints, the keys the window hides).
        List<int[]> paged = generate(dir(name), merge(sampling, "numBlocks", 4), prompts);
        List<int[]> flash = generate(dir(name), merge(sampling, "attention", "flash"), prompts);
        boolean differsFromGreedy = false;
        for (int i = 0; i < prompts.size(); ++i) {
            assertArrayEquals(stock.get(i), paged.get(i), "paged vs stock, case " + i);
            assertArrayEquals(stock.get(i), flash.get(i), "flash vs stock, case " + i);
            differsFromGreedy |= !Arrays.equals(stock.get(i), greedy.get(i));
        }
        assertTrue(differsFromGreedy, "temperature 1.5 should leave the greedy path somewhere");
    }

    private static Map<String, Object> merge(Map<String, Object> a, String key, Object value) {
        Map<String, Object> m = new java.util.HashMap<>(a);
        m.put(key, value);
        return m;
    }

    @Test
    void eosArgumentStopsAfterTheToken() throws Exception {
        JsonObject ref = reference("gpt2");
        int[] prompt = field(ref, "prompt").get(1);
        int[] full = field(ref, "generated").get(1);
        int eos = full[4];
        int first = 0;
        while (full[first] != eos) {
            ++first;
        }
        for (String attention : new String[] {"paged", "stock"}) {
            int[] got =
                    generate(
                                    dir("gpt2"),
                                    Map.of("eosTokenId", eos, "maxNewTokens", 12, "attention", attention),
                                    List.of(prompt))
                            .get(0);
            assertArrayEquals(Arrays.copyOf(full, first + 1), got, attention);
        }
    }

    @Test
    void eosListInGenerationConfigTakesTheFirst() throws Exception {
        Path copy = copy("gpt2");
        Files.writeString(
                copy.resolve("generation_config.json"), "{\"eos_token_id\": [7, 2]}", StandardCharsets.UTF_8);
        Criteria<int[], int[]> c = Criteria.builder().setTypes(int[].class, int[].class).build();
        try (ZooModel<int[], int[]> model = DecoderModels.load(copy, c)) {
            assertEquals(7, ((GenerationBlock) model.getBlock()).getEosTokenId());
        }
    }

    @Test
    void legacyRopeThetaKeyGeneratesTheSame() throws Exception {
        Path copy = copy("llama");
        Path config = copy.resolve("config.json");
        JsonObject json =
                JsonParser.parseString(Files.readString(config, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        double theta = json.getAsJsonObject("rope_parameters").get("rope_theta").getAsDouble();
        json.remove("rope_parameters");
        json.addProperty("rope_theta", theta);
        json.add("rope_scaling", JsonNull.INSTANCE);
        Files.writeString(config, json.toString(), StandardCharsets.UTF_8);
        JsonObject ref = reference("llama");
        List<int[]> got =
                generate(copy, Map.of("maxNewTokens", 12), field(ref, "prompt"));
        List<int[]> want = field(ref, "generated");
        for (int i = 0; i < want.size(); ++i) {
            assertArrayEquals(want.get(i), got.get(i), "case " + i);
        }
    }

    @Test
    void gemma2WithoutLayerTypesAlternatesAsGemma2ConfigDoes() throws Exception {
        // Gemma-2 configs written before layer_types: Gemma2Config makes the even layers local.
        // The fixture's list is that rule, so dropping the key must generate the same.
        Path copy = copy("gemma2");
        Path config = copy.resolve("config.json");
        JsonObject json =
                JsonParser.parseString(Files.readString(config, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        JsonArray types = json.getAsJsonArray("layer_types");
        for (int l = 0; l < types.size(); ++l) {
            assertEquals(
                    l % 2 == 0 ? "sliding_attention" : "full_attention",
                    types.get(l).getAsString(),
                    "the fixture follows the alternating rule");
        }
        json.remove("layer_types");
        Files.writeString(config, json.toString(), StandardCharsets.UTF_8);
        JsonObject ref = reference("gemma2");
        for (String attention : new String[] {"paged", "stock"}) {
            List<int[]> got =
                    generate(
                            copy,
                            Map.of("maxNewTokens", 12, "attention", attention),
                            field(ref, "prompt"));
            List<int[]> want = field(ref, "generated");
            for (int i = 0; i < want.size(); ++i) {
                assertArrayEquals(want.get(i), got.get(i), attention + " case " + i);
            }
        }
    }

    @Test
    void absentWindowAndCapKeysTakeTransformersDefaultsAndNullMeansNone() throws Exception {
        // MistralConfig and Gemma2Config default sliding_window to 4096 and Gemma2Config the caps
        // to 50 (attention) and 30 (logits) when the key is absent; null switches each off, but
        // for Gemma-2's window, which transformers needs (DecoderModelsBadInputTest).
        String[] keys = {"sliding_window", "attn_logit_softcapping", "final_logit_softcapping"};
        for (boolean absent : new boolean[] {true, false}) {
            for (String name : new String[] {"mistral", "gemma2"}) {
                Path copy = copy(name);
                Path config = copy.resolve("config.json");
                JsonObject json =
                        JsonParser.parseString(Files.readString(config, StandardCharsets.UTF_8))
                                .getAsJsonObject();
                int fixtureWindow = json.get("sliding_window").getAsInt();
                boolean gemma2 = "gemma2".equals(name);
                for (String key : keys) {
                    if (gemma2 && !absent && "sliding_window".equals(key)) {
                        continue;
                    }
                    if (json.has(key)) {
                        json.remove(key);
                        if (!absent) {
                            json.add(key, JsonNull.INSTANCE);
                        }
                    }
                }
                Files.writeString(config, json.toString(), StandardCharsets.UTF_8);
                Criteria<int[], int[]> c =
                        Criteria.builder().setTypes(int[].class, int[].class).build();
                try (ZooModel<int[], int[]> model = DecoderModels.load(copy, c)) {
                    DecoderConfig got =
                            DecoderModels.generationBlock(model).getDecoder().getConfig();
                    String what = name + (absent ? " without the keys" : " with null keys");
                    int window = absent ? 4096 : gemma2 ? fixtureWindow : 0;
                    assertEquals(window, got.getSlidingWindow(), what);
                    assertEquals(absent && gemma2 ? 50f : 0f, got.getAttentionSoftcap(), what);
                    assertEquals(absent && gemma2 ? 30f : 0f, got.getFinalSoftcap(), what);
                }
                deleteTree(copy);
            }
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path f : (Iterable<Path>) files.sorted(Comparator.reverseOrder())::iterator) {
                Files.delete(f);
            }
        }
    }

    private Path copy(String name) throws IOException {
        Path dst = Files.createDirectory(temp.resolve(name));
        try (Stream<Path> files = Files.list(dir(name))) {
            for (Path f : (Iterable<Path>) files::iterator) {
                Files.copy(f, dst.resolve(f.getFileName()));
            }
        }
        return dst;
    }
}
