/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.training.ParameterStore;

import io.djlattention.it.TestDevice;
import io.djlattention.serving.EmbeddingModel;
import io.djlattention.serving.EmbeddingService;
import io.djlattention.serving.OpenAiServer;
import io.djlattention.serving.ServedGenerator;
import io.djlattention.serving.ZooEmbeddingModel;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.encoder.EncoderModels;
import io.djlattention.zoo.encoder.MiniLm;
import io.djlattention.zoo.generate.GenerationBlock;
import io.djlattention.zoo.generate.GenerationEngine;

import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;

/**
 * The models the serving tests serve, loaded once per JVM on the tests' device ({@link
 * TestDevice}): stories260K (the model zoo's built-in decoder) and the embedding model; a helper
 * that starts a loopback server on them; and stories260K's reference logits.
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
                                    .optDevice(TestDevice.get())
                                    .build());
            decoder = ((GenerationBlock) storiesModel.getBlock()).getDecoder();
        }
        return decoder;
    }

    /**
     * The model zoo's built-in all-MiniLM-L6-v2, loaded once; each server gets a view that does
     * not close it (and one server at a time calls it: the predictor is not thread-safe).
     */
    static synchronized EmbeddingModel embedder() throws Exception {
        if (embedder == null) {
            ZooModel<String, float[]> model =
                    EncoderModels.load(
                            null,
                            Criteria.builder()
                                    .setTypes(String.class, float[].class)
                                    .optEngine("PyTorch")
                                    .optDevice(TestDevice.get())
                                    .build());
            embedder =
                    new ZooEmbeddingModel(model, MiniLm.tokenizerFile(), true);
        }
        EmbeddingModel shared = embedder;
        return new EmbeddingModel() {
            @Override
            public List<float[]> embed(List<String> texts) throws Exception {
                synchronized (shared) {
                    return shared.embed(texts);
                }
            }

            @Override
            public int countTokens(String text) {
                return shared.countTokens(text);
            }

            @Override
            public void releaseMemory() {
                shared.releaseMemory();
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
                        // No EOS (stories260K's is 1): every request generates exactly
                        // max_tokens, which the tests count on.
                        .optGenerator(new ServedGenerator(GENERATOR, e, null, -1))
                        .optEmbeddings(
                                EMBEDDER, EmbeddingService.builder().setModel(embedder()).build());
        server.accept(sb);
        return sb.build().start();
    }

    /**
     * stories260K's logits after a sequence, computed alone on the stock contiguous path (not the
     * paged path the engine runs): the reference the tests explain a batched run's choice with.
     */
    static float[] referenceLogits(int[] ids) throws Exception {
        Decoder decoder = stories();
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            long[] tokens = new long[ids.length];
            long[] positions = new long[ids.length];
            long[] mask = new long[ids.length];
            for (int i = 0; i < ids.length; ++i) {
                tokens[i] = ids[i];
                positions[i] = i;
                mask[i] = 1;
            }
            Shape shape = new Shape(1, ids.length);
            NDList out =
                    decoder.forward(
                            new ParameterStore(manager, false),
                            new NDList(
                                    manager.create(tokens, shape),
                                    manager.create(positions, shape),
                                    manager.create(mask, shape)),
                            false);
            NDArray logits = out.get(0);
            return logits.get(0, ids.length - 1).toType(DataType.FLOAT32, false).toFloatArray();
        }
    }
}
