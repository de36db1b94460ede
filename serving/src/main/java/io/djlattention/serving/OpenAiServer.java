/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

import io.djlattention.zoo.generate.GenerationEngine;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpObjectDecoder;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.timeout.IdleStateHandler;
import io.netty.util.concurrent.GlobalEventExecutor;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.logging.Level;
import java.util.logging.Logger;

import javax.net.ssl.SSLException;

/**
 * An OpenAI-compatible HTTP server on Netty: {@code POST /v1/completions} and {@code POST
 * /v1/chat/completions} on a {@link GenerationEngine} (continuous batching over the paged KV
 * cache; server-sent events with {@code "stream": true}; chats rendered by the model's {@link
 * ChatTemplate}), {@code POST /v1/embeddings} on an {@link EmbeddingService}, {@code GET
 * /v1/models}, {@code GET /health} and {@code GET /metrics} (Prometheus text). See docs/serving.md
 * for the API, its limits and its behaviour under overload and faults.
 *
 * <p>This class holds the lifecycle, the shared state and the metrics; {@link HttpConnection}
 * handles one connection (routing, request order, timeouts), {@link CompletionRoute} and {@link
 * EmbeddingRoute} the endpoints. Netty's event loops only parse, validate and write; generation
 * runs on the engine's thread and embedding on the service's thread, whose results come back to
 * the connection's event loop. A connection that closes cancels its requests (their KV blocks are
 * freed at once). A full queue answers {@code 429} with {@code Retry-After}; bad input {@code 400}
 * naming the field; bodies over the limit {@code 413}; unknown routes {@code 404}; a missing API
 * key {@code 401}; a slow request {@code 408}. Connections are capped, idle ones closed, and TLS
 * is optional. {@link #close} is graceful.
 */
