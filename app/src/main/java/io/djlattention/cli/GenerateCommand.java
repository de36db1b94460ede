/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import ai.djl.Device;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.ContiguousAttention;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.generate.ContinuousBatchingScheduler;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationResult;
import io.djlattention.zoo.generate.TokenSampler;

import me.tongfei.progressbar.ProgressBar;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Callable;

/**
 * {@code generate}: serves a few dozen greedy requests of different prompt and output lengths
 * through the continuous-batching scheduler and the paged KV cache, then reports tokens/s, the KV
 * blocks used against a max-length preallocation, and whether the first request's tokens equal
 * those of the stock path (full recomputation with stock DJL attention, no cache). Exit code 1 when
 * they differ, unless the cache is FP8 ({@code --kv-cache-dtype fp8}), whose rounding may change
 * tokens.
 */
@Command(
        name = "generate",
        mixinStandardHelpOptions = true,
        description = {
            "Serve generation requests through the continuous-batching scheduler and the paged KV"
                    + " cache (stories260K by default), with tokens/s, KV blocks used and parity of"
                    + " the first request with the stock path."
        })
public final class GenerateCommand implements Callable<Integer> {

    @Spec CommandSpec spec;

    @Mixin RuntimeOptions runtime;

    @Option(
            names = {"-m", "--model"},
            paramLabel = "PATH",
            description =
                    "a Hugging Face checkpoint directory (LlamaForCausalLM, MistralForCausalLM,"
                            + " Gemma2ForCausalLM, GPT2LMHeadModel) or a"
                            + " llama2.c .bin file (default: the built-in stories260K)")
    Path model;

    @Option(
            names = "--requests",
            paramLabel = "N",
            defaultValue = "32",
            description = "requests to serve (default ${DEFAULT-VALUE})")
    int requests;

    @Option(
            names = "--min-prompt-length",
            paramLabel = "N",
            defaultValue = "1",
            description = "shortest prompt in tokens (default ${DEFAULT-VALUE})")
    int minPrompt;

    @Option(
            names = "--max-prompt-length",
            paramLabel = "N",
            defaultValue = "96",
            description = "longest prompt in tokens (default ${DEFAULT-VALUE})")
    int maxPrompt;

    @Option(
            names = "--max-new-tokens",
            paramLabel = "N",
            defaultValue = "64",
            description =
                    "the most tokens a request generates; each draws its own count from"
                            + " [N/4, N] (default ${DEFAULT-VALUE})")
    int maxNewTokens;

    @Option(
            names = {"-b", "--batch-size"},
            paramLabel = "N",
            defaultValue = "16",
            description = "the most requests decoded together (default ${DEFAULT-VALUE})")
    int batchSize;

    @Option(
            names = "--block-size",
            paramLabel = "N",
            defaultValue = "16",
            description = "tokens per KV cache block (default ${DEFAULT-VALUE})")
    int blockSize;

    @Option(
            names = "--prefill",
            paramLabel = "KIND",
            defaultValue = "flash",
            description = "prefill attention: flash or paged (default ${DEFAULT-VALUE})")
    String prefill;

    @Option(
            names = "--kv-cache-dtype",
            paramLabel = "DTYPE",
            defaultValue = "auto",
            description =
                    "what the paged KV cache stores: auto (the model's dtype), fp8 / fp8_e4m3 (e4m3,"
                            + " one byte per element, scale 1) or fp8_e5m2 (e5m2, likewise)"
                            + " (default ${DEFAULT-VALUE})")
    String kvCacheDtype;

    @Option(
            names = "--seed",
            paramLabel = "N",
            defaultValue = "42",
            description = "seed of the random prompts (default ${DEFAULT-VALUE})")
    long seed;

    /** The numbers the summary of {@code all} reads. */
    Report report;

    /** What one run measured. */
    record Report(
            String model,
            int requests,
            long generatedTokens,
            double seconds,
            int peakBlocks,
            int preallocatedBlocks,
            boolean parity) {}

