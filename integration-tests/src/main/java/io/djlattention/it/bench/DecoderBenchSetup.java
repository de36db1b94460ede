/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.engine.Engine;
import io.djlattention.zoo.decoder.DecoderConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.LocalDate;

/** What the decoder benchmarks share: the model they run and the device line they print. */
final class DecoderBenchSetup {

    /** The benchmark model's vocabulary: prompts draw token ids below it. */
    static final int VOCAB_SIZE = 8192;

    private DecoderBenchSetup() {}

    /**
     * A GPT-2-style decoder of 4 layers, hidden 512, 8 heads: small enough for a CPU run of every
     * configuration, large enough that attention and the cache, not call overhead, dominate.
     *
     * @return the configuration
     */
    static DecoderConfig gpt2Config() {
        return config(DecoderConfig.Architecture.GPT2, 512);
    }

    /**
     * The benchmark model at another width or architecture: 4 layers, heads of 64, MLP 4 ×
     * hidden, vocab {@link #VOCAB_SIZE}. A narrow one (hidden 64) has negligible compute, so its
     * step time is the host's cost of issuing the step's operators.
     *
     * @param architecture GPT2 or LLAMA (untied head, rotary half style)
     * @param hidden the hidden size, a positive multiple of 64
     * @return the configuration
     * @throws IllegalArgumentException if {@code hidden} is not a positive multiple of 64
     */
    static DecoderConfig config(DecoderConfig.Architecture architecture, int hidden) {
        if (hidden <= 0 || hidden % 64 != 0) {
            throw new IllegalArgumentException(
                    "--hidden: expected a positive multiple of 64 (heads of 64), got " + hidden);
        }
        return DecoderConfig.builder()
                .setArchitecture(architecture)
                .setVocabSize(VOCAB_SIZE)
                .setHiddenSize(hidden)
                .setIntermediateSize(4 * hidden)
                .setNumLayers(4)
                .setNumHeads(hidden / 64)
                .optMaxPositions(2048)
                .build();
    }

    /**
     * The line naming the device, the cores, DJL and PyTorch versions and the date, printed above
     * each benchmark's tables.
     *
     * @return the line
     */
    static String deviceLine() {
        return "Device: "
                + cpuName()
                + ", "
                + Runtime.getRuntime().availableProcessors()
                + " cores, DJL "
                + Engine.getDjlVersion()
                + " / PyTorch "
                + Engine.getEngine("PyTorch").getVersion()
                + ", date "
                + LocalDate.now();
    }

    private static String cpuName() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/cpuinfo"))) {
                if (line.startsWith("model name")) {
                    return line.substring(line.indexOf(':') + 1).trim();
                }
            }
        } catch (IOException e) {
            // /proc is Linux's: elsewhere the architecture names the device
        }
        return System.getProperty("os.arch");
    }
}
