/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.zoo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelLoader;
import ai.djl.repository.zoo.ModelZoo;

import io.djlattention.zoo.CheckpointLoader;
import io.djlattention.zoo.DjlAttentionModelZoo;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How DJL's front door reaches the zoo, and what it refuses: the zoo is registered, {@code
 * optModelPath} claims Hugging Face directories but leaves other engines' model folders to DJL, and
 * a directory with an unsupported architecture or no {@code config.json} fails with a message
 * naming the file (these need no model weights).
 */
class ZooRoutingTest {

    @TempDir Path tmp;

    @Test
    void zooIsRegisteredWithItsBuiltInModels() {
        ModelZoo zoo = ModelZoo.getModelZoo(DjlAttentionModelZoo.GROUP_ID);
        assertInstanceOf(DjlAttentionModelZoo.class, zoo);
        Set<String> artifacts = new TreeSet<>();
        for (ModelLoader loader : zoo.getModelLoaders()) {
            artifacts.add(loader.getArtifactId());
            assertEquals(DjlAttentionModelZoo.GROUP_ID, loader.getGroupId());
        }
        assertEquals(Set.of("all-MiniLM-L6-v2", "stories260K"), artifacts);
        assertTrue(zoo.getSupportedEngines().contains("PyTorch"));
    }

    @Test
    void unsupportedArchitectureNamesConfigJsonAndArchitecture() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("t5"));
        write(dir.resolve("config.json"), "{\"architectures\": [\"T5ForConditionalGeneration\"]}");
        write(dir.resolve("tokenizer.json"), "{}");
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelPath(dir)
                        .optEngine("PyTorch")
                        .build();
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, criteria::loadModel);
        assertTrue(e.getMessage().contains(dir.resolve("config.json").toString()), e.getMessage());
        assertTrue(e.getMessage().contains("T5ForConditionalGeneration"), e.getMessage());
        assertTrue(e.getMessage().contains("BertModel"), "lists what is supported: " + e.getMessage());
    }

    @Test
    void configJsonWithoutArchitectureIsRefused() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("empty-config"));
        write(dir.resolve("config.json"), "{}");
        Criteria<int[], int[]> criteria =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelPath(dir)
                        .optEngine("PyTorch")
                        .build();
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, criteria::loadModel);
        assertTrue(e.getMessage().contains("config.json"), e.getMessage());
        assertTrue(e.getMessage().contains("no architectures"), e.getMessage());
    }

    @Test
    void familyComesFromArchitecturesOrModelType() throws Exception {
        String[][] cases = {
            {"{\"architectures\": [\"BertModel\"]}", "ENCODER"},
            {"{\"architectures\": [\"BertForMaskedLM\"]}", "ENCODER"},
            {"{\"model_type\": \"bert\"}", "ENCODER"},
            {"{\"architectures\": [\"LlamaForCausalLM\"]}", "DECODER"},
            {"{\"architectures\": [\"GPT2LMHeadModel\"]}", "DECODER"},
        };
        for (int i = 0; i < cases.length; ++i) {
            Path dir = Files.createDirectory(tmp.resolve("family" + i));
            write(dir.resolve("config.json"), cases[i][0]);
            assertEquals(
                    CheckpointLoader.Family.valueOf(cases[i][1]),
                    CheckpointLoader.familyOf(dir),
                    cases[i][0]);
        }
    }

    @Test
    void missingConfigJsonIsNamed() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("no-config"));
        write(dir.resolve("tokenizer.json"), "{}");
        write(dir.resolve("model.safetensors"), "");
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelPath(dir)
                        .optEngine("PyTorch")
                        .build();
        UncheckedIOException e = assertThrows(UncheckedIOException.class, criteria::loadModel);
        assertTrue(e.getMessage().contains(dir.resolve("config.json").toString()), e.getMessage());
        assertTrue(e.getMessage().contains("missing"), e.getMessage());
    }

    @Test
    void malformedConfigJsonIsNamed() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("bad-config"));
        write(dir.resolve("config.json"), "{\"architectures\": [");
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelPath(dir)
                        .build();
        UncheckedIOException e = assertThrows(UncheckedIOException.class, criteria::loadModel);
        assertTrue(e.getMessage().contains("config.json"), e.getMessage());
        assertTrue(e.getMessage().contains("malformed"), e.getMessage());
    }

    @Test
    void otherEnginesModelFoldersAreLeftToDjl() throws IOException {
        Path hf = Files.createDirectory(tmp.resolve("hf"));
        write(hf.resolve("config.json"), "{\"architectures\": [\"BertModel\"]}");
        assertTrue(CheckpointLoader.isCheckpoint(hf));
        for (String foreign : new String[] {"model.pt", "model.onnx", "serving.properties"}) {
            Path dir = Files.createDirectory(tmp.resolve("djl-" + foreign));
            write(dir.resolve("config.json"), "{\"architectures\": [\"BertModel\"]}");
            write(dir.resolve(foreign), "");
            assertFalse(CheckpointLoader.isCheckpoint(dir), foreign);
        }
        Path plain = Files.createDirectory(tmp.resolve("plain"));
        assertFalse(CheckpointLoader.isCheckpoint(plain));
        // A .bin that is no llama2.c checkpoint (too short for its header) is not claimed either.
        Path bin = tmp.resolve("weights.bin");
        Files.write(bin, new byte[] {1, 2, 3});
        assertFalse(CheckpointLoader.isCheckpoint(bin));
        assertFalse(CheckpointLoader.isCheckpoint(tmp.resolve("absent")));
    }

    @Test
    void unknownArtifactOfTheZooIsNamed() {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                Criteria.builder()
                                        .setTypes(String.class, float[].class)
                                        .optModelUrls("djl://io.djlattention/bert-large"));
        assertTrue(e.getMessage().contains("djl://io.djlattention/bert-large"), e.getMessage());
        assertTrue(e.getMessage().contains("all-MiniLM-L6-v2"), e.getMessage());
    }

    @Test
    void otherDjlGroupsKeepDjlsOwnResolution() {
        // DJL's own message for a djl:// URL whose zoo has no such model.
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                Criteria.builder()
                                        .setTypes(String.class, float[].class)
                                        .optModelUrls("djl://ai.djl.localmodelzoo/none"));
        assertEquals("Invalid djl URL: djl://ai.djl.localmodelzoo/none", e.getMessage());
    }

    private static void write(Path file, String text) throws IOException {
        Files.writeString(file, text, StandardCharsets.UTF_8);
    }
}
