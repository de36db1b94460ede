/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A JDK {@link HttpClient} on a loopback server, with the few calls the serving tests make. */
final class ServingClient {

    final HttpClient http;
    final String base;

    ServingClient(int port) {
        this.http =
                HttpClient.newBuilder()
                        .version(HttpClient.Version.HTTP_1_1)
                        .connectTimeout(Duration.ofSeconds(10))
                        .build();
        this.base = "http://127.0.0.1:" + port;
    }

    HttpResponse<String> get(String path) throws IOException, InterruptedException {
        return http.send(
                HttpRequest.newBuilder(URI.create(base + path))
                        .timeout(Duration.ofSeconds(60))
                        .GET()
                        .build(),
                HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> post(String path, String body) throws IOException, InterruptedException {
        return post(path, body.getBytes(StandardCharsets.UTF_8));
    }

    HttpResponse<String> post(String path, byte[] body) throws IOException, InterruptedException {
        return http.send(
                HttpRequest.newBuilder(URI.create(base + path))
                        .timeout(Duration.ofSeconds(60))
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofByteArray(body))
                        .build(),
                HttpResponse.BodyHandlers.ofString());
    }

    /** Opens a streaming request; read it with {@link Events}. */
    HttpResponse<InputStream> postStream(String path, String body)
            throws IOException, InterruptedException {
        return http.send(
                HttpRequest.newBuilder(URI.create(base + path))
                        .timeout(Duration.ofSeconds(60))
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString(body))
                        .build(),
                HttpResponse.BodyHandlers.ofInputStream());
    }

    /** Reads the {@code data:} events of a server-sent event stream. */
    static final class Events implements AutoCloseable {
        private final BufferedReader reader;

        Events(InputStream in) {
            reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        }

        /** Returns the next event's data, or null at the end of the stream. */
        String next() throws IOException {
            String line;
            while ((line = reader.readLine()) != null) {
                if (line.startsWith("data: ")) {
                    return line.substring(6);
                }
                if (!line.isEmpty()) {
                    throw new IOException("unexpected line in the event stream: " + line);
                }
            }
            return null;
        }

        @Override
        public void close() throws IOException {
            reader.close();
        }
    }

    /** A completion's outcome as a client sees it. */
    record Completion(int status, int[] tokenIds, String text, String finishReason, String body) {}

    /** Runs a non-streaming completion. */
    Completion complete(String requestJson) throws IOException, InterruptedException {
        HttpResponse<String> r = post("/v1/completions", requestJson);
        if (r.statusCode() != 200) {
            return new Completion(r.statusCode(), null, null, null, r.body());
        }
        JsonObject choice =
                JsonParser.parseString(r.body())
                        .getAsJsonObject()
                        .getAsJsonArray("choices")
                        .get(0)
                        .getAsJsonObject();
        return new Completion(
                200,
                ints(choice.getAsJsonArray("token_ids")),
                choice.get("text").getAsString(),
                choice.get("finish_reason").getAsString(),
                r.body());
    }

    /**
     * Runs a streaming completion; stops reading (and closes the connection) after {@code
     * disconnectAfter} token events when that is >= 0.
     */
    Completion stream(String requestJson, int disconnectAfter)
            throws IOException, InterruptedException {
        HttpResponse<InputStream> r = postStream("/v1/completions", requestJson);
        if (r.statusCode() != 200) {
            String body = new String(r.body().readAllBytes(), StandardCharsets.UTF_8);
            return new Completion(r.statusCode(), null, null, null, body);
        }
        List<Integer> ids = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        String finish = null;
        boolean done = false;
        try (Events events = new Events(r.body())) {
            String data;
            while ((data = events.next()) != null) {
                if (data.equals("[DONE]")) {
                    done = true;
                    // Read to the end of the body, as an SSE client does: closing a response
                    // stream early makes the JDK client drop the connection.
                    if (events.next() != null) {
                        throw new IOException("data after [DONE]");
                    }
                    break;
                }
                JsonObject o = JsonParser.parseString(data).getAsJsonObject();
                if (o.has("error")) {
                    String rest;
                    while ((rest = events.next()) != null && !rest.equals("[DONE]")) {
                        data = data + "\n" + rest;
                    }
                    return new Completion(500, null, null, null, data);
                }
                JsonObject choice = o.getAsJsonArray("choices").get(0).getAsJsonObject();
                for (JsonElement e : choice.getAsJsonArray("token_ids")) {
                    ids.add(e.getAsInt());
                }
                text.append(choice.get("text").getAsString());
                if (!choice.get("finish_reason").isJsonNull()) {
                    finish = choice.get("finish_reason").getAsString();
                }
                if (disconnectAfter >= 0 && ids.size() >= disconnectAfter) {
                    return new Completion(-1, toArray(ids), text.toString(), null, null);
                }
            }
        }
        if (!done) {
            throw new IOException("the event stream ended without data: [DONE]");
        }
        return new Completion(200, toArray(ids), text.toString(), finish, null);
    }

    /** Embeds texts; returns the vectors, or null with the status in {@code status[0]}. */
    List<float[]> embed(String model, List<String> texts, int[] status)
            throws IOException, InterruptedException {
        JsonObject req = new JsonObject();
        req.addProperty("model", model);
        JsonArray input = new JsonArray();
        texts.forEach(input::add);
        req.add("input", input);
        HttpResponse<String> r = post("/v1/embeddings", req.toString());
        status[0] = r.statusCode();
        if (r.statusCode() != 200) {
            return null;
        }
        List<float[]> out = new ArrayList<>();
        for (JsonElement d : JsonParser.parseString(r.body()).getAsJsonObject().getAsJsonArray("data")) {
            JsonArray v = d.getAsJsonObject().getAsJsonArray("embedding");
            float[] f = new float[v.size()];
            for (int i = 0; i < f.length; ++i) {
                f[i] = v.get(i).getAsFloat();
            }
            out.add(f);
        }
        return out;
    }

    /** Reads the unlabelled samples of /metrics. */
    Map<String, Double> metrics() throws IOException, InterruptedException {
        Map<String, Double> m = new HashMap<>();
        for (String line : get("/metrics").body().split("\n")) {
            if (line.startsWith("#") || line.isBlank()) {
                continue;
            }
            int sp = line.lastIndexOf(' ');
            m.put(line.substring(0, sp), Double.parseDouble(line.substring(sp + 1)));
        }
        return m;
    }

    static int[] ints(JsonArray a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; ++i) {
            out[i] = a.get(i).getAsInt();
        }
        return out;
    }

    private static int[] toArray(List<Integer> ids) {
        return ids.stream().mapToInt(Integer::intValue).toArray();
    }
}
