/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.serving.OpenAiServer;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * HTTP done right, on raw loopback sockets: pipelined requests are answered in request order; an
 * idle connection and a slow request (slowloris) are closed by their timeouts; connections beyond
 * the cap are closed at once; oversized URLs and headers get 414 and 431; HEAD and OPTIONS work on
 * the routes; error bodies name no Java class; response ids are unique across server restarts;
 * the tokens-per-second gauge decays to 0 when idle.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ServingHttpTest {

    private static final Duration IDLE = Duration.ofMillis(1500);
    private static final Duration REQUEST = Duration.ofMillis(1000);

    private OpenAiServer server;
    private ServingClient client;

    @BeforeAll
    void start() throws Exception {
        server =
                ServingModels.start(
                        e -> {}, s -> s.optIdleTimeout(IDLE).optRequestTimeout(REQUEST));
        client = new ServingClient(server.getPort());
    }

    @AfterAll
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    private static String completion(int maxTokens) {
        return "{\"prompt\": [1, 300, 400], \"max_tokens\": " + maxTokens + ", \"temperature\": 0}";
    }

    private static int tokens(RawHttp.Response r) {
        JsonObject o = JsonParser.parseString(r.body()).getAsJsonObject();
        return o.getAsJsonArray("choices").get(0).getAsJsonObject().getAsJsonArray("token_ids").size();
    }

    @Test
    void pipelinedRequestsAreAnsweredInRequestOrder() throws Exception {
        try (RawHttp c = new RawHttp(server.getPort(), 60_000)) {
            // A long completion, then two requests that finish long before it.
            c.send(
                    RawHttp.post("/v1/completions", completion(300))
                            + RawHttp.get("GET", "/health")
                            + RawHttp.post("/v1/completions", completion(1)));
            RawHttp.Response first = c.read(false);
            RawHttp.Response second = c.read(false);
            RawHttp.Response third = c.read(false);
            assertEquals(200, first.status(), first.body());
            assertEquals(300, tokens(first), "the first answer is not the first request's");
            assertEquals("{\"status\":\"ok\"}", second.body());
            assertEquals(1, tokens(third));
        }
    }

    @Test
    void idleConnectionsAreClosed() throws Exception {
        try (RawHttp silent = new RawHttp(server.getPort(), 10_000);
                RawHttp used = new RawHttp(server.getPort(), 10_000)) {
            used.send(RawHttp.get("GET", "/health"));
            assertEquals(200, used.read(false).status());
            long t0 = System.nanoTime();
            assertTrue(silent.closedByServer());
            assertTrue(used.closedByServer());
            double seconds = (System.nanoTime() - t0) / 1e9;
            assertTrue(seconds < 5, "closed after " + seconds + " s, idle timeout " + IDLE);
        }
    }

    @Test
    void aSlowRequestGets408AndIsClosed() throws Exception {
        double before = client.metrics().getOrDefault("djl_attn_http_responses_total{code=\"408\"}", 0.0);
        long t0 = System.nanoTime();
        boolean closed = false;
        try (RawHttp c = new RawHttp(server.getPort(), 10_000)) {
            c.send("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n");
            // One header line every 200 ms, the slowloris way: it never finishes.
            for (int i = 0; i < 40 && !closed; ++i) {
                Thread.sleep(200);
                try {
                    c.send("X-Slow-" + i + ": 1\r\n");
                } catch (java.io.IOException e) {
                    closed = true;
                }
                if (i == 12) {
                    break; // 2.6 s: past the request timeout; read what the server said
                }
            }
            try {
                RawHttp.Response r = c.read(false);
                assertEquals(408, r.status(), r.body());
            } catch (java.io.IOException e) {
                // The server's close may reset the connection before the 408 is read.
            }
            assertTrue(c.closedByServer());
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        assertTrue(seconds < 6, "slow request lived " + seconds + " s");
        assertEquals(
                before + 1,
                client.metrics().get("djl_attn_http_responses_total{code=\"408\"}"));
    }

    @Test
    void connectionsBeyondTheCapAreClosed() throws Exception {
        try (OpenAiServer capped =
                ServingModels.start(e -> {}, s -> s.optMaxConnections(4))) {
            List<RawHttp> open = new ArrayList<>();
            try {
                for (int i = 0; i < 4; ++i) {
                    RawHttp c = new RawHttp(capped.getPort(), 10_000);
                    open.add(c);
                    c.send(RawHttp.get("GET", "/health"));
                    assertEquals(200, c.read(false).status());
                }
                try (RawHttp extra = new RawHttp(capped.getPort(), 10_000)) {
                    assertTrue(extra.closedByServer(), "a fifth connection was kept");
                }
                open.remove(0).close();
                RawHttp.Response r = null;
                for (int attempt = 0; attempt < 50 && r == null; ++attempt) {
                    try (RawHttp again = new RawHttp(capped.getPort(), 10_000)) {
                        again.send(RawHttp.get("GET", "/health"));
                        r = again.read(false);
                    } catch (java.io.IOException e) {
                        Thread.sleep(20); // the closed socket's slot is freed asynchronously
                    }
                }
                assertEquals(200, r == null ? -1 : r.status());
            } finally {
                for (RawHttp c : open) {
                    c.close();
                }
            }
        }
    }

    @Test
    void oversizedUrlsAndHeadersGet414And431() throws Exception {
        try (RawHttp c = new RawHttp(server.getPort(), 10_000)) {
            c.send(RawHttp.get("GET", "/health?q=" + "a".repeat(20_000)));
            RawHttp.Response r = c.read(false);
            assertEquals(414, r.status(), r.body());
        }
        try (RawHttp c = new RawHttp(server.getPort(), 10_000)) {
            c.send("GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + "b".repeat(40_000) + "\r\n\r\n");
            RawHttp.Response r = c.read(false);
            assertEquals(431, r.status(), r.body());
        }
    }

    @Test
    void headAndOptions() throws Exception {
        try (RawHttp c = new RawHttp(server.getPort(), 10_000)) {
            c.send(RawHttp.get("HEAD", "/health") + RawHttp.get("GET", "/health"));
            RawHttp.Response head = c.read(true);
            RawHttp.Response get = c.read(false);
            assertEquals(200, head.status());
            assertEquals(String.valueOf(get.body().length()), head.headers().get("content-length"));
            assertEquals("{\"status\":\"ok\"}", get.body(), "HEAD's answer carried a body");
            c.send(RawHttp.get("OPTIONS", "/v1/completions"));
            RawHttp.Response options = c.read(false);
            assertEquals(204, options.status());
            assertEquals("POST, OPTIONS", options.headers().get("allow"));
        }
        assertEquals(405, client.send("DELETE", "/v1/models", null).statusCode());
    }

    @Test
    void errorBodiesNameNoJavaClass() throws Exception {
        String[] bad = {
            "GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n",
            "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header: 1\r\n\r\n",
        };
        for (String raw : bad) {
            try (RawHttp c = new RawHttp(server.getPort(), 10_000)) {
                c.send(raw);
                RawHttp.Response r = c.read(false);
                assertEquals(400, r.status(), raw);
                for (String leak : new String[] {"Exception", "io.netty", "java."}) {
                    assertFalse(r.body().contains(leak), r.body());
                }
            }
        }
    }

    @Test
    void responseIdsAreUniqueAcrossRestarts() throws Exception {
        Set<String> ids = new HashSet<>();
        for (int restart = 0; restart < 2; ++restart) {
            try (OpenAiServer s = ServingModels.start(e -> {}, b -> {})) {
                ServingClient c = new ServingClient(s.getPort());
                for (int i = 0; i < 3; ++i) {
                    ServingClient.Response r = c.post("/v1/completions", completion(1));
                    String id = JsonParser.parseString(r.body()).getAsJsonObject().get("id").getAsString();
                    assertTrue(id.matches("cmpl-[0-9a-f]{32}"), id);
                    assertTrue(ids.add(id), "repeated id " + id);
                }
            }
        }
    }

    @Test
    void aStreamWithIncludeUsageEndsWithTheUsage() throws Exception {
        String body =
                "{\"prompt\": [1, 300, 400], \"max_tokens\": 5, \"temperature\": 0, \"stream\": true,"
                        + " \"stream_options\": {\"include_usage\": true}}";
        int tokens = 0;
        JsonObject usage = null;
        try (ServingClient.StreamingResponse s = client.postStream("/v1/completions", body, true);
                ServingClient.Events events = new ServingClient.Events(s.body())) {
            for (String data = events.next(); data != null && !data.equals("[DONE]"); data = events.next()) {
                JsonObject chunk = JsonParser.parseString(data).getAsJsonObject();
                if (chunk.getAsJsonArray("choices").isEmpty()) {
                    usage = chunk.getAsJsonObject("usage");
                } else {
                    tokens += chunk.getAsJsonArray("choices").get(0).getAsJsonObject().getAsJsonArray("token_ids").size();
                }
            }
        }
        assertEquals(5, tokens);
        assertTrue(usage != null, "no usage chunk");
        assertEquals(3, usage.get("prompt_tokens").getAsInt());
        assertEquals(5, usage.get("completion_tokens").getAsInt());
        assertEquals(8, usage.get("total_tokens").getAsInt());
    }

    @Test
    void tokensPerSecondDecaysToZeroWhenIdle() throws Exception {
        assertEquals(200, client.post("/v1/completions", completion(64)).statusCode());
        double busy = client.metrics().get("djl_attn_generated_tokens_per_second");
        assertTrue(busy > 0, "no rate right after 64 tokens: " + busy);
        Thread.sleep(5_500); // the gauge's window is 5 s
        assertEquals(0.0, client.metrics().get("djl_attn_generated_tokens_per_second"));
        assertNotEquals(0.0, client.metrics().get("djl_attn_generated_tokens_total"));
    }
}
