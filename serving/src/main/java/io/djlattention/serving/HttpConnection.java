/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.JsonObject;

import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.util.ReferenceCountUtil;

import java.util.ArrayDeque;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * One per connection, on its event loop: routes each request, and writes the responses in request
 * order. HTTP/1.1 pipelining (a request sent before the previous response) is allowed: the
 * requests run concurrently, but a response is held until every earlier one on the connection has
 * been written, so the client reads them in the order it asked. At most {@link #MAX_PIPELINED}
 * requests are open per connection; beyond that the connection stops reading until one finishes.
 */
final class HttpConnection extends ChannelInboundHandlerAdapter {

    private static final Logger LOG = Logger.getLogger(HttpConnection.class.getName());

    /** Requests open on one connection before it stops reading (back-pressure, not an error). */
    static final int MAX_PIPELINED = 16;

    private final OpenAiServer server;
    private final RequestTimeout timeout;
    private final ArrayDeque<Exchange> order = new ArrayDeque<>();
    private ChannelHandlerContext ctx;
    private boolean closing;

    HttpConnection(OpenAiServer server, RequestTimeout timeout) {
        this.server = server;
        this.timeout = timeout;
    }

    /** A request whose body went over the limit: its body was dropped, it gets 413. */
    record Oversized(boolean keepAlive) {}

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    EventLoop loop() {
        return ctx.channel().eventLoop();
    }

    void count(int status) {
        server.count(status);
    }

    void ended() {
        server.requestEnded();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        timeout.requestReceived();
        if (closing) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof Oversized o) {
            Exchange x = open(o.keepAlive());
            x.fail(
                    new ApiException(
                            413,
                            "invalid_request_error",
                            "body",
                            "body: larger than the limit of " + server.maxBodyBytes() + " bytes"));
            return;
        }
        if (!(msg instanceof FullHttpRequest req)) {
            ReferenceCountUtil.release(msg);
            return;
        }
        try {
            Exchange x = open(HttpUtil.isKeepAlive(req) && req.decoderResult().isSuccess());
            try {
                if (req.decoderResult().isFailure()) {
                    throw malformed(req.decoderResult().cause());
                }
                route(x, req);
            } catch (ApiException e) {
                x.fail(e);
            } catch (RuntimeException | StackOverflowError e) {
                LOG.log(Level.WARNING, "request failed", e);
                x.fail(new ApiException(500, "server_error", null, "internal error; see the server's log"));
            }
        } finally {
            req.release();
        }
    }

    private Exchange open(boolean keepAlive) {
        Exchange x = new Exchange(this, keepAlive);
        server.requestStarted();
        order.addLast(x);
        if (order.size() >= MAX_PIPELINED) {
            ctx.channel().config().setAutoRead(false);
        }
        return x;
    }

    private static ApiException malformed(Throwable cause) {
        if (cause instanceof TooLongHttpLineException) {
            return new ApiException(
                    414, "invalid_request_error", null, "the request line (URL) is too long");
        }
        if (cause instanceof TooLongHttpHeaderException) {
            return new ApiException(
                    431, "invalid_request_error", null, "the request's headers are too large");
        }
        // Netty's message names its own classes: the client gets a plain sentence.
        return new ApiException(400, "invalid_request_error", null, "malformed HTTP request");
    }

    /**
     * Writes part of an exchange's response, or holds it while an earlier exchange on this
     * connection is still answering. {@code last} marks the response's end.
     */
    void write(Exchange x, Object msg, boolean last) {
        if (order.peekFirst() != x) {
            if (!order.contains(x)) {
                ReferenceCountUtil.release(msg); // abandoned
                return;
            }
            x.held.addLast(msg);
            x.heldComplete |= last;
            return;
        }
        writeNow(x, msg, last);
        if (last) {
            advance();
        }
    }

    private void writeNow(Exchange x, Object msg, boolean last) {
        boolean close = !x.keepAlive || server.isDraining();
        if (msg instanceof HttpResponse r) {
            r.headers()
                    .set(
                            HttpHeaderNames.CONNECTION,
                            close ? HttpHeaderValues.CLOSE : HttpHeaderValues.KEEP_ALIVE);
            if (!last) {
                ctx.write(msg); // a stream's headers go out with its first event
                return;
            }
        }
        var f = ctx.writeAndFlush(msg);
        if (last && close) {
            closing = true;
            f.addListener(ChannelFutureListener.CLOSE);
        }
    }

    /** The head exchange finished: write what the next ones hold, in order. */
    private void advance() {
        order.pollFirst();
        Exchange next;
        while (!closing && (next = order.peekFirst()) != null) {
            while (!next.held.isEmpty()) {
                Object msg = next.held.pollFirst();
                writeNow(next, msg, next.heldComplete && next.held.isEmpty());
            }
            if (!next.heldComplete) {
                ctx.flush();
                break;
            }
            order.pollFirst();
        }
        if (order.size() < MAX_PIPELINED && !closing) {
            ctx.channel().config().setAutoRead(true);
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        // The client went away: cancel what it was waiting for (frees KV blocks at once).
        List<Exchange> open = List.copyOf(order);
        order.clear();
        for (Exchange x : open) {
            x.abandon();
        }
        super.channelInactive(ctx);
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) throws Exception {
        if (evt instanceof IdleStateEvent && order.isEmpty()) {
            ctx.close(); // idle keep-alive connection: free its socket
            return;
        }
        super.userEventTriggered(ctx, evt);
    }

    /** Whether a request is open on this connection (the request timeout then writes nothing). */
    boolean isIdle() {
        return order.isEmpty();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        LOG.log(Level.FINE, "connection error", cause);
        ctx.close();
    }

    // ---- routing ------------------------------------------------------------------------------

    private void route(Exchange x, FullHttpRequest req) throws ApiException {
        String path = new QueryStringDecoder(req.uri()).path();
        HttpMethod method = req.method();
        boolean get = path.equals("/health") || path.equals("/metrics") || path.equals("/v1/models");
        boolean post =
                path.equals("/v1/completions")
                        || path.equals("/v1/chat/completions")
                        || path.equals("/v1/embeddings");
        if (!get && !post) {
            throw new ApiException(404, "not_found_error", null, "no route " + method + " " + path);
        }
        String allowed = get ? "GET, HEAD, OPTIONS" : "POST, OPTIONS";
        if (method.equals(HttpMethod.OPTIONS)) {
            FullHttpResponse r =
                    new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.NO_CONTENT);
            r.headers().set(HttpHeaderNames.ALLOW, allowed);
            x.send(r);
            return;
        }
        boolean methodOk =
                get ? method.equals(HttpMethod.GET) || method.equals(HttpMethod.HEAD) : method.equals(HttpMethod.POST);
        if (!methodOk) {
            throw new ApiException(
                    405,
                    "invalid_request_error",
                    null,
                    "method " + method + " not allowed here; use " + allowed);
        }
        if (path.startsWith("/v1/")) {
            server.apiKeys().check(req.headers().get(HttpHeaderNames.AUTHORIZATION));
        }
        // HEAD answers as GET: HttpServerCodec drops the body of a response to HEAD and keeps its
        // Content-Length.
        switch (path) {
            case "/health":
                refuseWhileDraining();
                JsonObject ok = new JsonObject();
                ok.addProperty("status", "ok");
                x.sendJson(200, ok);
                return;
            case "/metrics":
                x.send(
                        HttpResponses.text(
                                200, "text/plain; version=0.0.4; charset=utf-8", server.metricsText()));
                return;
            case "/v1/models":
                x.sendJson(200, server.modelsJson());
                return;
            case "/v1/completions":
                refuseWhileDraining();
                server.completions().completion(x, JsonFields.parseObject(req.content().nioBuffer()));
                return;
            case "/v1/chat/completions":
                refuseWhileDraining();
                server.completions().chat(x, JsonFields.parseObject(req.content().nioBuffer()));
                return;
            default: // "/v1/embeddings"
                refuseWhileDraining();
                server.embeddingRoute().embedding(x, JsonFields.parseObject(req.content().nioBuffer()));
        }
    }

    private void refuseWhileDraining() throws ApiException {
        if (server.isDraining()) {
            throw new ApiException(503, "server_shutting_down", null, "the server is shutting down");
        }
    }

    /** Writes a whole response outside any exchange (the request timeout's 408), then closes. */
    void writeAndClose(HttpMessage m) {
        closing = true;
        ctx.writeAndFlush(m).addListener(ChannelFutureListener.CLOSE);
    }
}
