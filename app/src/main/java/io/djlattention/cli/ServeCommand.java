/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.serving.ApiKeys;
import io.djlattention.serving.EmbeddingService;
import io.djlattention.serving.OpenAiServer;
import io.djlattention.serving.ServedGenerator;
import io.djlattention.serving.ZooEmbeddingModel;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.encoder.EncoderModels;
import io.djlattention.zoo.encoder.MiniLm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code serve}: the OpenAI-compatible HTTP server (docs/serving.md) on a generation model
 * (default: the built-in stories260K) and an embedding model (default: the built-in
 * all-MiniLM-L6-v2), bound to loopback by default. It runs until SIGTERM or SIGINT, then shuts down
 * gracefully (in-flight requests finish within {@code --shutdown-grace}) and exits 0.
 */
@Command(
        name = "serve",
        mixinStandardHelpOptions = true,
        description = "Serve the models over HTTP (OpenAI-compatible; see docs/serving.md).")
public final class ServeCommand implements Callable<Integer> {

    /** The built-in generation model's name. */
    public static final String STORIES = "stories260K";

    /** The built-in embedding model's name. */
    public static final String MINILM = "all-MiniLM-L6-v2";

    @Option(
            names = "--model",
            defaultValue = STORIES,
            description =
                    "Generation model: "
                            + STORIES
                            + " (built in), a Hugging Face LLaMA/GPT-2 checkpoint directory, a"
                            + " llama2.c .bin file, or none (default: ${DEFAULT-VALUE}).")
    String model;

    @Option(
            names = "--embedding-model",
            defaultValue = MINILM,
            description =
                    "Embedding model: "
                            + MINILM
                            + " (built in), a Hugging Face BERT checkpoint directory, or none"
                            + " (default: ${DEFAULT-VALUE}).")
    String embeddingModel;

    @Option(
            names = "--host",
            defaultValue = "127.0.0.1",
            description = "Address to bind; 0.0.0.0 for every interface (default: ${DEFAULT-VALUE}).")
    String host;

    @Option(names = "--port", defaultValue = "8080", description = "Port; 0 picks a free one (default: ${DEFAULT-VALUE}).")
    int port;

    @Mixin RuntimeOptions runtime = new RuntimeOptions();

    @Option(
            names = "--max-queue",
            defaultValue = "256",
            description =
                    "Requests waiting per model before 429 + Retry-After (default: ${DEFAULT-VALUE}).")
    int maxQueue;

    @Option(
            names = "--max-batch",
            defaultValue = "32",
            description = "Sequences generated together at most (default: ${DEFAULT-VALUE}).")
    int maxBatch;

    @Option(
            names = "--kv-blocks",
            defaultValue = "0",
            description =
                    "KV cache blocks (16 tokens each); 0 = room for a full batch of full-length"
                            + " sequences, at most 512 MiB (default: ${DEFAULT-VALUE}).")
    int kvBlocks;

    @Option(
            names = "--kv-cache-dtype",
            defaultValue = "auto",
            description =
                    "What the KV cache stores: auto (the model's dtype), fp8 / fp8_e4m3 (e4m3, one"
                            + " byte per element) or fp8_e5m2 (e5m2; the model zoo's argument"
                            + " kvCacheDtype) (default: ${DEFAULT-VALUE}).")
    String kvCacheDtype;

    @Option(
            names = "--batch-invariant",
            description =
                    "Make every completion independent of the batch and of preemption (bit for bit"
                            + " equal to its solo run): one forward per sequence, no prefix sharing,"
                            + " preempted sequences replayed by decode steps. Costs the batching"
                            + " (docs/serving.md).")
    boolean batchInvariant;

    @Option(
            names = "--embedding-batch",
            defaultValue = "32",
            description = "Texts embedded together at most (default: ${DEFAULT-VALUE}).")
    int embeddingBatch;

    @Option(
            names = "--max-body-bytes",
            defaultValue = "4194304",
            description = "Largest request body; larger ones get 413 (default: ${DEFAULT-VALUE}).")
    int maxBodyBytes;

