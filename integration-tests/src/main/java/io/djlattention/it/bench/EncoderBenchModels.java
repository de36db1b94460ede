/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The models {@link EncoderVsOrtBenchmark} needs beyond the built-in MiniLM, made at bench time by
 * {@code native-ops/bench/encoder/make_bench_models.py} (nothing large is committed): ONNX
 * Runtime's own int8 MiniLM ({@code quantize_dynamic} of the same file) and a random-weight
 * BERT-base checkpoint with its ONNX export. When no Python with torch, transformers and
 * onnxruntime is at hand, the cells that need them are reported as not run, with the reason.
 */
final class EncoderBenchModels {

    private static final String SCRIPT = "native-ops/bench/encoder/make_bench_models.py";
    private static final long TIMEOUT_MINUTES = 20;

    /** ORT's int8 MiniLM, or null. */
    final Path minilmInt8;
    /** The BERT-base checkpoint directory (save_pretrained), or null. */
    final Path bertBase;
    /** Its ONNX export, or null. */
    final Path bertBaseOnnx;
    /** Why the models are missing, or null when they are all there. */
    final String missing;

    private EncoderBenchModels(Path dir, String missing) {
        Path int8 = dir.resolve("minilm-int8.onnx");
        Path bert = dir.resolve("bert-base");
        Path bertOnnx = dir.resolve("bert-base.onnx");
        boolean all = Files.isRegularFile(int8) && Files.isDirectory(bert)
                && Files.isRegularFile(bertOnnx);
        this.minilmInt8 = Files.isRegularFile(int8) ? int8 : null;
        this.bertBase = all ? bert : null;
        this.bertBaseOnnx = all ? bertOnnx : null;
        this.missing = all ? null : (missing != null ? missing : "models incomplete in " + dir);
    }

    /**
     * Finds the models in {@code dir}, making the missing ones with {@code python} first.
     *
     * @param python a Python with torch, transformers, onnx and onnxruntime, or null
     * @param dir where the models live
     * @param minilmOnnx the built-in MiniLM's ONNX file (the int8 model is made from it)
     * @return what is there
     * @throws IOException if the folder cannot be made or the script cannot be started
     * @throws InterruptedException if interrupted while the script runs
     */
    static EncoderBenchModels prepare(Path python, Path dir, Path minilmOnnx)
            throws IOException, InterruptedException {
        Files.createDirectories(dir);
        EncoderBenchModels found = new EncoderBenchModels(dir, null);
        if (found.missing == null) {
            return found;
        }
        if (python == null || !Files.isExecutable(python)) {
            return new EncoderBenchModels(
                    dir,
                    "no Python with torch, transformers and onnxruntime (pass --python, or make"
                            + " .venv-bench with native-ops/scripts/bench-env.sh)");
        }
        Path script = repoFile(SCRIPT);
        Process p =
                new ProcessBuilder(
                                python.toString(),
                                script.toString(),
                                minilmOnnx.toString(),
                                dir.toString())
                        .inheritIO()
                        .start();
        if (!p.waitFor(TIMEOUT_MINUTES, TimeUnit.MINUTES)) {
            p.destroyForcibly();
            return new EncoderBenchModels(dir, SCRIPT + " ran past " + TIMEOUT_MINUTES + " min");
        }
        if (p.exitValue() != 0) {
            return new EncoderBenchModels(dir, SCRIPT + " exited with " + p.exitValue());
        }
        return new EncoderBenchModels(dir, null);
    }

    /**
     * A file of this repository, from the repository's root ({@link #repoRoot}).
     *
     * @param relative the path from the repository root
     * @return the file
     * @throws IOException if the root cannot be found
     */
    static Path repoFile(String relative) throws IOException {
        return repoRoot().resolve(relative);
    }

    /**
     * The repository's root: the working directory or its parent, whichever holds the script
     * (Maven's exec:java runs in the folder mvn was started from, a plain {@code java} run may
     * start in the module's folder).
     *
     * @return the root, absolute
     * @throws IOException if neither holds it
     */
    static Path repoRoot() throws IOException {
        for (Path base : new Path[] {Path.of(""), Path.of("..")}) {
            Path root = base.toAbsolutePath().normalize();
            if (Files.exists(root.resolve(SCRIPT))) {
                return root;
            }
        }
        throw new IOException(SCRIPT + " not found from " + Path.of("").toAbsolutePath());
    }
}
