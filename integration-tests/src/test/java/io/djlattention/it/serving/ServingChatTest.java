/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.it.HfFixtures;
import io.djlattention.serving.OpenAiServer;
import io.djlattention.serving.ServedGenerator;
import io.djlattention.zoo.DecoderModels;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * {@code /v1/chat/completions} on a tiny chat checkpoint that transformers wrote (make_chat.py: a
 * random LLaMA with a Zephyr-style chat template): the messages rendered by the server's Jinja2
 * (Jinjava) give the prompt of transformers' {@code apply_chat_template}, so greedy replies are
 * transformers' greedy {@code generate} ids and text, whole or streamed; a stream with {@code
 * include_usage} ends with the usage; the template's {@code raise_exception} and fields the sampler
 * does not implement are refused with 400 naming the field.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ServingChatTest {

    private static final String CHAT = "/v1/chat/completions";

    private ZooModel<int[], int[]> model;
    private OpenAiServer server;
    private ServingClient client;
    private final List<JsonObject> cases = new ArrayList<>();

    @BeforeAll
    void start() throws Exception {
        Path dir = HfFixtures.dir("chat");
        JsonObject ref = JsonParser.parseString(Files.readString(dir.resolve("reference.json"))).getAsJsonObject();
        for (JsonElement c : ref.getAsJsonArray("cases")) {
            cases.add(c.getAsJsonObject());
        }
        model =
                DecoderModels.load(
                        dir,
                        Criteria.builder().setTypes(int[].class, int[].class).optEngine("PyTorch").build());
        ServedGenerator g = ServedGenerator.fromZooModel("chat", model, e -> e.optNumBlocks(64));
        assertNotNull(g.chatTemplate(), "no chat template read from " + dir);
        server =
                OpenAiServer.builder()
                        .optPort(0)
                        .optIoThreads(2)
                        .optGenerator(g)
                        .optCloseOnShutdown(g.tokenizer())
                        .build()
                        .start();
        client = new ServingClient(server.getPort());
    }

    @AfterAll
    void stop() {
        if (server != null) {
            server.close();
        }
        if (model != null) {
            model.close();
        }
    }

    private static String request(JsonObject c, boolean stream) {
        JsonObject o = new JsonObject();
        o.addProperty("model", "chat");
        o.add("messages", c.get("messages"));
        o.addProperty("max_completion_tokens", c.getAsJsonArray("generated").size());
        o.addProperty("temperature", 0);
        o.addProperty("stream", stream);
        if (stream) {
            JsonObject options = new JsonObject();
            options.addProperty("include_usage", true);
            o.add("stream_options", options);
        }
        return o.toString();
    }

    @Test
    void repliesAreTransformersGreedyRepliesWholeAndStreamed() throws Exception {
        for (JsonObject c : cases) {
            int[] want = ServingClient.ints(c.getAsJsonArray("generated"));
            String wantText = c.get("generated_text").getAsString();
            int promptTokens = c.getAsJsonArray("prompt").size();

            ServingClient.Response r = client.post(CHAT, request(c, false));
            assertEquals(200, r.statusCode(), r.body());
            JsonObject body = JsonParser.parseString(r.body()).getAsJsonObject();
            assertEquals("chat.completion", body.get("object").getAsString());
            assertTrue(body.get("id").getAsString().matches("chatcmpl-[0-9a-f]{32}"), r.body());
            JsonObject choice = body.getAsJsonArray("choices").get(0).getAsJsonObject();
            assertArrayEquals(want, ServingClient.ints(choice.getAsJsonArray("token_ids")), c.get("text").getAsString());
            JsonObject message = choice.getAsJsonObject("message");
            assertEquals("assistant", message.get("role").getAsString());
            assertEquals(wantText, message.get("content").getAsString());
            JsonObject usage = body.getAsJsonObject("usage");
            assertEquals(promptTokens, usage.get("prompt_tokens").getAsInt(), "the rendered prompt differs");
            assertEquals(want.length, usage.get("completion_tokens").getAsInt());
            assertEquals(promptTokens + want.length, usage.get("total_tokens").getAsInt());

            StringBuilder text = new StringBuilder();
            List<Integer> ids = new ArrayList<>();
            JsonObject streamedUsage = null;
            String role = null;
            try (ServingClient.StreamingResponse s = client.postStream(CHAT, request(c, true), true);
                    ServingClient.Events events = new ServingClient.Events(s.body())) {
                assertEquals(200, s.statusCode());
                for (String data = events.next(); !"[DONE]".equals(data); data = events.next()) {
                    assertNotNull(data, "the stream ended without [DONE]");
                    JsonObject chunk = JsonParser.parseString(data).getAsJsonObject();
                    assertEquals("chat.completion.chunk", chunk.get("object").getAsString());
                    JsonArray choices = chunk.getAsJsonArray("choices");
                    if (choices.isEmpty()) {
                        streamedUsage = chunk.getAsJsonObject("usage");
                        continue;
                    }
                    JsonObject delta = choices.get(0).getAsJsonObject().getAsJsonObject("delta");
                    if (delta.has("role")) {
                        role = delta.get("role").getAsString();
                    }
                    if (delta.has("content")) {
                        text.append(delta.get("content").getAsString());
                    }
                    for (JsonElement id : choices.get(0).getAsJsonObject().getAsJsonArray("token_ids")) {
                        ids.add(id.getAsInt());
                    }
                }
            }
            assertEquals("assistant", role);
            assertEquals(wantText, text.toString());
            assertArrayEquals(want, ids.stream().mapToInt(Integer::intValue).toArray());
            assertNotNull(streamedUsage, "include_usage: no usage chunk");
            assertEquals(promptTokens, streamedUsage.get("prompt_tokens").getAsInt());
            assertEquals(want.length, streamedUsage.get("completion_tokens").getAsInt());
        }
    }

    private void assertRefused(String body, String param, String text) throws Exception {
        ServingClient.Response r = client.post(CHAT, body);
        assertEquals(400, r.statusCode(), r.body());
        JsonObject error = JsonParser.parseString(r.body()).getAsJsonObject().getAsJsonObject("error");
        assertEquals(param, error.get("param").getAsString(), r.body());
        assertTrue(error.get("message").getAsString().contains(text), r.body());
    }

    @Test
    void badChatsAndUnimplementedFieldsAreRefusedNamingTheField() throws Exception {
        String hello = "[{\"role\": \"user\", \"content\": \"Hello!\"}]";
        assertRefused("{}", "messages", "is required");
        assertRefused("{\"messages\": []}", "messages", "non-empty array");
        assertRefused("{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", "messages", "role");
        assertRefused("{\"messages\": [{\"role\": \"user\"}]}", "messages", "content is required");
        assertRefused(
                "{\"messages\": [{\"role\": \"assistant\", \"content\": \"Hi\"}]}",
                "messages",
                "Conversations must start with a system or user message");
        assertRefused("{\"messages\": " + hello + ", \"presence_penalty\": 0.5}", "presence_penalty", "not supported");
        assertRefused("{\"messages\": " + hello + ", \"frequency_penalty\": -1}", "frequency_penalty", "not supported");
        assertRefused("{\"messages\": " + hello + ", \"logit_bias\": {\"5\": 10}}", "logit_bias", "not supported");
        assertRefused(
                "{\"messages\": " + hello + ", \"stream_options\": {\"include_usage\": true}}",
                "stream_options",
                "stream");
        assertRefused("{\"messages\": " + hello + ", \"max_completion_tokens\": 0}", "max_completion_tokens", "got 0");
        // Zero penalties and an empty bias ask for nothing: accepted.
        ServingClient.Response ok =
                client.post(
                        CHAT,
                        "{\"messages\": " + hello + ", \"presence_penalty\": 0, \"frequency_penalty\": 0,"
                                + " \"logit_bias\": {}, \"max_tokens\": 2, \"temperature\": 0}");
        assertEquals(200, ok.statusCode(), ok.body());
    }
}
