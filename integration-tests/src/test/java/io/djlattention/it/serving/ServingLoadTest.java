/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.djlattention.serving.OpenAiServer;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * 64 concurrent clients over loopback, more than 1,000 requests mixing embeddings and completions,
 * streaming and not, with random prompt lengths: every (greedy) completion equals the same request
 * run alone, token for token, every embedding equals the one of
 * its text embedded alone, a tenth of the streaming clients hang up midway, and at the end every
 * KV block is free again.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ServingLoadTest {

    private static final int CLIENTS = 64;
    private static final int REQUESTS = 1024;

    /**
     * Embeddings (L2-normalised, float32) of a text inside a merged batch against the text alone:
     * the fused path packs tokens without padding, so a text's rows go through the same operations
     * in any batch but for the GEMMs' blocking over the total token count. Measured max |diff|
     * 1.3e-7 on this CPU; the bound leaves room for other GEMM kernels (AVX2 vs AVX-512).
     */
    private static final float EMBEDDING_BOUND = 1e-5f;

    private OpenAiServer server;
    private ServingClient client;

    @BeforeAll
    void start() throws Exception {
        server = ServingModels.start(e -> {}, s -> {});
        client = new ServingClient(server.getPort());
    }

    @AfterAll
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void concurrentMixedLoadMatchesSoloRuns() throws Exception {
        long seed = System.nanoTime();
        Random rnd = new Random(seed);
        String context = "seed " + seed;
        List<Requests.Spec> specs = Requests.specs(rnd, 128, 64, 24);
        List<String> sentences = Requests.sentences(rnd, 64, 40);

        // Solo references, one request at a time.
        List<int[]> solo = new ArrayList<>();
        for (Requests.Spec s : specs) {
            ServingClient.Completion c = client.complete(s.json(false));
            assertEquals(200, c.status(), context + ": " + c.body());
            solo.add(c.tokenIds());
        }
        List<float[]> soloEmbeddings = new ArrayList<>();
        int[] status = new int[1];
        for (String s : sentences) {
            List<float[]> e = client.embed(ServingModels.EMBEDDER, List.of(s), status);
            assertEquals(200, status[0], context);
            soloEmbeddings.add(e.get(0));
        }
        Map<String, Double> before = client.metrics();
        double totalBlocks = before.get("djl_attn_kv_blocks_total");
        assertEquals(totalBlocks, before.get("djl_attn_kv_blocks_free"), context);

        AtomicInteger next = new AtomicInteger();
        AtomicInteger completions = new AtomicInteger();
        AtomicInteger streamed = new AtomicInteger();
        AtomicInteger hungUp = new AtomicInteger();
        AtomicInteger embedded = new AtomicInteger();
        Queue<String> failures = new ConcurrentLinkedQueue<>();
        Queue<SoloDivergence> divergences = new ConcurrentLinkedQueue<>();
        float[] worst = new float[1];
        ExecutorService pool = Executors.newFixedThreadPool(CLIENTS);
        try {
            List<Future<?>> clients = new ArrayList<>();
            for (int c = 0; c < CLIENTS; ++c) {
                long clientSeed = rnd.nextLong();
                clients.add(
                        pool.submit(
                                () -> {
                                    Random r = new Random(clientSeed);
                                    for (int i = next.getAndIncrement();
                                            i < REQUESTS;
                                            i = next.getAndIncrement()) {
                                        try {
                                            if (r.nextInt(10) < 3) {
                                                int n = 1 + r.nextInt(4);
                                                List<Integer> which = new ArrayList<>();
                                                List<String> texts = new ArrayList<>();
                                                for (int k = 0; k < n; ++k) {
                                                    int w = r.nextInt(sentences.size());
                                                    which.add(w);
                                                    texts.add(sentences.get(w));
                                                }
                                                int[] st = new int[1];
                                                List<float[]> got =
                                                        client.embed(
                                                                ServingModels.EMBEDDER, texts, st);
                                                if (st[0] != 200) {
                                                    failures.add("embedding status " + st[0]);
                                                    continue;
                                                }
                                                for (int k = 0; k < n; ++k) {
                                                    float d =
                                                            maxDiff(
                                                                    soloEmbeddings.get(which.get(k)),
                                                                    got.get(k));
                                                    synchronized (worst) {
                                                        worst[0] = Math.max(worst[0], d);
                                                    }
                                                    if (d > EMBEDDING_BOUND) {
                                                        failures.add(
                                                                "embedding of text "
                                                                        + which.get(k)
                                                                        + " differs by "
                                                                        + d);
                                                    }
                                                }
                                                embedded.incrementAndGet();
                                                continue;
                                            }
                                            int s = r.nextInt(specs.size());
                                            Requests.Spec spec = specs.get(s);
                                            boolean stream = r.nextBoolean();
                                            int hangUpAfter = -1;
                                            if (stream && spec.maxTokens() > 1 && r.nextInt(10) == 0) {
                                                hangUpAfter = 1 + r.nextInt(spec.maxTokens() - 1);
                                            }
                                            ServingClient.Completion got =
                                                    stream
                                                            ? client.stream(spec.json(true), hangUpAfter)
                                                            : client.complete(spec.json(false));
                                            int[] want = solo.get(s);
                                            if (got.status() == -1) {
                                                hungUp.incrementAndGet();
                                                if (!Arrays.equals(
                                                        Arrays.copyOf(want, got.tokenIds().length),
                                                        got.tokenIds())) {
                                                    divergences.add(
                                                            new SoloDivergence(
                                                                    s, true, want, got.tokenIds()));
                                                }
                                                continue;
                                            }
                                            if (got.status() != 200) {
                                                failures.add("spec " + s + ": status " + got.status() + " " + got.body());
                                            } else if (!Arrays.equals(want, got.tokenIds())) {
                                                divergences.add(
                                                        new SoloDivergence(
                                                                s, stream, want, got.tokenIds()));
                                            }
                                            completions.incrementAndGet();
                                            if (stream) {
                                                streamed.incrementAndGet();
                                            }
                                        } catch (Exception e) {
                                            failures.add("request " + i + ": " + e);
                                        }
                                    }
                                    return null;
                                }));
            }
            for (Future<?> f : clients) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        // A greedy run may leave its solo run only at a float32 tie (SoloDivergence).
        int ties = SoloDivergence.tiedSpecs(divergences, specs, failures).size();
        assertTrue(failures.isEmpty(), context + ": " + failures.size() + " failures, first " + failures.peek());
        assertTrue(
                ties <= SoloDivergence.maxTiedSpecs(specs),
                context + ": " + ties + " of " + specs.size() + " specs left their solo run at a"
                        + " float32 tie: more than rounding explains");
        assertTrue(embedded.get() > 0 && completions.get() > 0 && streamed.get() > 0, context);
        assertEquals(REQUESTS, embedded.get() + completions.get() + hungUp.get(), context);
        System.out.printf(
                "serving load: %d completions (%d streamed), %d embeddings, %d hang-ups; worst"
                        + " embedding diff %.3g; %d specs left their solo run at a float32"
                        + " tie%n",
                completions.get(), streamed.get(), embedded.get(), hungUp.get(), worst[0], ties);
        Map<String, Double> after = waitForIdle(client);
        assertEquals(totalBlocks, after.get("djl_attn_kv_blocks_free"), context + ": blocks leaked");
        assertEquals(0.0, after.get("djl_attn_running_sequences"), context);
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void hangingUpMidStreamCancelsAndFreesAtOnce() throws Exception {
        Map<String, Double> before = waitForIdle(client);
        int[] prompt = new Random().ints(8, 0, 512).toArray();
        Requests.Spec spec = new Requests.Spec(prompt, 500, 0, 1, 0);
        ServingClient.Completion c = client.stream(spec.json(true), 2);
        assertEquals(-1, c.status());
        Map<String, Double> after = waitForIdle(client);
        assertEquals(
                before.get("djl_attn_completion_requests_total{outcome=\"cancelled\"}") + 1,
                after.get("djl_attn_completion_requests_total{outcome=\"cancelled\"}"));
        double generated =
                after.get("djl_attn_generated_tokens_total")
                        - before.get("djl_attn_generated_tokens_total");
        assertTrue(generated < 500, "the sequence ran on after the hang-up: " + generated);
        assertEquals(after.get("djl_attn_kv_blocks_total"), after.get("djl_attn_kv_blocks_free"));
    }

    /** Polls /metrics until nothing runs or waits (cancellations land within a step). */
    static Map<String, Double> waitForIdle(ServingClient client) throws Exception {
        Map<String, Double> m = null;
        for (int i = 0; i < 500; ++i) {
            m = client.metrics();
            if (m.get("djl_attn_running_sequences") == 0
                    && m.get("djl_attn_queue_length") == 0
                    && m.get("djl_attn_http_in_flight") <= 1) {
                return m;
            }
            Thread.sleep(10);
        }
        assertNotNull(m);
        return m;
    }

    static float maxDiff(float[] a, float[] b) {
        if (a.length != b.length) {
            return Float.POSITIVE_INFINITY;
        }
        float d = 0;
        for (int i = 0; i < a.length; ++i) {
            d = Math.max(d, Math.abs(a[i] - b[i]));
        }
        return d;
    }
}