    @Override
    public Integer call() throws Exception {
        runtime.apply();
        check();
        PrintWriter out = spec.commandLine().getOut();
        Device device = runtime.device();
        DataType dataType = runtime.dataType();
        PrefillAttention prefillKind = prefillKind();
        KvCacheDtype cacheDtype;
        try {
            cacheDtype = KvCacheDtype.fromString(kvCacheDtype);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(
                    spec.commandLine(), "--kv-cache-dtype: " + e.getMessage());
        }
        try (NDManager manager = NDManager.newBaseManager(device, "PyTorch")) {
            LoadedDecoder loaded;
            try (ProgressBar bar = Progress.start("load decoder", -1, "")) {
                loaded = LoadedDecoder.load(model, manager, dataType);
            }
            Decoder decoder = loaded.decoder();
            DecoderConfig config = decoder.getConfig();
            out.printf(
                    Locale.ROOT,
                    "Decoder: %s (%s, %d layers, hidden %d, %d heads / %d KV heads, vocab %d,"
                            + " max positions %d), %s on %s%n",
                    loaded.name(),
                    config.getArchitecture(),
                    config.getNumLayers(),
                    config.getHiddenSize(),
                    config.getNumHeads(),
                    config.getNumKvHeads(),
                    config.getVocabSize(),
                    config.getMaxPositions(),
                    dataType,
                    manager.getDevice());

            List<int[]> prompts = new ArrayList<>();
            List<Integer> lengths = new ArrayList<>();
            long promptTokens = makeRequests(config, loaded.bosTokenId(), prompts, lengths);
            int longest = 0;
            for (int i = 0; i < requests; ++i) {
                longest = Math.max(longest, prompts.get(i).length + lengths.get(i));
            }
            int blocksPerSequence = (longest + blockSize - 1) / blockSize;
            int maxLengthBlocks = (config.getMaxPositions() + blockSize - 1) / blockSize;
            int concurrent = Math.min(batchSize, requests);
            int preallocated = concurrent * maxLengthBlocks;
            long bytesPerBlock =
                    PagedKvCache.bytesPerBlock(
                            config.getNumLayers(),
                            blockSize,
                            config.getNumKvHeads(),
                            decoder.getCacheHeadDim(),
                            cacheDtype.storageType(dataType));

            Map<Long, GenerationResult> results;
            long[] ids = new long[requests];
            int peak;
            int iterations;
            long started;
            long elapsed;
            try (PagedKvCache cache =
                    decoder.newCacheBuilder(manager)
                            .optBlockSize(blockSize)
                            // room for every concurrent request at its full length: no preemption
                            .optNumBlocks(concurrent * blocksPerSequence)
                            .optCacheDtype(cacheDtype)
                            .build()) {
                ContinuousBatchingScheduler scheduler =
                        ContinuousBatchingScheduler.builder()
                                .setDecoder(decoder)
                                .setCache(cache)
                                .optMaxBatchSize(batchSize)
                                .optPrefillAttention(prefillKind)
                                .build();
                for (int i = 0; i < requests; ++i) {
                    ids[i] = scheduler.submit(prompts.get(i), GenerationConfig.greedy(lengths.get(i)));
                }
                results = new HashMap<>();
                started = System.nanoTime();
                try (ProgressBar bar = Progress.start("generate", requests, "requests")) {
                    while (scheduler.hasUnfinished()) {
                        for (GenerationResult r : scheduler.step()) {
                            results.put(r.requestId(), r);
                            bar.step();
                        }
                    }
                }
                elapsed = System.nanoTime() - started;
                peak = scheduler.getPeakUsedBlocks();
                iterations = scheduler.getIterations();
            }
            long generated = 0;
            for (GenerationResult r : results.values()) {
                generated += r.generated().length;
            }
            double seconds = elapsed / 1e9;

            out.println();
            out.println("Generation (continuous batching, paged KV cache, greedy):");
            new Table(
                            "requests",
                            "prompt tokens",
                            "generated tokens",
                            "iterations",
                            "seconds",
                            "generated tokens/s")
                    .row(
                            requests,
                            promptTokens,
                            generated,
                            iterations,
                            fmt(seconds, 2),
                            fmt(generated / seconds, 1))
                    .print(out);
            out.println();
            out.printf(
                    Locale.ROOT,
                    "KV cache (block size %d, %s per block):%n",
                    blockSize,
                    mib(bytesPerBlock));
            new Table("", "blocks", "memory")
                    .row("paged: peak used", peak, mib(peak * bytesPerBlock))
                    .row(
                            "max-length preallocation (" + concurrent + " x " + config.getMaxPositions()
                                    + " positions)",
                            preallocated,
                            mib(preallocated * bytesPerBlock))
                    .row(
                            "paged / preallocation",
                            fmt(100.0 * peak / preallocated, 1) + " %",
                            "")
                    .print(out);

            int[] first = results.get(ids[0]).generated();
            int[] stock;
            try (ProgressBar bar = Progress.start("stock path", first.length, "tokens")) {
                stock = stockGreedy(decoder, manager, prompts.get(0), first.length, bar);
            }
            boolean parity = Arrays.equals(first, stock);
            out.println();
            out.println("Parity of request 0 (prompt " + prompts.get(0).length + " tokens) with the"
                    + " stock path (stock DJL attention, no cache):");
            new Table("path", "first tokens", "result")
                    .row("paged + scheduler", head(first), "")
                    .row("stock", head(stock), parity ? "identical" : "DIFFERENT at " + firstDiff(first, stock))
                    .print(out);
            report =
                    new Report(
                            loaded.name(),
                            requests,
                            generated,
                            seconds,
                            peak,
                            preallocated,
                            parity);
            // An FP8 cache rounds K/V to 4 significant bits: its tokens may leave the exact
            // stock path's (stories260K's after 1-12 tokens, docs/paged-kv-cache.md), so the
            // comparison is reported, not enforced.
            if (!parity && cacheDtype == KvCacheDtype.AUTO) {
                spec.commandLine()
                        .getErr()
                        .println("generate: parity check FAILED: the paged path's tokens differ"
                                + " from the stock path's");
                return 1;
            }
            return 0;
        }
    }

