/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.cli.ServeCommand;
import io.djlattention.serving.OpenAiServer;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

import picocli.CommandLine;

/**
 * The server under load (docs/benchmarks.md): the same requests at concurrency 1, 8 and 64 against
 * a loopback server with continuous batching (stories260K completions, streamed, and MiniLM
 * embeddings), and against the same server with batching off (max batch 1: one sequence and one
 * text at a time). Prints throughput (requests/s, generated tokens/s) and latency percentiles
 * (time to first token, time per output token, embedding latency) as a markdown table.
 *
 * <pre>
 * mvn -B -Pserve-bench -DskipTests verify                 # full run
 * mvn -B -Pserve-bench -DskipTests -Dserve.bench.args="--requests 32 --concurrency 1,8" verify
 * </pre>
 *
 * Options: {@code --requests N} per concurrency level and kind (default 256), {@code --concurrency
 * 1,8,64}, {@code --max-tokens 32}, {@code --prompt 16..64} token ids, {@code --no-unbatched},
 * {@code --no-embeddings}, {@code --batch-invariant} (adds a batch-invariant server, max batch 64,
 * to measure that mode's cost), {@code --model DIR} and {@code --dtype float16} (another generation
 * model than stories260K, e.g. issue 25's 1B-class checkpoint on a GPU), {@code --kv-blocks N}.
 */
public final class ServingBenchmark {

    private ServingBenchmark() {}

