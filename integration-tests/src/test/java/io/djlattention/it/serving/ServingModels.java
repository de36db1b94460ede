/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.DecoderModels;
import io.djlattention.zoo.decoder.GenerationBlock;
import io.djlattention.zoo.generate.GenerationEngine;
import io.djlattention.zoo.serving.EmbeddingModel;
import io.djlattention.zoo.serving.EmbeddingService;
import io.djlattention.zoo.serving.OpenAiServer;
import io.djlattention.zoo.serving.ServedGenerator;

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

    private static ZooModel<int[], int[]> storiesModel;
    private static Decoder decoder;
    private static EmbeddingModel embedder;

    private ServingModels() {}

    /** The model zoo's built-in stories260K (its decoder; the model stays open for the JVM). */
    static synchronized Decoder stories() throws Exception {
        if (decoder == null) {
            storiesModel =
                    DecoderModels.load(
                            null,
                            Criteria.builder()
                                    .setTypes(int[].class, int[].class)
                                    .optEngine("PyTorch")
                                    .build());
            decoder = ((GenerationBlock) storiesModel.getBlock()).getDecoder();
        }
        return decoder;
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
            throws Exception {
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
