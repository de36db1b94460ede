/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.JsonArray;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;

import java.nio.charset.StandardCharsets;

/** The JSON shapes every route shares: OpenAI's error object and arrays of token ids. */
final class HttpResponses {

    private HttpResponses() {}

    static JsonArray ints(int[] values) {
        JsonArray a = new JsonArray(values.length);
        for (int v : values) {
            a.add(v);
        }
        return a;
    }

    static JsonObject errorJson(ApiException e) {
        JsonObject err = new JsonObject();
        err.addProperty("message", e.getMessage());
        err.addProperty("type", e.getType());
        err.add("param", e.getParam() == null ? JsonNull.INSTANCE : new JsonPrimitive(e.getParam()));
        err.addProperty("code", e.getStatus());
        return err;
    }

    static FullHttpResponse text(int status, String contentType, String text) {
        ByteBuf buf = Unpooled.copiedBuffer(text, StandardCharsets.UTF_8);
        FullHttpResponse r =
                new DefaultFullHttpResponse(
                        HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(status), buf);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
        HttpUtil.setContentLength(r, buf.readableBytes());
        return r;
    }

    static FullHttpResponse error(ApiException e) {
        JsonObject o = new JsonObject();
        o.add("error", errorJson(e));
        FullHttpResponse r = text(e.getStatus(), "application/json", o.toString());
        if (e.getStatus() == 429) {
            r.headers().set(HttpHeaderNames.RETRY_AFTER, "1");
        } else if (e.getStatus() == 401) {
            r.headers().set(HttpHeaderNames.WWW_AUTHENTICATE, "Bearer");
        }
        return r;
    }
}
