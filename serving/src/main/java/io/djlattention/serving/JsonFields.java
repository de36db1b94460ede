/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import com.google.gson.Strictness;
import com.google.gson.TypeAdapter;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;

import java.io.IOException;
import java.io.StringReader;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/** Strict parsing of request bodies and their fields; every error names the field. */
final class JsonFields {

    private static final TypeAdapter<JsonElement> ELEMENT = new Gson().getAdapter(JsonElement.class);

    private JsonFields() {}

    /**
     * Parses a body as one strict JSON object (RFC 8259: no comments, no single quotes, no
     * trailing data).
     *
     * @param body the body bytes
     * @return the object
     * @throws ApiException 400 naming {@code body} if it is not UTF-8 or not a JSON object
     */
    static JsonObject parseObject(ByteBuffer body) throws ApiException {
        String text;
        try {
            text =
                    StandardCharsets.UTF_8
                            .newDecoder()
                            .onMalformedInput(CodingErrorAction.REPORT)
                            .onUnmappableCharacter(CodingErrorAction.REPORT)
                            .decode(body)
                            .toString();
        } catch (CharacterCodingException e) {
            throw ApiException.badField("body", "not valid UTF-8");
        }
        if (text.isBlank()) {
            throw ApiException.badField("body", "expected a JSON object, got an empty body");
        }
        JsonElement root;
        try (JsonReader reader = new JsonReader(new StringReader(text))) {
            reader.setStrictness(Strictness.STRICT);
            reader.setNestingLimit(64);
            root = ELEMENT.read(reader);
            if (reader.peek() != JsonToken.END_DOCUMENT) {
                throw ApiException.badField("body", "unexpected data after the JSON value");
            }
        } catch (IOException | RuntimeException | StackOverflowError e) {
            throw ApiException.badField("body", "malformed JSON (" + oneLine(e) + ")");
        }
        if (!root.isJsonObject()) {
            throw ApiException.badField("body", "expected a JSON object");
        }
        return root.getAsJsonObject();
    }

    private static String oneLine(Throwable e) {
        String m = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        java.util.regex.Matcher where =
                java.util.regex.Pattern.compile("line \\d+ column \\d+").matcher(m);
        if (where.find()) {
            return "at " + where.group(); // gson's advice to relax parsing does not apply here
        }
        m = m.replaceAll("\\s+", " ");
        return m.length() > 200 ? m.substring(0, 200) + "..." : m;
    }

    /** Returns the field, or null when it is absent or JSON null. */
    static JsonElement get(JsonObject o, String name) {
        JsonElement e = o.get(name);
        return e == null || e.isJsonNull() ? null : e;
    }

    static String string(JsonObject o, String name, String dflt) throws ApiException {
        JsonElement e = get(o, name);
        if (e == null) {
            return dflt;
        }
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isString()) {
            throw ApiException.badField(name, "expected a string, got " + describe(e));
        }
        return e.getAsString();
    }

    static boolean bool(JsonObject o, String name, boolean dflt) throws ApiException {
        JsonElement e = get(o, name);
        if (e == null) {
            return dflt;
        }
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isBoolean()) {
            throw ApiException.badField(name, "expected true or false, got " + describe(e));
        }
        return e.getAsBoolean();
    }

    static double number(JsonObject o, String name, double dflt, double min, double max)
            throws ApiException {
        JsonElement e = get(o, name);
        if (e == null) {
            return dflt;
        }
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isNumber()) {
            throw ApiException.badField(name, "expected a number, got " + describe(e));
        }
        double v = e.getAsDouble();
        if (!(v >= min && v <= max)) {
            throw ApiException.badField(
                    name, "expected a number in [" + min + ", " + max + "], got " + e);
        }
        return v;
    }

    static long integer(JsonObject o, String name, long dflt, long min, long max)
            throws ApiException {
        JsonElement e = get(o, name);
        if (e == null) {
            return dflt;
        }
        return integer(e, name, min, max);
    }

    static long integer(JsonElement e, String name, long min, long max) throws ApiException {
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isNumber()) {
            throw ApiException.badField(name, "expected an integer, got " + describe(e));
        }
        BigDecimal v;
        try {
            v = e.getAsBigDecimal();
        } catch (NumberFormatException ex) {
            throw ApiException.badField(name, "expected an integer, got " + e);
        }
        if (v.signum() != 0 && v.stripTrailingZeros().scale() > 0) {
            throw ApiException.badField(name, "expected an integer, got " + e);
        }
        if (v.compareTo(BigDecimal.valueOf(min)) < 0 || v.compareTo(BigDecimal.valueOf(max)) > 0) {
            throw ApiException.badField(
                    name, "expected an integer in [" + min + ", " + max + "], got " + e);
        }
        return v.longValueExact();
    }

    static String describe(JsonElement e) {
        if (e.isJsonObject()) {
            return "an object";
        }
        if (e.isJsonArray()) {
            return "an array";
        }
        JsonPrimitive p = e.getAsJsonPrimitive();
        if (p.isBoolean()) {
            return "a boolean";
        }
        if (p.isNumber()) {
            return "a number";
        }
        return "a string";
    }

    static boolean allNumbers(JsonArray a) {
        for (JsonElement e : a) {
            if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isNumber()) {
                return false;
            }
        }
        return true;
    }
}
