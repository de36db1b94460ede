/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.JsonArray;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;

import io.djlattention.zoo.generate.GenerationEngine;
import io.djlattention.zoo.generate.GenerationResult;

import java.util.concurrent.RejectedExecutionException;

/**
 * {@code POST /v1/completions} and {@code POST /v1/chat/completions}: both submit a token-id prompt
 * to the {@link GenerationEngine} and answer with OpenAI's completion or chat-completion objects
 * (or their server-sent chunks); a chat's prompt is its messages rendered by the model's chat
 * template ({@link ChatTemplate}).
 */
final class CompletionRoute {

    private final ServedGenerator generator;
    private final int defaultMaxTokens;

    CompletionRoute(ServedGenerator generator, int defaultMaxTokens) {
        this.generator = generator;
        this.defaultMaxTokens = defaultMaxTokens;
    }

    void completion(Exchange x, JsonObject body) throws ApiException {
        requireModel(body);
        submit(x, CompletionRequest.parse(body, generator, defaultMaxTokens, null), false);
    }

    void chat(Exchange x, JsonObject body) throws ApiException {
        requireModel(body);
        if (generator.chatTemplate() == null) {
            throw ApiException.badField(
                    "messages",
                    "model '"
                            + generator.name()
                            + "' has no chat template (tokenizer_config.json's chat_template);"
                            + " use /v1/completions");
        }
        int[] prompt = generator.chatTemplate().encode(body, generator.tokenizer());
        submit(x, CompletionRequest.parse(body, generator, defaultMaxTokens, prompt), true);
    }

    private void requireModel(JsonObject body) throws ApiException {
        if (generator == null) {
            throw new ApiException(
                    404, "model_not_found", "model", "model: no generation model is served");
        }
        String model = JsonFields.string(body, "model", generator.name());
        if (!model.equals(generator.name())) {
            throw new ApiException(
                    404,
                    "model_not_found",
                    "model",
                    "model: '" + model + "' is not served here (serving '" + generator.name() + "')");
        }
    }

    private void submit(Exchange x, CompletionRequest cr, boolean chat) throws ApiException {
        Completion c = new Completion(x, cr, chat);
        GenerationEngine.Handle h;
        try {
            h =
                    generator
                            .engine()
                            .submit(
                                    cr.prompt(),
                                    cr.config(),
                                    (id, token) -> x.loop().execute(() -> c.onToken(token)));
        } catch (RejectedExecutionException e) {
            throw EmbeddingRoute.overloaded(e);
        } catch (IllegalStateException e) {
            throw new ApiException(503, "server_shutting_down", null, e.getMessage());
        } catch (IllegalArgumentException e) {
            throw ApiException.badField(chat ? "max_completion_tokens" : "max_tokens", e.getMessage());
        }
        c.handle = h;
        x.onAbandon = h::cancel;
        h.getResult().whenComplete((r, t) -> x.loop().execute(() -> c.onDone(r, t)));
    }

    /** The state of one completion (event-loop thread only). */
    private final class Completion {
        final Exchange x;
        final CompletionRequest req;
        final boolean chat;
        final TextStream text;
        final String id;
        final long createdAt = System.currentTimeMillis() / 1000;
        GenerationEngine.Handle handle;
        boolean roleSent;

        Completion(Exchange x, CompletionRequest req, boolean chat) {
            this.x = x;
            this.req = req;
            this.chat = chat;
            this.text = new TextStream(generator.tokenizer(), req.stops());
            this.id = ResponseIds.next(chat ? "chatcmpl-" : "cmpl-");
        }

        void onToken(int token) {
            if (x.done || text.isStopped()) {
                return;
            }
            String piece = text.add(token);
            if (text.isStopped() && handle != null) {
                handle.cancel(); // a stop string: end the sequence now, free its blocks
            }
            if (req.stream()) {
                x.startStream();
                x.writeEvent(chunk(piece, new int[] {token}, null).toString());
            }
        }

