/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.djlattention.zoo.generate.EngineMetrics;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationEngine;
import io.djlattention.zoo.generate.GenerationResult;
import io.djlattention.zoo.generate.GenerationResult.FinishReason;
import io.djlattention.zoo.generate.TokenSampler;
import io.djlattention.zoo.serving.OpenAiServer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The engine's token-id API on stories260K: streaming to the listener, cancellation (blocks freed
 * before the result completes), stop token ids, top-p, reproducible per-request seeds, a failing
 * listener,
 * bounded admission (and its 429 over HTTP).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class GenerationEngineTest {

    private static GenerationEngine engine(int maxBatch, int maxQueue) throws Exception {
        return GenerationEngine.builder()
                .setDecoder(ServingModels.stories())
                .optNumBlocks(128)
                .optMaxBatchSize(maxBatch)
                .optMaxQueue(maxQueue)
                .build();
    }

    private static int[] prompt(Random rnd) {
        return rnd.ints(1 + rnd.nextInt(30), 0, 512).toArray();
    }

    @Test
    void streamsEveryTokenAndCancelFreesBlocks() throws Exception {
        try (GenerationEngine e = engine(8, 16)) {
            int[] prompt = prompt(new Random());
            List<Integer> streamed = new ArrayList<>();
            CountDownLatch three = new CountDownLatch(3);
            GenerationEngine.Handle h =
                    e.submit(
                            prompt,
                            GenerationConfig.greedy(400),
                            (id, token) -> {
                                synchronized (streamed) {
                                    streamed.add(token);
                                }
                                three.countDown();
                            });
            assertTrue(three.await(30, TimeUnit.SECONDS));
            h.cancel();
            GenerationResult r = h.getResult().get(30, TimeUnit.SECONDS);
            assertEquals(FinishReason.CANCELLED, r.finishReason());
            assertTrue(r.generated().length >= 3 && r.generated().length < 400);
            // The listener got every token up to the cancel, in order (tokens sampled between
            // cancel() and the engine's next iteration are in the result, not streamed).
            int[] got;
            synchronized (streamed) {
                got = streamed.stream().mapToInt(i -> i).toArray();
            }
            assertTrue(got.length >= 3 && got.length <= r.generated().length);
            assertArrayEquals(Arrays.copyOf(r.generated(), got.length), got);
            EngineMetrics m = e.getMetrics();
            assertEquals(m.kvBlocksTotal(), m.kvBlocksFree(), "blocks still held after cancel");
            assertEquals(1, m.cancelled());
            // Streamed tokens equal the uncancelled run's first tokens.
            GenerationResult full = e.submit(prompt, GenerationConfig.greedy(10), null).getResult().get();
            assertArrayEquals(
                    Arrays.copyOf(full.generated(), Math.min(10, r.generated().length)),
                    Arrays.copyOf(r.generated(), Math.min(10, r.generated().length)));
        }
    }

    @Test
    void stopTokenIdsEndGenerationAtTheirFirstOccurrence() throws Exception {
        try (GenerationEngine e = engine(8, 16)) {
            int[] prompt = prompt(new Random());
            int[] free = e.submit(prompt, GenerationConfig.greedy(24), null).getResult().get().generated();
            int stop = free[free.length / 2];
            int first = 0;
            while (free[first] != stop) {
                ++first;
            }
            GenerationConfig c =
                    GenerationConfig.builder().setMaxNewTokens(24).optStopTokenIds(stop).build();
            GenerationResult r = e.submit(prompt, c, null).getResult().get();
            assertEquals(FinishReason.STOP, r.finishReason());
            assertArrayEquals(Arrays.copyOf(free, first + 1), r.generated());
        }
    }

    @Test
    void seededSamplingIsReproducibleAndTinyTopPIsGreedy() throws Exception {
        Random rnd = new Random();
        try (GenerationEngine e = engine(16, 64)) {
            for (int i = 0; i < 6; ++i) {
                int[] p = prompt(rnd);
                long seed = rnd.nextLong();
                GenerationConfig c =
                        GenerationConfig.builder()
                                .setMaxNewTokens(1 + rnd.nextInt(20))
                                .optSampling(0.5f + rnd.nextFloat(), rnd.nextInt(3) * 20, seed)
                                .optTopP(0.5f + 0.5f * rnd.nextFloat())
                                .build();
                // Alone, the same seed draws the same tokens (the generator is the request's own).
                assertArrayEquals(
                        e.submit(p, c, null).getResult().get().generated(),
                        e.submit(p, c, null).getResult().get().generated(),
                        "seed " + seed);
            }
            // top_p small enough keeps only the most likely token: greedy.
            int[] p = prompt(rnd);
            GenerationConfig nucleus =
                    GenerationConfig.builder()
                            .setMaxNewTokens(12)
                            .optSampling(1f, 0, rnd.nextLong())
                            .optTopP(1e-6f)
                            .build();
            assertArrayEquals(
                    e.submit(p, GenerationConfig.greedy(12), null).getResult().get().generated(),
                    e.submit(p, nucleus, null).getResult().get().generated());
        }
    }

    @Test
    void topPDrawsOnlyFromTheNucleusInProportion() {
        // probabilities 0.5, 0.3, 0.15, 0.05: the 0.7 nucleus is {0, 1}, drawn 5:3.
        float[] logits = {
            (float) Math.log(0.5), (float) Math.log(0.3), (float) Math.log(0.15), (float) Math.log(0.05)
        };
        int[] counts = new int[4];
        int draws = 4000;
        long seed = new Random().nextLong();
        TokenSampler s =
                new TokenSampler(
                        GenerationConfig.builder()
                                .setMaxNewTokens(1)
                                .optSampling(1f, 0, seed)
                                .optTopP(0.7f)
                                .build());
        for (int i = 0; i < draws; ++i) {
            counts[s.next(logits)]++;
        }
        assertEquals(0, counts[2] + counts[3], Arrays.toString(counts));
        double p0 = counts[0] / (double) draws;
        double sigma = Math.sqrt(0.625 * 0.375 / draws);
        assertTrue(Math.abs(p0 - 0.625) < 5 * sigma, "seed " + seed + ": " + Arrays.toString(counts));
    }

    @Test
    void aFailingListenerCancelsOnlyItsRequest() throws Exception {
        try (GenerationEngine e = engine(8, 16)) {
            int[] prompt = prompt(new Random());
            GenerationEngine.Handle bad =
                    e.submit(
                            prompt,
                            GenerationConfig.greedy(50),
                            (id, t) -> {
                                throw new IllegalStateException("listener bug");
                            });
            GenerationEngine.Handle good = e.submit(prompt, GenerationConfig.greedy(50), null);
            assertEquals(FinishReason.CANCELLED, bad.getResult().get().finishReason());
            assertEquals(50, good.getResult().get().generated().length);
            assertEquals(e.getMetrics().kvBlocksTotal(), e.getMetrics().kvBlocksFree());
        }
    }

    @Test
    void aFullQueueRefusesAndTheServerSays429() throws Exception {
        try (GenerationEngine e = engine(1, 2)) {
            int[] prompt = prompt(new Random());
            List<GenerationEngine.Handle> accepted = new ArrayList<>();
            int refused = 0;
            for (int i = 0; i < 20; ++i) {
                try {
                    accepted.add(e.submit(prompt, GenerationConfig.greedy(40), null));
                } catch (RejectedExecutionException ex) {
                    ++refused;
                }
            }
            // One running (batch 1) and at most two waiting at any time.
            assertTrue(accepted.size() <= 4 && refused >= 16, accepted.size() + " accepted");
            assertEquals(refused, e.getMetrics().rejected());
            for (GenerationEngine.Handle h : accepted) {
                assertEquals(40, h.getResult().get().generated().length);
            }
            assertThrows(
                    IllegalArgumentException.class,
                    () -> e.submit(new int[] {600}, GenerationConfig.greedy(1), null));
        }
        try (OpenAiServer server =
                ServingModels.start(e -> e.optMaxBatchSize(1).optMaxQueue(1), s -> {})) {
            ServingClient client = new ServingClient(server.getPort());
            String body = new Requests.Spec(new int[] {5, 6, 7}, 100, 0, 1, 0).json(false);
            ExecutorService pool = Executors.newFixedThreadPool(8);
            AtomicInteger tooMany = new AtomicInteger();
            AtomicInteger ok = new AtomicInteger();
            try {
                List<Future<?>> fs = new ArrayList<>();
                for (int i = 0; i < 8; ++i) {
                    fs.add(
                            pool.submit(
                                    () -> {
                                        HttpResponse<String> r = client.post("/v1/completions", body);
                                        if (r.statusCode() == 429) {
                                            assertEquals("1", r.headers().firstValue("retry-after").orElse(null));
                                            assertTrue(r.body().contains("queue is full"), r.body());
                                            tooMany.incrementAndGet();
                                        } else {
                                            assertEquals(200, r.statusCode(), r.body());
                                            ok.incrementAndGet();
                                        }
                                        return null;
                                    }));
                }
                for (Future<?> f : fs) {
                    f.get();
                }
            } finally {
                pool.shutdownNow();
            }
            assertTrue(tooMany.get() > 0 && ok.get() > 0, tooMany + " refused, " + ok + " served");
        }
    }
}
