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

    /** Random completion specs: prompts of 1 to {@code maxPrompt} ids, a quarter sampled. */
    static List<Spec> specs(Random rnd, int count, int maxPrompt, int maxTokens) {
        List<Spec> out = new ArrayList<>();
        for (int i = 0; i < count; ++i) {
            int[] prompt = new int[1 + rnd.nextInt(maxPrompt)];
            for (int j = 0; j < prompt.length; ++j) {
                prompt[j] = rnd.nextInt(512);
            }
            boolean sampled = rnd.nextInt(4) == 0;
            out.add(
                    new Spec(
                            prompt,
                            1 + rnd.nextInt(maxTokens),
                            sampled ? 0.5 + rnd.nextDouble() : 0,
                            sampled ? 0.8 + 0.2 * rnd.nextDouble() : 1,
                            rnd.nextLong()));
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
