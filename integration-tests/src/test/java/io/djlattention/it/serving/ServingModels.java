/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;

import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Llama2cLoader;
import io.djlattention.zoo.generate.GenerationEngine;
import io.djlattention.zoo.serving.EmbeddingModel;
import io.djlattention.zoo.serving.EmbeddingService;
import io.djlattention.zoo.serving.OpenAiServer;
import io.djlattention.zoo.serving.ServedGenerator;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The models the serving tests serve, loaded once per JVM: stories260K (the model zoo's built-in
 * decoder) and the embedding model; and a helper that starts a loopback server on them.
 */
final class ServingModels {

    static final String GENERATOR = "stories260K";
    static final String EMBEDDER = "all-MiniLM-L6-v2";

    private static NDManager manager;
    private static Decoder decoder;
    private static EmbeddingModel embedder;

    private ServingModels() {}

    static synchronized Decoder stories() throws IOException {
        if (decoder == null) {
            manager = NDManager.newBaseManager();
            decoder = Llama2cLoader.load(storiesFile(), manager, DataType.FLOAT32);
        }
        return decoder;
    }

    private static Path storiesFile() throws IOException {
        String resource = "/io/djlattention/zoo/models/stories260K/stories260K.bin";
        try (InputStream in = ServingModels.class.getResourceAsStream(resource)) {
            if (in != null) {
                Path tmp = Files.createTempFile("stories260K", ".bin");
                tmp.toFile().deleteOnExit();
                Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
                return tmp;
            }
        }
        return Paths.get(System.getProperty("djl.attn.shared", "../shared"))
                .resolve("models/stories260K/stories260K.bin");
    }

    /** The embedding model, shared: the servers get a view that does not close it. */
    static synchronized EmbeddingModel embedder() {
        if (embedder == null) {
            embedder = new StubEmbedder();
        }
        EmbeddingModel shared = embedder;
        return new EmbeddingModel() {
            @Override
            public List<float[]> embed(List<String> texts) throws Exception {
                return shared.embed(texts);
            }

            @Override
            public int countTokens(String text) {
                return shared.countTokens(text);
            }

            @Override
            public void close() {}
        };
    }

    /**
     * Starts a loopback server on a free port with both models.
     *
     * @param engine changes to the engine's defaults (cache size, hooks)
     * @param server changes to the server's defaults
     */
    static OpenAiServer start(
            Consumer<GenerationEngine.Builder> engine, Consumer<OpenAiServer.Builder> server)
            throws IOException, InterruptedException {
        GenerationEngine.Builder eb =
                GenerationEngine.builder()
                        .setDecoder(stories())
                        .optNumBlocks(256)
                        .optMaxBatchSize(32)
                        .optShutdownGrace(Duration.ofSeconds(10));
        engine.accept(eb);
        GenerationEngine e = eb.build();
        OpenAiServer.Builder sb =
                OpenAiServer.builder()
                        .optPort(0)
                        .optIoThreads(2)
                        .optGenerator(new ServedGenerator(GENERATOR, e, null, -1))
                        .optEmbeddings(
                                EMBEDDER, EmbeddingService.builder().setModel(embedder()).build());
        server.accept(sb);
        return sb.build().start();
    }

    /** A placeholder until the zoo's MiniLM is in: a fixed function of the text. */
    private static final class StubEmbedder implements EmbeddingModel {
        @Override
        public List<float[]> embed(List<String> texts) {
            List<float[]> out = new ArrayList<>();
            for (String t : texts) {
                java.util.Random r = new java.util.Random(t.hashCode());
                float[] v = new float[384];
                double n = 0;
                for (int i = 0; i < v.length; ++i) {
                    v[i] = (float) r.nextGaussian();
                    n += v[i] * v[i];
                }
                for (int i = 0; i < v.length; ++i) {
                    v[i] /= (float) Math.sqrt(n);
                }
                out.add(v);
            }
            return out;
        }

        @Override
        public int countTokens(String text) {
            return text.split("\\s+").length;
        }

        @Override
        public void close() {}
    }
}
