/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.serving.ApiKeys;
import io.djlattention.serving.OpenAiServer;
import io.netty.pkitesting.CertificateBuilder;
import io.netty.pkitesting.X509Bundle;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLContext;

/**
 * API keys (Bearer, on the {@code /v1/} routes; {@code /health} stays open for probes) and TLS
 * from PEM files, with a self-signed certificate made in the test by Netty's test PKI.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ServingSecurityTest {

    private static final String COMPLETION =
            "{\"prompt\": [1, 300, 400], \"max_tokens\": 4, \"temperature\": 0}";

    @Test
    void apiKeysAreRequiredOnV1Routes(@TempDir Path dir) throws Exception {
        Path keys = dir.resolve("keys");
        Files.writeString(keys, "# the keys\nkey-one-7f3a\n\nkey-two-91bc\n");
        try (OpenAiServer server =
                ServingModels.start(e -> {}, s -> {
                    try {
                        s.optApiKeys(ApiKeys.fromFile(keys));
                    } catch (IOException ex) {
                        throw new IllegalStateException(ex);
                    }
                })) {
            ServingClient client = new ServingClient(server.getPort());
            assertEquals(200, client.get("/health").statusCode(), "probes need no key");
            for (String auth : new String[] {null, "Bearer key-one", "Bearer key-one-7f3a0", "Basic a2V5", "Bearer "}) {
                ServingClient.Response r = send(server.getPort(), "/v1/models", null, auth);
                assertEquals(401, r.statusCode(), auth + ": " + r.body());
                assertEquals("Bearer", r.header("WWW-Authenticate"));
                JsonObject error = JsonParser.parseString(r.body()).getAsJsonObject().getAsJsonObject("error");
                assertTrue(error.get("message").getAsString().contains("API key"), r.body());
            }
            assertEquals(401, send(server.getPort(), "/v1/completions", COMPLETION, null).statusCode());
            for (String key : new String[] {"key-one-7f3a", "key-two-91bc"}) {
                assertEquals(200, send(server.getPort(), "/v1/models", null, "Bearer " + key).statusCode());
                ServingClient.Response r = send(server.getPort(), "/v1/completions", COMPLETION, "bearer " + key);
                assertEquals(200, r.statusCode(), r.body());
            }
        }
        assertThrows(IllegalArgumentException.class, () -> ApiKeys.of(List.of("has space")));
        Files.writeString(keys, "# nothing\n\n");
        assertThrows(IllegalArgumentException.class, () -> ApiKeys.fromFile(keys));
    }

    /** A request with an optional Authorization header, through the test's HTTP client. */
    private static ServingClient.Response send(int port, String path, String body, String auth)
            throws IOException {
        var c = (java.net.HttpURLConnection) new URL("http://127.0.0.1:" + port + path).openConnection();
        return exchange(c, body, auth);
    }

    private static ServingClient.Response exchange(
            java.net.HttpURLConnection c, String body, String auth) throws IOException {
        c.setConnectTimeout(10_000);
        c.setReadTimeout(60_000);
        if (auth != null) {
            c.setRequestProperty("Authorization", auth);
        }
        if (body != null) {
            c.setRequestMethod("POST");
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            try (OutputStream out = c.getOutputStream()) {
                out.write(body.getBytes(StandardCharsets.UTF_8));
            }
        }
        int status = c.getResponseCode();
        try (InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream()) {
            String text = in == null ? "" : new String(in.readAllBytes(), StandardCharsets.UTF_8);
            return new ServingClient.Response(status, c.getHeaderFields(), text);
        }
    }

    @Test
    void tlsRoundTrip() throws Exception {
        X509Bundle cert =
                new CertificateBuilder()
                        .subject("CN=localhost")
                        .addSanDnsName("localhost")
                        .setIsCertificateAuthority(true)
                        .ecp256()
                        .buildSelfSigned();
        Path chain = cert.toTempCertChainPem().toPath();
        Path key = cert.toTempPrivateKeyPem().toPath();
        try (OpenAiServer server = ServingModels.start(e -> {}, s -> s.optTls(chain, key))) {
            SSLContext ssl = SSLContext.getInstance("TLS");
            ssl.init(null, cert.toTrustManagerFactory().getTrustManagers(), null);
            var c =
                    (HttpsURLConnection)
                            new URL("https://localhost:" + server.getPort() + "/v1/completions").openConnection();
            c.setSSLSocketFactory(ssl.getSocketFactory());
            ServingClient.Response r = exchange(c, COMPLETION, null);
            assertEquals(200, r.statusCode(), r.body());
            JsonObject choice =
                    JsonParser.parseString(r.body()).getAsJsonObject().getAsJsonArray("choices").get(0).getAsJsonObject();
            assertEquals(4, choice.getAsJsonArray("token_ids").size());
            // Plain HTTP to the TLS port gets no HTTP answer.
            assertThrows(IOException.class, () -> send(server.getPort(), "/health", null, null));
        } finally {
            Files.deleteIfExists(chain);
            Files.deleteIfExists(key);
        }
    }
}
