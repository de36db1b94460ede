/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.serving.OpenAiServer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Graceful shutdown: in-flight streams either finish (within the grace period) or end with a final
 * {@code finish_reason: "abort"} event, an error event and {@code data: [DONE]}; the engine thread
 * ends and its cache is freed; the port stops accepting. And the {@code serve} command in a fresh
 * JVM on the default models: it answers, and SIGTERM ends it with exit code 0.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ServingShutdownTest {

    private static final int STREAMS = 4;

    /** What a stream saw: the tokens, the last finish reason, whether an error event came. */
    record Seen(int tokens, String finish, boolean error, boolean done) {}

    private static List<Seen> shutDownMidStream(Duration grace, int maxTokens) throws Exception {
        OpenAiServer server = ServingModels.start(e -> {}, s -> s.optShutdownGrace(grace));
        ServingClient client = new ServingClient(server.getPort());
        CountDownLatch started = new CountDownLatch(STREAMS);
        ExecutorService pool = Executors.newFixedThreadPool(STREAMS);
        List<Future<Seen>> fs = new ArrayList<>();
        try {
            for (int i = 0; i < STREAMS; ++i) {
                int[] prompt = new Random().ints(4, 0, 512).toArray();
                String json = new Requests.Spec(prompt, maxTokens, 0, 1, 0).json(true);
                fs.add(pool.submit(() -> read(client, json, started)));
            }
            assertTrue(started.await(30, TimeUnit.SECONDS), "the streams did not start");
            server.close();
            assertTrue(server.getGenerator().engine().isTerminated());
            assertThrows(IOException.class, () -> client.get("/health"));
            List<Seen> seen = new ArrayList<>();
            for (Future<Seen> f : fs) {
                seen.add(f.get(30, TimeUnit.SECONDS));
            }
            return seen;
        } finally {
            pool.shutdownNow();
            server.close();
        }
    }

    private static Seen read(ServingClient client, String json, CountDownLatch started)
            throws IOException {
        int tokens = 0;
        String finish = null;
        boolean error = false;
        boolean done = false;
        try (ServingClient.StreamingResponse r = client.postStream("/v1/completions", json, true);
                ServingClient.Events events = new ServingClient.Events(r.body())) {
            assertEquals(200, r.statusCode());
            String data;
            while ((data = events.next()) != null) {
                if (data.equals("[DONE]")) {
                    done = true;
                    break;
                }
                JsonObject o = JsonParser.parseString(data).getAsJsonObject();
                if (o.has("error")) {
                    error = true;
                    continue;
                }
                JsonObject choice = o.getAsJsonArray("choices").get(0).getAsJsonObject();
                tokens += choice.getAsJsonArray("token_ids").size();
                if (tokens == 1) {
                    started.countDown();
                }
                if (!choice.get("finish_reason").isJsonNull()) {
                    finish = choice.get("finish_reason").getAsString();
                }
            }
        }
        return new Seen(tokens, finish, error, done);
    }

    @Test
    void withoutGraceInFlightStreamsEndWithAFinalEvent() throws Exception {
        for (Seen s : shutDownMidStream(Duration.ZERO, 500)) {
            assertEquals("abort", s.finish(), s.toString());
            assertTrue(s.error() && s.done() && s.tokens() < 500, s.toString());
        }
    }

    /**
     * The command as a user runs it: {@code serve --port 0} in a fresh JVM on the default models
     * answers a completion and an embedding, and SIGTERM ends it gracefully with exit code 0.
     */
    @Test
    void serveCommandAnswersAndExitsZeroOnSigterm() throws Exception {
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        Path log = Files.createTempFile("serve", ".log");
        List<String> command = new ArrayList<>(List.of(java));
        // The child runs as this JVM does: the same DJL, JavaCPP and project settings (the GPU
        // suite's Java sets some on its command line, e.g. ai.djl.offline).
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("ai.djl.") || name.startsWith("djl.attn.") || name.startsWith("org.bytedeco.")) {
                command.add("-D" + name + "=" + System.getProperty(name));
            }
        }
        command.addAll(
                List.of(
                        "-cp",
                        System.getProperty("java.class.path"),
                        "io.djlattention.cli.Main",
                        "serve",
                        "--port",
                        "0",
                        "--io-threads",
                        "1"));
        Process p =
                new ProcessBuilder(command)
                        .redirectErrorStream(true)
                        .redirectOutput(log.toFile())
                        .start();
        try {
            Pattern serving = Pattern.compile("(?m)^serving on http://127\\.0\\.0\\.1:(\\d+)");
            Matcher m = serving.matcher("");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (!m.find() && p.isAlive() && System.nanoTime() < deadline) {
                Thread.sleep(100);
                m = serving.matcher(Files.readString(log));
            }
            assertTrue(m.find(0), "serve did not start:\n" + Files.readString(log));
            ServingClient client = new ServingClient(Integer.parseInt(m.group(1)));
            // llama2.c's own greedy continuation of this prompt (greedy_reference.json).
            ServingClient.Completion c =
                    client.complete(
                            "{\"prompt\": [1, 300, 400, 500, 261, 7], \"max_tokens\": 6,"
                                    + " \"temperature\": 0}");
            assertEquals(200, c.status(), c.body());
            assertArrayEquals(new int[] {466, 436, 344, 292, 466, 436}, c.tokenIds());
            int[] status = new int[1];
            List<float[]> e = client.embed(ServingModels.EMBEDDER, List.of("a test sentence"), status);
            assertEquals(200, status[0]);
            assertEquals(384, e.get(0).length);
            p.destroy(); // SIGTERM
            assertTrue(p.waitFor(30, TimeUnit.SECONDS), "serve did not stop on SIGTERM");
            String output = Files.readString(log);
            assertEquals(0, p.exitValue(), output);
            assertTrue(output.contains("stopped"), output);
        } finally {
            p.destroyForcibly();
            Files.deleteIfExists(log);
        }
    }

    @Test
    void withGraceInFlightStreamsFinish() throws Exception {
        for (Seen s : shutDownMidStream(Duration.ofSeconds(30), 60)) {
            assertEquals(new Seen(60, "length", false, true), s);
        }
    }
}
