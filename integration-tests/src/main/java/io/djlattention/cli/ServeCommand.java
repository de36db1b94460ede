/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import ai.djl.Device;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Llama2cLoader;
import io.djlattention.zoo.encoder.EncoderModels;
import io.djlattention.zoo.encoder.MiniLm;
import io.djlattention.zoo.generate.GenerationEngine;
import io.djlattention.zoo.serving.EmbeddingService;
import io.djlattention.zoo.serving.OpenAiServer;
import io.djlattention.zoo.serving.ServedGenerator;
import io.djlattention.zoo.serving.ZooEmbeddingModel;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code serve}: the OpenAI-compatible HTTP server (docs/serving.md) on a generation model
 * (default stories260K) and an embedding model (default all-MiniLM-L6-v2), bound to loopback by
 * default. It runs until SIGTERM or SIGINT, then shuts down gracefully and exits 0.
 */
@Command(
        name = "serve",
        mixinStandardHelpOptions = true,
        description = "Serve the models over HTTP (OpenAI-compatible; see docs/serving.md).")
public final class ServeCommand implements Callable<Integer> {

    @Option(
            names = "--model",
            defaultValue = "stories260K",
            description =
                    "Generation model: stories260K (built in), a llama2.c .bin file, a Hugging Face"
                            + " checkpoint directory, or 'none' (default: ${DEFAULT-VALUE}).")
    String model;

    @Option(
            names = "--embedding-model",
            defaultValue = "all-MiniLM-L6-v2",
            description =
                    "Embedding model: all-MiniLM-L6-v2 (built in), a Hugging Face BERT checkpoint"
                            + " directory, or 'none' (default: ${DEFAULT-VALUE}).")
    String embeddingModel;

    @Option(
            names = "--host",
            defaultValue = "127.0.0.1",
            description = "Address to bind; 0.0.0.0 for all interfaces (default: ${DEFAULT-VALUE}).")
    String host;

    @Option(names = "--port", defaultValue = "8080", description = "Port (default: ${DEFAULT-VALUE}).")
    int port;

    @Option(
            names = "--device",
            description = "Device: cpu, gpu or gpu0, gpu1, ... (default: the GPU if DJL sees one).")
    String device;

    @Option(
            names = "--max-queue",
            defaultValue = "256",
            description =
                    "Requests queued per model before 429 + Retry-After (default: ${DEFAULT-VALUE}).")
    int maxQueue;

    @Option(
            names = "--max-batch",
            defaultValue = "32",
            description = "Sequences generated together (default: ${DEFAULT-VALUE}).")
    int maxBatch;

    @Option(
            names = "--kv-blocks",
            defaultValue = "0",
            description =
                    "KV cache blocks of 16 tokens; 0 = a full batch of full-length sequences, at"
                            + " most 512 MiB (default: ${DEFAULT-VALUE}).")
    int kvBlocks;

    @Option(
            names = "--embedding-batch",
            defaultValue = "32",
            description = "Texts embedded together at most (default: ${DEFAULT-VALUE}).")
    int embeddingBatch;

    @Option(
            names = "--max-body-bytes",
            defaultValue = "4194304",
            description = "Largest request body; larger gets 413 (default: ${DEFAULT-VALUE}).")
    int maxBodyBytes;

    @Option(
            names = "--default-max-tokens",
            defaultValue = "16",
            description = "max_tokens when a request leaves it out (default: ${DEFAULT-VALUE}).")
    int defaultMaxTokens;

    @Option(
            names = "--shutdown-grace",
            defaultValue = "30",
            description =
                    "Seconds in-flight completions may finish at shutdown before they are"
                            + " cancelled (default: ${DEFAULT-VALUE}).")
    int shutdownGraceSeconds;

    @Option(
            names = "--io-threads",
            defaultValue = "0",
            description = "Netty I/O threads; 0 = the processors, at least 2.")
    int ioThreads;

