/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

import io.djlattention.it.paged.Stories260k;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.generate.GenerationBlock;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The built-in stories260K (the model zoo's default decoder, {@code
 * djl://io.djlattention/stories260K} through DJL's {@code Criteria}) reproduces llama2.c's greedy reference ids exactly through its predictor on every path: paged
 * cache + continuous-batching scheduler (flash and paged prefill, ample blocks and too few blocks,
 * which forces preemption), and flash / stock attention over a contiguous cache.
 */
class Stories260kZooTest {

    private static int[] ints(JsonArray a) {
        int[] v = new int[a.size()];
        for (int i = 0; i < v.length; ++i) {
            v[i] = a.get(i).getAsInt();
        }
        return v;
    }

    @ParameterizedTest(name = "{0} prefill {1} blocks {2}")
    @CsvSource({"paged, flash, 0", "paged, paged, 0", "paged, paged, 10", "flash, flash, 0",
        "stock, flash, 0"})
    void greedyMatchesReference(String attention, String prefill, int numBlocks) throws Exception {
        JsonArray cases = Stories260k.reference();
        List<int[]> prompts = new ArrayList<>();
        List<int[]> expected = new ArrayList<>();
        int maxNew = 0;
        for (int i = 0; i < cases.size(); ++i) {
            JsonObject c = cases.get(i).getAsJsonObject();
            prompts.add(ints(c.getAsJsonArray("prompt")));
            expected.add(ints(c.getAsJsonArray("generated")));
            maxNew = Math.max(maxNew, expected.get(i).length);
        }
        Criteria<int[], int[]> criteria =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelUrls("djl://io.djlattention/stories260K")
                        .optEngine("PyTorch")
                        .optArgument("attention", attention)
                        .optArgument("prefill", prefill)
                        .optArgument("numBlocks", numBlocks)
                        .optArgument("blockSize", 8)
                        .optArgument("maxNewTokens", maxNew)
                        .build();
        try (ZooModel<int[], int[]> model = criteria.loadModel();
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            GenerationBlock block = DecoderModels.generationBlock(model);
            assertEquals(attention, block.getAttention().name().toLowerCase(java.util.Locale.ROOT));
            assertEquals(maxNew, block.getGenerationConfig().getMaxNewTokens());
            List<int[]> got = predictor.batchPredict(prompts);
            for (int i = 0; i < prompts.size(); ++i) {
                int[] want = expected.get(i);
                // The reference stops some cases early; the first ids must agree exactly.
                assertEquals(maxNew, got.get(i).length, "case " + i);
                assertArrayEquals(
                        want, Arrays.copyOf(got.get(i), want.length), attention + " case " + i);
            }
        }
    }

    @Test
    void llama2cFileLoadsLikeTheBuiltInModel(@TempDir Path temp) throws Exception {
        // A llama2.c .bin file given by path goes through the same loader as the resource.
        Path file = temp.resolve("stories260K.bin");
        try (InputStream in = DecoderModels.class.getResourceAsStream(DecoderModels.STORIES260K)) {
            Files.copy(in, file);
        }
        JsonObject c = Stories260k.reference().get(1).getAsJsonObject();
        int[] want = ints(c.getAsJsonArray("generated"));
        Criteria<int[], int[]> criteria =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optArgument("maxNewTokens", want.length)
                        .build();
        try (ZooModel<int[], int[]> model = DecoderModels.load(file, criteria);
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            assertEquals("stories260K.bin", model.getName());
            GenerationBlock block = (GenerationBlock) model.getBlock();
            assertEquals(512, block.getDecoder().getConfig().getVocabSize());
            assertEquals(1, block.getEosTokenId()); // llama2.c's run.c stops at BOS
            assertArrayEquals(want, predictor.predict(ints(c.getAsJsonArray("prompt"))));
        }
    }
}
