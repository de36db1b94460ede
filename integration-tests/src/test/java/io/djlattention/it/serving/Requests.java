/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/** Random request bodies for the serving tests. */
final class Requests {

    private static final String[] WORDS = {
        "the", "cat", "sat", "on", "a", "warm", "mat", "while", "rain", "fell", "over", "old",
        "city", "lights", "and", "quiet", "rivers", "ran", "to", "sea", "bright", "morning",
        "coffee", "tastes", "better", "with", "friends", "who", "laugh", "loudly", "über",
        "naïve", "café", "日本", "numbers", "42", "3.14", "models", "attention", "kernels"
    };

    private Requests() {}

    /** A completion spec: prompt ids, max tokens and sampling (temperature 0 = greedy). */
    record Spec(int[] prompt, int maxTokens, double temperature, double topP, long seed) {

        String json(boolean stream) {
            JsonObject o = new JsonObject();
            o.addProperty("model", ServingModels.GENERATOR);
            JsonArray p = new JsonArray();
            for (int t : prompt) {
                p.add(t);
            }
            o.add("prompt", p);
            o.addProperty("max_tokens", maxTokens);
            o.addProperty("temperature", temperature);
            if (temperature > 0) {
                o.addProperty("top_p", topP);
                o.addProperty("seed", seed);
            }
            o.addProperty("stream", stream);
            return o.toString();
        }
    }

    /**
     * Random greedy completion specs: prompts of 1 to {@code maxPrompt} ids. Greedy, because only
     * argmax is exact across batches: a seeded draw that lands within float32 rounding of the
     * boundary between two tokens may pick the other one in a batch whose GEMMs round differently.
     */
    static List<Spec> specs(Random rnd, int count, int maxPrompt, int maxTokens) {
        List<Spec> out = new ArrayList<>();
        for (int i = 0; i < count; ++i) {
            int[] prompt = new int[1 + rnd.nextInt(maxPrompt)];
            for (int j = 0; j < prompt.length; ++j) {
                prompt[j] = rnd.nextInt(512);
            }
            out.add(new Spec(prompt, 1 + rnd.nextInt(maxTokens), 0, 1, rnd.nextLong()));
        }
        return out;
    }

    /** Random sentences of 1 to {@code maxWords} words. */
    static List<String> sentences(Random rnd, int count, int maxWords) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < count; ++i) {
            int n = 1 + rnd.nextInt(maxWords);
            StringBuilder s = new StringBuilder();
            for (int w = 0; w < n; ++w) {
                s.append(w == 0 ? "" : " ").append(WORDS[rnd.nextInt(WORDS.length)]);
            }
            out.add(s.toString() + " #" + i);
        }
        return out;
    }
}