    @Option(
            names = "--default-max-tokens",
            defaultValue = "16",
            description = "max_tokens of a request that leaves it out (default: ${DEFAULT-VALUE}).")
    int defaultMaxTokens;

    @Option(
            names = "--shutdown-grace",
            defaultValue = "30",
            description =
                    "Seconds in-flight completions may run on at shutdown before they are"
                            + " cancelled (default: ${DEFAULT-VALUE}).")
    int shutdownGraceSeconds;

    @Option(
            names = "--io-threads",
            defaultValue = "0",
            description = "Netty I/O threads; 0 = the processors, at least 2 (default: ${DEFAULT-VALUE}).")
    int ioThreads;

    @Option(
            names = "--idle-timeout",
            defaultValue = "60",
            description =
                    "Seconds a connection may stay open with no request in progress before it is"
                            + " closed (default: ${DEFAULT-VALUE}).")
    int idleTimeoutSeconds;

    @Option(
            names = "--request-timeout",
            defaultValue = "30",
            description =
                    "Seconds a request may take to arrive (headers and body) before 408 and the"
                            + " connection closes (default: ${DEFAULT-VALUE}).")
    int requestTimeoutSeconds;

    @Option(
            names = "--max-connections",
            defaultValue = "1000",
            description =
                    "Open connections at most; more are closed at once. Keep it below ulimit -n"
                            + " (default: ${DEFAULT-VALUE}).")
    int maxConnections;

    /** The environment variable that may hold the API key. */
    public static final String API_KEY_ENV = "DJL_ATTN_API_KEY";

    @Option(
            names = "--api-key-file",
            description =
                    "Require Authorization: Bearer <key> on /v1/ with a key from this file (one per"
                            + " line). Without it, the environment variable "
                            + API_KEY_ENV
                            + " may hold one key. Keys are never taken on the command line.")
    Path apiKeyFile;

    @Option(names = "--tls-cert", description = "Serve HTTPS with this PEM certificate chain (with --tls-key).")
    Path tlsCert;

    @Option(names = "--tls-key", description = "The PEM private key (unencrypted PKCS#8) of --tls-cert.")
    Path tlsKey;

    /**
     * Serves until SIGTERM or SIGINT, then shuts down gracefully.
     *
     * @return 0 after a graceful shutdown
     * @throws Exception if a model cannot be loaded or the port cannot be bound
     */
    @Override
    public Integer call() throws Exception {
        OpenAiServer server = startServer();
        System.out.println(
                "serving on "
                        + (tlsCert != null ? "https" : "http")
                        + "://"
                        + host
                        + ":"
                        + server.getPort()
                        + (server.requiresApiKey() ? ", API key required" : "")
                        + " (see docs/serving.md)");
        try {
            awaitSignal(server);
            System.out.println("shutting down: finishing in-flight requests");
        } finally {
            server.close();
        }
        System.out.println("stopped");
        return 0;
    }

