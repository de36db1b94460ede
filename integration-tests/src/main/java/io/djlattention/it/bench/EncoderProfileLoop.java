/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;

import io.djlattention.GemmMode;
import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.BertEncoder;
import io.djlattention.zoo.encoder.BertEncoderConfig;
import io.djlattention.zoo.encoder.MiniLm;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * One implementation of {@link EncoderVsOrtBenchmark} on one cell in a steady loop, for {@code
 * perf record} (issue 24's profiles): 4 s of warm-up, then the timed loop; prints the median, p10,
 * p90 and mean ms per call (ids to embeddings, as the benchmark times it) and the process's CPU ms
 * per call and system-time share over the timed loop ({@code /proc/self/stat}), so that a
 * profile's shares turn into CPU ms per call.
 *
 * <p>Usage: {@code EncoderProfileLoop fused|bf16|ort minilm|bert BATCH TOKENS THREADS SECONDS}
 * ({@code bert} reads {@code integration-tests/target/bench-models/bert-base[.onnx]}, made by
 * {@link EncoderVsOrtBenchmark}). The thread count is set before the encoder loads, so libtorch,
 * ONNX Runtime and djl-attention's kernels all run with it.
 */
public final class EncoderProfileLoop {

    private EncoderProfileLoop() {}

    /**
     * Runs the loop and prints one line.
     *
     * @param args see the class comment
     * @throws Exception if a model cannot be loaded or a forward fails
     */
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            throw new IllegalArgumentException(
                    "usage: EncoderProfileLoop fused|bf16|ort minilm|bert BATCH TOKENS THREADS"
                            + " SECONDS");
        }
        String impl = args[0];
        boolean bert = args[1].equals("bert");
        int b = Integer.parseInt(args[2]);
        int s = Integer.parseInt(args[3]);
        int threads = Integer.parseInt(args[4]);
        double seconds = Double.parseDouble(args[5]);
        Path bertDir =
                EncoderBenchModels.repoRoot()
                        .resolve("integration-tests/target/bench-models/bert-base");
        Engine.getEngine("PyTorch");
        JniUtils.setNumThreads(threads);
        Random random = new Random(24);
        long[] ids = new long[b * s];
        long[] mask = new long[b * s];
        long[][] ids2 = new long[b][s];
        long[][] mask2 = new long[b][s];
        for (int i = 0; i < b; ++i) {
            for (int j = 0; j < s; ++j) {
                long id = j == 0 ? 101 : j == s - 1 ? 102 : 1000 + random.nextInt(28000);
                ids[i * s + j] = id;
                mask[i * s + j] = 1;
                ids2[i][j] = id;
                mask2[i][j] = 1;
            }
        }
        List<Double> times = new ArrayList<>();
        long[] cpu0;
        long[] cpu1;
        try (NDManager manager = NDManager.newBaseManager()) {
            Runnable call;
            OrtMiniLm ort = null;
            if (impl.equals("ort")) {
                ort =
                        bert
                                ? OrtMiniLm.create(Path.of(bertDir + ".onnx"), threads)
                                : OrtMiniLm.create(threads);
                OrtMiniLm session = ort;
                call = () -> session.embed(ids2, mask2);
            } else {
                BertEncoder encoder = encoder(manager, bert, bertDir, impl);
                call =
                        () -> {
                            try (NDManager scope = manager.newSubManager()) {
                                Shape shape = new Shape(b, s);
                                NDArray emb =
                                        encoder.sentenceEmbeddings(
                                                scope.create(ids, shape),
                                                null,
                                                scope.create(mask, shape),
                                                BertEncoder.Pooling.MEAN,
                                                true);
                                emb.toFloatArray();
                            }
                        };
            }
            long warm = System.nanoTime() + 4_000_000_000L;
            while (System.nanoTime() < warm) {
                call.run();
            }
            cpu0 = cpuTicks();
            long end = System.nanoTime() + (long) (seconds * 1e9);
            while (System.nanoTime() < end) {
                long start = System.nanoTime();
                call.run();
                times.add((System.nanoTime() - start) / 1e6);
            }
            cpu1 = cpuTicks();
            if (ort != null) {
                ort.close();
            }
        }
        long ticks = cpu1[0] + cpu1[1] - cpu0[0] - cpu0[1];
        double mean = times.stream().mapToDouble(Double::doubleValue).average().orElse(0);
        Collections.sort(times);
        int n = times.size();
        System.out.printf(
                Locale.ROOT,
                "RESULT %s %s %dx%d threads %d: calls %d median %.3f ms p10 %.3f p90 %.3f mean %.3f"
                        + " cpu/call %.3f ms sys %.1f%%%n",
                impl,
                args[1],
                b,
                s,
                threads,
                n,
                times.get(n / 2),
                times.get(n / 10),
                times.get(n * 9 / 10),
                mean,
                ticks * 10.0 / n,
                100.0 * (cpu1[1] - cpu0[1]) / Math.max(1, ticks));
    }

    private static BertEncoder encoder(NDManager manager, boolean bert, Path dir, String impl)
            throws Exception {
        GemmMode mode = impl.equals("bf16") ? GemmMode.BFLOAT16 : GemmMode.FLOAT32;
        BertEncoder encoder;
        try (NDManager temp = NDManager.newBaseManager()) {
            if (bert) {
                HfCheckpoint hf = HfCheckpoint.open(dir);
                encoder =
                        BertEncoder.builder()
                                .setConfig(BertEncoderConfig.fromCheckpoint(hf))
                                .optGemm(mode)
                                .build();
                encoder.setWeights(manager, hf.readTensors(temp), hf);
            } else {
                encoder = BertEncoder.builder().setConfig(MiniLm.config()).optGemm(mode).build();
                encoder.setWeights(manager, MiniLm.weights(temp), MiniLm.onnxFile().toString());
            }
        }
        return encoder;
    }

    /** User and system CPU ticks (1/100 s) of this process. */
    private static long[] cpuTicks() throws IOException {
        String stat = Files.readString(Path.of("/proc/self/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return new long[] {Long.parseLong(f[11]), Long.parseLong(f[12])};
    }
}
