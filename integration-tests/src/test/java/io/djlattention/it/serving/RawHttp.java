/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * HTTP/1.1 over a plain loopback socket, byte by byte, for what {@code HttpURLConnection} will not
 * do: pipelining, slow or malformed requests, idle connections. Responses are read by their
 * {@code Content-Length} or chunked encoding.
 */
final class RawHttp implements AutoCloseable {

    final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    RawHttp(int port, int readTimeoutMs) throws IOException {
        socket = new Socket("127.0.0.1", port);
        socket.setSoTimeout(readTimeoutMs);
        in = socket.getInputStream();
        out = socket.getOutputStream();
    }

    /** A response: status, headers (lower-case names) and body. */
    record Response(int status, Map<String, String> headers, String body) {}

    static String post(String path, String json) {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + b.length + "\r\n\r\n" + json;
    }

    static String get(String method, String path) {
        return method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    }

    void send(String raw) throws IOException {
        out.write(raw.getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    /** Reads one response; {@code head} for the answer to a HEAD request (no body). */
    Response read(boolean head) throws IOException {
        String status = line();
        if (status == null) {
            throw new IOException("connection closed before a response");
        }
        Map<String, String> headers = new LinkedHashMap<>();
        for (String l = line(); l != null && !l.isEmpty(); l = line()) {
            int c = l.indexOf(':');
            headers.put(l.substring(0, c).trim().toLowerCase(Locale.ROOT), l.substring(c + 1).trim());
        }
        int code = Integer.parseInt(status.split(" ")[1]);
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        if (!head && code != 204) {
            if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
                for (int n = Integer.parseInt(line().trim(), 16); n > 0; n = Integer.parseInt(line().trim(), 16)) {
                    body.write(in.readNBytes(n));
                    line();
                }
                line();
            } else {
                body.write(in.readNBytes(Integer.parseInt(headers.getOrDefault("content-length", "0"))));
            }
        }
        return new Response(code, headers, body.toString(StandardCharsets.UTF_8));
    }

    /** Whether the server closed the connection (end of stream) within the read timeout. */
    boolean closedByServer() throws IOException {
        try {
            return in.read() < 0;
        } catch (java.net.SocketException e) {
            return true; // reset
        }
    }

    private String line() throws IOException {
        StringBuilder s = new StringBuilder();
        for (int c = in.read(); c >= 0; c = in.read()) {
            if (c == '\n') {
                int n = s.length();
                return n > 0 && s.charAt(n - 1) == '\r' ? s.substring(0, n - 1) : s.toString();
            }
            s.append((char) c);
        }
        return s.length() == 0 ? null : s.toString();
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
