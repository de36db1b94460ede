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
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * An HTTP/1.1 client on a loopback server, with the few calls the serving tests make.
 *
 * <p>It is built on {@link HttpURLConnection} (module {@code java.base}), not on the JDK's newer
 * {@code HttpClient}: the Java runtime of the GPU suite is a jlink image without that module. Every
 * request has a 10 s connect and a 60 s read timeout; a response body is read to its end, so the
 * connection goes back to the JDK's keep-alive cache and later requests reuse it, as a pooling
 * client's would.
 */
final class ServingClient {

    static final int CONNECT_TIMEOUT_MS = 10_000;
    static final int READ_TIMEOUT_MS = 60_000;

    static {
        // The JDK keeps 5 idle connections per server by default; the load tests run up to 64
        // clients, each of which should find its connection again, as with a pooling client.
        if (System.getProperty("http.maxConnections") == null) {
            System.setProperty("http.maxConnections", "128");
        }
    }

    final String base;

    ServingClient(int port) {
        this.base = "http://127.0.0.1:" + port;
    }

    /** A whole response: status, headers (names compared ignoring case) and body. */
    record Response(int statusCode, Map<String, List<String>> headers, String body) {

        /** Returns the first value of a header, or null; the name is compared ignoring case. */
        String header(String name) {
            for (Map.Entry<String, List<String>> e : headers.entrySet()) {
                if (e.getKey() != null && e.getKey().equalsIgnoreCase(name) && !e.getValue().isEmpty()) {
                    return e.getValue().get(0);
                }
            }
            return null;
        }
    }

    Response get(String path) throws IOException {
        return send("GET", path, null);
    }

    Response post(String path, String body) throws IOException {
        return post(path, body.getBytes(StandardCharsets.UTF_8));
    }

    Response post(String path, byte[] body) throws IOException {
        return send("POST", path, body);
    }

    /**
     * Sends a request and reads the whole response.
     *
     * @param method the HTTP method
     * @param path the path on the server
     * @param body the JSON body, or null for none
     */
    Response send(String method, String path, byte[] body) throws IOException {
        HttpURLConnection c = open(method, path, body, true);
        try {
            int status = c.getResponseCode();
            String text;
            try (InputStream in = bodyStream(c, status)) {
                text = in == null ? "" : new String(in.readAllBytes(), StandardCharsets.UTF_8);
            }
            return new Response(status, c.getHeaderFields(), text);
        } catch (IOException | RuntimeException e) {
            c.disconnect();
            throw e;
        }
    }

    /**
     * Opens a streaming completion; read its body with {@link Events}, then close it.
     *
     * @param keepAlive false to ask the server to close the connection after this response: a
     *     client that will hang up midway uses it, so that closing the stream closes the socket and
     *     the server sees the hang-up
     */
    StreamingResponse postStream(String path, String body, boolean keepAlive) throws IOException {
        HttpURLConnection c = open("POST", path, body.getBytes(StandardCharsets.UTF_8), keepAlive);
        try {
            int status = c.getResponseCode();
            return new StreamingResponse(c, status, bodyStream(c, status));
        } catch (IOException | RuntimeException e) {
            c.disconnect();
            throw e;
        }
    }

    /** An open response whose body is read as it arrives. */
    static final class StreamingResponse implements AutoCloseable {
        private final HttpURLConnection connection;
        private final int status;
        private final InputStream body;

        StreamingResponse(HttpURLConnection connection, int status, InputStream body) {
            this.connection = connection;
            this.status = status;
            this.body = body == null ? InputStream.nullInputStream() : body;
        }

        int statusCode() {
            return status;
        }

        String header(String name) {
            return connection.getHeaderField(name);
        }

        InputStream body() {
            return body;
        }

        /**
         * Hangs up mid-response: closes the socket, so the server sees the channel close. (With
         * keep-alive off the JDK never pools the connection; {@code disconnect} closes it.)
         */
        void hangUp() {
            connection.disconnect();
        }

