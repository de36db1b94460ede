/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;

import java.nio.charset.StandardCharsets;

/**
 * One request and its response on a connection. Its methods run on the connection's event loop
 * ({@link #loop}); what it writes goes through {@link HttpConnection#write}, which keeps the
 * responses of pipelined requests in request order. A route that starts work elsewhere sets
 * {@link #onAbandon}, which cancels it when the client goes away.
 */
final class Exchange {

    private final HttpConnection connection;
    final boolean keepAlive;
    /** Cancels the work behind this exchange (a generation, an embedding) when it is abandoned. */
    Runnable onAbandon;
    boolean headersSent;
    boolean done;
    /** What was written while an earlier request on the connection was still answering. */
    final java.util.ArrayDeque<Object> held = new java.util.ArrayDeque<>();
    /** Whether {@link #held} ends with the last part of the response. */
    boolean heldComplete;

    Exchange(HttpConnection connection, boolean keepAlive) {
        this.connection = connection;
        this.keepAlive = keepAlive;
    }

    EventLoop loop() {
        return connection.loop();
    }

    /** The client went away: cancel the work, drop what was not written. */
    void abandon() {
        if (onAbandon != null) {
            onAbandon.run();
        }
        end();
        for (Object o : held) {
            io.netty.util.ReferenceCountUtil.release(o);
        }
        held.clear();
    }

    void fail(ApiException e) {
        if (done) {
            return;
        }
        if (headersSent) {
            // Mid-stream: an error event, then the end of the stream.
            JsonObject o = new JsonObject();
            o.add("error", HttpResponses.errorJson(e));
            writeEvent(o.toString());
            writeEvent("[DONE]");
            finishStream();
            return;
        }
        send(HttpResponses.error(e));
    }

    void sendJson(int status, JsonElement body) {
        send(HttpResponses.text(status, "application/json", body.toString()));
    }

    void send(FullHttpResponse r) {
        if (done) {
            r.release();
            return;
        }
        end();
        connection.count(r.status().code());
        connection.write(this, r, true);
    }

    void startStream() {
        if (headersSent || done) {
            return;
        }
        HttpResponse r = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/event-stream; charset=utf-8");
        r.headers().set(HttpHeaderNames.CACHE_CONTROL, "no-cache");
        HttpUtil.setTransferEncodingChunked(r, true);
        connection.count(200);
        headersSent = true;
        connection.write(this, r, false);
    }

    void writeEvent(String data) {
        if (done) {
            return;
        }
        ByteBuf buf = Unpooled.copiedBuffer("data: " + data + "\n\n", StandardCharsets.UTF_8);
        connection.write(this, new DefaultHttpContent(buf), false);
    }

    void finishStream() {
        if (done) {
            return;
        }
        end();
        connection.write(this, LastHttpContent.EMPTY_LAST_CONTENT, true);
    }

    private void end() {
        if (!done) {
            done = true;
            connection.ended();
        }
    }
}
