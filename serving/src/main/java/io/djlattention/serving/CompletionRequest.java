/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.generate.GenerationConfig;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A parsed {@code POST /v1/completions} or {@code POST /v1/chat/completions} body. Fields the
 * sampler does not implement ({@code presence_penalty}, {@code frequency_penalty}, {@code
 * logit_bias}, {@code suffix}) are refused with 400 naming the field unless they ask for nothing
 * (0, an empty map, an empty string): never silently ignored.
 *
 * @param prompt the prompt's token ids
 * @param config how it generates
 * @param stream whether to answer with server-sent events
 * @param stops stop strings (text layer)
 * @param includeUsage whether a stream ends with a usage chunk ({@code stream_options})
 */
record CompletionRequest(
        int[] prompt,
        GenerationConfig config,
        boolean stream,
        List<String> stops,
        boolean includeUsage) {

    /** OpenAI's limit on stop strings. */
    static final int MAX_STOPS = 4;

    /**
     * Parses and checks a body against the model.
     *
     * @param body the JSON body
     * @param model the served model's description
     * @param defaultMaxTokens max_tokens when absent
     * @param chatPrompt a chat's rendered messages, or null: the body's {@code prompt}
     * @return the request
     * @throws ApiException 400 naming the field at fault
     */
    static CompletionRequest parse(
            JsonObject body, ServedGenerator model, int defaultMaxTokens, int[] chatPrompt)
            throws ApiException {
        DecoderConfig dc = model.engine().getDecoder().getConfig();
        int vocab = dc.getVocabSize();
        int maxPositions = dc.getMaxPositions();
        boolean chat = chatPrompt != null;
        String promptField = chat ? "messages" : "prompt";
        int[] prompt = chat ? chatPrompt : prompt(body, model.tokenizer(), vocab);
        for (int id : prompt) {
            if (id < 0 || id >= vocab) {
                throw ApiException.badField(
                        promptField, "the tokenizer gave id " + id + " outside the vocabulary");
            }
        }
        if (prompt.length >= maxPositions) {
            throw ApiException.badField(
                    promptField,
                    prompt.length
                            + " tokens leave no room to generate under the model's context of "
                            + maxPositions
                            + " tokens");
        }
        String maxField =
                chat && JsonFields.get(body, "max_completion_tokens") != null
                        ? "max_completion_tokens"
                        : "max_tokens";
        long maxTokens =
                JsonFields.integer(body, maxField, defaultMaxTokens, 1, Integer.MAX_VALUE);
        if (prompt.length + maxTokens > maxPositions) {
            throw ApiException.badField(
                    maxField,
                    maxTokens
                            + " plus the prompt's "
                            + prompt.length
                            + " tokens exceed the model's context of "
                            + maxPositions
                            + " tokens");
        }
        double temperature = JsonFields.number(body, "temperature", 1.0, 0, 2);
        double topP = JsonFields.number(body, "top_p", 1.0, Double.MIN_VALUE, 1);
        long topK = JsonFields.integer(body, "top_k", -1, -1, vocab);
        long seed =
                JsonFields.integer(
                        body,
                        "seed",
                        ThreadLocalRandom.current().nextLong(),
                        Long.MIN_VALUE,
                        Long.MAX_VALUE);
        boolean stream = JsonFields.bool(body, "stream", false);
        long n = JsonFields.integer(body, "n", 1, 1, Integer.MAX_VALUE);
        if (n != 1) {
            throw ApiException.badField("n", "only n = 1 is supported, got " + n);
        }
        long bestOf = JsonFields.integer(body, "best_of", 1, 1, Integer.MAX_VALUE);
        if (bestOf != 1) {
            throw ApiException.badField("best_of", "only best_of = 1 is supported, got " + bestOf);
        }
        if (!chat && JsonFields.bool(body, "echo", false)) {
            throw ApiException.badField("echo", "echo is not supported");
        }
        JsonElement logprobs = JsonFields.get(body, "logprobs");
        if (logprobs != null && !(chat && logprobs.isJsonPrimitive() && !JsonFields.bool(body, "logprobs", false))) {
            throw ApiException.badField("logprobs", "logprobs are not supported");
        }
        refuseUnlessZero(body, "presence_penalty");
        refuseUnlessZero(body, "frequency_penalty");
        JsonElement bias = JsonFields.get(body, "logit_bias");
        if (bias != null && !(bias.isJsonObject() && bias.getAsJsonObject().isEmpty())) {
            throw ApiException.badField(
                    "logit_bias", "logit_bias is not supported (only an empty map is accepted)");
        }
        if (!chat && !JsonFields.string(body, "suffix", "").isEmpty()) {
            throw ApiException.badField("suffix", "suffix (insertion) is not supported");
        }
        boolean includeUsage = false;
        JsonElement streamOptions = JsonFields.get(body, "stream_options");
        if (streamOptions != null) {
            if (!streamOptions.isJsonObject()) {
                throw ApiException.badField(
                        "stream_options", "expected an object, got " + JsonFields.describe(streamOptions));
            }
            if (!stream) {
                throw ApiException.badField("stream_options", "only allowed with \"stream\": true");
            }
            includeUsage = JsonFields.bool(streamOptions.getAsJsonObject(), "include_usage", false);
        }
        List<String> stops = stops(body, model.tokenizer() != null);
        int[] stopIds = stopTokenIds(body, vocab);

        GenerationConfig.Builder config =
                GenerationConfig.builder()
                        .setMaxNewTokens((int) maxTokens)
                        .optEosTokenId(model.eosTokenId())
                        .optStopTokenIds(stopIds);
        if (temperature > 0 && topK != 1) {
            config.optSampling((float) temperature, (int) Math.max(0, topK), seed);
            config.optTopP((float) topP);
        }
        return new CompletionRequest(prompt, config.build(), stream, stops, includeUsage);
    }

    private static void refuseUnlessZero(JsonObject body, String name) throws ApiException {
        double v = JsonFields.number(body, name, 0, -2, 2);
        if (v != 0) {
            throw ApiException.badField(name, name + " is not supported (only 0 is accepted), got " + v);
        }
    }

    private static int[] prompt(JsonObject body, HuggingFaceTokenizer tokenizer, int vocab)
            throws ApiException {
        JsonElement e = JsonFields.get(body, "prompt");
        if (e == null) {
            throw ApiException.badField("prompt", "is required");
        }
        if (e.isJsonArray()) {
            JsonArray a = e.getAsJsonArray();
            if (a.isEmpty()) {
                throw ApiException.badField("prompt", "must not be empty");
            }
            if (!JsonFields.allNumbers(a)) {
                if (a.size() != 1) {
                    throw ApiException.badField(
                            "prompt",
                            "expected one prompt (a string or an array of token ids), got an"
                                    + " array of "
                                    + a.size()
                                    + " prompts; send one request per prompt");
                }
                e = a.get(0);
                if (e.isJsonArray()) {
                    a = e.getAsJsonArray();
                    if (a.isEmpty() || !JsonFields.allNumbers(a)) {
                        throw ApiException.badField(
                                "prompt", "expected a non-empty array of integer token ids");
                    }
                }
            }
            if (e.isJsonArray()) {
                int[] ids = new int[a.size()];
                for (int i = 0; i < ids.length; ++i) {
                    ids[i] = (int) JsonFields.integer(a.get(i), "prompt", 0, vocab - 1);
                }
                return ids;
            }
        }
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isString()) {
            throw ApiException.badField(
                    "prompt",
                    "expected a string or an array of token ids, got " + JsonFields.describe(e));
        }
        String text = e.getAsString();
        if (text.isEmpty()) {
            throw ApiException.badField("prompt", "must not be empty");
        }
        if (tokenizer == null) {
            throw ApiException.badField(
                    "prompt",
                    "this model has no tokenizer: token ids are required (send the prompt as an"
                            + " array of integers)");
        }
        long[] ids = tokenizer.encode(text, true, false).getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; ++i) {
            if (ids[i] < 0 || ids[i] >= vocab) {
                throw ApiException.badField(
                        "prompt", "the tokenizer gave id " + ids[i] + " outside the vocabulary");
            }
            out[i] = (int) ids[i];
        }
        if (out.length == 0) {
            throw ApiException.badField("prompt", "tokenizes to no tokens");
        }
        return out;
    }

    private static List<String> stops(JsonObject body, boolean hasTokenizer) throws ApiException {
        JsonElement e = JsonFields.get(body, "stop");
        List<String> stops = new ArrayList<>();
        if (e == null) {
            return stops;
        }
        if (e.isJsonArray()) {
            JsonArray a = e.getAsJsonArray();
            if (a.size() > MAX_STOPS) {
                throw ApiException.badField(
                        "stop", "expected at most " + MAX_STOPS + " strings, got " + a.size());
            }
            for (JsonElement s : a) {
                if (!s.isJsonPrimitive() || !s.getAsJsonPrimitive().isString()) {
                    throw ApiException.badField(
                            "stop", "expected strings, got " + JsonFields.describe(s));
                }
                stops.add(s.getAsString());
            }
        } else if (e.isJsonPrimitive() && e.getAsJsonPrimitive().isString()) {
            stops.add(e.getAsString());
        } else {
            throw ApiException.badField(
                    "stop", "expected a string or an array of strings, got " + JsonFields.describe(e));
        }
        for (String s : stops) {
            if (s.isEmpty()) {
                throw ApiException.badField("stop", "stop strings must not be empty");
            }
        }
        if (!stops.isEmpty() && !hasTokenizer) {
            throw ApiException.badField(
                    "stop",
                    "this model has no tokenizer, so stop strings cannot be matched; use"
                            + " stop_token_ids");
        }
        return stops;
    }

    private static int[] stopTokenIds(JsonObject body, int vocab) throws ApiException {
        JsonElement e = JsonFields.get(body, "stop_token_ids");
        if (e == null) {
            return new int[0];
        }
        if (!e.isJsonArray()) {
            throw ApiException.badField(
                    "stop_token_ids",
                    "expected an array of token ids, got " + JsonFields.describe(e));
        }
        JsonArray a = e.getAsJsonArray();
        int[] ids = new int[a.size()];
        for (int i = 0; i < ids.length; ++i) {
            ids[i] = (int) JsonFields.integer(a.get(i), "stop_token_ids", 0, vocab - 1);
        }
        return ids;
    }
}