        /**
         * Closes the body: a body read to its end gives the connection back to the keep-alive
         * cache; one that is not closes the socket.
         */
        @Override
        public void close() throws IOException {
            body.close();
        }
    }

    private HttpURLConnection open(String method, String path, byte[] body, boolean keepAlive)
            throws IOException {
        HttpURLConnection c = (HttpURLConnection) new URL(base + path).openConnection();
        c.setConnectTimeout(CONNECT_TIMEOUT_MS);
        c.setReadTimeout(READ_TIMEOUT_MS);
        c.setInstanceFollowRedirects(false);
        c.setUseCaches(false);
        c.setRequestMethod(method);
        if (!keepAlive) {
            c.setRequestProperty("Connection", "close");
        }
        if (body != null) {
            c.setRequestProperty("Content-Type", "application/json");
            c.setDoOutput(true);
            // Fixed-length streaming: the body goes out as given, and a failed POST is never
            // silently sent again on another connection.
            c.setFixedLengthStreamingMode(body.length);
            try (OutputStream out = c.getOutputStream()) {
                out.write(body);
            } catch (IOException | RuntimeException e) {
                c.disconnect();
                throw e;
            }
        }
        return c;
    }

    /** The response's body: the error stream for 4xx/5xx (null when it has none). */
    private static InputStream bodyStream(HttpURLConnection c, int status) throws IOException {
        return status >= 400 ? c.getErrorStream() : c.getInputStream();
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
    Completion complete(String requestJson) throws IOException {
        return completion(post("/v1/completions", requestJson));
    }

    /** Reads a non-streaming completion's response. */
    static Completion completion(Response r) {
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
     * Runs a streaming completion; when {@code disconnectAfter >= 0}, hangs up (closes the socket)
     * after that many tokens and returns status -1 with the tokens read so far.
     */
    Completion stream(String requestJson, int disconnectAfter) throws IOException {
        boolean hangUp = disconnectAfter >= 0;
        try (StreamingResponse r = postStream("/v1/completions", requestJson, !hangUp)) {
            if (r.statusCode() != 200) {
                String body = new String(r.body().readAllBytes(), StandardCharsets.UTF_8);
                return new Completion(r.statusCode(), null, null, null, body);
            }
            String type = r.header("Content-Type");
            if (type == null || !type.startsWith("text/event-stream")) {
                throw new IOException("a streaming completion came as " + type);
            }
            List<Integer> ids = new ArrayList<>();
            StringBuilder text = new StringBuilder();
            String finish = null;
            Events events = new Events(r.body());
            String data;
            while ((data = events.next()) != null) {
                if (data.equals("[DONE]")) {
                    // Read to the end of the body, as an SSE client does: the connection then
                    // goes back to the keep-alive cache.
                    if (events.next() != null) {
                        throw new IOException("data after [DONE]");
                    }
                    return new Completion(200, toArray(ids), text.toString(), finish, null);
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
                if (hangUp && ids.size() >= disconnectAfter) {
                    r.hangUp();
                    return new Completion(-1, toArray(ids), text.toString(), null, null);
                }
            }
            throw new IOException("the event stream ended without data: [DONE]");
        }
    }

    /** Embeds texts; returns the vectors, or null with the status in {@code status[0]}. */
    List<float[]> embed(String model, List<String> texts, int[] status) throws IOException {
        JsonObject req = new JsonObject();
        req.addProperty("model", model);
        JsonArray input = new JsonArray();
        texts.forEach(input::add);
        req.add("input", input);
        Response r = post("/v1/embeddings", req.toString());
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
    Map<String, Double> metrics() throws IOException {
        Response r = get("/metrics");
        if (r.statusCode() != 200) {
            throw new IOException("/metrics: status " + r.statusCode() + " " + r.body());
        }
        Map<String, Double> m = new HashMap<>();
        for (String line : r.body().split("\n")) {
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
