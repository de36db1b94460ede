/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.logging.Level;
import java.util.logging.Logger;

/** {@code POST /v1/embeddings} on an {@link EmbeddingService}. */
final class EmbeddingRoute {

    private static final Logger LOG = Logger.getLogger(EmbeddingRoute.class.getName());

    private final String name;
    private final EmbeddingService embeddings;
    private final int maxInputs;
    private final int maxChars;

    EmbeddingRoute(String name, EmbeddingService embeddings, int maxInputs, int maxChars) {
        this.name = name;
        this.embeddings = embeddings;
        this.maxInputs = maxInputs;
        this.maxChars = maxChars;
    }

    static ApiException overloaded(RejectedExecutionException e) {
        return new ApiException(429, "rate_limit_exceeded", null, e.getMessage() + "; retry later");
    }

    void embedding(Exchange x, JsonObject body) throws ApiException {
        if (embeddings == null) {
            throw new ApiException(
                    404, "model_not_found", "model", "model: no embedding model is served");
        }
        String model = JsonFields.string(body, "model", name);
        if (!model.equals(name)) {
            throw new ApiException(
                    404,
                    "model_not_found",
                    "model",
                    "model: '" + model + "' is not served here (serving '" + name + "')");
        }
        List<String> texts = inputs(body);
        String format = JsonFields.string(body, "encoding_format", "float");
        if (!format.equals("float") && !format.equals("base64")) {
            throw ApiException.badField(
                    "encoding_format", "expected \"float\" or \"base64\", got \"" + format + "\"");
        }
        long dims = JsonFields.integer(body, "dimensions", -1, 1, Integer.MAX_VALUE);
        CompletableFuture<List<float[]>> f;
        try {
            f = embeddings.submit(texts);
        } catch (RejectedExecutionException e) {
            throw overloaded(e);
        } catch (IllegalStateException e) {
            throw new ApiException(503, "server_shutting_down", null, e.getMessage());
        }
        x.onAbandon = () -> f.cancel(false);
        f.whenComplete((out, t) -> x.loop().execute(() -> done(x, texts, out, t, format, dims)));
    }

    private List<String> inputs(JsonObject body) throws ApiException {
        JsonElement e = JsonFields.get(body, "input");
        if (e == null) {
            throw ApiException.badField("input", "is required");
        }
        List<String> texts = new ArrayList<>();
        if (e.isJsonPrimitive() && e.getAsJsonPrimitive().isString()) {
            texts.add(e.getAsString());
        } else if (e.isJsonArray()) {
            JsonArray a = e.getAsJsonArray();
            if (a.isEmpty()) {
                throw ApiException.badField("input", "must not be an empty array");
            }
            if (a.size() > maxInputs) {
                throw ApiException.badField(
                        "input", "expected at most " + maxInputs + " texts, got " + a.size());
            }
            for (JsonElement t : a) {
                if (t.isJsonArray() || t.isJsonPrimitive() && t.getAsJsonPrimitive().isNumber()) {
                    throw ApiException.badField(
                            "input", "token ids are not supported for embeddings; send text");
                }
                if (!t.isJsonPrimitive() || !t.getAsJsonPrimitive().isString()) {
                    throw ApiException.badField(
                            "input",
                            "expected a string or an array of strings, got an array holding "
                                    + JsonFields.describe(t));
                }
                texts.add(t.getAsString());
            }
        } else {
            throw ApiException.badField(
                    "input",
                    "expected a string or an array of strings, got " + JsonFields.describe(e));
        }
        for (int i = 0; i < texts.size(); ++i) {
            String t = texts.get(i);
            if (t.isEmpty()) {
                throw ApiException.badField(
                        "input", "text " + i + " is empty; every input must be non-empty");
            }
            if (t.length() > maxChars) {
                throw ApiException.badField(
                        "input",
                        "text "
                                + i
                                + " has "
                                + t.length()
                                + " characters, more than the limit of "
                                + maxChars);
            }
        }
        return texts;
    }

    private void done(
            Exchange x, List<String> texts, List<float[]> out, Throwable t, String format, long dims) {
        if (x.done) {
            return;
        }
        if (t != null) {
            Throwable cause =
                    t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
            if (cause instanceof IllegalArgumentException) {
                x.fail(ApiException.badField("input", cause.getMessage()));
            } else {
                LOG.log(Level.WARNING, "embedding failed", cause);
                x.fail(
                        new ApiException(
                                500, "server_error", null, "embedding failed: " + cause.getMessage()));
            }
            return;
        }
        JsonArray data = new JsonArray();
        int tokens = 0;
        for (int i = 0; i < out.size(); ++i) {
            float[] v = out.get(i);
            if (dims > 0 && dims != v.length) {
                x.fail(
                        ApiException.badField(
                                "dimensions",
                                "this model's embeddings have " + v.length + " dimensions, got " + dims));
                return;
            }
            JsonObject item = new JsonObject();
            item.addProperty("object", "embedding");
            item.addProperty("index", i);
            if (format.equals("base64")) {
                ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
                b.asFloatBuffer().put(v);
                item.addProperty("embedding", Base64.getEncoder().encodeToString(b.array()));
            } else {
                JsonArray values = new JsonArray(v.length);
                for (float f : v) {
                    values.add(f);
                }
                item.add("embedding", values);
            }
            data.add(item);
            tokens += embeddings.getModel().countTokens(texts.get(i));
        }
        JsonObject body = new JsonObject();
        body.addProperty("object", "list");
        body.add("data", data);
        body.addProperty("model", name);
        JsonObject usage = new JsonObject();
        usage.addProperty("prompt_tokens", tokens);
        usage.addProperty("total_tokens", tokens);
        body.add("usage", usage);
        x.sendJson(200, body);
    }
}
