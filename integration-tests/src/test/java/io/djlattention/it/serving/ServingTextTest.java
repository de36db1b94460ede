/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
 * Text prompts on a model with a tokenizer: the tiny random LLaMA checkpoint that transformers
 * wrote (make_decoders.py), served from its directory. Greedy completions give transformers' own
 * greedy ids and decoded text; the streamed pieces add up to the same text; a stop string cuts the
 * text before it and ends the generation.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ServingTextTest {

    private ZooModel<int[], int[]> model;
    private OpenAiServer server;
    private ServingClient client;
    private List<JsonObject> cases;

    @BeforeAll
    void start() throws Exception {
        Path dir = HfFixtures.dir("decoders").resolve("llama");
        JsonObject ref = JsonParser.parseString(Files.readString(dir.resolve("reference.json"))).getAsJsonObject();
        cases = new ArrayList<>();
        for (JsonElement c : ref.getAsJsonArray("cases")) {
            cases.add(c.getAsJsonObject());
        }
        model =
                DecoderModels.load(
                        dir,
                        Criteria.builder().setTypes(int[].class, int[].class).optEngine("PyTorch").build());
        ServedGenerator g = ServedGenerator.fromZooModel("llama", model, e -> e.optNumBlocks(64));
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

    private static String request(String text, int maxTokens, boolean stream, String stop) {
        JsonObject o = new JsonObject();
        o.addProperty("model", "llama");
        o.addProperty("prompt", text);
        o.addProperty("max_tokens", maxTokens);
        o.addProperty("temperature", 0);
        o.addProperty("stream", stream);
        if (stop != null) {
            JsonArray s = new JsonArray();
            s.add(stop);
            o.add("stop", s);
        }
        return o.toString();
    }

    @Test
    void textPromptsGiveTransformersGreedyTextStreamedOrNot() throws Exception {
        for (JsonObject c : cases) {
            String text = c.get("text").getAsString();
            int[] want = ServingClient.ints(c.getAsJsonArray("generated"));
            String wantText = c.get("generated_text").getAsString();
            ServingClient.Completion whole = client.complete(request(text, 12, false, null));
            assertEquals(200, whole.status(), whole.body());
            assertArrayEquals(want, whole.tokenIds(), text);
            assertEquals(wantText, whole.text(), text);
            JsonObject usage = JsonParser.parseString(whole.body()).getAsJsonObject().getAsJsonObject("usage");
            assertEquals(c.getAsJsonArray("prompt").size(), usage.get("prompt_tokens").getAsInt());
            ServingClient.Completion streamed = client.stream(request(text, 12, true, null), -1);
            assertArrayEquals(want, streamed.tokenIds(), text);
            assertEquals(wantText, streamed.text(), text);
            assertEquals(whole.finishReason(), streamed.finishReason());
        }
    }

    @Test
    void aStopStringCutsTheTextAndEndsTheRequest() throws Exception {
        int tested = 0;
        for (JsonObject c : cases) {
            String wantText = c.get("generated_text").getAsString();
            if (wantText.length() < 6) {
                continue;
            }
            String stop = null;
            for (int at = wantText.length() / 2; at + 2 <= wantText.length(); ++at) {
                String candidate = wantText.substring(at, at + 2);
                if (candidate.indexOf('\uFFFD') < 0 && !Character.isSurrogate(candidate.charAt(0))) {
                    stop = candidate; // a stop string of whole characters, no undecodable bytes
                    break;
                }
            }
            if (stop == null) {
                continue;
            }
            String cut = wantText.substring(0, wantText.indexOf(stop));
            for (boolean stream : new boolean[] {false, true}) {
                String body = request(c.get("text").getAsString(), 12, stream, stop);
                ServingClient.Completion r = stream ? client.stream(body, -1) : client.complete(body);
                assertEquals(200, r.status(), r.body());
                assertEquals(cut, r.text(), "stop " + stop);
                assertEquals("stop", r.finishReason());
            }
            ++tested;
        }
        assertTrue(tested > 0, "no reference continuation long enough for a stop string");
        var m = ServingLoadTest.waitForIdle(client);
        assertEquals(m.get("djl_attn_kv_blocks_total"), m.get("djl_attn_kv_blocks_free"));
    }
}
