/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

import io.djlattention.it.TestDevice;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.generate.ContinuousBatchingScheduler;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationResult;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;

/**
 * Prefix sharing between separate requests in the {@link ContinuousBatchingScheduler}: requests
 * with a common prompt prefix of several blocks generate token for token what they generate with
 * sharing off and what each generates alone, while holding one copy of the prefix's full blocks.
 *
 * <p>Exact token equality is the float32 claim, as in {@link DecoderPathsTest}: a request that
 * shares a prefix reads K/V computed from the same tokens at the same positions in another
 * request's prefill; only the summation order of that prefill differs (~1e-6 relative on logits),
 * far below the top-1/top-2 margins of these models. For stories260K the expectation is the
 * reference continuation of two independent implementations: a prompt that is the reference prompt
 * plus the first {@code k} reference tokens must continue with reference token {@code k} onwards.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PrefixSharingTest {

    private static final int BLOCK = 8;

    private NDManager manager;
    private Decoder gpt2;
    private int[][] prompts;
    private GenerationConfig[] configs;

    @BeforeAll
    void build() {
        manager = NDManager.newBaseManager(TestDevice.get());
        gpt2 =
                new Decoder(
                        DecoderConfig.builder()
                                .setArchitecture(DecoderConfig.Architecture.GPT2)
                                .setVocabSize(384)
                                .setHiddenSize(128)
                                .setIntermediateSize(512)
                                .setNumLayers(2)
                                .setNumHeads(2)
                                .optMaxPositions(128)
                                .build());
        gpt2.initializeRandom(manager, 2024, 0.1f);
        Random random = new Random(5);
        int[] prefix = random.ints(40, 0, 384).toArray(); // 5 full blocks of 8
        prompts =
                new int[][] {
                    concat(prefix, random.ints(7, 0, 384).toArray()), // 5 blocks + 7
                    concat(prefix, random.ints(13, 0, 384).toArray()),
                    concat(prefix, new int[] {99}), // the prefix + 1 token
                    concat(prefix, random.ints(8, 0, 384).toArray()), // 48: a block multiple
                    prefix.clone(), // 40, the prefix itself: 4 blocks shareable
                    concat(Arrays.copyOf(prefix, 20), random.ints(10, 0, 384).toArray()),
                    random.ints(9, 0, 384).toArray(), // unrelated
                    null // the first prompt again, sampled
                };
        prompts[7] = prompts[0].clone();
        int[] maxNew = {12, 15, 10, 10, 10, 8, 10, 12};
        configs = new GenerationConfig[prompts.length];
        for (int r = 0; r < prompts.length; ++r) {
            configs[r] =
                    r % 3 == 1
                            ? GenerationConfig.builder()
                                    .setMaxNewTokens(maxNew[r])
                                    .optSampling(0.9f, 40, 300 + r)
                                    .build()
                            : GenerationConfig.greedy(maxNew[r]);
        }
    }

    @AfterAll
    void close() {
        manager.close();
    }

    private static int[] concat(int[] a, int[] b) {
        int[] c = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    @Test
    void requestsSharingAPrefixGenerateWhatTheyGenerateAlone() {
        int[][] alone = new int[prompts.length][];
        for (int r = 0; r < prompts.length; ++r) {
            // Alone, with flash prefill of the whole prompt: no cached prefix on this path.
            alone[r] =
                    run(
                                    gpt2,
                                    new int[][] {prompts[r]},
                                    new GenerationConfig[] {configs[r]},
                                    64,
                                    1,
                                    false,
                                    0,
                                    PrefillAttention.FLASH)
                            .outputs[0];
        }
        Run off = run(gpt2, prompts, configs, 200, 8, false, 0, PrefillAttention.PAGED);
        Run on = run(gpt2, prompts, configs, 200, 8, true, 0, PrefillAttention.PAGED);
        // Chunks of 5: the prefix is registered block by block while it is prefilled.
        Run chunked = run(gpt2, prompts, configs, 200, 8, true, 5, PrefillAttention.PAGED);
        // Flash prefill: a batch with a shared prefix falls back to paged_prefill_attention.
        Run flash = run(gpt2, prompts, configs, 200, 8, true, 0, PrefillAttention.FLASH);
        for (int r = 0; r < prompts.length; ++r) {
            assertArrayEquals(alone[r], off.outputs[r], "request " + r + ", sharing off");
            assertArrayEquals(alone[r], on.outputs[r], "request " + r + ", sharing on");
            assertArrayEquals(alone[r], chunked.outputs[r], "request " + r + ", chunked");
            assertArrayEquals(alone[r], flash.outputs[r], "request " + r + ", flash prefill");
        }
        assertEquals(0, off.sharedTokens);
        // The first request computes the 40-token prefix; then requests 1, 2, 3 and 7 share its
        // 5 blocks (40 tokens), request 4 (the prefix itself, 40 tokens) 4 blocks (its last
        // token is computed), request 5 the 2 blocks of its first 20 tokens, request 6 nothing.
        long expectedShared = 4 * 40 + 32 + 16;
        assertEquals(expectedShared, on.sharedTokens);
        assertEquals(expectedShared, chunked.sharedTokens);
        assertEquals(expectedShared, flash.sharedTokens);
        assertEquals(off.prefilledTokens - expectedShared, on.prefilledTokens);
        assertTrue(
                on.peakBlocks < off.peakBlocks,
                "peak blocks with sharing " + on.peakBlocks + ", without " + off.peakBlocks);
    }

    @Test
    void underBlockPressurePreemptionKeepsTheTokens() {
        int[][] alone = new int[prompts.length][];
        for (int r = 0; r < prompts.length; ++r) {
            alone[r] =
                    run(
                                    gpt2,
                                    new int[][] {prompts[r]},
                                    new GenerationConfig[] {configs[r]},
                                    64,
                                    1,
                                    false,
                                    0,
                                    PrefillAttention.PAGED)
                            .outputs[0];
        }
        // 14 blocks of 8 (112 slots) for 8 requests of up to 68 tokens: running sequences are
        // preempted (their references released) and recomputed, sharing the prefix again.
        for (int chunk : new int[] {0, 6}) {
            Run pressed = run(gpt2, prompts, configs, 14, 8, true, chunk, PrefillAttention.PAGED);
            assertTrue(pressed.preemptions > 0, "no preemption with chunk " + chunk);
            assertTrue(pressed.sharedTokens > 0, "nothing shared with chunk " + chunk);
            for (int r = 0; r < prompts.length; ++r) {
                assertArrayEquals(
                        alone[r], pressed.outputs[r], "request " + r + ", chunk " + chunk);
            }
        }
    }

    @ParameterizedTest(name = "{0} blocks")
    @ValueSource(ints = {40, 12})
    void stories260kContinuesTheReferenceFromSharedPrefixes(int numBlocks) throws IOException {
        JsonArray cases = Stories260k.reference();
        int[] prompt0 = ints(cases.get(0).getAsJsonObject(), "prompt");
        int[] gen0 = ints(cases.get(0).getAsJsonObject(), "generated");
        int[] prompt1 = ints(cases.get(1).getAsJsonObject(), "prompt");
        int[] gen1 = ints(cases.get(1).getAsJsonObject(), "generated");
        try (NDManager m = manager.newSubManager()) {
            Decoder stories = Stories260k.load(m, DataType.FLOAT32);
            int maxNew = 12;
            // Reference prompt + the first k reference tokens: the prompt lengths are 25 (a
            // 24-token prefix of 3 blocks + 1), 32 (a block multiple), 38 and 24 (the prefix).
            int[] ks = {24, 31, 37, 23};
            int[][] prompts = new int[ks.length + 2][];
            int[][] expected = new int[ks.length + 2][];
            for (int i = 0; i < ks.length; ++i) {
                prompts[i] = concat(prompt0, Arrays.copyOf(gen0, ks[i]));
                expected[i] = Arrays.copyOfRange(gen0, ks[i], ks[i] + maxNew);
            }
            // The 24-token prefix with a suffix of its own (no reference: compared with sharing
            // off), and the other reference prompt (6 tokens, shares nothing).
            prompts[ks.length] = concat(prompts[3], new int[] {5, 6, 7});
            prompts[ks.length + 1] = prompt1;
            expected[ks.length + 1] = Arrays.copyOf(gen1, maxNew);
            GenerationConfig[] configs = new GenerationConfig[prompts.length];
            Arrays.fill(configs, GenerationConfig.greedy(maxNew));
            Run off =
                    run(stories, prompts, configs, numBlocks, 8, false, 0, PrefillAttention.PAGED);
            Run on = run(stories, prompts, configs, numBlocks, 8, true, 0, PrefillAttention.PAGED);
            expected[ks.length] = off.outputs[ks.length];
            for (int r = 0; r < prompts.length; ++r) {
                assertArrayEquals(expected[r], off.outputs[r], "request " + r + ", sharing off");
                assertArrayEquals(expected[r], on.outputs[r], "request " + r + ", sharing on");
            }
            assertTrue(on.sharedTokens > 0, "nothing shared");
            if (numBlocks == 40) {
                assertTrue(on.peakBlocks < off.peakBlocks, on.peakBlocks + " vs " + off.peakBlocks);
            } else {
                assertTrue(on.preemptions > 0, "12 blocks should force preemption");
            }
        }
    }

    private static int[] ints(JsonObject c, String key) {
        JsonArray a = c.getAsJsonArray(key);
        int[] v = new int[a.size()];
        for (int i = 0; i < v.length; ++i) {
            v[i] = a.get(i).getAsInt();
        }
        return v;
    }

    /** The outcome of one scheduler run. */
    private static final class Run {
        int[][] outputs;
        long sharedTokens;
        long prefilledTokens;
        int peakBlocks;
        int preemptions;
    }

    private Run run(
            Decoder decoder,
            int[][] prompts,
            GenerationConfig[] configs,
            int numBlocks,
            int maxBatch,
            boolean sharing,
            int chunk,
            PrefillAttention prefill) {
        try (PagedKvCache cache =
                decoder.newCacheBuilder(manager)
                        .optBlockSize(BLOCK)
                        .optNumBlocks(numBlocks)
                        .build()) {
            ContinuousBatchingScheduler scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .optMaxBatchSize(maxBatch)
                            .optPrefillAttention(prefill)
                            .optMaxPrefillChunk(chunk)
                            .optPrefixSharing(sharing)
                            .build();
            long[] ids = new long[prompts.length];
            for (int r = 0; r < prompts.length; ++r) {
                ids[r] = scheduler.submit(prompts[r], configs[r]);
            }
            Map<Long, GenerationResult> results = scheduler.runToCompletion();
            assertEquals(cache.getNumBlocks(), cache.getNumFreeBlocks(), "blocks leaked");
            assertEquals(0, cache.getNumIndexedBlocks(), "index not empty");
            Run run = new Run();
            run.outputs = new int[prompts.length][];
            for (int r = 0; r < prompts.length; ++r) {
                run.outputs[r] = results.get(ids[r]).generated();
                assertEquals(configs[r].getMaxNewTokens(), run.outputs[r].length);
            }
            run.sharedTokens = scheduler.getSharedPromptTokens();
            run.prefilledTokens = scheduler.getPrefilledTokens();
            run.peakBlocks = scheduler.getPeakUsedBlocks();
            run.preemptions = scheduler.getPreemptions();
            return run;
        }
    }
}