    @Override
    public Integer call() throws Exception {
        System.setProperty("ai.djl.offline", System.getProperty("ai.djl.offline", "true"));
        Device dev = device == null ? null : Device.fromName(device);
        NDManager manager = dev == null ? NDManager.newBaseManager() : NDManager.newBaseManager(dev);
        OpenAiServer server = null;
        ZooModel<String, float[]> encoder = null;
        try {
            OpenAiServer.Builder b =
                    OpenAiServer.builder()
                            .optHost(host)
                            .optPort(port)
                            .optMaxBodyBytes(maxBodyBytes)
                            .optDefaultMaxTokens(defaultMaxTokens)
                            .optShutdownGrace(Duration.ofSeconds(shutdownGraceSeconds));
            if (ioThreads > 0) {
                b.optIoThreads(ioThreads);
            }
            if (!"none".equals(model)) {
                b.optGenerator(loadGenerator(manager));
            }
            if (!"none".equals(embeddingModel)) {
                Criteria.Builder<String, float[]> cb =
                        Criteria.builder().setTypes(String.class, float[].class).optEngine("PyTorch");
                if (dev != null) {
                    cb.optDevice(dev);
                }
                boolean builtIn = "all-MiniLM-L6-v2".equals(embeddingModel);
                Path dir = builtIn ? null : Paths.get(embeddingModel);
                encoder = EncoderModels.load(dir, cb.build());
                Path tokenizerFile = builtIn ? MiniLm.tokenizerFile() : dir.resolve("tokenizer.json");
                HuggingFaceTokenizer tokenizer =
                        Files.isRegularFile(tokenizerFile)
                                ? HuggingFaceTokenizer.newInstance(tokenizerFile)
                                : null;
                String name = builtIn ? embeddingModel : dir.getFileName().toString();
                b.optEmbeddings(
                        name,
                        EmbeddingService.builder()
                                .setModel(new ZooEmbeddingModel(encoder, tokenizer, false))
                                .optMaxBatchInputs(embeddingBatch)
                                .optMaxQueue(maxQueue)
                                .build());
            }
            server = b.build().start();
            System.out.println(
                    "serving on http://" + host + ":" + server.getPort() + " (docs/serving.md)");
            awaitSignal(server);
            return 0;
        } finally {
            if (server != null) {
                server.close();
            }
            if (encoder != null) {
                encoder.close();
            }
            manager.close();
        }
    }

    private ServedGenerator loadGenerator(NDManager manager) throws IOException {
        Path file;
        if ("stories260K".equals(model)) {
            file = builtInStories();
        } else {
            file = Paths.get(model);
        }
        Decoder decoder = Llama2cLoader.load(file, manager, DataType.FLOAT32);
        GenerationEngine.Builder eb =
                GenerationEngine.builder()
                        .setDecoder(decoder)
                        .optMaxBatchSize(maxBatch)
                        .optMaxQueue(maxQueue)
                        .optShutdownGrace(Duration.ofSeconds(shutdownGraceSeconds));
        if (kvBlocks > 0) {
            eb.optNumBlocks(kvBlocks);
        }
        String name = "stories260K".equals(model) ? model : file.getFileName().toString();
        return new ServedGenerator(name, eb.build(), null, -1);
    }

    private static Path builtInStories() throws IOException {
        String resource = "/io/djlattention/zoo/models/stories260K/stories260K.bin";
        try (InputStream in = ServeCommand.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException("the built-in stories260K is missing: " + resource);
            }
            Path tmp = Files.createTempFile("stories260K", ".bin");
            tmp.toFile().deleteOnExit();
            Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
            return tmp;
        }
    }

    /**
     * Blocks until SIGTERM or SIGINT. The signals are handled here rather than by a shutdown hook
     * so that the graceful shutdown runs before the JVM starts exiting and the process exits 0.
     */
    @SuppressWarnings("removal")
    private static void awaitSignal(OpenAiServer server) throws InterruptedException {
        CountDownLatch signalled = new CountDownLatch(1);
        try {
            for (String name : new String[] {"TERM", "INT"}) {
                sun.misc.Signal.handle(new sun.misc.Signal(name), s -> signalled.countDown());
            }
        } catch (IllegalArgumentException | LinkageError e) {
            Runtime.getRuntime().addShutdownHook(new Thread(server::close));
        }
        signalled.await();
        System.out.println("shutting down: finishing in-flight requests");
    }
}
