/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;

import io.djlattention.zoo.generate.GenerationEngine;
import io.djlattention.zoo.generate.GenerationResult;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.util.concurrent.GlobalEventExecutor;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * An OpenAI-compatible HTTP server on Netty: {@code POST /v1/completions} on a {@link
 * GenerationEngine} (continuous batching over the paged KV cache; server-sent events with {@code
 * "stream": true}), {@code POST /v1/embeddings} on an {@link EmbeddingService}, {@code GET
 * /v1/models}, {@code GET /health} and {@code GET /metrics} (Prometheus text). See
 * docs/serving.md for the API, its limits and its behaviour under overload and faults.
 *
 * <p>Netty's event loops only parse, validate and write; generation runs on the engine's thread and
 * embedding on the service's thread, whose results come back to the connection's event loop. A
 * connection that closes cancels its requests (their KV blocks are freed at once). A full queue
 * answers {@code 429} with {@code Retry-After}; bad input {@code 400} naming the field; bodies over
 * the limit {@code 413}; unknown routes {@code 404}. {@link #close} is graceful.
 */
public final class OpenAiServer implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(OpenAiServer.class.getName());

    private final ServedGenerator generator;
    private final String embeddingName;
    private final EmbeddingService embeddings;
    private final String host;
    private final int requestedPort;
    private final int maxBodyBytes;
    private final int maxEmbeddingInputs;
    private final int maxEmbeddingChars;
    private final int defaultMaxTokens;
    private final int ioThreads;
    private final Duration shutdownGrace;
    private final List<AutoCloseable> closeAfter;
    private final long created = System.currentTimeMillis() / 1000;
    private final AtomicLong nextId = new AtomicLong();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final ConcurrentHashMap<Integer, LongAdder> responses = new ConcurrentHashMap<>();
    private final ChannelGroup channels = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);
    private final CountDownLatch closed = new CountDownLatch(1);
    private volatile boolean draining;
    private EventLoopGroup boss;
    private EventLoopGroup workers;
    private Channel serverChannel;
    private int port;
    private boolean closing;

    private OpenAiServer(Builder b) {
        generator = b.generator;
        embeddingName = b.embeddingName;
        embeddings = b.embeddings;
        host = b.host;
        requestedPort = b.port;
        maxBodyBytes = b.maxBodyBytes;
        maxEmbeddingInputs = b.maxEmbeddingInputs;
        maxEmbeddingChars = b.maxEmbeddingChars;
        defaultMaxTokens = b.defaultMaxTokens;
        ioThreads = b.ioThreads;
        shutdownGrace = b.shutdownGrace;
        closeAfter = List.copyOf(b.closeAfter);
    }

    /**
     * Returns a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Binds the port and starts serving.
     *
     * @return this server
     * @throws InterruptedException if interrupted while binding
     */
    public synchronized OpenAiServer start() throws InterruptedException {
        if (serverChannel != null) {
            throw new IllegalStateException("the server is already started");
        }
        boss = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        workers = new MultiThreadIoEventLoopGroup(ioThreads, NioIoHandler.newFactory());
        try {
            ServerBootstrap bootstrap =
                    new ServerBootstrap()
                            .group(boss, workers)
                            .channel(NioServerSocketChannel.class)
                            .option(ChannelOption.SO_BACKLOG, 1024)
                            .childOption(ChannelOption.TCP_NODELAY, true)
                            .childHandler(
                                    new ChannelInitializer<SocketChannel>() {
                                        @Override
                                        protected void initChannel(SocketChannel ch) {
                                            channels.add(ch);
                                            ch.pipeline()
                                                    .addLast(new HttpServerCodec())
                                                    .addLast(new BodyLimit(maxBodyBytes))
                                                    .addLast(new Handler());
                                        }
                                    });
            serverChannel = bootstrap.bind(host, requestedPort).sync().channel();
        } catch (RuntimeException | InterruptedException e) {
            boss.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            workers.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            throw e;
        }
        port = ((InetSocketAddress) serverChannel.localAddress()).getPort();
        LOG.info("serving on http://" + host + ":" + port);
        return this;
    }

    /**
     * Returns the bound port.
     *
     * @return the port
     */
    public int getPort() {
        return port;
    }

    /**
     * Returns the generation model served.
     *
     * @return the model, or null
     */
    public ServedGenerator getGenerator() {
        return generator;
    }

    /**
     * Returns the embedding service.
     *
     * @return the service, or null
     */
    public EmbeddingService getEmbeddings() {
        return embeddings;
    }

    /**
     * Returns the HTTP exchanges still running (accepted, final response not yet written).
     *
     * @return the count
     */
    public int getInFlight() {
        return inFlight.get();
    }

    /**
     * Blocks until {@link #close} has finished.
     *
     * @throws InterruptedException if interrupted
     */
    public void awaitClosed() throws InterruptedException {
        closed.await();
    }

    /**
     * Shuts down gracefully: stops accepting connections (and answers new requests on open ones
     * with 503), lets in-flight generations finish for up to the shutdown grace and cancels the
     * rest with a final event ({@code finish_reason: "abort"}), embeds what is queued, frees the
     * KV cache, closes the connections and the event loops. A second call waits for the first.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closing) {
                try {
                    closed.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return;
            }
            closing = true;
        }
        draining = true;
        try {
            if (serverChannel != null) {
                serverChannel.close().syncUninterruptibly();
            }
            if (generator != null) {
                generator.engine().shutdown(shutdownGrace);
            }
            if (embeddings != null) {
                embeddings.close();
            }
            // The final events were handed to the event loops: let them be written.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (inFlight.get() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            channels.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (workers != null) {
                workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
                boss.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
            }
            for (AutoCloseable c : closeAfter) {
                try {
                    c.close();
                } catch (Exception e) {
                    LOG.log(Level.WARNING, "closing " + c + " failed", e);
                }
            }
            closed.countDown();
        }
    }

    // ---- metrics ------------------------------------------------------------------------------

    /**
     * Returns the metrics in the Prometheus text format (version 0.0.4).
     *
     * @return the exposition
     */
    public String metricsText() {
        PrometheusText p = new PrometheusText();
        if (generator != null) {
            GenerationEngine e = generator.engine();
            var m = e.getMetrics();
            p.gauge("djl_attn_queue_length", "Completion requests accepted but not running.", m.queued());
            p.gauge("djl_attn_running_sequences", "Sequences in the running batch.", m.running());
            p.gauge("djl_attn_kv_blocks_total", "KV cache blocks.", m.kvBlocksTotal());
            p.gauge("djl_attn_kv_blocks_free", "Free KV cache blocks.", m.kvBlocksFree());
            p.gauge(
                    "djl_attn_kv_blocks_used",
                    "KV cache blocks in use.",
                    m.kvBlocksTotal() - m.kvBlocksFree());
            p.counter(
                    "djl_attn_preemptions_total",
                    "Sequences preempted (freed, requeued, recomputed).",
                    m.preemptions());
            p.header(
                    "djl_attn_completion_requests_total",
                    "Completion requests by outcome.",
                    "counter");
            p.sample("djl_attn_completion_requests_total{outcome=\"finished\"}", m.completed());
            p.sample("djl_attn_completion_requests_total{outcome=\"cancelled\"}", m.cancelled());
            p.sample("djl_attn_completion_requests_total{outcome=\"failed\"}", m.failed());
            p.sample("djl_attn_completion_requests_total{outcome=\"rejected\"}", m.rejected());
            p.counter("djl_attn_prompt_tokens_total", "Prompt tokens accepted.", m.promptTokens());
            p.counter(
                    "djl_attn_generated_tokens_total", "Tokens generated.", m.generatedTokens());
            p.counter("djl_attn_engine_steps_total", "Scheduler iterations.", m.steps());
            p.gauge(
                    "djl_attn_generated_tokens_per_second",
                    "Tokens generated per second over the last 5 seconds.",
                    m.tokensPerSecond());
            p.histogram(
                    "djl_attn_time_to_first_token_seconds",
                    "Time from a completion's arrival to its first token.",
                    e.getTimeToFirstToken());
            p.histogram(
                    "djl_attn_time_per_output_token_seconds",
                    "Time between consecutive tokens of a completion.",
                    e.getTimePerOutputToken());
            p.histogram(
                    "djl_attn_completion_latency_seconds",
                    "Time from a completion's arrival to its end.",
                    e.getRequestLatency());
        }
        if (embeddings != null) {
            p.gauge(
                    "djl_attn_embedding_queue_length",
                    "Embedding requests waiting.",
                    embeddings.getQueueLength());
            p.counter(
                    "djl_attn_embedding_requests_total",
                    "Embedding requests accepted.",
                    embeddings.getRequests());
            p.counter(
                    "djl_attn_embedding_inputs_total", "Texts embedded.", embeddings.getInputs());
            p.counter(
                    "djl_attn_embedding_rejected_total",
                    "Embedding requests refused (queue full).",
                    embeddings.getRejected());
            p.counter(
                    "djl_attn_embedding_failed_total",
                    "Embedding requests that failed.",
                    embeddings.getFailed());
            p.counter(
                    "djl_attn_embedding_batches_total",
                    "Model calls (merged batches).",
                    embeddings.getBatches());
            p.histogram(
                    "djl_attn_embedding_latency_seconds",
                    "Time from an embedding request's arrival to its result.",
                    embeddings.getLatency());
        }
        p.gauge("djl_attn_http_in_flight", "HTTP exchanges in progress.", inFlight.get());
        p.header("djl_attn_http_responses_total", "HTTP responses by status.", "counter");
        for (var e : new java.util.TreeMap<>(responses).entrySet()) {
            p.sample(
                    "djl_attn_http_responses_total{code=\"" + e.getKey() + "\"}",
                    e.getValue().sum());
        }
        return p.toString();
    }

    // ---- the connection handler -----------------------------------------------------------------

    /** Answers an oversized body with 413 and a JSON error; the rest of the body is discarded. */
    private final class BodyLimit extends HttpObjectAggregator {

        BodyLimit(int maxBytes) {
            super(maxBytes);
        }

        @Override
        protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
            ApiException e =
                    new ApiException(
                            413,
                            "invalid_request_error",
                            "body",
                            "body: larger than the limit of " + maxBodyBytes + " bytes");
            FullHttpResponse r = errorResponse(e);
            count(413);
            // The connection stays open: the aggregator reads and drops the rest of the body, so
            // a client still sending it reads the 413 instead of a reset.
            ctx.writeAndFlush(r);
        }
    }

    /** One per connection; everything it does runs on the connection's event loop. */
    private final class Handler extends SimpleChannelInboundHandler<FullHttpRequest> {

        private final Set<Exchange> open = new HashSet<>();

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            boolean keepAlive = HttpUtil.isKeepAlive(req);
            Exchange x = new Exchange(ctx, keepAlive);
            inFlight.incrementAndGet();
            open.add(x);
            try {
                if (req.decoderResult().isFailure()) {
                    throw new ApiException(
                            400,
                            "invalid_request_error",
                            null,
                            "malformed HTTP request: " + req.decoderResult().cause());
                }
                route(x, req);
            } catch (ApiException e) {
                x.fail(e);
            } catch (RuntimeException | StackOverflowError e) {
                LOG.log(Level.WARNING, "request failed", e);
                x.fail(new ApiException(500, "server_error", null, "internal error: " + e));
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            // The client went away: cancel what it was waiting for (frees KV blocks at once).
            for (Exchange x : new ArrayList<>(open)) {
                x.abandon();
            }
            super.channelInactive(ctx);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            LOG.log(Level.FINE, "connection error", cause);
            ctx.close();
        }

        private void route(Exchange x, FullHttpRequest req) throws ApiException {
            String path = new QueryStringDecoder(req.uri()).path();
            HttpMethod method = req.method();
            switch (path) {
                case "/health":
                    requireMethod(method, HttpMethod.GET);
                    if (draining) {
                        throw new ApiException(
                                503, "server_shutting_down", null, "the server is shutting down");
                    }
                    JsonObject ok = new JsonObject();
                    ok.addProperty("status", "ok");
                    x.sendJson(200, ok);
                    return;
                case "/metrics":
                    requireMethod(method, HttpMethod.GET);
                    x.sendText(200, "text/plain; version=0.0.4; charset=utf-8", metricsText());
                    return;
                case "/v1/models":
                    requireMethod(method, HttpMethod.GET);
                    x.sendJson(200, models());
                    return;
                case "/v1/completions":
                    requireMethod(method, HttpMethod.POST);
                    refuseWhileDraining();
                    completion(x, JsonFields.parseObject(req.content().nioBuffer()));
                    return;
                case "/v1/embeddings":
                    requireMethod(method, HttpMethod.POST);
                    refuseWhileDraining();
                    embedding(x, JsonFields.parseObject(req.content().nioBuffer()));
                    return;
                default:
                    throw new ApiException(
                            404, "not_found_error", null, "no route " + method + " " + path);
            }
        }

        private void requireMethod(HttpMethod got, HttpMethod expected) throws ApiException {
            if (!got.equals(expected)) {
                throw new ApiException(
                        405,
                        "invalid_request_error",
                        null,
                        "method " + got + " not allowed here; use " + expected);
            }
        }

        private void refuseWhileDraining() throws ApiException {
            if (draining) {
                throw new ApiException(
                        503, "server_shutting_down", null, "the server is shutting down");
            }
        }

        private void checkModel(JsonObject body, String served) throws ApiException {
            String model = JsonFields.string(body, "model", served);
            if (!model.equals(served)) {
                throw new ApiException(
                        404,
                        "model_not_found",
                        "model",
                        "model: '" + model + "' is not served here (serving '" + served + "')");
            }
        }

        // ---- /v1/completions ------------------------------------------------------------------

        private void completion(Exchange x, JsonObject body) throws ApiException {
            if (generator == null) {
                throw new ApiException(
                        404, "model_not_found", "model", "model: no generation model is served");
            }
            checkModel(body, generator.name());
            CompletionRequest cr = CompletionRequest.parse(body, generator, defaultMaxTokens);
            Completion c = new Completion(x, cr);
            x.completion = c;
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
                throw overloaded(e);
            } catch (IllegalStateException e) {
                throw new ApiException(503, "server_shutting_down", null, e.getMessage());
            } catch (IllegalArgumentException e) {
                throw ApiException.badField("max_tokens", e.getMessage());
            }
            c.handle = h;
            h.getResult().whenComplete((r, t) -> x.loop().execute(() -> c.onDone(r, t)));
        }

        // ---- /v1/embeddings -------------------------------------------------------------------

        private void embedding(Exchange x, JsonObject body) throws ApiException {
            if (embeddings == null) {
                throw new ApiException(
                        404, "model_not_found", "model", "model: no embedding model is served");
            }
            checkModel(body, embeddingName);
            List<String> texts = embeddingInputs(body);
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
            x.pending = f;
            f.whenComplete(
                    (out, t) ->
                            x.loop().execute(() -> embeddingDone(x, texts, out, t, format, dims)));
        }

        private List<String> embeddingInputs(JsonObject body) throws ApiException {
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
                if (a.size() > maxEmbeddingInputs) {
                    throw ApiException.badField(
                            "input",
                            "expected at most " + maxEmbeddingInputs + " texts, got " + a.size());
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
                if (t.length() > maxEmbeddingChars) {
                    throw ApiException.badField(
                            "input",
                            "text "
                                    + i
                                    + " has "
                                    + t.length()
                                    + " characters, more than the limit of "
                                    + maxEmbeddingChars);
                }
            }
            return texts;
        }

        private void embeddingDone(
                Exchange x,
                List<String> texts,
                List<float[]> out,
                Throwable t,
                String format,
                long dims) {
            if (x.done) {
                return;
            }
            if (t != null) {
                Throwable cause = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
                if (cause instanceof IllegalArgumentException) {
                    x.fail(ApiException.badField("input", cause.getMessage()));
                } else {
                    LOG.log(Level.WARNING, "embedding failed", cause);
                    x.fail(new ApiException(500, "server_error", null, "embedding failed: " + cause));
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
            body.addProperty("model", embeddingName);
            JsonObject usage = new JsonObject();
            usage.addProperty("prompt_tokens", tokens);
            usage.addProperty("total_tokens", tokens);
            body.add("usage", usage);
            x.sendJson(200, body);
        }

        private ApiException overloaded(RejectedExecutionException e) {
            return new ApiException(429, "rate_limit_exceeded", null, e.getMessage() + "; retry later");
        }

        private JsonObject models() {
            JsonArray data = new JsonArray();
            if (generator != null) {
                data.add(model(generator.name()));
            }
            if (embeddings != null) {
                data.add(model(embeddingName));
            }
            JsonObject o = new JsonObject();
            o.addProperty("object", "list");
            o.add("data", data);
            return o;
        }

        private JsonObject model(String name) {
            JsonObject m = new JsonObject();
            m.addProperty("id", name);
            m.addProperty("object", "model");
            m.addProperty("created", created);
            m.addProperty("owned_by", "djl-attention");
            return m;
        }

        /** One request/response on this connection. */
        private final class Exchange {
            final ChannelHandlerContext ctx;
            final boolean keepAlive;
            Completion completion;
            CompletableFuture<?> pending;
            boolean headersSent;
            boolean done;

            Exchange(ChannelHandlerContext ctx, boolean keepAlive) {
                this.ctx = ctx;
                this.keepAlive = keepAlive;
            }

            io.netty.channel.EventLoop loop() {
                return ctx.channel().eventLoop();
            }

            void abandon() {
                if (completion != null && completion.handle != null) {
                    completion.handle.cancel();
                }
                if (pending != null) {
                    pending.cancel(false);
                }
                end();
            }

            void fail(ApiException e) {
                if (done) {
                    return;
                }
                if (headersSent) {
                    // Mid-stream: an error event, then the end of the stream.
                    JsonObject o = new JsonObject();
                    o.add("error", errorJson(e));
                    writeEvent(o.toString());
                    writeEvent("[DONE]");
                    finishStream();
                    return;
                }
                FullHttpResponse r = errorResponse(e);
                if (e.getStatus() == 429) {
                    r.headers().set(HttpHeaderNames.RETRY_AFTER, "1");
                }
                send(r);
            }

            void sendJson(int status, JsonElement body) {
                sendText(status, "application/json", body.toString());
            }

            void sendText(int status, String contentType, String text) {
                ByteBuf buf = Unpooled.copiedBuffer(text, StandardCharsets.UTF_8);
                FullHttpResponse r =
                        new DefaultFullHttpResponse(
                                HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(status), buf);
                r.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
                send(r);
            }

            private void send(FullHttpResponse r) {
                if (done) {
                    r.release();
                    return;
                }
                count(r.status().code());
                HttpUtil.setContentLength(r, r.content().readableBytes());
                boolean close = !keepAlive || draining;
                r.headers()
                        .set(
                                HttpHeaderNames.CONNECTION,
                                close ? HttpHeaderValues.CLOSE : HttpHeaderValues.KEEP_ALIVE);
                var f = ctx.writeAndFlush(r);
                if (close) {
                    f.addListener(ChannelFutureListener.CLOSE);
                }
                end();
            }

            void startStream() {
                if (headersSent || done) {
                    return;
                }
                HttpResponse r = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
                r.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/event-stream; charset=utf-8");
                r.headers().set(HttpHeaderNames.CACHE_CONTROL, "no-cache");
                HttpUtil.setTransferEncodingChunked(r, true);
                count(200);
                ctx.write(r);
                headersSent = true;
            }

            void writeEvent(String data) {
                if (done) {
                    return;
                }
                ByteBuf buf = Unpooled.copiedBuffer("data: " + data + "\n\n", StandardCharsets.UTF_8);
                ctx.writeAndFlush(new DefaultHttpContent(buf));
            }

            void finishStream() {
                if (done) {
                    return;
                }
                var f = ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
                if (!keepAlive || draining) {
                    f.addListener(ChannelFutureListener.CLOSE);
                }
                end();
            }

            private void end() {
                if (!done) {
                    done = true;
                    open.remove(this);
                    inFlight.decrementAndGet();
                }
            }
        }

        /** The state of one completion (event-loop thread only). */
        private final class Completion {
            final Exchange x;
            final CompletionRequest req;
            final TextStream text;
            final String id = "cmpl-" + nextId.incrementAndGet();
            final long createdAt = System.currentTimeMillis() / 1000;
            GenerationEngine.Handle handle;

            Completion(Exchange x, CompletionRequest req) {
                this.x = x;
                this.req = req;
                this.text = new TextStream(generator.tokenizer(), req.stops());
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
                    String why = t != null ? String.valueOf(t) : r.error();
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
                        x.fail(e);
                    } else {
                        x.fail(e);
                    }
                    return;
                }
                String rest = text.flush();
                int[] ids = text.isStopped() ? text.getTokenIds() : r.generated();
                if (req.stream()) {
                    x.startStream();
                    x.writeEvent(chunk(rest, new int[0], finish).toString());
                    x.writeEvent("[DONE]");
                    x.finishStream();
                    return;
                }
                JsonObject choice = new JsonObject();
                choice.addProperty("index", 0);
                choice.addProperty("text", text.getText());
                choice.add("token_ids", ints(ids));
                choice.add("logprobs", JsonNull.INSTANCE);
                choice.addProperty("finish_reason", finish);
                JsonArray choices = new JsonArray();
                choices.add(choice);
                JsonObject body = header();
                body.add("choices", choices);
                JsonObject usage = new JsonObject();
                usage.addProperty("prompt_tokens", req.prompt().length);
                usage.addProperty("completion_tokens", ids.length);
                usage.addProperty("total_tokens", req.prompt().length + ids.length);
                body.add("usage", usage);
                x.sendJson(200, body);
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

            private JsonObject header() {
                JsonObject o = new JsonObject();
                o.addProperty("id", id);
                o.addProperty("object", "text_completion");
                o.addProperty("created", createdAt);
                o.addProperty("model", generator.name());
                return o;
            }

            private JsonObject chunk(String piece, int[] tokens, String finish) {
                JsonObject choice = new JsonObject();
                choice.addProperty("index", 0);
                choice.addProperty("text", piece);
                choice.add("token_ids", ints(tokens));
                choice.add("logprobs", JsonNull.INSTANCE);
                choice.add("finish_reason", finish == null ? JsonNull.INSTANCE : new JsonPrimitive(finish));
                JsonArray choices = new JsonArray();
                choices.add(choice);
                JsonObject o = header();
                o.add("choices", choices);
                return o;
            }
        }
    }

    private static JsonArray ints(int[] values) {
        JsonArray a = new JsonArray(values.length);
        for (int v : values) {
            a.add(v);
        }
        return a;
    }

    private static JsonObject errorJson(ApiException e) {
        JsonObject err = new JsonObject();
        err.addProperty("message", e.getMessage());
        err.addProperty("type", e.getType());
        err.add("param", e.getParam() == null ? JsonNull.INSTANCE : new JsonPrimitive(e.getParam()));
        err.addProperty("code", e.getStatus());
        return err;
    }

    private static FullHttpResponse errorResponse(ApiException e) {
        JsonObject o = new JsonObject();
        o.add("error", errorJson(e));
        ByteBuf buf = Unpooled.copiedBuffer(o.toString(), StandardCharsets.UTF_8);
        FullHttpResponse r =
                new DefaultFullHttpResponse(
                        HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(e.getStatus()), buf);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
        HttpUtil.setContentLength(r, buf.readableBytes());
        return r;
    }

    private void count(int status) {
        responses.computeIfAbsent(status, k -> new LongAdder()).increment();
    }

    /** Builds an {@link OpenAiServer}. */
    public static final class Builder {

        private ServedGenerator generator;
        private String embeddingName;
        private EmbeddingService embeddings;
        private String host = "127.0.0.1";
        private int port = 8080;
        private int maxBodyBytes = 4 << 20;
        private int maxEmbeddingInputs = 2048;
        private int maxEmbeddingChars = 100_000;
        private int defaultMaxTokens = 16;
        private int ioThreads = Math.max(2, Runtime.getRuntime().availableProcessors());
        private Duration shutdownGrace = Duration.ofSeconds(30);
        private final List<AutoCloseable> closeAfter = new ArrayList<>();

        Builder() {}

        /**
         * Closes a resource (a model, its manager) after the server has shut down, in the order
         * added.
         *
         * @param resource the resource
         * @return this builder
         */
        public Builder optCloseOnShutdown(AutoCloseable resource) {
            closeAfter.add(resource);
            return this;
        }

        /**
         * Serves a generation model on {@code /v1/completions}; the server closes its engine.
         *
         * @param generator the model
         * @return this builder
         */
        public Builder optGenerator(ServedGenerator generator) {
            this.generator = generator;
            return this;
        }

        /**
         * Serves an embedding model on {@code /v1/embeddings}; the server closes the service.
         *
         * @param name the model's name in the API
         * @param embeddings the service
         * @return this builder
         */
        public Builder optEmbeddings(String name, EmbeddingService embeddings) {
            this.embeddingName = name;
            this.embeddings = embeddings;
            return this;
        }

        /**
         * Sets the address to bind (default 127.0.0.1: loopback only).
         *
         * @param host the address
         * @return this builder
         */
        public Builder optHost(String host) {
            this.host = host;
            return this;
        }

        /**
         * Sets the port (default 8080; 0 picks a free one, see {@link #getPort}).
         *
         * @param port the port
         * @return this builder
         */
        public Builder optPort(int port) {
            this.port = port;
            return this;
        }

        /**
         * Sets the largest request body accepted (default 4 MiB); larger ones get 413.
         *
         * @param maxBodyBytes the limit in bytes
         * @return this builder
         */
        public Builder optMaxBodyBytes(int maxBodyBytes) {
            this.maxBodyBytes = maxBodyBytes;
            return this;
        }

        /**
         * Sets the most texts in one embedding request (default 2048, OpenAI's limit).
         *
         * @param maxEmbeddingInputs the limit
         * @return this builder
         */
        public Builder optMaxEmbeddingInputs(int maxEmbeddingInputs) {
            this.maxEmbeddingInputs = maxEmbeddingInputs;
            return this;
        }

        /**
         * Sets the longest text accepted for embedding, in characters (default 100,000); the model
         * itself may truncate or refuse texts longer than its positions.
         *
         * @param maxEmbeddingChars the limit
         * @return this builder
         */
        public Builder optMaxEmbeddingChars(int maxEmbeddingChars) {
            this.maxEmbeddingChars = maxEmbeddingChars;
            return this;
        }

        /**
         * Sets {@code max_tokens} when a completion request leaves it out (default 16, OpenAI's).
         *
         * @param defaultMaxTokens the default
         * @return this builder
         */
        public Builder optDefaultMaxTokens(int defaultMaxTokens) {
            this.defaultMaxTokens = defaultMaxTokens;
            return this;
        }

        /**
         * Sets the Netty I/O threads (default the processors, at least 2).
         *
         * @param ioThreads the threads
         * @return this builder
         */
        public Builder optIoThreads(int ioThreads) {
            this.ioThreads = ioThreads;
            return this;
        }

        /**
         * Sets how long {@link #close} lets in-flight completions finish (default 30 s).
         *
         * @param shutdownGrace the grace period
         * @return this builder
         */
        public Builder optShutdownGrace(Duration shutdownGrace) {
            this.shutdownGrace = shutdownGrace;
            return this;
        }

        /**
         * Builds the server (not started: see {@link #start}).
         *
         * @return the server
         */
        public OpenAiServer build() {
            if (generator == null && embeddings == null) {
                throw new IllegalArgumentException(
                        "OpenAiServer: optGenerator or optEmbeddings is required");
            }
            if (maxBodyBytes < 1024 || ioThreads < 1 || defaultMaxTokens < 1) {
                throw new IllegalArgumentException(
                        "OpenAiServer: optMaxBodyBytes >= 1024, optIoThreads >= 1 and"
                                + " optDefaultMaxTokens >= 1 are required");
            }
            return new OpenAiServer(this);
        }
    }
}
