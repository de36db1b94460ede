/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * Batch-invariant mode ({@code GenerationEngine.Builder.optBatchInvariant}): under forced
 * preemption (a 12-block cache, 24 concurrent clients, 200 requests) every completion, greedy or
 * seeded sampling, streamed or not, equals its solo run bit for bit: no float32-tie allowance, as
 * the default mode needs ({@link SoloDivergence}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ServingBatchInvariantTest {

    private OpenAiServer server;
    private ServingClient client;

    @BeforeAll
    void start() throws Exception {
        server =
                ServingModels.start(
                        e -> e.optNumBlocks(12).optMaxBatchSize(16).optBatchInvariant(true), s -> {});
        client = new ServingClient(server.getPort());
    }

    @AfterAll
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    @Test
    void outputsEqualSoloRunsBitForBitUnderPreemption() throws Exception {
        long seed = System.nanoTime();
        Random rnd = new Random(seed);
        List<Requests.Spec> specs = new ArrayList<>(Requests.specs(rnd, 32, 64, 24));
        for (Requests.Spec g : Requests.specs(rnd, 10, 64, 24)) {
            // Seeded sampling: the draw sees the same probabilities only if the logits are equal.
            specs.add(new Requests.Spec(g.prompt(), g.maxTokens(), 0.9, 0.95, rnd.nextLong()));
        }
        List<int[]> solo = new ArrayList<>();
        for (Requests.Spec s : specs) {
            ServingClient.Completion c = client.complete(s.json(false));
            assertEquals(200, c.status(), c.body());
            solo.add(c.tokenIds());
        }
        double preemptionsBefore = client.metrics().get("djl_attn_preemptions_total");
        Queue<String> failures = new ConcurrentLinkedQueue<>();
        ExecutorService pool = Executors.newFixedThreadPool(24);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < 200; ++i) {
                int s = rnd.nextInt(specs.size());
                boolean stream = rnd.nextBoolean();
                fs.add(
                        pool.submit(
                                () -> {
                                    ServingClient.Completion c =
                                            stream
                                                    ? client.stream(specs.get(s).json(true), -1)
                                                    : client.complete(specs.get(s).json(false));
                                    if (c.status() != 200) {
                                        failures.add("spec " + s + ": " + c.status() + " " + c.body());
                                    } else if (!Arrays.equals(solo.get(s), c.tokenIds())) {
                                        failures.add(
                                                "spec " + s + (stream ? " streamed" : "") + ": solo "
                                                        + Arrays.toString(solo.get(s)) + ", got "
                                                        + Arrays.toString(c.tokenIds()));
                                    }
                                    return null;
                                }));
            }
            for (Future<?> f : fs) {
                f.get(240, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(
                failures.isEmpty(),
                "seed " + seed + ": " + failures.size() + " of 200 differ, first " + failures.peek());
        double preemptions = client.metrics().get("djl_attn_preemptions_total") - preemptionsBefore;
        assertTrue(preemptions > 0, "seed " + seed + ": nothing was preempted: the test proves nothing");
        var m = ServingLoadTest.waitForIdle(client);
        assertEquals(m.get("djl_attn_kv_blocks_total"), m.get("djl_attn_kv_blocks_free"));
    }
}
