/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.serving.EmbeddingModel;
import io.djlattention.serving.EmbeddingService;
import io.djlattention.serving.OpenAiServer;
import io.djlattention.zoo.encoder.MiniLm;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * Embedding requests in bounded memory and fairly: no model call holds more than the batch limit
 * however many texts a request sends (the model's working memory is bounded by the batch, not by
 * the request), a small request is not stuck behind a large one, a failing text fails only its
 * request, and usage counts every token the model embeds (up to its 512 positions, not the 128 of
 * all-MiniLM-L6-v2's tokenizer.json).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EmbeddingBatchingTest {

    /** A model whose embedding of a text is its length and first character, taking 2 ms a text. */
    private static final class RecordingModel implements EmbeddingModel {
        final ConcurrentLinkedQueue<List<String>> calls = new ConcurrentLinkedQueue<>();
        final AtomicInteger releases = new AtomicInteger();
        /** Releases seen by each call, when it started. */
        final ConcurrentLinkedQueue<Integer> releasesAtCall = new ConcurrentLinkedQueue<>();

        @Override
        public List<float[]> embed(List<String> texts) throws Exception {
            calls.add(List.copyOf(texts));
            releasesAtCall.add(releases.get());
            Thread.sleep(2L * texts.size());
            List<float[]> out = new ArrayList<>();
            for (String t : texts) {
                if (t.startsWith("FAIL")) {
                    throw new IllegalArgumentException("input: cannot embed '" + t + "'");
                }
                out.add(new float[] {t.length(), t.charAt(0)});
            }
            return out;
        }

        @Override
        public int countTokens(String text) {
            return text.length();
        }

        @Override
        public void releaseMemory() {
            releases.incrementAndGet();
        }

        @Override
        public void close() {}
    }

    private static List<String> texts(String prefix, int n, Random random) {
        return IntStream.range(0, n)
                .mapToObj(i -> prefix + "x".repeat(random.nextInt(20)))
                .collect(Collectors.toList());
    }

    private static void assertEmbeds(List<String> texts, List<float[]> got) {
        assertEquals(texts.size(), got.size());
        for (int i = 0; i < texts.size(); ++i) {
            assertArrayEquals(new float[] {texts.get(i).length(), texts.get(i).charAt(0)}, got.get(i), "text " + i);
        }
    }

    @Test
    void callsAreBoundedAndSmallRequestsAreNotStuckBehindLargeOnes() throws Exception {
        RecordingModel model = new RecordingModel();
        Random random = new Random(25);
        int batch = 5;
        try (EmbeddingService service =
                EmbeddingService.builder().setModel(model).optMaxBatchInputs(batch).build()) {
            List<String> large = texts("L", 301, random);
            List<String> other = texts("M", 47, random);
            CompletableFuture<List<float[]>> big = service.submit(large);
            CompletableFuture<List<float[]>> medium = service.submit(other);
            Thread.sleep(20);
            List<String> small = List.of("S-small");
            CompletableFuture<List<float[]>> tiny = service.submit(small);
            assertEmbeds(small, tiny.get(30, TimeUnit.SECONDS));
            assertFalse(big.isDone(), "the small request waited for all of the large one");
            assertEmbeds(other, medium.get(30, TimeUnit.SECONDS));
            assertEmbeds(large, big.get(30, TimeUnit.SECONDS));
            int most = model.calls.stream().mapToInt(List::size).max().orElse(0);
            assertTrue(most <= batch, "a model call held " + most + " texts, limit " + batch);
            int total = model.calls.stream().mapToInt(List::size).sum();
            assertEquals(large.size() + other.size() + small.size(), total, "texts embedded twice or lost");
            assertEquals(model.calls.size(), service.getBatches());
        }
    }

    /**
     * Memory is released once a burst is over (EmbeddingMemoryTest measures what that gives back),
     * not between the calls of a burst, nor between requests sent one after another, nor again
     * while nothing runs.
     */
    @Test
    void memoryIsReleasedOnceAfterEachBurst() throws Exception {
        RecordingModel model = new RecordingModel();
        Random random = new Random(3);
        long idle = EmbeddingService.RELEASE_AFTER_IDLE_MILLIS;
        try (EmbeddingService service =
                EmbeddingService.builder().setModel(model).optMaxBatchInputs(4).build()) {
            Thread.sleep(idle + 200);
            assertEquals(0, model.releases.get(), "released before any call");
            for (int burst = 1; burst <= 2; ++burst) {
                int first = model.calls.size();
                // Requests one after another, each right after the last answer.
                for (int r = 0; r < 5; ++r) {
                    List<String> texts = texts("R", 1 + random.nextInt(12), random);
                    assertEmbeds(texts, service.submit(texts).get(30, TimeUnit.SECONDS));
                }
                List<Integer> seen = model.releasesAtCall.stream().skip(first).toList();
                int before = burst - 1;
                assertTrue(
                        seen.size() >= 5 && seen.stream().allMatch(n -> n == before),
                        "released during burst " + burst + ": releases seen by its calls " + seen);
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(idle + 5_000);
                while (model.releases.get() < burst && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                assertEquals(burst, model.releases.get(), "no release after burst " + burst);
                Thread.sleep(idle + 200);
                assertEquals(burst, model.releases.get(), "released again with nothing run");
            }
        }
    }

    @Test
    void aFailingTextFailsOnlyItsRequest() throws Exception {
        RecordingModel model = new RecordingModel();
        Random random = new Random(7);
        try (EmbeddingService service =
                EmbeddingService.builder().setModel(model).optMaxBatchInputs(4).build()) {
            List<String> good = texts("G", 13, random);
            List<String> bad = new ArrayList<>(texts("B", 6, random));
            bad.add(3, "FAIL-me");
            CompletableFuture<List<float[]>> g = service.submit(good);
            CompletableFuture<List<float[]>> b = service.submit(bad);
            assertEmbeds(good, g.get(30, TimeUnit.SECONDS));
            var e = org.junit.jupiter.api.Assertions.assertThrows(
                    java.util.concurrent.ExecutionException.class, () -> b.get(30, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof IllegalArgumentException, String.valueOf(e.getCause()));
            assertEquals(1, service.getFailed());
            assertEquals(0, service.getQueueLength());
        }
    }

    @Test
    void usageCountsTheTokensTheModelEmbeds() throws Exception {
        Random random = new Random(11);
        String[] words = {"the", "cat", "sat", "on", "a", "warm", "mat", "while", "rain", "fell"};
        List<String> inputs = new ArrayList<>();
        for (int n : new int[] {3, 300, 700}) {
            inputs.add(
                    IntStream.range(0, n)
                            .mapToObj(i -> words[random.nextInt(words.length)])
                            .collect(Collectors.joining(" ")));
        }
        int want = 0;
        try (HuggingFaceTokenizer reference =
                HuggingFaceTokenizer.newInstance(
                        MiniLm.tokenizerFile(), Map.of("truncation", "false", "padding", "false"))) {
            for (String t : inputs) {
                want += Math.min(reference.encode(t).getIds().length, 512);
            }
        }
        assertTrue(want > 3 * 128, "the inputs are too short to tell: " + want);
        try (OpenAiServer server = ServingModels.start(e -> {}, s -> {})) {
            JsonObject req = new JsonObject();
            JsonArray a = new JsonArray();
            inputs.forEach(a::add);
            req.add("input", a);
            ServingClient.Response r = new ServingClient(server.getPort()).post("/v1/embeddings", req.toString());
            assertEquals(200, r.statusCode(), r.body());
            JsonObject usage = JsonParser.parseString(r.body()).getAsJsonObject().getAsJsonObject("usage");
            assertEquals(want, usage.get("prompt_tokens").getAsInt());
            assertEquals(want, usage.get("total_tokens").getAsInt());
        }
    }
}
