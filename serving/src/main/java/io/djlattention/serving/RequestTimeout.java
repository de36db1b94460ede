/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.util.concurrent.ScheduledFuture;

import java.util.concurrent.TimeUnit;

/**
 * Bounds the time from a request's first byte to the whole request (line, headers and body): a
 * client that sends slowly (slowloris) gets {@code 408} and the connection closes. It sits first in
 * the pipeline, on raw bytes; {@link HttpConnection} tells it when a whole request has arrived.
 * Bytes of the next pipelined request that came with the previous one start no clock; a
 * connection left with such a fragment is closed by the idle timeout.
 */
final class RequestTimeout extends ChannelInboundHandlerAdapter {

    private final long timeoutNanos;
    private HttpConnection connection;
    private ChannelHandlerContext ctx;
    private long partialSince; // System.nanoTime() of the first byte of a request; 0: none
    private ScheduledFuture<?> check;

    RequestTimeout(long timeoutNanos) {
        this.timeoutNanos = timeoutNanos;
    }

    void setConnection(HttpConnection connection) {
        this.connection = connection;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (partialSince == 0) {
            partialSince = System.nanoTime();
            schedule(timeoutNanos);
        }
        ctx.fireChannelRead(msg);
    }

    /** A whole request has been decoded. */
    void requestReceived() {
        partialSince = 0;
    }

    private void schedule(long delayNanos) {
        if (check == null || check.isDone()) {
            check = ctx.executor().schedule(this::expire, delayNanos, TimeUnit.NANOSECONDS);
        }
    }

    private void expire() {
        check = null;
        if (partialSince == 0 || !ctx.channel().isActive()) {
            return;
        }
        long left = partialSince + timeoutNanos - System.nanoTime();
        if (left > 0) {
            schedule(left);
            return;
        }
        if (connection != null && connection.isIdle()) {
            ApiException e =
                    new ApiException(
                            408,
                            "invalid_request_error",
                            null,
                            "the request did not arrive within "
                                    + TimeUnit.NANOSECONDS.toMillis(timeoutNanos)
                                    + " ms");
            var r = HttpResponses.error(e);
            r.headers().set(io.netty.handler.codec.http.HttpHeaderNames.CONNECTION, "close");
            connection.count(408);
            connection.writeAndClose(r);
        } else {
            ctx.close(); // mid-response: no room for a 408
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        if (check != null) {
            check.cancel(false);
        }
        super.channelInactive(ctx);
    }
}
