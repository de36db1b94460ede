/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.serving.OpenAiServer;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;

/**
 * Bad input on both endpoints and on the routes: each case gets its status and an OpenAI-style
 * JSON error whose {@code param} names the field at fault and whose message says what is wrong;
 * the server keeps serving afterwards.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ServingBadInputTest {

    private static final String C = "/v1/completions";
    private static final String E = "/v1/embeddings";
    private static final String CHAT = "/v1/chat/completions";
    private static final int BODY_LIMIT = 1 << 20;

    private OpenAiServer server;
    private ServingClient client;

    @BeforeAll
    void start() throws Exception {
        server = ServingModels.start(e -> {}, s -> s.optMaxBodyBytes(BODY_LIMIT));
        client = new ServingClient(server.getPort());
    }

    @AfterAll
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    static Stream<Arguments> cases() {
        String longPrompt =
                IntStream.range(0, 512).mapToObj(i -> "7").collect(Collectors.joining(","));
        return Stream.of(
                // completions: prompt
                row(C, "{\"max_tokens\": 4}", 400, "prompt", "is required"),
                row(C, "{\"prompt\": \"Once upon a time\"}", 400, "prompt", "token ids are required"),
                row(C, "{\"prompt\": \"\"}", 400, "prompt", "must not be empty"),
                row(C, "{\"prompt\": []}", 400, "prompt", "must not be empty"),
                row(C, "{\"prompt\": [1, \"a\"]}", 400, "prompt", "one prompt"),
                row(C, "{\"prompt\": [[1, 2], [3]]}", 400, "prompt", "one prompt"),
                row(C, "{\"prompt\": {\"ids\": [1]}}", 400, "prompt", "got an object"),
                row(C, "{\"prompt\": [512]}", 400, "prompt", "[0, 511]"),
                row(C, "{\"prompt\": [-1]}", 400, "prompt", "[0, 511]"),
                row(C, "{\"prompt\": [1.5]}", 400, "prompt", "integer"),
                row(C, "{\"prompt\": [" + longPrompt + "]}", 400, "prompt", "context of 512"),
                // completions: max_tokens, sampling, flags
                row(C, "{\"prompt\": [1], \"max_tokens\": \"5\"}", 400, "max_tokens", "got a string"),
                row(C, "{\"prompt\": [1], \"max_tokens\": -1}", 400, "max_tokens", "got -1"),
                row(C, "{\"prompt\": [1], \"max_tokens\": 0}", 400, "max_tokens", "got 0"),
                row(C, "{\"prompt\": [1], \"max_tokens\": 2.5}", 400, "max_tokens", "integer"),
                row(C, "{\"prompt\": [1], \"max_tokens\": 100000}", 400, "max_tokens", "context of 512"),
                row(C, "{\"prompt\": [1], \"max_tokens\": 1e30}", 400, "max_tokens", "integer in"),
                row(C, "{\"prompt\": [1], \"temperature\": -0.5}", 400, "temperature", "got -0.5"),
                row(C, "{\"prompt\": [1], \"temperature\": \"hot\"}", 400, "temperature", "number"),
                row(C, "{\"prompt\": [1], \"top_p\": 0}", 400, "top_p", "got 0"),
                row(C, "{\"prompt\": [1], \"top_p\": 1.5}", 400, "top_p", "got 1.5"),
                row(C, "{\"prompt\": [1], \"seed\": \"abc\"}", 400, "seed", "integer"),
                row(C, "{\"prompt\": [1], \"stream\": \"yes\"}", 400, "stream", "true or false"),
                row(C, "{\"prompt\": [1], \"stop\": \"The end\"}", 400, "stop", "no tokenizer"),
                row(C, "{\"prompt\": [1], \"stop\": 5}", 400, "stop", "string"),
                row(C, "{\"prompt\": [1], \"stop_token_ids\": [9999]}", 400, "stop_token_ids", "[0, 511]"),
                row(C, "{\"prompt\": [1], \"n\": 2}", 400, "n", "n = 1"),
                row(C, "{\"prompt\": [1], \"logprobs\": 3}", 400, "logprobs", "not supported"),
                row(C, "{\"prompt\": [1], \"model\": \"gpt-4\"}", 404, "model", "'gpt-4' is not served"),
                row(C, "{\"prompt\": [1], \"model\": 7}", 400, "model", "string"),
                // completions: fields the sampler does not implement are refused, never ignored
                row(C, "{\"prompt\": [1], \"presence_penalty\": 1}", 400, "presence_penalty", "not supported"),
                row(C, "{\"prompt\": [1], \"frequency_penalty\": 0.1}", 400, "frequency_penalty", "not supported"),
                row(C, "{\"prompt\": [1], \"frequency_penalty\": 3}", 400, "frequency_penalty", "[-2.0, 2.0]"),
                row(C, "{\"prompt\": [1], \"logit_bias\": {\"7\": -100}}", 400, "logit_bias", "not supported"),
                row(C, "{\"prompt\": [1], \"suffix\": \"end\"}", 400, "suffix", "not supported"),
                row(C, "{\"prompt\": [1], \"stream_options\": {\"include_usage\": true}}", 400, "stream_options", "stream"),
                row(C, "{\"prompt\": [1], \"stream\": true, \"stream_options\": 1}", 400, "stream_options", "object"),
                // chat on a model without a chat template
                row(CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", 400, "messages", "no chat template"),
                // embeddings
                row(E, "{}", 400, "input", "is required"),
                row(E, "{\"input\": \"\"}", 400, "input", "empty"),
                row(E, "{\"input\": []}", 400, "input", "empty array"),
                row(E, "{\"input\": [\"ok\", \"\"]}", 400, "input", "text 1 is empty"),
                row(E, "{\"input\": [1, 2, 3]}", 400, "input", "token ids are not supported"),
                row(E, "{\"input\": [[1, 2]]}", 400, "input", "token ids are not supported"),
                row(E, "{\"input\": 42}", 400, "input", "got a number"),
                row(E, "{\"input\": [\"a\", true]}", 400, "input", "boolean"),
                row(E, "{\"input\": \"a\", \"model\": \"text-embedding-3-small\"}", 404, "model", "not served"),
                row(E, "{\"input\": \"a\", \"encoding_format\": \"int8\"}", 400, "encoding_format", "int8"),
                row(E, "{\"input\": \"a\", \"dimensions\": 17}", 400, "dimensions", "17"),
                // bodies, both endpoints
                row(C, "not json", 400, "body", "malformed JSON"),
                row(E, "{\"input\": \"a\",}", 400, "body", "malformed JSON"),
                row(C, "{\"prompt\": [1]} {}", 400, "body", "malformed JSON (at line 1 column"),
                row(E, "[\"a\"]", 400, "body", "expected a JSON object"),
                row(C, "", 400, "body", "empty body"),
                row(E, "{'input': 'a'}", 400, "body", "malformed JSON"));
    }

    private static Arguments row(String path, String body, int status, String param, String text) {
        return Arguments.of(path, body.getBytes(StandardCharsets.UTF_8), status, param, text);
    }

    static Stream<Arguments> binaryCases() {
        byte[] notUtf8 = {'{', '"', 'i', 'n', 'p', 'u', 't', '"', ':', '"', (byte) 0xC3, (byte) 0x28, '"', '}'};
        byte[] big = new byte[10 << 20];
        Arrays.fill(big, (byte) ' ');
        big[0] = '{';
        big[big.length - 1] = '}';
        return Stream.of(
                Arguments.of(C, notUtf8, 400, "body", "not valid UTF-8"),
                Arguments.of(E, notUtf8, 400, "body", "not valid UTF-8"),
                Arguments.of(C, big, 413, "body", "larger than the limit"),
                Arguments.of(E, big, 413, "body", "larger than the limit"));
    }

    @ParameterizedTest(name = "{0} {1} -> {2} {3}")
    @MethodSource({"cases", "binaryCases"})
    void badInputGetsAClearError(String path, byte[] body, int status, String param, String text)
            throws Exception {
        ServingClient.Response r = client.post(path, body);
        assertEquals(status, r.statusCode(), r.body());
        JsonObject error = JsonParser.parseString(r.body()).getAsJsonObject().getAsJsonObject("error");
        JsonElement p = error.get("param");
        assertEquals(param, p.isJsonNull() ? null : p.getAsString(), r.body());
        String message = error.get("message").getAsString();
        assertTrue(message.startsWith(param), message);
        assertTrue(message.contains(text), "expected '" + text + "' in: " + message);
        assertEquals(200, client.get("/health").statusCode(), "the server stopped serving");
    }

    @Test
    void routesAndMethods() throws Exception {
        assertEquals(404, client.get("/v1/chat/nothing").statusCode());
        assertEquals(404, client.get("/").statusCode());
        assertEquals(405, client.get(C).statusCode());
        assertEquals(405, client.post("/health", "{}").statusCode());
        assertEquals(405, client.send("DELETE", "/v1/models", null).statusCode());
        JsonObject models = JsonParser.parseString(client.get("/v1/models").body()).getAsJsonObject();
        assertEquals(2, models.getAsJsonArray("data").size());
        // Still serving after all of the above.
        ServingClient.Completion c = client.complete("{\"prompt\": [1, 2, 3], \"max_tokens\": 3, \"temperature\": 0}");
        assertEquals(200, c.status(), c.body());
        assertEquals(3, c.tokenIds().length);
    }
}