        void onDone(GenerationResult r, Throwable t) {
            if (x.done) {
                return;
            }
            if (t != null || r.finishReason() == GenerationResult.FinishReason.FAILED) {
                String why = t != null ? String.valueOf(t.getMessage()) : r.error();
                x.fail(new ApiException(500, "server_error", null, "generation failed: " + why));
                return;
            }
            String finish = finishReason(r);
            if (finish == null) {
                // Cancelled by the server (shutdown), not by this client or a stop string.
                ApiException e =
                        new ApiException(
                                503,
                                "server_shutting_down",
                                null,
                                "the request was cancelled: the server is shutting down");
                if (req.stream() && x.headersSent) {
                    x.writeEvent(chunk(text.flush(), new int[0], "abort").toString());
                }
                x.fail(e);
                return;
            }
            String rest = text.flush();
            int[] ids = text.isStopped() ? text.getTokenIds() : r.generated();
            if (req.stream()) {
                x.startStream();
                x.writeEvent(chunk(rest, new int[0], finish).toString());
                if (req.includeUsage()) {
                    JsonObject last = header(true);
                    last.add("choices", new JsonArray());
                    last.add("usage", usage(ids.length));
                    x.writeEvent(last.toString());
                }
                x.writeEvent("[DONE]");
                x.finishStream();
                return;
            }
            JsonObject choice = new JsonObject();
            choice.addProperty("index", 0);
            if (chat) {
                JsonObject message = new JsonObject();
                message.addProperty("role", "assistant");
                message.addProperty("content", text.getText());
                choice.add("message", message);
            } else {
                choice.addProperty("text", text.getText());
            }
            choice.add("token_ids", HttpResponses.ints(ids));
            choice.add("logprobs", JsonNull.INSTANCE);
            choice.addProperty("finish_reason", finish);
            JsonArray choices = new JsonArray();
            choices.add(choice);
            JsonObject body = header(false);
            body.add("choices", choices);
            body.add("usage", usage(ids.length));
            x.sendJson(200, body);
        }

        private JsonObject usage(int completionTokens) {
            JsonObject usage = new JsonObject();
            usage.addProperty("prompt_tokens", req.prompt().length);
            usage.addProperty("completion_tokens", completionTokens);
            usage.addProperty("total_tokens", req.prompt().length + completionTokens);
            return usage;
        }

        /** OpenAI's finish reason, or null for a cancellation by the server. */
        private String finishReason(GenerationResult r) {
            if (text.isStopped()) {
                return "stop";
            }
            switch (r.finishReason()) {
                case LENGTH:
                case MAX_POSITIONS:
                    return "length";
                case EOS:
                case STOP:
                    return "stop";
                default:
                    return null;
            }
        }

        private JsonObject header(boolean chunk) {
            JsonObject o = new JsonObject();
            o.addProperty("id", id);
            o.addProperty(
                    "object",
                    chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
            o.addProperty("created", createdAt);
            o.addProperty("model", generator.name());
            return o;
        }

        private JsonObject chunk(String piece, int[] tokens, String finish) {
            JsonObject choice = new JsonObject();
            choice.addProperty("index", 0);
            if (chat) {
                JsonObject delta = new JsonObject();
                if (!roleSent) {
                    delta.addProperty("role", "assistant");
                    roleSent = true;
                }
                if (finish == null || !piece.isEmpty()) {
                    delta.addProperty("content", piece);
                }
                choice.add("delta", delta);
            } else {
                choice.addProperty("text", piece);
            }
            choice.add("token_ids", HttpResponses.ints(tokens));
            choice.add("logprobs", JsonNull.INSTANCE);
            choice.add("finish_reason", finish == null ? JsonNull.INSTANCE : new JsonPrimitive(finish));
            JsonArray choices = new JsonArray();
            choices.add(choice);
            JsonObject o = header(true);
            o.add("choices", choices);
            return o;
        }
    }
}