    /**
     * Runs the benchmark.
     *
     * @param args the options above
     * @throws Exception if a server or request fails
     */
    public static void main(String[] args) throws Exception {
        int requests = 256;
        int[] concurrency = {1, 8, 64};
        int maxTokens = 32;
        int minPrompt = 16;
        int maxPrompt = 64;
        boolean unbatched = true;
        boolean embed = true;
        boolean invariant = false;
        List<String> modelOptions = new ArrayList<>();
        for (int i = 0; i < args.length; ++i) {
            switch (args[i]) {
                case "--requests":
                    requests = BenchSupport.intValue(args, ++i);
                    break;
                case "--concurrency":
                    concurrency = BenchSupport.ints(BenchSupport.value(args, ++i), "--concurrency");
                    break;
                case "--max-tokens":
                    maxTokens = BenchSupport.intValue(args, ++i);
                    break;
                case "--prompt":
                    String range = BenchSupport.value(args, ++i);
                    int[] bounds = BenchSupport.ints(range.replace("..", ","), "--prompt");
                    if (bounds.length != 2 || !range.contains("..")) {
                        throw new IllegalArgumentException(
                                "--prompt: expected MIN..MAX token counts, got " + range);
                    }
                    minPrompt = bounds[0];
                    maxPrompt = bounds[1];
                    break;
                case "--no-unbatched":
                    unbatched = false;
                    break;
                case "--no-embeddings":
                    embed = false;
                    break;
                case "--batch-invariant":
                    invariant = true;
                    break;
                case "--model":
                case "--dtype":
                case "--kv-blocks":
                    modelOptions.add(args[i]);
                    modelOptions.add(BenchSupport.value(args, ++i));
                    break;
                default:
                    throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Random rnd = new Random(42);
        List<String> completions = new ArrayList<>();
        List<String> embeddings = new ArrayList<>();
        for (int i = 0; i < requests; ++i) {
            JsonObject c = new JsonObject();
            JsonArray prompt = new JsonArray();
            int n = minPrompt + rnd.nextInt(maxPrompt - minPrompt + 1);
            for (int t = 0; t < n; ++t) {
                prompt.add(rnd.nextInt(512));
            }
            c.add("prompt", prompt);
            c.addProperty("max_tokens", maxTokens);
            c.addProperty("temperature", 0);
            c.addProperty("stream", true);
            completions.add(c.toString());
            JsonObject e = new JsonObject();
            StringBuilder text = new StringBuilder();
            int words = 4 + rnd.nextInt(28);
            for (int w = 0; w < words; ++w) {
                text.append(w == 0 ? "" : " ").append(WORDS[rnd.nextInt(WORDS.length)]);
            }
            e.addProperty("input", text.toString());
            embeddings.add(e.toString());
        }

        // Every client keeps its connection, as with a pooling client: the JDK keeps only 5 idle
        // connections per server unless told otherwise (read once, at the first request).
        if (System.getProperty("http.maxConnections") == null) {
            int most = Arrays.stream(concurrency).max().orElse(1);
            System.setProperty("http.maxConnections", Integer.toString(Math.max(5, most)));
        }
        StringBuilder table = new StringBuilder();
        table.append("Serving benchmark, ")
                .append(Instant.now())
                .append(", ")
                .append(cpuModel())
                .append(", ")
                .append(Runtime.getRuntime().availableProcessors())
                .append(" CPU threads, device ")
                .append(ai.djl.engine.Engine.getEngine("PyTorch").defaultDevice())
                .append(". Command: mvn -B -Pserve-bench -DskipTests")
                .append(" -Dserve.bench.args=\"")
                .append(String.join(" ", args))
                .append("\" verify\n\n");
        table.append(
                "| server | concurrency | completions/s | generated tokens/s | TTFT p50 / p99 (ms) |"
                        + " per output token p50 / p99 (ms) | embeddings/s | embedding p50 / p99"
                        + " (ms) |\n");
        table.append("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        List<String> servers = new ArrayList<>(List.of("continuous batching"));
        if (invariant) {
            servers.add("batch-invariant");
        }
        if (unbatched) {
            servers.add("one at a time");
        }
        for (String label : servers) {
            boolean batched = !label.equals("one at a time");
            int maxBatch = batched ? 64 : 1;
            ServeCommand command = new ServeCommand();
            List<String> options =
                    new ArrayList<>(
                            List.of(
                                    "--port", "0",
                                    "--max-batch", Integer.toString(maxBatch),
                                    "--embedding-batch", batched ? "32" : "1",
                                    "--max-queue", "4096",
                                    "--embedding-model", embed ? ServeCommand.MINILM : "none"));
            if (label.equals("batch-invariant")) {
                options.add("--batch-invariant");
            }
            options.addAll(modelOptions);
            new CommandLine(command).parseArgs(options.toArray(new String[0]));
            try (OpenAiServer server = command.startServer()) {
                String base = "http://127.0.0.1:" + server.getPort();
                // Warm-up: the first calls pay for lazy initialisation.
                run(base, completions.subList(0, Math.min(8, requests)), 4, true);
                if (embed) {
                    run(base, embeddings.subList(0, Math.min(8, requests)), 4, false);
                }
                for (int c : concurrency) {
                    Result gen = run(base, completions, c, true);
                    Result emb = embed ? run(base, embeddings, c, false) : new Result();
                    emb.seconds = embed ? emb.seconds : Double.NaN;
                    table.append(
                            String.format(
                                    "| %s | %d | %.1f | %.0f | %.1f / %.1f | %.2f / %.2f | %.1f | %.1f / %.1f |%n",
                                    label,
                                    c,
                                    gen.perSecond(),
                                    gen.tokens / gen.seconds,
                                    pct(gen.first, 50),
                                    pct(gen.first, 99),
                                    pct(gen.perToken, 50),
                                    pct(gen.perToken, 99),
                                    emb.perSecond(),
                                    pct(emb.first, 50),
                                    pct(emb.first, 99)));
                    System.err.println(table);
                }
            }
        }
        System.out.println(table);
    }

    private static final String[] WORDS = {
        "the", "cat", "sat", "on", "a", "warm", "mat", "while", "rain", "fell", "over", "old",
        "city", "lights", "and", "quiet", "rivers", "ran", "to", "sea", "bright", "morning"
    };

    /** Latencies in ms and totals of one run. */
    private static final class Result {
        final List<Double> first = new ArrayList<>();
        final List<Double> perToken = new ArrayList<>();
        long tokens;
        int requests;
        double seconds;

        double perSecond() {
            return requests / seconds;
        }
    }

    private static Result run(String base, List<String> bodies, int clients, boolean generate)
            throws Exception {
        Result result = new Result();
        AtomicInteger next = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(clients);
        long start = System.nanoTime();
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int c = 0; c < clients; ++c) {
                fs.add(
                        pool.submit(
                                () -> {
                                    for (int i = next.getAndIncrement(); i < bodies.size(); i = next.getAndIncrement()) {
                                        one(base, bodies.get(i), generate, result);
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
        result.seconds = (System.nanoTime() - start) / 1e9;
        result.requests = bodies.size();
        return result;
    }

    /**
     * One request on {@link HttpURLConnection} (module java.base: the GPU machine's jlink Java
     * runtime has no other HTTP client). Bodies are read to their end, so connections go back to
     * the JDK's keep-alive cache and are reused, as with a pooling client.
     */
    private static void one(String base, String body, boolean generate, Result out)
            throws Exception {
        HttpURLConnection c =
                (HttpURLConnection)
                        new URL(base + (generate ? "/v1/completions" : "/v1/embeddings"))
                                .openConnection();
        c.setConnectTimeout(10_000);
        c.setReadTimeout(5 * 60_000);
        c.setRequestMethod("POST");
        c.setRequestProperty("Content-Type", "application/json");
        c.setDoOutput(true);
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        c.setFixedLengthStreamingMode(bytes.length);
        long t0 = System.nanoTime();
        try (OutputStream os = c.getOutputStream()) {
            os.write(bytes);
        }
        int status = c.getResponseCode();
        if (status != 200) {
            InputStream err = c.getErrorStream();
            String text = err == null ? "" : new String(err.readAllBytes(), StandardCharsets.UTF_8);
            c.disconnect();
            throw new IOException((generate ? "completion: " : "embedding: ") + status + " " + text);
        }
        if (!generate) {
            try (InputStream in = c.getInputStream()) {
                in.readAllBytes();
            }
            synchronized (out) {
                out.first.add((System.nanoTime() - t0) / 1e6);
            }
            return;
        }
        List<Double> gaps = new ArrayList<>();
        double first = -1;
        long last = t0;
        int tokens = 0;
        try (BufferedReader in =
                new BufferedReader(new InputStreamReader(c.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (!line.startsWith("data: ") || line.equals("data: [DONE]")) {
                    continue;
                }
                JsonArray ids =
                        JsonParser.parseString(line.substring(6))
                                .getAsJsonObject()
                                .getAsJsonArray("choices")
                                .get(0)
                                .getAsJsonObject()
                                .getAsJsonArray("token_ids");
                if (ids.isEmpty()) {
                    continue;
                }
                long now = System.nanoTime();
                if (first < 0) {
                    first = (now - t0) / 1e6;
                } else {
                    gaps.add((now - last) / 1e6);
                }
                last = now;
                tokens += ids.size();
            }
        }
        synchronized (out) {
            out.first.add(first);
            out.perToken.addAll(gaps);
            out.tokens += tokens;
        }
    }

    private static String cpuModel() {
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/cpuinfo"))) {
                if (line.startsWith("model name")) {
                    return line.substring(line.indexOf(':') + 1).trim();
                }
            }
        } catch (java.io.IOException e) {
            // not Linux: the architecture below says enough
        }
        return System.getProperty("os.arch");
    }

    private static double pct(List<Double> values, int p) {
        if (values.isEmpty()) {
            return Double.NaN;
        }
        double[] v = values.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        int i = (int) Math.ceil(p / 100.0 * v.length) - 1;
        return v[Math.max(0, Math.min(v.length - 1, i))];
    }
}