    /**
     * Loads the models and starts the server with this command's options (the benchmark's entry
     * point too). Closing the server closes the models.
     *
     * @return the started server
     * @throws Exception if a model cannot be loaded or the port cannot be bound
     */
    public OpenAiServer startServer() throws Exception {
        if (System.getProperty("ai.djl.offline") == null) {
            System.setProperty("ai.djl.offline", "true"); // everything is local
        }
        runtime.apply();
        Device dev = runtime.device();
        String dtype = runtime.dataType().name().toLowerCase(java.util.Locale.ROOT);
        OpenAiServer.Builder b =
                OpenAiServer.builder()
                        .optHost(host)
                        .optPort(port)
                        .optMaxBodyBytes(maxBodyBytes)
                        .optDefaultMaxTokens(defaultMaxTokens)
                        .optShutdownGrace(Duration.ofSeconds(shutdownGraceSeconds))
                        .optIdleTimeout(Duration.ofSeconds(idleTimeoutSeconds))
                        .optRequestTimeout(Duration.ofSeconds(requestTimeoutSeconds))
                        .optMaxConnections(maxConnections)
                        .optApiKeys(apiKeys());
        if (tlsCert != null || tlsKey != null) {
            if (tlsCert == null || tlsKey == null) {
                throw new IllegalArgumentException("--tls-cert and --tls-key go together");
            }
            b.optTls(tlsCert, tlsKey);
        }
        if (ioThreads > 0) {
            b.optIoThreads(ioThreads);
        }
        if (!"none".equals(model)) {
            Criteria.Builder<int[], int[]> cb =
                    Criteria.builder()
                            .setTypes(int[].class, int[].class)
                            .optEngine("PyTorch")
                            .optArgument("maxBatchSize", maxBatch)
                            .optArgument("dtype", dtype)
                            .optArgument("kvCacheDtype", kvCacheDtype);
            if (dev != null) {
                cb.optDevice(dev);
            }
            Path path = STORIES.equals(model) ? null : Paths.get(model);
            ZooModel<int[], int[]> decoder = DecoderModels.load(path, cb.build());
            b.optCloseOnShutdown(decoder);
            ServedGenerator generator =
                    ServedGenerator.fromZooModel(
                            path == null ? STORIES : path.getFileName().toString(),
                            decoder,
                            e -> {
                                e.optMaxBatchSize(maxBatch)
                                        .optMaxQueue(maxQueue)
                                        .optBatchInvariant(batchInvariant)
                                        .optShutdownGrace(Duration.ofSeconds(shutdownGraceSeconds));
                                if (kvBlocks > 0) {
                                    e.optNumBlocks(kvBlocks);
                                }
                            });
            if (generator.tokenizer() != null) {
                b.optCloseOnShutdown(generator.tokenizer());
            }
            b.optGenerator(generator);
        }
        if (!"none".equals(embeddingModel)) {
            b.optEmbeddings(embeddingName(), embeddingService(dev));
        }
        return b.build().start();
    }

    private ApiKeys apiKeys() throws IOException {
        if (apiKeyFile != null) {
            return ApiKeys.fromFile(apiKeyFile);
        }
        String key = System.getenv(API_KEY_ENV);
        if (key != null && !key.isBlank()) {
            return ApiKeys.of(java.util.List.of(key.strip()));
        }
        return ApiKeys.none();
    }

    private String embeddingName() {
        return MINILM.equals(embeddingModel)
                ? MINILM
                : Paths.get(embeddingModel).getFileName().toString();
    }

    private EmbeddingService embeddingService(Device dev)
            throws IOException, ModelNotFoundException, MalformedModelException {
        Criteria.Builder<String, float[]> cb =
                Criteria.builder().setTypes(String.class, float[].class).optEngine("PyTorch");
        if (dev != null) {
            cb.optDevice(dev);
        }
        boolean builtIn = MINILM.equals(embeddingModel);
        Path dir = builtIn ? null : Paths.get(embeddingModel);
        ZooModel<String, float[]> encoder = EncoderModels.load(dir, cb.build());
        Path tokenizerFile = builtIn ? MiniLm.tokenizerFile() : dir.resolve("tokenizer.json");
        return EmbeddingService.builder()
                .setModel(
                        new ZooEmbeddingModel(
                                encoder, Files.isRegularFile(tokenizerFile) ? tokenizerFile : null, true))
                .optMaxBatchInputs(embeddingBatch)
                .optMaxQueue(maxQueue)
                .build();
    }

    /**
     * Blocks until SIGTERM or SIGINT. The signals are handled here rather than by a shutdown hook,
     * so the graceful shutdown runs before the JVM begins to exit and the process exits 0.
     */
    private static void awaitSignal(OpenAiServer server) throws InterruptedException {
        CountDownLatch signalled = new CountDownLatch(1);
        try {
            for (String name : new String[] {"TERM", "INT"}) {
                sun.misc.Signal.handle(new sun.misc.Signal(name), s -> signalled.countDown());
            }
        } catch (IllegalArgumentException | LinkageError e) {
            // No signal API: a shutdown hook still shuts down gracefully (exit code 143 then).
            Runtime.getRuntime().addShutdownHook(new Thread(server::close));
        }
        signalled.await();
    }
}
