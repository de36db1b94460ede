/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import ai.djl.Model;
import ai.djl.metric.Metrics;
import ai.djl.modality.nlp.generate.CausalLMOutput;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.translate.TranslatorContext;
import io.djlattention.zoo.decoder.CausalLmTranslator;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@link CausalLmTranslator} passes the attention mask on only when it hides a key, deciding on
 * the prompt's call and carrying the answer with the generation (the name of the first present
 * key array) instead of reading the mask back at every step.
 */
class CausalLmTranslatorTest {

    private static final int LAYERS = 2;

    @Test
    void unpaddedPromptDropsTheMaskForTheWholeGeneration() {
        try (NDManager m = NDManager.newBaseManager()) {
            CausalLmTranslator translator = new CausalLmTranslator();
            // The prompt's call: a mask of ones is read once and dropped.
            Context prompt = new Context();
            NDList in = translator.processInput(prompt, inputs(m, new long[] {1, 1, 1}, null));
            assertEquals(2, in.size(), "mask dropped");
            CausalLMOutput out = translator.processOutput(prompt, outputs(m));
            NDArray firstPast = out.getPastKeyValuesList().get(0);
            assertEquals(CausalLmTranslator.UNPADDED, firstPast.getName());
            // The next step: the carried name decides; the mask is not read (it holds a zero here
            // on purpose, and is still dropped).
            Context step = new Context();
            NDList next =
                    translator.processInput(
                            step, inputs(m, new long[] {0, 1, 1, 1}, out.getPastKeyValuesList()));
            assertEquals(2 + 2 * LAYERS, next.size(), "mask dropped on the carried answer");
            assertSame(firstPast, next.get(2), "past arrays passed on in order");
        }
    }

    @Test
    void paddedPromptKeepsTheMask() {
        try (NDManager m = NDManager.newBaseManager()) {
            CausalLmTranslator translator = new CausalLmTranslator();
            Context prompt = new Context();
            NDList in = translator.processInput(prompt, inputs(m, new long[] {0, 1, 1}, null));
            assertEquals(3, in.size(), "mask kept");
            CausalLMOutput out = translator.processOutput(prompt, outputs(m));
            assertEquals(
                    CausalLmTranslator.PADDED, out.getPastKeyValuesList().get(0).getName());
            Context step = new Context();
            NDList next =
                    translator.processInput(
                            step, inputs(m, new long[] {0, 1, 1, 1}, out.getPastKeyValuesList()));
            assertEquals(3 + 2 * LAYERS, next.size(), "mask kept on the carried answer");
        }
    }

    @Test
    void pastOfUnknownOriginHasItsMaskRead() {
        try (NDManager m = NDManager.newBaseManager()) {
            CausalLmTranslator translator = new CausalLmTranslator();
            NDList past = outputs(m).subNDList(1); // no name: not made by this translator
            NDList padded =
                    translator.processInput(new Context(), inputs(m, new long[] {0, 1, 1}, past));
            assertEquals(3 + 2 * LAYERS, padded.size());
            NDList unpadded =
                    translator.processInput(new Context(), inputs(m, new long[] {1, 1, 1}, past));
            assertEquals(2 + 2 * LAYERS, unpadded.size());
        }
    }

    /** {@code [ids, positions, mask, past...]} for one row of mask {@code mask}. */
    private static NDList inputs(NDManager m, long[] mask, NDList past) {
        NDList in =
                new NDList(
                        m.create(new long[] {5}, new Shape(1, 1)),
                        m.create(new long[] {mask.length - 1}, new Shape(1, 1)),
                        m.create(mask, new Shape(1, mask.length)));
        if (past != null) {
            in.addAll(past);
        }
        return in;
    }

    /** {@code [logits, k_0, v_0, k_1, v_1]}. */
    private static NDList outputs(NDManager m) {
        NDList out = new NDList(m.zeros(new Shape(1, 1, 4), DataType.FLOAT32));
        for (int i = 0; i < 2 * LAYERS; ++i) {
            out.add(m.zeros(new Shape(1, 1, 3, 2), DataType.FLOAT32));
        }
        return out;
    }

    /** The attachments of one call; nothing else is used by the translator. */
    private static final class Context implements TranslatorContext {

        private final Map<String, Object> attachments = new HashMap<>();

        @Override
        public Model getModel() {
            return null;
        }

        @Override
        public NDManager getNDManager() {
            return null;
        }

        @Override
        public NDManager getPredictorManager() {
            return null;
        }

        @Override
        public Block getBlock() {
            return null;
        }

        @Override
        public Metrics getMetrics() {
            return null;
        }

        @Override
        public Object getAttachment(String key) {
            return attachments.get(key);
        }

        @Override
        public void setAttachment(String key, Object value) {
            attachments.put(key, value);
        }

        @Override
        public void close() {}
    }
}
