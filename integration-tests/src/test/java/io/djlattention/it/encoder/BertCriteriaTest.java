/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.inference.Predictor;
import ai.djl.modality.Classifications;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

import org.junit.jupiter.api.Test;

import java.util.List;

/**
 * The fixture's checkpoints through DJL's front door ({@code Criteria.optModelPath(dir)
 * .loadModel()}), as a user loads them: sentence embeddings and fill-mask equal transformers'.
 */
class BertCriteriaTest {

    @Test
    void embeddingsThroughCriteria() throws Exception {
        List<String> sentences = BertReference.sentences();
        JsonArray mean = BertReference.json().getAsJsonArray("embeddings_mean");
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelPath(BertReference.checkpoint("bert"))
                        .optEngine("PyTorch")
                        .build();
        try (ZooModel<String, float[]> model = criteria.loadModel();
                Predictor<String, float[]> predictor = model.newPredictor()) {
            List<float[]> out = predictor.batchPredict(sentences);
            for (int i = 0; i < sentences.size(); ++i) {
                double cos = BertReference.cosine(BertReference.doubles(mean.get(i)), out.get(i));
                assertTrue(cos >= 0.99999, "sentence " + i + ": cosine " + cos);
            }
        }
    }

    @Test
    void fillMaskThroughCriteria() throws Exception {
        JsonObject c = BertReference.json().getAsJsonArray("fill_mask").get(0).getAsJsonObject();
        Criteria<String, Classifications> criteria =
                Criteria.builder()
                        .setTypes(String.class, Classifications.class)
                        .optModelPath(BertReference.checkpoint("bert-mlm"))
                        .optEngine("PyTorch")
                        .optArgument("topK", 3)
                        .build();
        try (ZooModel<String, Classifications> model = criteria.loadModel();
                Predictor<String, Classifications> predictor = model.newPredictor()) {
            Classifications got = predictor.predict(c.get("text").getAsString());
            assertEquals(3, got.getClassNames().size());
            for (int k = 0; k < 3; ++k) {
                assertEquals(
                        c.getAsJsonArray("top5_tokens").get(k).getAsString(),
                        got.getClassNames().get(k));
            }
        }
    }
}
