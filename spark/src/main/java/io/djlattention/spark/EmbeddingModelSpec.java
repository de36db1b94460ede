/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;
import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.TranslateException;

import io.djlattention.zoo.DelegatingTranslator;
import io.djlattention.zoo.encoder.SentenceEmbeddingTranslator;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

/**
 * Everything an executor needs to load an embedding model, resolved on the driver: the model (a
 * {@code djl://} URL or a checkpoint path), the device parameter, L2 normalisation and PyTorch's
 * intra-op threads per task.
 *
 * @param model a model URL ({@code djl://io.djlattention/all-MiniLM-L6-v2}) or a path
 * @param device auto, cpu, gpu or gpu:N ({@link TaskDevice})
 * @param normalize whether embeddings are L2-normalised
 * @param threads PyTorch's intra-op threads on the CPU (the task's cores)
 */
record EmbeddingModelSpec(String model, String device, boolean normalize, int threads)
        implements Serializable {

    /**
     * Returns this JVM's model for the task's device, loading it on first use.
     *
     * @return the shared model
     * @throws ModelLoadException if it cannot load (here or earlier in this JVM)
     */
    Loaded get() {
        return get(TaskDevice.resolve(device));
    }

    /**
     * Returns this JVM's model on a device, loading it on first use.
     *
     * @param on the device
     * @return the shared model
     * @throws ModelLoadException if it cannot load (here or earlier in this JVM)
     */
    Loaded get(Device on) {
        String key = "embedding " + model + " on " + on + " (normalize " + normalize + ")";
        return ExecutorModels.get(key, () -> load(on));
    }

    private Loaded load(Device on) throws Exception {
        Criteria.Builder<String, float[]> b =
                ExecutorModels.criteria(String.class, float[].class, model, on, threads)
                        .optArgument("normalize", String.valueOf(normalize));
        ZooModel<String, float[]> loaded = b.build().loadModel();
        try {
            return new Loaded(loaded);
        } catch (RuntimeException e) {
            loaded.close();
            throw e;
        }
    }

    /** An embedding model loaded in this JVM, shared by its tasks (each with its own predictor). */
    static final class Loaded implements AutoCloseable {

        private final ZooModel<String, float[]> model;
        private final HuggingFaceTokenizer tokenizer;
        private final int maxLength;

        Loaded(ZooModel<String, float[]> model) {
            this.model = model;
            ZooModel<String, float[]> real = model;
            if (model.getTranslator() instanceof DelegatingTranslator) {
                real = ((DelegatingTranslator<String, float[]>) model.getTranslator()).getDelegate();
            }
            if (!(real.getTranslator() instanceof SentenceEmbeddingTranslator)) {
                throw new IllegalArgumentException(
                        "model: expected a text-embedding model of the djl-attention zoo (String ->"
                                + " float[]), got "
                                + model.getName()
                                + " with translator "
                                + real.getTranslator().getClass().getSimpleName());
            }
            SentenceEmbeddingTranslator t = (SentenceEmbeddingTranslator) real.getTranslator();
            tokenizer = t.getTokenizer();
            maxLength = t.getMaxLength();
        }

        /**
         * Returns a predictor for one task (predictors are not thread-safe; the model is).
         *
         * @return a new predictor, closed by the caller
         */
        Predictor<String, float[]> newPredictor() {
            return model.newPredictor();
        }

        /**
         * Returns the most tokens a text may have (special tokens included).
         *
         * @return the model's context
         */
        int getMaxLength() {
            return maxLength;
        }

        /**
         * Embeds a batch of texts: null for a null, empty or blank text and for one longer than
         * the model's context (which the model would truncate), each counted in {@code bad}.
         *
         * @param predictor the task's predictor
         * @param texts the texts, any of them null
         * @param bad the counters
         * @return one embedding or null per text, in order
         * @throws TranslateException if the model fails
         */
        float[][] embed(Predictor<String, float[]> predictor, List<String> texts, BadRows bad)
                throws TranslateException {
            float[][] out = new float[texts.size()][];
            List<String> candidates = new ArrayList<>(texts.size());
            List<Integer> where = new ArrayList<>(texts.size());
            for (int i = 0; i < texts.size(); ++i) {
                String text = texts.get(i);
                if (text == null || text.isBlank()) {
                    bad.addMissing();
                } else {
                    candidates.add(text);
                    where.add(i);
                }
            }
            if (candidates.isEmpty()) {
                return out;
            }
            Encoding[] encodings = tokenizer.batchEncode(candidates);
            List<String> good = new ArrayList<>(candidates.size());
            int[] goodAt = new int[candidates.size()];
            for (int c = 0; c < candidates.size(); ++c) {
                if (encodings[c].getIds().length > maxLength) {
                    bad.addRejected();
                } else {
                    goodAt[good.size()] = where.get(c);
                    good.add(candidates.get(c));
                }
            }
            if (!good.isEmpty()) {
                List<float[]> embeddings = predictor.batchPredict(good);
                for (int g = 0; g < good.size(); ++g) {
                    out[goodAt[g]] = embeddings.get(g);
                }
            }
            return out;
        }

        @Override
        public void close() {
            model.close();
        }

        @Override
        public String toString() {
            return model.getName() + " (maxLength " + maxLength + ")";
        }
    }
}
