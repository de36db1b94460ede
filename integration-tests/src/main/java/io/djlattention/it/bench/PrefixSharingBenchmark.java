/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.ndarray.NDManager;

import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.generate.ContinuousBatchingScheduler;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationResult;

import java.util.Arrays;
import java.util.Map;
import java.util.Random;

/**
 * Prefix sharing between requests on the CPU: 8 requests with the same 256-token system prompt and
 * a 32-token question each (288-token prompts), 16 greedy new tokens each, through the {@link
 * ContinuousBatchingScheduler} with {@code optPrefixSharing} off and on.
 *
 * <p>Model: the GPT-2-style decoder of {@link PagedDecodeBenchmark} (4 layers, C = 512, 8 heads of
 * 64, MLP 2048, vocab 8192, float32, fixed random weights); {@link PagedKvCache} with blocks of 16,
 * room for everything; default (flash) prefill. Reported per mode: prompt tokens prefilled, prompt
 * tokens served from shared blocks, the peak of blocks in use, the time until every request has its
 * first token (the end of the last step that prefilled anything) and the time until all have
 * finished. One warm-up run per mode, then the median of 5 runs, the two modes taking turns so that
 * load from other processes falls on both alike. The generated tokens of the two modes are compared
 * (they must be identical).
 *
 * <p>Run: {@code OMP_WAIT_POLICY=PASSIVE mvn -B -Pprefix-bench -DskipTests verify}.
 */
public final class PrefixSharingBenchmark {

    private static final int REQUESTS = 8;
    private static final int SYSTEM_PROMPT = 256;
    private static final int QUESTION = 32;
    private static final int NEW_TOKENS = 16;
    private static final int BLOCK_SIZE = 16;
    private static final int RUNS = 5;

    private PrefixSharingBenchmark() {}

    /**
     * Runs the benchmark and prints a markdown table.
     *
     * @param args unused
     */
    public static void main(String[] args) {
        System.out.println(DecoderBenchSetup.deviceLine());
        DecoderConfig config = DecoderBenchSetup.gpt2Config();
        Random random = new Random(7);
        int[] system = random.ints(SYSTEM_PROMPT, 0, DecoderBenchSetup.VOCAB_SIZE).toArray();
        int[][] prompts = new int[REQUESTS][];
        for (int r = 0; r < REQUESTS; ++r) {
            prompts[r] = Arrays.copyOf(system, SYSTEM_PROMPT + QUESTION);
            for (int i = SYSTEM_PROMPT; i < prompts[r].length; ++i) {
                prompts[r][i] = random.nextInt(DecoderBenchSetup.VOCAB_SIZE);
            }
        }
        try (NDManager manager = NDManager.newBaseManager()) {
            Decoder decoder = new Decoder(config);
            decoder.initializeRandom(manager, 1, 0.05f);
            Result[][] results = new Result[2][RUNS];
            for (int run = -1; run < RUNS; ++run) {
                for (int mode = 0; mode < 2; ++mode) {
                    Result r = run(decoder, manager, prompts, mode == 1);
                    if (run >= 0) {
                        results[mode][run] = r;
                    }
                }
            }
            boolean same = true;
            for (int run = 0; run < RUNS; ++run) {
                same &= Arrays.deepEquals(results[0][run].tokens, results[1][run].tokens);
            }
            System.out.println();
            System.out.printf(
                    "%d requests: %d-token shared system prompt + %d-token question, %d new"
                            + " tokens each, block %d; identical tokens with and without"
                            + " sharing: %s%n%n",
                    REQUESTS, SYSTEM_PROMPT, QUESTION, NEW_TOKENS, BLOCK_SIZE, same ? "yes" : "NO");
            System.out.println(
                    "| prefix sharing | prompt tokens prefilled | served from shared blocks"
                            + " | peak blocks | all first tokens (ms) | all finished (ms) |");
            System.out.println("| --- | --- | --- | --- | --- | --- |");
            double[] firsts = new double[2];
            double[] totals = new double[2];
            for (int mode = 0; mode < 2; ++mode) {
                Result r = results[mode][0];
                firsts[mode] = median(results[mode], true);
                totals[mode] = median(results[mode], false);
                System.out.printf(
                        "| %s | %d | %d | %d | %.0f | %.0f |%n",
                        mode == 1 ? "on" : "off",
                        r.prefilled,
                        r.shared,
                        r.peakBlocks,
                        firsts[mode],
                        totals[mode]);
            }
            System.out.printf(
                    "%nwith sharing: %.2fx fewer peak blocks, all first tokens %.2fx sooner,"
                            + " all finished %.2fx sooner%n",
                    (double) results[0][0].peakBlocks / results[1][0].peakBlocks,
                    firsts[0] / firsts[1],
                    totals[0] / totals[1]);
        }
    }

    /** One run's outcome. */
    private static final class Result {
        int[][] tokens;
        long prefilled;
        long shared;
        int peakBlocks;
        double firstTokensMs;
        double finishedMs;
    }

    private static Result run(
            Decoder decoder, NDManager manager, int[][] prompts, boolean sharing) {
        int longest = SYSTEM_PROMPT + QUESTION + NEW_TOKENS;
        int numBlocks = REQUESTS * ((longest + BLOCK_SIZE - 1) / BLOCK_SIZE) + 8;
        try (PagedKvCache cache =
                decoder.newCacheBuilder(manager)
                        .optBlockSize(BLOCK_SIZE)
                        .optNumBlocks(numBlocks)
                        .build()) {
            ContinuousBatchingScheduler scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .optMaxBatchSize(REQUESTS)
                            .optPrefixSharing(sharing)
                            .build();
            long[] ids = new long[prompts.length];
            for (int r = 0; r < prompts.length; ++r) {
                ids[r] = scheduler.submit(prompts[r], GenerationConfig.greedy(NEW_TOKENS));
            }
            Result result = new Result();
            Map<Long, GenerationResult> done = new java.util.HashMap<>();
            long start = System.nanoTime();
            long lastPrefillEnd = start;
            while (scheduler.hasUnfinished()) {
                long before = scheduler.getPrefilledTokens();
                for (GenerationResult g : scheduler.step()) {
                    done.put(g.requestId(), g);
                }
                if (scheduler.getPrefilledTokens() > before) {
                    lastPrefillEnd = System.nanoTime();
                }
            }
            result.finishedMs = (System.nanoTime() - start) / 1e6;
            result.firstTokensMs = (lastPrefillEnd - start) / 1e6;
            result.tokens = new int[prompts.length][];
            for (int r = 0; r < prompts.length; ++r) {
                result.tokens[r] = done.get(ids[r]).generated();
            }
            result.prefilled = scheduler.getPrefilledTokens();
            result.shared = scheduler.getSharedPromptTokens();
            result.peakBlocks = scheduler.getPeakUsedBlocks();
            if (cache.getNumFreeBlocks() != cache.getNumBlocks()) {
                throw new IllegalStateException("blocks leaked");
            }
            return result;
        }
    }

    private static double median(Result[] results, boolean firstTokens) {
        double[] v = new double[results.length];
        for (int i = 0; i < v.length; ++i) {
            v[i] = firstTokens ? results[i].firstTokensMs : results[i].finishedMs;
        }
        Arrays.sort(v);
        return v[v.length / 2];
    }
}
