/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.djlattention.serving.OpenAiServer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
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
 * A soak of more than 10,000 short requests (completions streamed and not, embeddings) from 16
 * clients: every one succeeds, and live native memory, read as NativeResourceTest reads it (the
 * resident size of a JVM whose heap is fixed and pre-touched), does not grow beyond a bound after a
 * warm-up.
 */
class ServingSoakTest {

    private static final int CLIENTS = 16;
    private static final int WARM_UP = 1_500;
    private static final int SOAK = 10_000;

    /**
     * Allowed growth of the resident size over the soak. Measured on the 2-core machine: 17-22
     * MiB over the first 10,000 requests after the warm-up, then 1.2, 0.6 and 0.2 MiB over three
     * more rounds of 10,000 (malloc arenas and Netty's buffer pools filling, then flat: no
     * per-request leak). A leak of the per-request step arrays or response buffers (tens of KiB
     * each) would exceed the bound several times over; a leaked sequence's KV blocks would show as
     * failures (the pool is fixed) and in the free-block check.
     */
    private static final long BOUND_KIB = 64 * 1024;

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void tenThousandShortRequestsKeepNativeMemoryBounded() throws Exception {
        try (OpenAiServer server = ServingModels.start(e -> {}, s -> {})) {
            ServingClient client = new ServingClient(server.getPort());
            long seed = System.nanoTime();
            run(client, new Random(seed), WARM_UP);
            System.gc();
            long before = residentKiB();
            run(client, new Random(seed + 1), SOAK);
            System.gc();
            long grown = residentKiB() - before;
            System.out.printf("soak: %d requests, resident size grew by %d KiB%n", SOAK, grown);
            assertTrue(grown < BOUND_KIB, "resident memory grew by " + grown + " KiB");
            Map<String, Double> m = ServingLoadTest.waitForIdle(client);
            assertEquals(m.get("djl_attn_kv_blocks_total"), m.get("djl_attn_kv_blocks_free"));
        }
    }

    private static void run(ServingClient client, Random rnd, int requests) throws Exception {
        AtomicInteger next = new AtomicInteger();
        Queue<String> failures = new ConcurrentLinkedQueue<>();
        List<String> texts = Requests.sentences(rnd, 64, 12);
        ExecutorService pool = Executors.newFixedThreadPool(CLIENTS);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int k = 0; k < CLIENTS; ++k) {
                long clientSeed = rnd.nextLong();
                fs.add(
                        pool.submit(
                                () -> {
                                    Random r = new Random(clientSeed);
                                    int[] st = new int[1];
                                    for (int i = next.getAndIncrement();
                                            i < requests;
                                            i = next.getAndIncrement()) {
                                        if (r.nextInt(8) == 0) {
                                            client.embed(
                                                    ServingModels.EMBEDDER,
                                                    List.of(texts.get(r.nextInt(texts.size()))),
                                                    st);
                                            if (st[0] != 200) {
                                                failures.add("embedding: " + st[0]);
                                            }
                                            continue;
                                        }
                                        Requests.Spec s = Requests.specs(r, 1, 8, 3).get(0);
                                        ServingClient.Completion c =
                                                r.nextBoolean()
                                                        ? client.stream(s.json(true), -1)
                                                        : client.complete(s.json(false));
                                        if (c.status() != 200 || c.tokenIds().length != s.maxTokens()) {
                                            failures.add("completion: " + c.status() + " " + c.body());
                                        }
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
        assertTrue(failures.isEmpty(), failures.size() + " failed, first " + failures.peek());
    }

    private static long residentKiB() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IOException("no VmRSS in /proc/self/status");
    }
}
