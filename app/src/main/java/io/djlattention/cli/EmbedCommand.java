/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import ai.djl.Device;
import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.TranslateException;

import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.MiniLm;

import me.tongfei.progressbar.ProgressBar;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code embed}: sentence embeddings with all-MiniLM-L6-v2 loaded through DJL's {@code Criteria}
 * ({@code djl://io.djlattention/all-MiniLM-L6-v2}, fused padding-free path). Prints the embedding
 * size, the nearest neighbours of a query, the cosine of every sentence against ONNX Runtime
 * running the same ONNX file, and sentences/s of the fused model, the same model on stock DJL ops,
 * and ONNX Runtime. Exit code 1 when a cosine is below the bound.
 */
@Command(
        name = "embed",
        mixinStandardHelpOptions = true,
        description = {
            "Embed sentences with all-MiniLM-L6-v2 on the fused path: similarity demo, parity with"
                    + " ONNX Runtime, throughput of fused vs stock DJL ops vs ONNX Runtime."
        })
public final class EmbedCommand implements Callable<Integer> {

    /** The model's URL in this project's zoo. */
    static final String MODEL_URL = "djl://io.djlattention/all-MiniLM-L6-v2";

    /** Sentences of very different lengths and topics (the last one well over 200 tokens). */
    static final List<String> SENTENCES =
            List.of(
                    "Hello!",
                    "A man is playing a guitar on the stage.",
                    "Someone strums an acoustic guitar while singing.",
                    "The orchestra performed Beethoven's ninth symphony last night.",
                    "A cat is sleeping on the warm windowsill.",
                    "The kitten curled up in the sun and dozed off.",
                    "Dogs are loyal companions and love to play fetch.",
                    "How do I reset my password?",
                    "I forgot my login credentials and cannot sign in to my account.",
                    "The stock market fell sharply after the interest rate announcement.",
                    "Central banks raised rates to fight inflation.",
                    "Preheat the oven to 220 degrees and bake the bread for thirty minutes.",
                    "This sourdough recipe needs a starter that is at least a week old.",
                    "The rocket lifted off and reached orbit nine minutes later.",
                    "Astronauts aboard the space station conducted a spacewalk.",
                    "Photosynthesis converts light energy into chemical energy.",
                    "Rain is expected tomorrow afternoon, so bring an umbrella.",
                    "The football match ended in a draw after extra time.",
                    "Quantum computers use qubits that can be in superposition.",
                    "She painted the old fence a bright shade of blue.",
                    "Traffic on the highway was backed up for miles because of an accident.",
                    "Learning a new language takes patience, practice and curiosity.",
                    "The museum's new exhibition features sculptures from ancient Greece.",
                    "In the beginning of the twentieth century, the small coastal town was known"
                            + " mostly for its fishing fleet, its narrow cobbled streets and the"
                            + " lighthouse that stood on the rocks at the northern end of the"
                            + " harbour. Over the following decades, as the railway reached the"
                            + " coast and the first hotels were built along the promenade,"
                            + " visitors from the cities began to arrive every summer, drawn by"
                            + " the clean air, the long sandy beaches and the promise of a quiet"
                            + " holiday away from the noise and smoke of the factories. The"
                            + " fishermen, at first suspicious of the newcomers, soon discovered"
                            + " that the tourists would pay well for fresh fish, boat trips around"
                            + " the bay and rooms in their cottages, and by the nineteen fifties"
                            + " tourism had overtaken fishing as the town's main source of income."
                            + " Today the lighthouse is a museum, the harbour is full of sailing"
                            + " yachts instead of trawlers, and the old cannery has been turned"
                            + " into apartments, a cinema and a market hall where local farmers"
                            + " sell cheese, honey, vegetables and bread every Saturday morning.");

    @Spec CommandSpec spec;

    @Mixin RuntimeOptions runtime;

    @Option(
            names = "--sentences",
            paramLabel = "FILE",
            description = "a UTF-8 text file, one sentence per line (default: built-in sentences)")
    Path sentencesFile;

    @Option(
            names = "--query",
            paramLabel = "TEXT",
            defaultValue = "A musician plays the guitar.",
            description = "the similarity demo's query (default: ${DEFAULT-VALUE})")
    String query;

    @Option(
            names = "--top",
            paramLabel = "N",
            defaultValue = "5",
            description = "neighbours to show (default ${DEFAULT-VALUE})")
    int top;

    @Option(
            names = {"-b", "--batch-size"},
            paramLabel = "N",
            defaultValue = "32",
            description = "sentences per batchPredict call (default ${DEFAULT-VALUE})")
    int batchSize;

    @Option(
            names = "--max-length",
            paramLabel = "N",
            defaultValue = "512",
            description =
                    "tokens per sentence, special tokens included; longer sentences are truncated"
                            + " (default ${DEFAULT-VALUE}, the model's max positions)")
    int maxLength;

    @Option(
            names = "--seconds",
            paramLabel = "S",
            defaultValue = "2",
            description = "minimum time of each throughput measurement (default ${DEFAULT-VALUE})")
    double seconds;

    @Option(
            names = "--min-cosine",
            paramLabel = "C",
            description =
                    "parity bound against ONNX Runtime (default 0.99999 for float32, 0.999 for"
                            + " float16)")
    Double minCosine;

    /** The numbers the summary of {@code all} reads. */
    Report report;

    /** What one run measured. */
    record Report(
            int sentences,
            int dims,
            double minCosine,
            boolean parity,
            double fusedPerSecond,
            double stockPerSecond,
            double ortPerSecond,
            double ortSortedPerSecond) {}

    @Override
    public Integer call() throws Exception {
        runtime.apply();
        if (batchSize < 1) {
            throw new ParameterException(
                    spec.commandLine(), "--batch-size: expected >= 1, got " + batchSize);
        }
        if (maxLength < 2) {
            throw new ParameterException(
                    spec.commandLine(), "--max-length: expected >= 2, got " + maxLength);
        }
        if (top < 1) {
            throw new ParameterException(spec.commandLine(), "--top: expected >= 1, got " + top);
        }
        PrintWriter out = spec.commandLine().getOut();
        List<String> sentences = sentencesFile == null ? SENTENCES : readSentences(sentencesFile);
        boolean half = runtime.dataType() == ai.djl.ndarray.types.DataType.FLOAT16;
        double bound = minCosine != null ? minCosine : half ? 0.999 : 0.99999;
        Device device = runtime.device();

        try (ZooModel<String, float[]> fused = load("fused", device);
                Predictor<String, float[]> predictor = fused.newPredictor()) {
            float[][] embeddings;
            try (ProgressBar bar = Progress.start("embed", sentences.size(), "sentences")) {
                embeddings = embed(predictor, sentences, bar);
            }
            float[] q = predictor.predict(query);
            out.printf(
                    Locale.ROOT,
                    "Model: all-MiniLM-L6-v2 (%s), fused path, %s on %s%n",
                    MODEL_URL,
                    runtime.dataType(),
                    runtime.resolvedDevice());
            out.printf(
                    Locale.ROOT,
                    "Embedded %d sentences: %d x %d floats%n%n",
                    sentences.size(),
                    embeddings.length,
                    embeddings[0].length);

            out.println("Nearest neighbours of \"" + query + "\" (cosine similarity):");
            Integer[] order = new Integer[sentences.size()];
            double[] sim = new double[sentences.size()];
            for (int i = 0; i < order.length; ++i) {
                order[i] = i;
                sim[i] = cosine(q, embeddings[i]);
            }
            Arrays.sort(order, (a, b) -> Double.compare(sim[b], sim[a]));
            Table neighbours = new Table("rank", "cosine", "sentence");
            for (int r = 0; r < Math.min(top, order.length); ++r) {
                neighbours.row(r + 1, fmt(sim[order[r]], 4), clip(sentences.get(order[r])));
            }
            neighbours.print(out);

            // Parity: the same ONNX file through ONNX Runtime, tokenized the same way.
            int ortThreads = runtime.threads != null ? runtime.threads : 0;
            double worst = 1;
            int worstIndex = 0;
            try (HuggingFaceTokenizer tokenizer = tokenizer();
                    OrtMiniLm ort = OrtMiniLm.create(ortThreads)) {
                float[][] reference;
                try (ProgressBar bar = Progress.start("ONNX Runtime", sentences.size(), "sentences")) {
                    reference = ortEmbed(ort, tokenizer, sentences, bar);
                }
                for (int i = 0; i < sentences.size(); ++i) {
                    double c = cosine(embeddings[i], reference[i]);
                    if (c < worst) {
                        worst = c;
                        worstIndex = i;
                    }
                }
                boolean parity = worst >= bound;
                out.println();
                out.printf(
                        Locale.ROOT,
                        "Parity with ONNX Runtime %s (same ONNX file), cosine per sentence:%n",
                        ai.onnxruntime.OrtEnvironment.getEnvironment().getVersion());
                new Table("sentences", "min cosine", "1 - min cosine", "at sentence", "bound", "result")
                        .row(
                                sentences.size(),
                                fmt(worst, 8),
                                String.format(Locale.ROOT, "%.2e", 1 - worst),
                                worstIndex + " (" + tokens(tokenizer, sentences.get(worstIndex)) + " tokens)",
                                bound,
                                parity ? "pass" : "FAIL")
                        .print(out);

                // Throughput, one table.
                double fusedRate = throughput("fused DJL", predictor, sentences);
                double stockRate;
                try (ZooModel<String, float[]> stock = load("stock", device);
                        Predictor<String, float[]> sp = stock.newPredictor()) {
                    stockRate = throughput("stock DJL ops", sp, sentences);
                }
                double ortRate = ortThroughput(ort, tokenizer, sentences);
                // What a careful ONNX Runtime user does: sort by length before batching, which
                // removes most of its padding (issue 24's fair comparison).
                List<String> sorted = new ArrayList<>(sentences);
                sorted.sort(java.util.Comparator.comparingInt(s -> tokens(tokenizer, s)));
                double ortSortedRate = ortThroughput(ort, tokenizer, sorted);
                out.println();
                out.printf(
                        Locale.ROOT,
                        "Throughput, %d sentences in batches of %d, %s threads%s:%n",
                        sentences.size(),
                        batchSize,
                        runtime.threads != null ? String.valueOf(runtime.threads) : "default",
                        " (ONNX Runtime: "
                                + (ortThreads > 0 ? ortThreads + " intra-op threads" : "default session options")
                                + ", on the CPU)");
                new Table("engine", "sentences/s", "vs stock DJL", "fused DJL vs this")
                        .row("fused DJL (djl-attention)", fmt(fusedRate, 1), fmt(fusedRate / stockRate, 2) + "x", "1.00x")
                        .row("stock DJL ops", fmt(stockRate, 1), "1.00x", fmt(fusedRate / stockRate, 2) + "x")
                        .row("ONNX Runtime, batches in input order", fmt(ortRate, 1), fmt(ortRate / stockRate, 2) + "x",
                                fmt(fusedRate / ortRate, 2) + "x")
                        .row("ONNX Runtime, length-sorted batches", fmt(ortSortedRate, 1),
                                fmt(ortSortedRate / stockRate, 2) + "x", fmt(fusedRate / ortSortedRate, 2) + "x")
                        .print(out);
                out.printf(
                        Locale.ROOT,
                        "Fused DJL vs ONNX Runtime on length-sorted batches (the fair comparison: a"
                                + " careful ONNX Runtime user sorts by length first): %.2fx%n",
                        fusedRate / ortSortedRate);
                out.printf(
                        Locale.ROOT,
                        "(%d to %d tokens per sentence: stock DJL and ONNX Runtime compute every batch"
                                + " padded to its longest sentence (sorting shrinks that padding),"
                                + " the fused path only the real"
                                + " tokens; docs/benchmarks.md has fixed shapes.)%n",
                        minTokens(tokenizer, sentences),
                        maxTokens(tokenizer, sentences));
                report =
                        new Report(
                                sentences.size(),
                                embeddings[0].length,
                                worst,
                                parity,
                                fusedRate,
                                stockRate,
                                ortRate,
                                ortSortedRate);
                if (!parity) {
                    spec.commandLine()
                            .getErr()
                            .printf(
                                    Locale.ROOT,
                                    "embed: parity check FAILED: sentence %d has cosine %.7f < %s"
                                            + " against ONNX Runtime%n",
                                    worstIndex,
                                    worst,
                                    bound);
                    return 1;
                }
                return 0;
            }
        }
    }

    private ZooModel<String, float[]> load(String attention, Device device) throws Exception {
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls(MODEL_URL)
                        .optEngine("PyTorch")
                        .optDevice(device)
                        .optArgument("attention", attention)
                        .optArgument("dtype", runtime.dataType().toString())
                        .optArgument("maxLength", maxLength)
                        .build();
        try (ProgressBar bar = Progress.start("load " + attention + " model", -1, "")) {
            return criteria.loadModel();
        }
    }

    private float[][] embed(Predictor<String, float[]> p, List<String> sentences, ProgressBar bar)
            throws TranslateException {
        float[][] out = new float[sentences.size()][];
        for (int from = 0; from < sentences.size(); from += batchSize) {
            int to = Math.min(sentences.size(), from + batchSize);
            List<float[]> batch = p.batchPredict(sentences.subList(from, to));
            for (int i = from; i < to; ++i) {
                out[i] = batch.get(i - from);
            }
            if (bar != null) {
                bar.stepBy(to - from);
            }
        }
        return out;
    }

    private double throughput(String name, Predictor<String, float[]> p, List<String> sentences)
            throws TranslateException {
        embed(p, warmUp(sentences), null);
        long budget = (long) (seconds * 1e9);
        long count = 0;
        long start = System.nanoTime();
        try (ProgressBar bar = Progress.start(name, (long) Math.ceil(seconds), "s")) {
            while (System.nanoTime() - start < budget || count == 0) {
                embed(p, sentences, null);
                count += sentences.size();
                bar.stepTo(Math.min(bar.getMax(), (System.nanoTime() - start) / 1_000_000_000L));
            }
        }
        return count / ((System.nanoTime() - start) / 1e9);
    }

    private double ortThroughput(OrtMiniLm ort, HuggingFaceTokenizer tokenizer, List<String> sentences) {
        ortEmbed(ort, tokenizer, warmUp(sentences), null);
        long budget = (long) (seconds * 1e9);
        long count = 0;
        long start = System.nanoTime();
        try (ProgressBar bar = Progress.start("ONNX Runtime", (long) Math.ceil(seconds), "s")) {
            while (System.nanoTime() - start < budget || count == 0) {
                ortEmbed(ort, tokenizer, sentences, null);
                count += sentences.size();
                bar.stepTo(Math.min(bar.getMax(), (System.nanoTime() - start) / 1_000_000_000L));
            }
        }
        return count / ((System.nanoTime() - start) / 1e9);
    }

    /**
     * The warm-up batch: the first few sentences. Enough for first-call costs (lazy loading,
     * allocator growth); a whole pass would double the time of slow engines.
     */
    private static List<String> warmUp(List<String> sentences) {
        return sentences.subList(0, Math.min(4, sentences.size()));
    }

    /** ONNX Runtime embeddings, batches padded to their longest sentence (tokenizing included). */
    private float[][] ortEmbed(
            OrtMiniLm ort, HuggingFaceTokenizer tokenizer, List<String> sentences, ProgressBar bar) {
        float[][] out = new float[sentences.size()][];
        for (int from = 0; from < sentences.size(); from += batchSize) {
            int to = Math.min(sentences.size(), from + batchSize);
            Encoding[] enc = tokenizer.batchEncode(sentences.subList(from, to));
            int len = 0;
            for (Encoding e : enc) {
                len = Math.max(len, e.getIds().length);
            }
            long[][] ids = new long[enc.length][len];
            long[][] mask = new long[enc.length][len];
            for (int b = 0; b < enc.length; ++b) {
                long[] id = enc[b].getIds();
                System.arraycopy(id, 0, ids[b], 0, id.length);
                Arrays.fill(mask[b], 0, id.length, 1);
            }
            float[][] e = ort.embed(ids, mask);
            System.arraycopy(e, 0, out, from, e.length);
            if (bar != null) {
                bar.stepBy(to - from);
            }
        }
        return out;
    }

    private HuggingFaceTokenizer tokenizer() throws IOException {
        return HuggingFaceTokenizer.newInstance(
                MiniLm.tokenizerFile(),
                Map.of(
                        "padding", "false",
                        "truncation", "true",
                        "maxLength", String.valueOf(maxLength)));
    }

    private static int minTokens(HuggingFaceTokenizer tokenizer, List<String> sentences) {
        return sentences.stream().mapToInt(x -> tokens(tokenizer, x)).min().orElse(0);
    }

    private static int maxTokens(HuggingFaceTokenizer tokenizer, List<String> sentences) {
        return sentences.stream().mapToInt(x -> tokens(tokenizer, x)).max().orElse(0);
    }

    private static int tokens(HuggingFaceTokenizer tokenizer, String sentence) {
        return tokenizer.encode(sentence).getIds().length;
    }

    /**
     * Reads one sentence per non-blank line, refusing bytes that are not UTF-8.
     *
     * @param file the file
     * @return the sentences
     * @throws IOException if the file cannot be read, is not UTF-8, or has no sentence
     */
    static List<String> readSentences(Path file) throws IOException {
        if (!Files.isRegularFile(file)) {
            throw new IOException(file + ": no such file");
        }
        CharsetDecoder decoder =
                StandardCharsets.UTF_8
                        .newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT);
        List<String> out = new ArrayList<>();
        int line = 0;
        try (BufferedReader reader =
                new BufferedReader(new InputStreamReader(Files.newInputStream(file), decoder))) {
            String s;
            while ((s = reader.readLine()) != null) {
                ++line;
                if (!s.isBlank()) {
                    out.add(s.strip());
                }
            }
        } catch (CharacterCodingException e) {
            throw new IOException(
                    file + ": not valid UTF-8 (after line " + line + "): " + e.getMessage(), e);
        }
        if (out.isEmpty()) {
            throw new IOException(file + ": no sentences (every line is blank)");
        }
        return out;
    }

    static double cosine(float[] a, float[] b) {
        double dot = 0;
        double na = 0;
        double nb = 0;
        for (int i = 0; i < a.length; ++i) {
            dot += (double) a[i] * b[i];
            na += (double) a[i] * a[i];
            nb += (double) b[i] * b[i];
        }
        return dot / Math.max(Math.sqrt(na * nb), 1e-30);
    }

    private static String clip(String s) {
        return s.length() <= 70 ? s : s.substring(0, 67) + "...";
    }

    private static String fmt(double v, int decimals) {
        return String.format(Locale.ROOT, "%." + decimals + "f", v);
    }
}
