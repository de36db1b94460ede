/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.MalformedModelException;
import ai.djl.inference.Predictor;
import ai.djl.modality.Classifications;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.TranslateException;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.zoo.encoder.BertEncoder;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Bad input for the BERT encoder: each case gives its documented behaviour or a clear exception
 * naming the file, key, argument or input — never a JVM crash.
 */
class BertBadInputTest {

    @TempDir Path temp;

    private static ZooModel<String, float[]> embeddings(Path dir, Map<String, String> args)
            throws Exception {
        ai.djl.repository.zoo.Criteria.Builder<String, float[]> b =
                ai.djl.repository.zoo.Criteria.builder().setTypes(String.class, float[].class);
        for (Map.Entry<String, String> e : args.entrySet()) {
            b.optArgument(e.getKey(), e.getValue());
        }
        return io.djlattention.zoo.encoder.EncoderModels.load(dir, b.build());
    }

    /** A copy of the fixture's BertModel checkpoint in the test's own folder. */
    private Path copy(String name) throws IOException {
        Path src = BertReference.checkpoint(name);
        Path dst = temp.resolve(name);
        Files.createDirectories(dst);
        try (Stream<Path> files = Files.list(src)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                Files.copy(f, dst.resolve(f.getFileName()));
            }
        }
        return dst;
    }

    private static void editConfig(Path dir, String key, String jsonValue) throws IOException {
        Path file = dir.resolve("config.json");
        JsonObject config =
                JsonParser.parseString(Files.readString(file, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        config.add(key, JsonParser.parseString(jsonValue));
        Files.writeString(file, config.toString(), StandardCharsets.UTF_8);
    }

    /** Drops one tensor from a safetensors file: its header entry (the data may stay). */
    private static void dropTensor(Path file, String name) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        long headerLength =
                ByteBuffer.wrap(bytes, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
        String header = new String(bytes, 8, (int) headerLength, StandardCharsets.UTF_8);
        JsonObject json = JsonParser.parseString(header).getAsJsonObject();
        assertTrue(json.has(name), name + " in " + file);
        json.remove(name);
        byte[] newHeader = json.toString().getBytes(StandardCharsets.UTF_8);
        ByteBuffer out = ByteBuffer.allocate(8 + newHeader.length + bytes.length - 8 - (int) headerLength);
        out.order(ByteOrder.LITTLE_ENDIAN).putLong(newHeader.length).put(newHeader);
        out.put(bytes, 8 + (int) headerLength, bytes.length - 8 - (int) headerLength);
        Files.write(file, out.array());
    }

    @Test
    void emptyStringEmbedsClsSep() throws Exception {
        // Documented: "" is [CLS] [SEP], as transformers; the reference's sentence 0 is "".
        assertEquals("", BertReference.sentences().get(0));
        assertEquals(2, BertReference.ids(0).length);
        try (ZooModel<String, float[]> model = embeddings(BertReference.checkpoint("bert"), Map.of());
                Predictor<String, float[]> predictor = model.newPredictor()) {
            float[] got = predictor.predict("");
            double[] want =
                    BertReference.doubles(
                            BertReference.json().getAsJsonArray("embeddings_mean").get(0));
            assertTrue(BertReference.cosine(want, got) >= 0.99999);
        }
    }

    @Test
    void emptyBatchGivesEmptyList() throws Exception {
        try (ZooModel<String, float[]> model = embeddings(BertReference.checkpoint("bert"), Map.of());
                Predictor<String, float[]> predictor = model.newPredictor()) {
            assertEquals(Collections.emptyList(), predictor.batchPredict(new ArrayList<>()));
        }
    }

    /** Documented: truncated to max_position_embeddings (64) tokens, as transformers truncates. */
    @Test
    void textLongerThanMaxPositionsIsTruncated() throws Exception {
        List<String> sentences = BertReference.sentences();
        int last = sentences.size() - 1;
        String longText = sentences.get(last) + " " + sentences.get(last);
        try (ZooModel<String, float[]> model = embeddings(BertReference.checkpoint("bert"), Map.of());
                Predictor<String, float[]> predictor = model.newPredictor()) {
            assertEquals("64", model.getProperty("maxLength"));
            float[] got = predictor.batchPredict(List.of("Hello", longText)).get(1);
            double[] want =
                    BertReference.doubles(
                            BertReference.json().getAsJsonArray("embeddings_mean").get(last));
            // Twice the sentence truncates to the same 64 tokens as the sentence once.
            assertTrue(BertReference.cosine(want, got) >= 0.99999);
        }
        // A smaller maxLength truncates there.
        try (ZooModel<String, float[]> model =
                        embeddings(BertReference.checkpoint("bert"), Map.of("maxLength", "8"));
                NDManager manager = model.getNDManager().newSubManager()) {
            long[] ids =
                    ((io.djlattention.zoo.encoder.SentenceEmbeddingTranslator)
                                    model.getTranslator())
                            .encode(manager, List.of(longText))
                            .get(0)
                            .toLongArray();
            long[] full = BertReference.ids(last);
            assertEquals(8, ids.length);
            assertEquals(Arrays.toString(Arrays.copyOf(full, 7)), Arrays.toString(Arrays.copyOf(ids, 7)));
            assertEquals(full[full.length - 1], ids[7], "the closing [SEP] is kept");
        }
    }

    @Test
    void nullTextIsRefused() throws Exception {
        try (ZooModel<String, float[]> model = embeddings(BertReference.checkpoint("bert"), Map.of());
                Predictor<String, float[]> predictor = model.newPredictor()) {
            List<String> texts = new ArrayList<>();
            texts.add("fine");
            texts.add(null);
            TranslateException e =
                    assertThrows(TranslateException.class, () -> predictor.batchPredict(texts));
            assertTrue(String.valueOf(e.getMessage()).contains("element 1 is null"), e.getMessage());
        }
    }

    @Test
    void missingTokenizerJson() throws Exception {
        Path dir = copy("bert");
        Files.delete(dir.resolve("tokenizer.json"));
        IOException e = assertThrows(IOException.class, () -> embeddings(dir, Map.of()));
        assertTrue(e.getMessage().contains("tokenizer.json"), e.getMessage());
        assertTrue(e.getMessage().contains(dir.toString()), e.getMessage());
    }

    @Test
    void missingTensor() throws Exception {
        Path dir = copy("bert");
        String tensor = "encoder.layer.2.intermediate.dense.bias";
        dropTensor(dir.resolve("model.safetensors"), tensor);
        MalformedModelException e =
                assertThrows(MalformedModelException.class, () -> embeddings(dir, Map.of()));
        assertTrue(e.getMessage().contains("model.safetensors"), e.getMessage());
        assertTrue(e.getMessage().contains("missing tensor " + tensor), e.getMessage());
    }

    @Test
    void fillMaskWithoutHead() throws Exception {
        ai.djl.repository.zoo.Criteria<String, Classifications> criteria =
                ai.djl.repository.zoo.Criteria.builder()
                        .setTypes(String.class, Classifications.class)
                        .build();
        MalformedModelException e =
                assertThrows(
                        MalformedModelException.class,
                        () ->
                                io.djlattention.zoo.encoder.EncoderModels.load(
                                        BertReference.checkpoint("bert"), criteria));
        assertTrue(e.getMessage().contains("missing tensor cls.predictions"), e.getMessage());
        assertTrue(e.getMessage().contains("model.safetensors"), e.getMessage());
    }

    @ParameterizedTest
    @CsvSource(
            delimiter = '|',
            value = {
                "hidden_act|\"relu\"|hidden_act",
                "hidden_act|\"gelu_new\"|hidden_act",
                "position_embedding_type|\"relative_key\"|position_embedding_type",
                "architectures|[\"LlamaForCausalLM\"]|architectures",
                "num_attention_heads|7|num_attention_heads",
                "hidden_size|\"sixty\"|hidden_size",
                "is_decoder|true|is_decoder"
            })
    void unsupportedConfig(String key, String value, String named) throws Exception {
        Path dir = copy("bert");
        editConfig(dir, key, value);
        if ("architectures".equals(key)) {
            editConfig(dir, "model_type", "\"llama\"");
        }
        MalformedModelException e =
                assertThrows(MalformedModelException.class, () -> embeddings(dir, Map.of()));
        assertTrue(e.getMessage().contains("config.json"), e.getMessage());
        assertTrue(e.getMessage().contains(named), e.getMessage());
    }

    @Test
    void otherTypesAreNotAnEncoderTask() {
        ai.djl.repository.zoo.Criteria<String, String> criteria =
                ai.djl.repository.zoo.Criteria.builder().setTypes(String.class, String.class).build();
        ModelNotFoundException e =
                assertThrows(
                        ModelNotFoundException.class,
                        () ->
                                io.djlattention.zoo.encoder.EncoderModels.load(
                                        BertReference.checkpoint("bert"), criteria));
        assertTrue(e.getMessage().contains("java.lang.String -> java.lang.String"), e.getMessage());
    }

    @ParameterizedTest
    @CsvSource(
            delimiter = '|',
            value = {
                "attention|flash",
                "pooling|max",
                "dtype|bfloat16",
                "maxLength|65",
                "maxLength|1",
                "maxLength|many",
                "normalize|yes"
            })
    void badArguments(String key, String value) {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> embeddings(BertReference.checkpoint("bert"), Map.of(key, value)));
        assertTrue(e.getMessage().startsWith(key + ":"), e.getMessage());
        assertTrue(e.getMessage().contains(value), e.getMessage());
    }

    @Test
    void textWithoutOrWithTwoMasks() throws Exception {
        ai.djl.repository.zoo.Criteria<String, Classifications> criteria =
                ai.djl.repository.zoo.Criteria.builder()
                        .setTypes(String.class, Classifications.class)
                        .build();
        try (ZooModel<String, Classifications> model =
                        io.djlattention.zoo.encoder.EncoderModels.load(
                                BertReference.checkpoint("bert-mlm"), criteria);
                Predictor<String, Classifications> predictor = model.newPredictor()) {
            TranslateException none =
                    assertThrows(TranslateException.class, () -> predictor.predict("no mask"));
            assertTrue(none.getMessage().contains("no [MASK] token"), none.getMessage());
            TranslateException two =
                    assertThrows(
                            TranslateException.class,
                            () -> predictor.predict("[MASK] and [MASK]"));
            assertTrue(two.getMessage().contains("more than one"), two.getMessage());
            assertEquals(Collections.emptyList(), predictor.batchPredict(new ArrayList<>()));
        }
    }

    /** The block's own checks on arrays given directly. */
    @Test
    void blockInputChecks() throws Exception {
        try (ZooModel<String, float[]> model = embeddings(BertReference.checkpoint("bert"), Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            BertEncoder encoder = (BertEncoder) model.getBlock();
            NDArray ids = manager.create(new long[] {2, 7, 3}, new Shape(1, 3));
            NDArray ones = manager.ones(new Shape(1, 3), DataType.INT64);
            NDArray big = manager.create(new long[] {2, 100000, 3}, new Shape(1, 3));
            assertMessage(
                    () -> encoder.lastHiddenState(big, null, ones), "inputIds: value 100000");
            NDArray types = manager.create(new long[] {0, 2, 0}, new Shape(1, 3));
            assertMessage(
                    () -> encoder.lastHiddenState(ids, types, ones), "tokenTypeIds: value 2");
            NDArray empty = manager.zeros(new Shape(1, 3), DataType.INT64);
            assertMessage(
                    () -> encoder.lastHiddenState(ids, null, empty),
                    "attentionMask: row 0 has no token");
            NDArray twos = manager.create(new long[] {1, 2, 1}, new Shape(1, 3));
            assertMessage(() -> encoder.lastHiddenState(ids, null, twos), "attentionMask: value 2");
            NDArray longIds = manager.ones(new Shape(1, 65), DataType.INT64);
            assertMessage(
                    () -> encoder.lastHiddenState(longIds, null, longIds),
                    "exceeds max_position_embeddings = 64");
            NDArray floats = manager.ones(new Shape(1, 3));
            assertMessage(
                    () -> encoder.lastHiddenState(floats, null, ones),
                    "inputIds: expected an integer array");
            assertMessage(
                    () -> encoder.lastHiddenState(ids, null, manager.ones(new Shape(1, 4))),
                    "attentionMask: expected shape (1, 3)");
            IllegalStateException e =
                    assertThrows(
                            IllegalStateException.class,
                            () ->
                                    encoder.maskedLmLogits(
                                            ids, null, ones, manager.zeros(new Shape(1, 1))));
            assertTrue(e.getMessage().contains("no masked-LM head"), e.getMessage());
        }
    }

    private static void assertMessage(org.junit.jupiter.api.function.Executable call, String part) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertInstanceOf(IllegalArgumentException.class, e);
        assertTrue(e.getMessage().contains(part), e.getMessage());
    }
}
