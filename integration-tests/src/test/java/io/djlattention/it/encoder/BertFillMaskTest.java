/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.inference.Predictor;
import ai.djl.modality.Classifications;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import io.djlattention.zoo.encoder.BertEncoder;
import io.djlattention.zoo.encoder.FillMaskTranslator;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A random {@code BertForMaskedLM} saved by transformers: fill-mask through {@code
 * EncoderModels.load} ({@code String → Classifications}) gives transformers' top-5 tokens (float64
 * reference, well separated logits) and probabilities, on both paths.
 */
class BertFillMaskTest {

    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void topFiveAreTransformers(String attention) throws Exception {
        JsonArray cases = BertReference.json().getAsJsonArray("fill_mask");
        List<String> texts = new ArrayList<>();
        for (JsonElement e : cases) {
            texts.add(e.getAsJsonObject().get("text").getAsString());
        }
        try (ZooModel<String, Classifications> model =
                        BertReference.load(
                                "bert-mlm",
                                String.class,
                                Classifications.class,
                                Map.of("attention", attention));
                Predictor<String, Classifications> predictor = model.newPredictor();
                NDManager manager = model.getNDManager().newSubManager()) {
            FillMaskTranslator translator = (FillMaskTranslator) model.getTranslator();
            assertEquals("[MASK]", translator.getMaskToken());
            List<Classifications> batch = predictor.batchPredict(texts);
            for (int i = 0; i < texts.size(); ++i) {
                JsonObject c = cases.get(i).getAsJsonObject();
                // The ids and the mask position the model saw are transformers'.
                NDList inputs = translator.encode(manager, List.of(texts.get(i)));
                assertEquals(
                        java.util.Arrays.toString(BertReference.longs(c.getAsJsonArray("ids"))),
                        java.util.Arrays.toString(inputs.get(0).toLongArray()));
                assertEquals(c.get("mask_index").getAsLong(), inputs.get(3).getLong(0, 0));
                List<String> tokens = new ArrayList<>();
                for (JsonElement t : c.getAsJsonArray("top5_tokens")) {
                    tokens.add(t.getAsString());
                }
                double[] probs = BertReference.doubles(c.get("top5_probs"));
                for (Classifications got :
                        new Classifications[] {batch.get(i), predictor.predict(texts.get(i))}) {
                    List<Classifications.Classification> top = got.topK(5);
                    assertEquals(5, top.size());
                    for (int k = 0; k < 5; ++k) {
                        assertEquals(tokens.get(k), top.get(k).getClassName(), "rank " + k);
                        assertEquals(probs[k], top.get(k).getProbability(), 1e-5, "rank " + k);
                    }
                }
            }
        }
    }

    /** The logits themselves: the fused and stock paths on a padded batch agree. */
    @org.junit.jupiter.api.Test
    void logitsAgreeAcrossPaths() throws Exception {
        List<String> texts = new ArrayList<>();
        for (JsonElement e : BertReference.json().getAsJsonArray("fill_mask")) {
            texts.add(e.getAsJsonObject().get("text").getAsString());
        }
        try (ZooModel<String, Classifications> model =
                        BertReference.load(
                                "bert-mlm", String.class, Classifications.class, Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            BertEncoder encoder = (BertEncoder) model.getBlock();
            NDList in = ((FillMaskTranslator) model.getTranslator()).encode(manager, texts);
            NDArray fused =
                    encoder.withAttention(BertEncoder.Attention.FUSED)
                            .maskedLmLogits(in.get(0), in.get(1), in.get(2), in.get(3));
            NDArray stock =
                    encoder.withAttention(BertEncoder.Attention.STOCK)
                            .maskedLmLogits(in.get(0), in.get(1), in.get(2), in.get(3));
            assertEquals(stock.getShape(), fused.getShape());
            float diff = fused.sub(stock).abs().max().getFloat();
            assertTrue(diff <= 1e-4, "max |fused - stock| " + diff);
        }
    }
}
