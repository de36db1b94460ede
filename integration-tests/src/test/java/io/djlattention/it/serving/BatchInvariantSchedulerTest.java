/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;

import io.djlattention.paged.PagedKvCache;
import io.djlattention.it.TestDevice;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.generate.ContinuousBatchingScheduler;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationResult;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * Batch invariance at the scheduler, bit for bit on the logits: 48 requests (greedy and seeded
 * sampling, prompts of 1 to 64 ids) run together on a 12-block cache that preempts them over and
 * over; with {@code optBatchInvariant} every logits row each token was chosen from equals, bit for
 * bit, the row of the same request run alone, and so do the tokens. The same workload in the
 * default mode must differ in some row (the control: otherwise the workload would not exercise
 * what the mode fixes and the test would prove nothing).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class BatchInvariantSchedulerTest {

    private static final int BLOCKS = 12;

    /** A request: prompt and configuration. */
    private record Request(int[] prompt, GenerationConfig config) {}

    /** What one run saw: per request, its tokens and the logits rows they were chosen from. */
    private record Run(List<int[]> tokens, List<List<float[]>> logits, int preemptions) {}

    private static List<Request> requests(Random rnd, int n) {
        List<Request> out = new ArrayList<>();
        for (int i = 0; i < n; ++i) {
            int[] prompt = new int[1 + rnd.nextInt(64)];
            for (int j = 0; j < prompt.length; ++j) {
                prompt[j] = rnd.nextInt(512);
            }
            GenerationConfig.Builder c = GenerationConfig.builder().setMaxNewTokens(1 + rnd.nextInt(24));
            if (i % 3 == 2) {
                c.optSampling(0.9f, 0, rnd.nextLong()).optTopP(0.95f);
            }
            out.add(new Request(prompt, c.build()));
        }
        return out;
    }

    /** Runs the requests together (all submitted at once), or each alone. */
    private static Run run(List<Request> requests, boolean together, boolean invariant) throws Exception {
        Decoder decoder = ServingModels.stories();
        List<int[]> tokens = new ArrayList<>();
        List<List<float[]>> logits = new ArrayList<>();
        int preemptions = 0;
        try (NDManager m = NDManager.newBaseManager(TestDevice.get());
                PagedKvCache cache = decoder.newCacheBuilder(m).optBlockSize(16).optNumBlocks(BLOCKS).build()) {
            Map<Long, List<float[]>> rows = new HashMap<>();
            ContinuousBatchingScheduler s =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .optMaxBatchSize(16)
                            .optBatchInvariant(invariant)
                            .optLogitsHook((id, row) -> rows.computeIfAbsent(id, k -> new ArrayList<>()).add(row.clone()))
                            .build();
            List<Long> ids = new ArrayList<>();
            Map<Long, GenerationResult> results = new HashMap<>();
            for (Request r : requests) {
                ids.add(s.submit(r.prompt(), r.config()));
                if (!together) {
                    results.putAll(s.runToCompletion());
                }
            }
            results.putAll(s.runToCompletion());
            for (long id : ids) {
                GenerationResult r = results.get(id);
                assertEquals(GenerationResult.FinishReason.LENGTH, r.finishReason(), "request " + id);
                tokens.add(r.generated());
                logits.add(rows.get(id));
            }
            preemptions = s.getPreemptions();
        }
        return new Run(tokens, logits, preemptions);
    }

    /** How many logits rows of {@code got} differ in any bit from {@code want}'s. */
    private static int differingRows(Run want, Run got) {
        int differ = 0;
        for (int i = 0; i < want.logits().size(); ++i) {
            List<float[]> a = want.logits().get(i);
            List<float[]> b = got.logits().get(i);
            for (int t = 0; t < Math.min(a.size(), b.size()); ++t) {
                // Arrays.equals on floats compares floatToIntBits: bit for bit.
                if (!java.util.Arrays.equals(a.get(t), b.get(t))) {
                    ++differ;
                }
            }
        }
        return differ;
    }

    @Test
    void logitsEqualSoloRunsBitForBitUnderPreemption() throws Exception {
        long seed = System.nanoTime();
        List<Request> requests = requests(new Random(seed), 48);
        Run solo = run(requests, false, true);
        Run together = run(requests, true, true);
        assertTrue(together.preemptions() > 0, "seed " + seed + ": nothing was preempted");
        for (int i = 0; i < requests.size(); ++i) {
            assertArrayEquals(solo.tokens().get(i), together.tokens().get(i), "seed " + seed + ", request " + i);
        }
        assertEquals(0, differingRows(solo, together), "seed " + seed + ": logits rows differ from the solo run's");

        Run defaultSolo = run(requests, false, false);
        Run defaultTogether = run(requests, true, false);
        assertTrue(
                differingRows(defaultSolo, defaultTogether) > 0,
                "seed " + seed + ": the default mode gave solo logits bit for bit too: the workload"
                        + " does not exercise batch variance");
    }
}
