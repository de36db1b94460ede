/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A model's chat template: the Jinja2 template of its {@code tokenizer_config.json} ({@code
 * chat_template}) rendered by Jinjava (HubSpot's Jinja2 for Java) the way transformers' {@code
 * apply_chat_template} renders it: {@code trim_blocks} and {@code lstrip_blocks} on, the variables
 * {@code messages}, {@code add_generation_prompt}, {@code bos_token}, {@code eos_token}, and the
 * function {@code raise_exception}; the text is then tokenized without adding special tokens (the
 * template writes them).
 */
public final class ChatTemplate {

    private static final String[] ROLES = {"system", "developer", "user", "assistant", "tool"};

    private final String template;
    private final String bosToken;
    private final String eosToken;
    private final Jinjava jinjava;

    /**
     * Creates a template.
     *
     * @param template the Jinja2 source (null only inside this class, before a template file is
     *     found)
     * @param bosToken the text of the beginning-of-sequence token ({@code bos_token}), or ""
     * @param eosToken the text of the end-of-sequence token ({@code eos_token}), or ""
     */
    public ChatTemplate(String template, String bosToken, String eosToken) {
        this.template = template;
        this.bosToken = bosToken;
        this.eosToken = eosToken;
        this.jinjava =
                new Jinjava(
                        JinjavaConfig.newBuilder()
                                .withTrimBlocks(true)
                                .withLstripBlocks(true)
                                .withFailOnUnknownTokens(false)
                                .build());
        jinjava.getGlobalContext()
                .registerFunction(
                        new ELFunctionDefinition(
                                "", "raise_exception", ChatTemplate.class, "raiseException", String.class));
    }

    /**
     * Reads the chat template saved beside a tokenizer, as transformers' {@code save_pretrained}
     * writes it: {@code chat_template.jinja} (transformers 4.50 and later) or else the {@code
     * chat_template} of {@code tokenizer_config.json}; {@code bos_token} and {@code eos_token}
     * come from {@code tokenizer_config.json}.
     *
     * @param dir the tokenizer's directory
     * @return the template, or null when there is none
     * @throws IOException if a file cannot be read or is malformed (the message names it)
     */
    public static ChatTemplate fromDirectory(Path dir) throws IOException {
        Path config = dir.resolve("tokenizer_config.json");
        Path jinja = dir.resolve("chat_template.jinja");
        ChatTemplate t = Files.isRegularFile(config) ? fromTokenizerConfig(config) : null;
        if (Files.isRegularFile(jinja)) {
            String source = Files.readString(jinja, StandardCharsets.UTF_8);
            return t != null
                    ? new ChatTemplate(source, t.bosToken, t.eosToken)
                    : new ChatTemplate(source, "", "");
        }
        return t == null || t.template == null ? null : t;
    }

    /**
     * Reads the chat template of a {@code tokenizer_config.json}.
     *
     * @param file the file
     * @return the template (its source null when the file has no {@code chat_template})
     * @throws IOException if the file cannot be read or is not a JSON object (the message names it)
     */
    static ChatTemplate fromTokenizerConfig(Path file) throws IOException {
        JsonObject config;
        try {
            config = JsonParser.parseString(Files.readString(file, StandardCharsets.UTF_8)).getAsJsonObject();
        } catch (RuntimeException e) {
            throw new IOException(file + ": not a JSON object: " + e.getMessage(), e);
        }
        JsonElement t = config.get("chat_template");
        String source = null;
        if (t != null && t.isJsonPrimitive()) {
            source = t.getAsString();
        } else if (t != null && t.isJsonArray()) {
            // Named templates ([{"name": "default", "template": ...}, ...]): the default one.
            for (JsonElement e : t.getAsJsonArray()) {
                JsonObject o = e.getAsJsonObject();
                if ("default".equals(o.get("name").getAsString())) {
                    source = o.get("template").getAsString();
                }
            }
        }
        return new ChatTemplate(source, token(config, "bos_token"), token(config, "eos_token"));
    }

    private static String token(JsonObject config, String name) {
        JsonElement e = config.get(name);
        if (e == null || e.isJsonNull()) {
            return "";
        }
        if (e.isJsonObject() && e.getAsJsonObject().has("content")) {
            return e.getAsJsonObject().get("content").getAsString(); // an AddedToken
        }
        return e.getAsString();
    }

    /**
     * Called by templates as {@code raise_exception(message)}: the conversation is invalid.
     *
     * @param message the template's message
     * @return never
     */
    public static String raiseException(String message) {
        throw new IllegalArgumentException(message);
    }

    /**
     * Renders messages.
     *
     * @param messages the messages ({@code role}, {@code content} and whatever else the template
     *     reads)
     * @param addGenerationPrompt whether to end with the assistant's turn opening
     * @return the prompt text
     * @throws IllegalArgumentException if the template refuses the messages or fails (the message
     *     says why)
     */
    public String render(List<Map<String, Object>> messages, boolean addGenerationPrompt) {
        Map<String, Object> context = new HashMap<>();
        context.put("messages", messages);
        context.put("add_generation_prompt", addGenerationPrompt);
        context.put("bos_token", bosToken);
        context.put("eos_token", eosToken);
        RenderResult r = jinjava.renderForResult(template, context);
        for (TemplateError e : r.getErrors()) {
            if (e.getSeverity() == TemplateError.ErrorType.FATAL) {
                Throwable cause = e.getException();
                while (cause != null && !(cause instanceof IllegalArgumentException) && cause.getCause() != null) {
                    cause = cause.getCause();
                }
                String why =
                        cause instanceof IllegalArgumentException ? cause.getMessage() : e.getMessage();
                throw new IllegalArgumentException("the chat template refused the messages: " + why);
            }
        }
        return r.getOutput();
    }

    /**
     * Parses a chat request's {@code messages}, renders them with the generation prompt and
     * tokenizes the text.
     *
     * @param body the request
     * @param tokenizer the model's tokenizer
     * @return the prompt's token ids
     * @throws ApiException 400 naming {@code messages} when they are malformed or refused
     */
    int[] encode(JsonObject body, HuggingFaceTokenizer tokenizer) throws ApiException {
        List<Map<String, Object>> messages = messages(body);
        String text;
        try {
            text = render(messages, true);
        } catch (IllegalArgumentException e) {
            throw ApiException.badField("messages", e.getMessage());
        }
        long[] ids = tokenizer.encode(text, false, false).getIds();
        if (ids.length == 0) {
            throw ApiException.badField("messages", "the chat template gave an empty prompt");
        }
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; ++i) {
            out[i] = (int) ids[i];
        }
        return out;
    }

    private static List<Map<String, Object>> messages(JsonObject body) throws ApiException {
        JsonElement e = JsonFields.get(body, "messages");
        if (e == null) {
            throw ApiException.badField("messages", "is required");
        }
        if (!e.isJsonArray() || e.getAsJsonArray().isEmpty()) {
            throw ApiException.badField(
                    "messages", "expected a non-empty array of messages, got " + JsonFields.describe(e));
        }
        List<Map<String, Object>> out = new ArrayList<>();
        JsonArray a = e.getAsJsonArray();
        for (int i = 0; i < a.size(); ++i) {
            JsonElement m = a.get(i);
            if (!m.isJsonObject()) {
                throw ApiException.badField(
                        "messages", "message " + i + ": expected an object, got " + JsonFields.describe(m));
            }
            JsonObject o = m.getAsJsonObject();
            String role = JsonFields.string(o, "role", null);
            if (role == null || !List.of(ROLES).contains(role)) {
                throw ApiException.badField(
                        "messages",
                        "message " + i + ": role: expected one of " + String.join(", ", ROLES) + ", got " + role);
            }
            Map<String, Object> msg = new LinkedHashMap<>();
            msg.put("role", role);
            msg.put("content", content(o.get("content"), i));
            JsonElement name = JsonFields.get(o, "name");
            if (name != null) {
                msg.put("name", JsonFields.string(o, "name", ""));
            }
            out.add(msg);
        }
        return out;
    }

    private static String content(JsonElement c, int i) throws ApiException {
        if (c == null || c.isJsonNull()) {
            throw ApiException.badField("messages", "message " + i + ": content is required");
        }
        if (c.isJsonPrimitive() && c.getAsJsonPrimitive().isString()) {
            return c.getAsString();
        }
        if (c.isJsonArray()) {
            StringBuilder s = new StringBuilder();
            for (JsonElement p : c.getAsJsonArray()) {
                if (!p.isJsonObject()
                        || !"text".equals(JsonFields.string(p.getAsJsonObject(), "type", null))) {
                    throw ApiException.badField(
                            "messages", "message " + i + ": only text content parts are supported");
                }
                s.append(JsonFields.string(p.getAsJsonObject(), "text", ""));
            }
            return s.toString();
        }
        throw ApiException.badField(
                "messages",
                "message " + i + ": content: expected a string or text parts, got " + JsonFields.describe(c));
    }
}