    private void check() {
        positive("--requests", requests);
        positive("--min-prompt-length", minPrompt);
        positive("--max-prompt-length", maxPrompt);
        positive("--max-new-tokens", maxNewTokens);
        positive("--batch-size", batchSize);
        positive("--block-size", blockSize);
        if (minPrompt > maxPrompt) {
            throw new ParameterException(
                    spec.commandLine(),
                    "--min-prompt-length (" + minPrompt + ") exceeds --max-prompt-length ("
                            + maxPrompt + ")");
        }
    }

    private void positive(String name, int value) {
        if (value < 1) {
            throw new ParameterException(spec.commandLine(), name + ": expected >= 1, got " + value);
        }
    }

    private PrefillAttention prefillKind() {
        switch (prefill.toLowerCase(Locale.ROOT)) {
            case "flash":
                return PrefillAttention.FLASH;
            case "paged":
                return PrefillAttention.PAGED;
            default:
                throw new ParameterException(
                        spec.commandLine(), "--prefill: expected flash or paged, got '" + prefill + "'");
        }
    }

    /** Random prompts (seeded) and output lengths that fit the model's positions. */
    private long makeRequests(
            DecoderConfig config, int bos, List<int[]> prompts, List<Integer> lengths) {
        int positions = config.getMaxPositions();
        if (positions < 2) {
            throw new IllegalArgumentException("model: max positions " + positions + " < 2");
        }
        Random random = new Random(seed);
        long total = 0;
        for (int i = 0; i < requests; ++i) {
            int newTokens = Math.max(1, maxNewTokens / 4 + random.nextInt(maxNewTokens - maxNewTokens / 4 + 1));
            newTokens = Math.min(newTokens, positions - 1);
            int length = minPrompt + random.nextInt(maxPrompt - minPrompt + 1);
            length = Math.max(1, Math.min(length, positions - newTokens));
            int[] prompt = new int[length];
            for (int t = 0; t < length; ++t) {
                // ids above the special tokens (0-2 in llama2.c's and most vocabularies)
                prompt[t] = 3 + random.nextInt(config.getVocabSize() - 3);
            }
            if (bos >= 0) {
                prompt[0] = bos;
            }
            prompts.add(prompt);
            lengths.add(newTokens);
            total += length;
        }
        return total;
    }

    /**
     * Greedy generation on the stock path: every step recomputes the whole sequence with stock DJL
     * attention and no cache, so it shares neither the cache, the kernels nor the scheduler with
     * the path under test.
     */
    static int[] stockGreedy(
            Decoder decoder, NDManager manager, int[] prompt, int newTokens, ProgressBar bar) {
        Decoder stock = decoder.withContiguousAttention(ContiguousAttention.STOCK);
        int[] seq = Arrays.copyOf(prompt, prompt.length + newTokens);
        for (int n = 0; n < newTokens; ++n) {
            int len = prompt.length + n;
            try (NDManager m = manager.newSubManager()) {
                long[] ids = new long[len];
                for (int i = 0; i < len; ++i) {
                    ids[i] = seq[i];
                }
                NDList out =
                        stock.forward(
                                null,
                                new NDList(
                                        m.create(ids, new Shape(1, len)),
                                        m.arange(0, len, 1, DataType.INT64).reshape(1, len)),
                                false);
                float[] logits =
                        out.get(0).get("0, -1, :").toType(DataType.FLOAT32, false).toFloatArray();
                seq[len] = TokenSampler.argMax(logits);
            }
            if (bar != null) {
                bar.step();
            }
        }
        return Arrays.copyOfRange(seq, prompt.length, seq.length);
    }

    private static String head(int[] ids) {
        int n = Math.min(ids.length, 12);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < n; ++i) {
            sb.append(i == 0 ? "" : " ").append(ids[i]);
        }
        return sb.append(ids.length > n ? " ... (" + ids.length + ")" : "").toString();
    }

    private static int firstDiff(int[] a, int[] b) {
        int n = Math.min(a.length, b.length);
        for (int i = 0; i < n; ++i) {
            if (a[i] != b[i]) {
                return i;
            }
        }
        return n;
    }

    static String fmt(double v, int decimals) {
        return String.format(Locale.ROOT, "%." + decimals + "f", v);
    }

    static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.2f MiB", bytes / (1024.0 * 1024.0));
    }
}