public final class OpenAiServer implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(OpenAiServer.class.getName());

    /** The longest request line (method, URL, version) before {@code 414}. */
    static final int MAX_REQUEST_LINE_BYTES = 8192;

    /** The most header bytes before {@code 431}. */
    static final int MAX_HEADER_BYTES = 16384;

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
    private final Duration idleTimeout;
    private final Duration requestTimeout;
    private final int maxConnections;
    private final ApiKeys apiKeys;
    private final SslContext sslContext;
    private final CompletionRoute completionRoute;
    private final EmbeddingRoute embeddingRoute;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicInteger connections = new AtomicInteger();
    private final LongAdder connectionsRefused = new LongAdder();
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
        idleTimeout = b.idleTimeout;
        requestTimeout = b.requestTimeout;
        maxConnections = b.maxConnections;
        apiKeys = b.apiKeys;
        sslContext = b.sslContext;
        completionRoute = generator == null ? null : new CompletionRoute(generator, defaultMaxTokens);
        embeddingRoute =
                new EmbeddingRoute(embeddingName, embeddings, maxEmbeddingInputs, maxEmbeddingChars);
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
                                            initConnection(ch);
                                        }
                                    });
            serverChannel = bootstrap.bind(host, requestedPort).sync().channel();
        } catch (RuntimeException | InterruptedException e) {
            boss.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            workers.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            throw e;
        }
        port = ((InetSocketAddress) serverChannel.localAddress()).getPort();
        LOG.info("serving on " + (sslContext == null ? "http" : "https") + "://" + host + ":" + port);
        return this;
    }

    /**
     * Sets up a new connection's pipeline, or closes it at once when {@code maxConnections} are
     * open (a socket per idle client would otherwise exhaust the process's file limit).
     */
    private void initConnection(SocketChannel ch) {
        if (connections.incrementAndGet() > maxConnections) {
            connections.decrementAndGet();
            connectionsRefused.increment();
            ch.close();
            return;
        }
        ch.closeFuture().addListener(f -> connections.decrementAndGet());
        channels.add(ch);
        RequestTimeout timeout = new RequestTimeout(requestTimeout.toNanos());
        HttpConnection connection = new HttpConnection(this, timeout);
        timeout.setConnection(connection);
        ch.pipeline().addLast(timeout);
        if (sslContext != null) {
            ch.pipeline().addLast(sslContext.newHandler(ch.alloc()));
        }
        ch.pipeline()
                .addLast(new IdleStateHandler(0, 0, idleTimeout.toMillis(), TimeUnit.MILLISECONDS))
                .addLast(
                        new HttpServerCodec(
                                MAX_REQUEST_LINE_BYTES, MAX_HEADER_BYTES, HttpObjectDecoder.DEFAULT_MAX_CHUNK_SIZE))
                .addLast(new BodyLimit(maxBodyBytes))
                .addLast(connection);
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
     * Returns whether the {@code /v1/} routes require an API key.
     *
     * @return true if keys were given
     */
    public boolean requiresApiKey() {
        return apiKeys.isEnabled();
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
        p.gauge("djl_attn_http_connections", "Open HTTP connections.", connections.get());
        p.counter(
                "djl_attn_http_connections_refused_total",
                "Connections closed at once because --max-connections were open.",
                connectionsRefused.sum());
        p.header("djl_attn_http_responses_total", "HTTP responses by status.", "counter");
        for (var e : new java.util.TreeMap<>(responses).entrySet()) {
            p.sample(
                    "djl_attn_http_responses_total{code=\"" + e.getKey() + "\"}",
                    e.getValue().sum());
        }
        return p.toString();
    }

    // ---- what the connections share ---------------------------------------------------------

    /** Answers an oversized body with 413 (through the connection, in request order). */
    private static final class BodyLimit extends HttpObjectAggregator {

        BodyLimit(int maxBytes) {
            super(maxBytes);
        }

        @Override
        protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
            // The connection stays open: the aggregator reads and drops the rest of the body, so
            // a client still sending it reads the 413 instead of a reset.
            ctx.fireChannelRead(new HttpConnection.Oversized(HttpUtil.isKeepAlive(oversized)));
        }
    }

    int maxBodyBytes() {
        return maxBodyBytes;
    }

    boolean isDraining() {
        return draining;
    }

    ApiKeys apiKeys() {
        return apiKeys;
    }

    CompletionRoute completions() {
        return completionRoute;
    }

    EmbeddingRoute embeddingRoute() {
        return embeddingRoute;
    }

    void requestStarted() {
        inFlight.incrementAndGet();
    }

    void requestEnded() {
        inFlight.decrementAndGet();
    }

    void count(int status) {
        responses.computeIfAbsent(status, k -> new LongAdder()).increment();
    }

    JsonObject modelsJson() {
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
        private Duration idleTimeout = Duration.ofSeconds(60);
        private Duration requestTimeout = Duration.ofSeconds(30);
        private int maxConnections = 1000;
        private ApiKeys apiKeys = ApiKeys.none();
        private Path tlsCert;
        private Path tlsKey;
        private SslContext sslContext;
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
         * Sets how long a connection may stay open with no request in progress and no bytes moving
         * (default 60 s); then the server closes it.
         *
         * @param idleTimeout the timeout, positive
         * @return this builder
         */
        public Builder optIdleTimeout(Duration idleTimeout) {
            this.idleTimeout = idleTimeout;
            return this;
        }

        /**
         * Sets how long a request may take to arrive, from its first byte to the end of its body
         * (default 30 s); a slower one gets {@code 408} and the connection closes.
         *
         * @param requestTimeout the timeout, positive
         * @return this builder
         */
        public Builder optRequestTimeout(Duration requestTimeout) {
            this.requestTimeout = requestTimeout;
            return this;
        }

        /**
         * Sets the most open connections (default 1000); a connection beyond them is closed at
         * once. Keep it below the process's file limit ({@code ulimit -n}).
         *
         * @param maxConnections at least 1
         * @return this builder
         */
        public Builder optMaxConnections(int maxConnections) {
            this.maxConnections = maxConnections;
            return this;
        }

        /**
         * Requires {@code Authorization: Bearer <key>} on the {@code /v1/} routes ({@code
         * /health} and {@code /metrics} stay open for probes and scrapers).
         *
         * @param apiKeys the accepted keys
         * @return this builder
         */
        public Builder optApiKeys(ApiKeys apiKeys) {
            this.apiKeys = apiKeys;
            return this;
        }

        /**
         * Serves HTTPS with a PEM certificate chain and its PEM private key (PKCS#8, unencrypted:
         * {@code openssl pkcs8 -topk8 -nocrypt} converts others), through Netty's JDK TLS.
         *
         * @param certChain the certificate chain file
         * @param privateKey the private key file
         * @return this builder
         */
        public Builder optTls(Path certChain, Path privateKey) {
            this.tlsCert = certChain;
            this.tlsKey = privateKey;
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
            if (idleTimeout.isNegative() || idleTimeout.isZero()
                    || requestTimeout.isNegative() || requestTimeout.isZero()) {
                throw new IllegalArgumentException(
                        "OpenAiServer: optIdleTimeout and optRequestTimeout: expected positive"
                                + " durations, got "
                                + idleTimeout
                                + " and "
                                + requestTimeout);
            }
            if (maxConnections < 1) {
                throw new IllegalArgumentException(
                        "OpenAiServer: optMaxConnections: expected >= 1, got " + maxConnections);
            }
            sslContext = null;
            if (tlsCert != null || tlsKey != null) {
                if (tlsCert == null || tlsKey == null) {
                    throw new IllegalArgumentException(
                            "OpenAiServer: optTls needs both the certificate chain and the key");
                }
                try {
                    sslContext = SslContextBuilder.forServer(tlsCert.toFile(), tlsKey.toFile()).build();
                } catch (SSLException | IllegalArgumentException e) {
                    throw new IllegalArgumentException(
                            "tls: cannot use the certificate "
                                    + tlsCert
                                    + " with the key "
                                    + tlsKey
                                    + " (PEM, key in unencrypted PKCS#8): "
                                    + e.getMessage(),
                            e);
                }
            }
            return new OpenAiServer(this);
        }
    }
}
