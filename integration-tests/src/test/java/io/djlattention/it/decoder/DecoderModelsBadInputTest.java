/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.MalformedModelException;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.TranslateException;

import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;

import io.djlattention.it.HfFixtures;
import io.djlattention.zoo.DecoderModels;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Bad checkpoints, arguments and inputs give clear errors naming the file, key, tensor or request:
 * an unknown architecture, refused {@code config.json} keys, a missing tensor, a missing {@code
 * tokenizer.json} for text input, an empty prompt, a prompt as long as the model's max positions
 * (refused, not truncated), unsupported types and arguments.
 */
class DecoderModelsBadInputTest {

    @TempDir Path temp;

    private static Path fixture(String name) {
        return HfFixtures.dir("decoders").resolve(name);
    }

    /** Copies a fixture checkpoint, letting {@code edit} change its config.json. */
    private Path copy(String name, Consumer<JsonObject> edit) throws IOException {
        Path src = fixture(name);
        Path dst = temp.resolve(name + "_copy");
        Files.createDirectories(dst);
        try (Stream<Path> files = Files.list(src)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                Files.copy(f, dst.resolve(f.getFileName()));
            }
        }
        Path config = dst.resolve("config.json");
        JsonObject json =
                JsonParser.parseString(Files.readString(config, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        edit.accept(json);
        Files.writeString(config, json.toString(), StandardCharsets.UTF_8);
        return dst;
    }

    private static Criteria<int[], int[]> ids() {
        return Criteria.builder().setTypes(int[].class, int[].class).build();
    }

    private static Criteria<String, String> text() {
        return Criteria.builder().setTypes(String.class, String.class).build();
    }

    private static void assertMessage(Throwable e, String... parts) {
        for (String p : parts) {
            assertTrue(e.getMessage().contains(p), "'" + e.getMessage() + "' lacks '" + p + "'");
        }
    }

    @Test
    void unknownArchitectureNamesConfigAndArchitecture() throws IOException {
        Path dir =
                copy(
                        "gpt2",
                        c -> {
                            com.google.gson.JsonArray a = new com.google.gson.JsonArray();
                            a.add("Qwen2ForCausalLM");
                            c.add("architectures", a);
                        });
        MalformedModelException e =
                assertThrows(MalformedModelException.class, () -> DecoderModels.load(dir, ids()));
        assertMessage(e, dir.resolve("config.json").toString(), "Qwen2ForCausalLM");
    }

    @Test
    void refusedConfigKeysAreNamed() throws IOException {
        Map<String, Consumer<JsonObject>> edits =
                Map.of(
                        "attention_bias", c -> c.addProperty("attention_bias", true),
                        "mlp_bias", c -> c.addProperty("mlp_bias", true),
                        "sliding_window", c -> c.addProperty("sliding_window", 64),
                        "rope_parameters.rope_type",
                                c ->
                                        c.getAsJsonObject("rope_parameters")
                                                .addProperty("rope_type", "linear"),
                        "hidden_act", c -> c.addProperty("hidden_act", "gelu"));
        for (Map.Entry<String, Consumer<JsonObject>> edit : edits.entrySet()) {
            Path dir = copy("llama", edit.getValue());
            MalformedModelException e =
                    assertThrows(
                            MalformedModelException.class,
                            () -> DecoderModels.load(dir, ids()),
                            edit.getKey());
            assertMessage(e, "config.json", edit.getKey());
            deleteTree(dir);
        }
        Path legacy =
                copy(
                        "llama",
                        c -> {
                            c.remove("rope_parameters");
                            JsonObject scaling = new JsonObject();
                            scaling.addProperty("type", "dynamic");
                            scaling.addProperty("factor", 2.0);
                            c.add("rope_scaling", scaling);
                        });
        assertMessage(
                assertThrows(MalformedModelException.class, () -> DecoderModels.load(legacy, ids())),
                "config.json",
                "rope_scaling.type");
        deleteTree(legacy);
        Path gelu = copy("gpt2", c -> c.add("activation_function", new JsonPrimitive("relu")));
        assertMessage(
                assertThrows(MalformedModelException.class, () -> DecoderModels.load(gelu, ids())),
                "config.json",
                "activation_function",
                "relu");
    }

    @Test
    void refusedWindowAndGemma2KeysAreNamed() throws IOException {
        // key in the message -> (fixture, edit)
        Map<String, Map.Entry<String, Consumer<JsonObject>>> edits =
                Map.of(
                        "sliding_window",
                                Map.entry("mistral", c -> c.addProperty("sliding_window", 0)),
                        "layer_types[1]",
                                Map.entry(
                                        "gemma2",
                                        c ->
                                                c.getAsJsonArray("layer_types")
                                                        .set(1, new JsonPrimitive("chunked"))),
                        "layer_types",
                                Map.entry(
                                        "gemma2",
                                        c -> c.getAsJsonArray("layer_types").remove(3)),
                        "use_bidirectional_attention",
                                Map.entry(
                                        "gemma2",
                                        c -> c.addProperty("use_bidirectional_attention", true)),
                        "hidden_activation",
                                Map.entry(
                                        "gemma2",
                                        c -> c.addProperty("hidden_activation", "gelu")),
                        "attn_logit_softcapping",
                                Map.entry(
                                        "gemma2",
                                        c -> c.addProperty("attn_logit_softcapping", -1.0)),
                        "final_logit_softcapping",
                                Map.entry(
                                        "gemma2",
                                        c -> c.addProperty("final_logit_softcapping", 0.0)),
                        "query_pre_attn_scalar",
                                Map.entry(
                                        "gemma2", c -> c.addProperty("query_pre_attn_scalar", 0)));
        for (Map.Entry<String, Map.Entry<String, Consumer<JsonObject>>> edit : edits.entrySet()) {
            Path dir = copy(edit.getValue().getKey(), edit.getValue().getValue());
            MalformedModelException e =
                    assertThrows(
                            MalformedModelException.class,
                            () -> DecoderModels.load(dir, ids()),
                            edit.getKey());
            assertMessage(e, dir.resolve("config.json").toString(), edit.getKey());
            deleteTree(dir);
        }
        // Gemma-2 without a window (transformers refuses null there too; Mistral takes it as
        // none) and a cap that float32, the operators' type, would round to 0.
        String[] keys = {"sliding_window", "attn_logit_softcapping"};
        List<Consumer<JsonObject>> gemma2Edits =
                List.of(
                        c -> c.add("sliding_window", JsonNull.INSTANCE),
                        c -> c.addProperty("attn_logit_softcapping", 1e-50));
        for (int i = 0; i < keys.length; ++i) {
            Path dir = copy("gemma2", gemma2Edits.get(i));
            MalformedModelException e =
                    assertThrows(
                            MalformedModelException.class,
                            () -> DecoderModels.load(dir, ids()),
                            keys[i]);
            assertMessage(e, dir.resolve("config.json").toString(), keys[i]);
            deleteTree(dir);
        }
    }

    @Test
    void missingTensorNamesFileAndTensor() throws IOException {
        Path dir = copy("gpt2", c -> {});
        Path weights = dir.resolve("model.safetensors");
        dropTensor(weights, "transformer.h.1.mlp.c_fc.weight");
        MalformedModelException e =
                assertThrows(MalformedModelException.class, () -> DecoderModels.load(dir, ids()));
        assertMessage(e, weights.toString(), "transformer.h.1.mlp.c_fc.weight");
    }

    @Test
    void textInputWithoutTokenizerNamesTheFile() throws Exception {
        Path dir = copy("gpt2", c -> {});
        Files.delete(dir.resolve("tokenizer.json"));
        MalformedModelException e =
                assertThrows(MalformedModelException.class, () -> DecoderModels.load(dir, text()));
        assertMessage(e, dir.resolve("tokenizer.json").toString(), "missing");
        // Token ids need no tokenizer.
        try (ZooModel<int[], int[]> model = DecoderModels.load(dir, ids())) {
            assertEquals(null, model.getProperty("tokenizer"));
        }
        // Nor does stories260K have one.
        assertMessage(
                assertThrows(MalformedModelException.class, () -> DecoderModels.load(null, text())),
                "stories260K",
                "tokenizer.json");
    }

    @Test
    void emptyAndOverlongPromptsAreRefused() throws Exception {
        Path dir = fixture("gpt2"); // n_positions 96, no BOS added by its tokenizer
        try (ZooModel<int[], int[]> model = DecoderModels.load(dir, ids());
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            TranslateException empty =
                    assertThrows(TranslateException.class, () -> predictor.predict(new int[0]));
            assertMessage(rootCause(empty), "at least one");
            TranslateException longer =
                    assertThrows(
                            TranslateException.class,
                            () -> predictor.batchPredict(List.of(new int[] {5}, new int[96])));
            assertMessage(rootCause(longer), "request 1", "96 tokens", "max positions 96");
            TranslateException outside =
                    assertThrows(
                            TranslateException.class,
                            () -> predictor.predict(new int[] {3, 100000}));
            assertMessage(rootCause(outside), "100000");
            // One short of max positions is accepted; generation stops at the limit.
            int[] generated = predictor.predict(new int[95]);
            assertEquals(1, generated.length);
        }
        try (ZooModel<String, String> model = DecoderModels.load(dir, text());
                Predictor<String, String> predictor = model.newPredictor()) {
            TranslateException empty =
                    assertThrows(TranslateException.class, () -> predictor.predict(""));
            assertMessage(rootCause(empty), "encodes to no tokens");
            // A text longer than max positions is refused too: the tokenizer does not truncate.
            String story = "Once upon a time there was a little girl named Lily. ".repeat(20);
            TranslateException tooLong =
                    assertThrows(TranslateException.class, () -> predictor.predict(story));
            assertMessage(rootCause(tooLong), "max positions 96", "refused, not truncated");
            assertEquals(List.of(), predictor.batchPredict(List.of()));
            // Past DJL's tokenizer default of 512 tokens the whole prompt still reaches the model
            // (the message counts all of its tokens): nothing truncates it on the way.
            String longer = story.repeat(4);
            int tokens;
            try (HuggingFaceTokenizer reference =
                    HuggingFaceTokenizer.builder()
                            .optTokenizerPath(dir.resolve("tokenizer.json"))
                            .optTruncation(false)
                            .build()) {
                tokens = reference.encode(longer).getIds().length;
            }
            assertTrue(tokens > 512, "the prompt must be longer than 512 tokens: " + tokens);
            TranslateException longerThan512 =
                    assertThrows(TranslateException.class, () -> predictor.predict(longer));
            assertMessage(rootCause(longerThan512), ": " + tokens + " tokens leave no room");
        }
    }

    @Test
    void unsupportedTypesAndArgumentsAreNamed() {
        Criteria<String, float[]> embedding =
                Criteria.builder().setTypes(String.class, float[].class).build();
        assertMessage(
                assertThrows(
                        ModelNotFoundException.class, () -> DecoderModels.load(null, embedding)),
                "String",
                "float[]");
        for (String[] bad :
                new String[][] {
                    {"attention", "sdpa"}, {"dtype", "bfloat16"}, {"maxNewTokens", "0"},
                    {"prefill", "none"}, {"temperature", "-1"}, {"maxBatchSize", "zero"}
                }) {
            Criteria<int[], int[]> c =
                    Criteria.builder()
                            .setTypes(int[].class, int[].class)
                            .optArgument(bad[0], bad[1])
                            .build();
            MalformedModelException e =
                    assertThrows(
                            MalformedModelException.class,
                            () -> DecoderModels.load(null, c),
                            bad[0]);
            assertMessage(e, "argument " + bad[0], bad[1]);
        }
        assertMessage(
                assertThrows(
                        IOException.class, () -> DecoderModels.load(temp.resolve("nope"), ids())),
                "nope");
    }

    private static Throwable rootCause(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

    /** Rewrites a safetensors file without one tensor's header entry (its bytes stay unused). */
    private static void dropTensor(Path file, String name) throws IOException {
        byte[] all = Files.readAllBytes(file);
        ByteBuffer b = ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN);
        int headerLength = (int) b.getLong(0);
        JsonObject header =
                JsonParser.parseString(new String(all, 8, headerLength, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        JsonElement removed = header.remove(name);
        assertTrue(removed != null, name + " not in " + file);
        StringBuilder json = new StringBuilder(header.toString());
        while (json.length() < headerLength) {
            json.append(' '); // same length: the data offsets stay valid
        }
        byte[] h = json.toString().getBytes(StandardCharsets.UTF_8);
        assertEquals(headerLength, h.length);
        System.arraycopy(h, 0, all, 8, h.length);
        Files.write(file, all);
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                Files.delete(f);
            }
        }
        Files.delete(dir);
    }
}
