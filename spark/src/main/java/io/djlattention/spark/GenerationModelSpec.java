/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.generate.GenerationBlock;
import io.djlattention.zoo.generate.GenerationEngine;

import java.io.Serializable;
import java.nio.file.Paths;
import java.time.Duration;

/**
 * Everything an executor needs to load a decoder and start its continuous-batching engine,
 * resolved on the driver.
 *
 * @param model a model URL ({@code djl://io.djlattention/stories260K}) or a checkpoint path
 * @param device auto, cpu, gpu or gpu:N ({@link TaskDevice})
 * @param tokenizer a {@code tokenizer.json} for string prompts, or null for the model's own
 * @param maxBatchSize the most sequences the engine decodes together (all tasks of the JVM share
 *     it)
 * @param threads PyTorch's intra-op threads on the CPU
 */
record GenerationModelSpec(
        String model, String device, String tokenizer, int maxBatchSize, int threads)
        implements Serializable {

    /**
     * Returns this JVM's engine for the task's device, loading it on first use.
     *
     * @return the shared engine
     * @throws ModelLoadException if it cannot load (here or earlier in this JVM)
     */
    Loaded get() {
        return get(TaskDevice.resolve(device));
    }

    /**
     * Returns this JVM's engine on a device, loading it on first use.
     *
     * @param on the device
     * @return the shared engine
     * @throws ModelLoadException if it cannot load (here or earlier in this JVM)
     */
    Loaded get(Device on) {
        String key =
                "decoder " + model + " on " + on + " (tokenizer " + tokenizer + ", max batch "
                        + maxBatchSize + ")";
        return ExecutorModels.get(key, () -> load(on));
    }

    private Loaded load(Device on) throws Exception {
        Criteria.Builder<int[], int[]> b =
                ExecutorModels.criteria(int[].class, int[].class, model, on, threads)
                        .optArgument("maxBatchSize", maxBatchSize);
        if (tokenizer != null) {
            b.optArgument("tokenizer", tokenizer);
        }
        ZooModel<int[], int[]> loaded = b.build().loadModel();
        try {
            return new Loaded(loaded, maxBatchSize);
        } catch (Exception e) {
            loaded.close();
            throw e;
        }
    }

    /**
     * A decoder and its engine, loaded in this JVM and shared by its tasks: their requests are
     * batched together by the engine's scheduler.
     */
    static final class Loaded implements AutoCloseable {

        private final ZooModel<int[], int[]> model;
        private final GenerationEngine engine;
        private final HuggingFaceTokenizer tokenizer;
        private final long eosTokenId;

        Loaded(ZooModel<int[], int[]> model, int maxBatchSize) throws java.io.IOException {
            this.model = model;
            GenerationBlock block = DecoderModels.generationBlock(model);
            eosTokenId = block.getEosTokenId();
            engine = newEngine(block, model.getNDManager().getDevice(), maxBatchSize);
            String file = DecoderModels.unwrap(model).getProperty("tokenizer");
            try {
                tokenizer = file == null ? null : HuggingFaceTokenizer.newInstance(Paths.get(file));
            } catch (RuntimeException | java.io.IOException e) {
                engine.close();
                throw e;
            }
        }

        /**
         * Starts an engine on a model-zoo decoder with the block's own settings, as the OpenAI
         * server does: what the Spark jobs run and what their tests compare against.
         *
         * @param block the decoder's block
         * @param device the device of its weights
         * @param maxBatchSize the most sequences decoded together
         * @return a running engine, closed by the caller
         */
        static GenerationEngine newEngine(GenerationBlock block, Device device, int maxBatchSize) {
            GenerationEngine.Builder b =
                    GenerationEngine.builder()
                            .setDecoder(block.getDecoder())
                            .optDevice(device)
                            .optBlockSize(block.getBlockSize())
                            .optPrefillAttention(block.getPrefillAttention())
                            .optPrefixSharing(block.isPrefixSharing())
                            .optKvCacheDtype(block.getKvCacheDtype())
                            .optKvCacheScales(block.getKvCacheScales())
                            .optMaxBatchSize(maxBatchSize)
                            .optShutdownGrace(Duration.ofSeconds(5))
                            .optThreadName("djl-attention-spark-generation");
            if (block.getNumBlocks() > 0) {
                b.optNumBlocks(block.getNumBlocks());
            }
            return b.build();
        }

        GenerationEngine engine() {
            return engine;
        }

        /** The tokenizer for string prompts, or null when the model has none. */
        HuggingFaceTokenizer tokenizer() {
            return tokenizer;
        }

        long eosTokenId() {
            return eosTokenId;
        }

        String name() {
            return model.getName();
        }

        @Override
        public void close() {
            engine.close();
            if (tokenizer != null) {
                tokenizer.close();
            }
            model.close();
        }
    }
}
