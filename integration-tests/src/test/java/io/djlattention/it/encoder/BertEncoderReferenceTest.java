/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static io.djlattention.it.encoder.BertReference.assertClose;
import static io.djlattention.it.encoder.BertReference.cosine;
import static io.djlattention.it.encoder.BertReference.doubles;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.repository.zoo.ZooModel;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

import io.djlattention.zoo.encoder.BertEncoder;
import io.djlattention.zoo.encoder.SentenceEmbeddingTranslator;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;
import java.util.Map;

/**
 * A random {@code BertModel} (hidden 60, 5 heads of dim 12, 3 layers, 64 positions) saved by
 * transformers, loaded through {@code EncoderModels.load}, against transformers' own float64
 * outputs ({@code make_bert.py}), on the fused and the stock path.
 */
class BertEncoderReferenceTest {

    private static final double HIDDEN_TOLERANCE = 1e-4;
    private static final double COSINE = 0.99999;

    private static ZooModel<String, float[]> load(String attention, Map<String, String> extra)
            throws Exception {
        Map<String, String> args = new java.util.HashMap<>(extra);
        args.put("attention", attention);
        return BertReference.load("bert", String.class, float[].class, args);
    }

    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void tokenIdsAreTransformers(String attention) throws Exception {
        List<String> sentences = BertReference.sentences();
        try (ZooModel<String, float[]> model = load(attention, Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            SentenceEmbeddingTranslator translator =
                    (SentenceEmbeddingTranslator) model.getTranslator();
            for (int i = 0; i < sentences.size(); ++i) {
                NDList batch = translator.encode(manager, List.of(sentences.get(i)));
                assertArrayEquals(
                        BertReference.ids(i),
                        batch.get(0).toLongArray(),
                        "ids of sentence " + i + " " + sentences.get(i));
            }
            // The long sentence is cut to the 64 positions as transformers' truncation cuts it.
            assertEquals(64, BertReference.ids(sentences.size() - 1).length);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void lastHiddenStatePerSentence(String attention) throws Exception {
        JsonObject ref = BertReference.json();
        JsonArray states = ref.getAsJsonArray("last_hidden_state");
        try (ZooModel<String, float[]> model = load(attention, Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            BertEncoder encoder = (BertEncoder) model.getBlock();
            for (int i = 0; i < states.size(); ++i) {
                long[] ids = BertReference.ids(i);
                NDArray idArray = manager.create(ids).reshape(1, ids.length);
                NDArray hidden =
                        encoder.lastHiddenState(
                                idArray,
                                manager.zeros(idArray.getShape(), idArray.getDataType()),
                                manager.ones(idArray.getShape(), idArray.getDataType()));
                assertClose(
                        doubles(states.get(i)),
                        hidden.toFloatArray(),
                        HIDDEN_TOLERANCE,
                        attention + " sentence " + i);
            }
        }
    }

    /** All sentences in one right-padded batch: lengths 2 to 64. */
    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void paddedBatchOfSentences(String attention) throws Exception {
        List<String> sentences = BertReference.sentences();
        JsonArray states = BertReference.json().getAsJsonArray("last_hidden_state");
        try (ZooModel<String, float[]> model = load(attention, Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            BertEncoder encoder = (BertEncoder) model.getBlock();
            SentenceEmbeddingTranslator translator =
                    (SentenceEmbeddingTranslator) model.getTranslator();
            NDList batch = translator.encode(manager, sentences);
            NDArray hidden = encoder.lastHiddenState(batch.get(0), batch.get(1), batch.get(2));
            long seq = batch.get(0).getShape().get(1);
            assertEquals(64, seq);
            for (int i = 0; i < sentences.size(); ++i) {
                int len = BertReference.ids(i).length;
                assertClose(
                        doubles(states.get(i)),
                        hidden.get(new NDIndex(i + ", 0:" + len)).toFloatArray(),
                        HIDDEN_TOLERANCE,
                        attention + " batch row " + i);
                if ("fused".equals(attention) && len < seq) {
                    float[] padding = hidden.get(new NDIndex(i + ", " + len + ":")).toFloatArray();
                    assertArrayEquals(new float[padding.length], padding, 0f, "padding row " + i);
                }
            }
        }
    }

    /** Random ids with token types 0 and 1, lengths 1, 64, 7, 33, 2. */
    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void randomIdsWithTokenTypes(String attention) throws Exception {
        JsonObject raw = BertReference.json().getAsJsonObject("raw");
        try (ZooModel<String, float[]> model = load(attention, Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            BertEncoder encoder = (BertEncoder) model.getBlock();
            NDArray ids = BertReference.matrix(manager, raw.getAsJsonArray("input_ids"));
            NDArray types = BertReference.matrix(manager, raw.getAsJsonArray("token_type_ids"));
            NDArray mask = BertReference.matrix(manager, raw.getAsJsonArray("attention_mask"));
            NDArray hidden = encoder.lastHiddenState(ids, types, mask);
            // The reference zeroes padding rows; compare the stock path's valid rows only.
            NDArray valid = hidden.mul(mask.expandDims(2).toType(hidden.getDataType(), false));
            assertClose(
                    doubles(raw.get("last_hidden_state")),
                    valid.toFloatArray(),
                    HIDDEN_TOLERANCE,
                    attention + " raw batch");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void meanPooledEmbeddingsThroughPredictor(String attention) throws Exception {
        List<String> sentences = BertReference.sentences();
        JsonArray expected = BertReference.json().getAsJsonArray("embeddings_mean");
        try (ZooModel<String, float[]> model = load(attention, Map.of());
                Predictor<String, float[]> predictor = model.newPredictor()) {
            List<float[]> batch = predictor.batchPredict(sentences);
            assertEquals(sentences.size(), batch.size());
            for (int i = 0; i < sentences.size(); ++i) {
                double[] want = doubles(expected.get(i));
                float[] single = predictor.predict(sentences.get(i));
                for (float[] got : new float[][] {batch.get(i), single}) {
                    assertEquals(60, got.length);
                    double cos = cosine(want, got);
                    assertTrue(cos >= COSINE, attention + " sentence " + i + ": cosine " + cos);
                    assertClose(want, got, 1e-4, attention + " embedding " + i);
                }
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void clsPoolingAndNoNormalisation(String attention) throws Exception {
        List<String> sentences = BertReference.sentences();
        JsonArray cls = BertReference.json().getAsJsonArray("embeddings_cls");
        JsonArray mean = BertReference.json().getAsJsonArray("embeddings_mean");
        try (ZooModel<String, float[]> clsModel = load(attention, Map.of("pooling", "cls"));
                Predictor<String, float[]> clsPredictor = clsModel.newPredictor();
                ZooModel<String, float[]> rawModel = load(attention, Map.of("normalize", "false"));
                Predictor<String, float[]> rawPredictor = rawModel.newPredictor()) {
            List<float[]> clsOut = clsPredictor.batchPredict(sentences);
            List<float[]> rawOut = rawPredictor.batchPredict(sentences);
            for (int i = 0; i < sentences.size(); ++i) {
                double cos = cosine(doubles(cls.get(i)), clsOut.get(i));
                assertTrue(cos >= COSINE, "cls pooling, sentence " + i + ": cosine " + cos);
                double norm = 0;
                for (float v : rawOut.get(i)) {
                    norm += v * v;
                }
                // Layer-normed states of width 60 average to a norm far from 1.
                assertTrue(Math.abs(Math.sqrt(norm) - 1) > 0.05, "not normalised: " + norm);
                cos = cosine(doubles(mean.get(i)), rawOut.get(i));
                assertTrue(cos >= COSINE, "unnormalised, sentence " + i + ": cosine " + cos);
            }
        }
    }

    /** The same weights through both paths, on a batch of very different lengths. */
    @org.junit.jupiter.api.Test
    void fusedAndStockAgree() throws Exception {
        List<String> sentences = BertReference.sentences();
        try (ZooModel<String, float[]> model = load("fused", Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            BertEncoder encoder = (BertEncoder) model.getBlock();
            NDList batch =
                    ((SentenceEmbeddingTranslator) model.getTranslator())
                            .encode(manager, sentences);
            int paths = BertEncoder.Attention.values().length;
            float[][] pooled = new float[paths][];
            float[][] hidden = new float[paths][];
            NDArray mask = batch.get(2).expandDims(2).toType(ai.djl.ndarray.types.DataType.FLOAT32, false);
            for (BertEncoder.Attention a : BertEncoder.Attention.values()) {
                BertEncoder view = encoder.withAttention(a);
                pooled[a.ordinal()] =
                        view.sentenceEmbeddings(
                                        batch.get(0),
                                        batch.get(1),
                                        batch.get(2),
                                        BertEncoder.Pooling.MEAN,
                                        true)
                                .toFloatArray();
                hidden[a.ordinal()] =
                        view.lastHiddenState(batch.get(0), batch.get(1), batch.get(2))
                                .mul(mask)
                                .toFloatArray();
            }
            int stock = BertEncoder.Attention.STOCK.ordinal();
            double[] stockPooled = new double[pooled[stock].length];
            double[] stockHidden = new double[hidden[stock].length];
            for (int i = 0; i < stockPooled.length; ++i) {
                stockPooled[i] = pooled[stock][i];
            }
            for (int i = 0; i < stockHidden.length; ++i) {
                stockHidden[i] = hidden[stock][i];
            }
            for (BertEncoder.Attention a : BertEncoder.Attention.values()) {
                assertClose(stockPooled, pooled[a.ordinal()], 1e-5, "pooled " + a + " vs stock");
                assertClose(stockHidden, hidden[a.ordinal()], 1e-4, "hidden " + a + " vs stock");
            }
        }
    }

    /**
     * dtype float16 (GEMMs and attention in float16, norms and pooling in float32) runs on the CPU
     * kernels too: measured max |diff| 5.3e-3 (fused) and 6.4e-3 (stock) against the float64
     * hidden states; the bound leaves room for other CPUs' GEMM blocking.
     */
    @ParameterizedTest
    @ValueSource(strings = {"fused", "stock"})
    void float16Compute(String attention) throws Exception {
        List<String> sentences = BertReference.sentences();
        JsonArray states = BertReference.json().getAsJsonArray("last_hidden_state");
        JsonArray mean = BertReference.json().getAsJsonArray("embeddings_mean");
        try (ZooModel<String, float[]> model = load(attention, Map.of("dtype", "float16"));
                Predictor<String, float[]> predictor = model.newPredictor();
                NDManager manager = model.getNDManager().newSubManager()) {
            assertEquals("float16", model.getProperty("dtype"));
            BertEncoder encoder = (BertEncoder) model.getBlock();
            NDList batch =
                    ((SentenceEmbeddingTranslator) model.getTranslator())
                            .encode(manager, sentences);
            NDArray hidden = encoder.lastHiddenState(batch.get(0), batch.get(1), batch.get(2));
            assertEquals(ai.djl.ndarray.types.DataType.FLOAT16, hidden.getDataType());
            List<float[]> embeddings = predictor.batchPredict(sentences);
            for (int i = 0; i < sentences.size(); ++i) {
                int len = BertReference.ids(i).length;
                assertClose(
                        doubles(states.get(i)),
                        hidden.get(new NDIndex(i + ", 0:" + len))
                                .toType(ai.djl.ndarray.types.DataType.FLOAT32, false)
                                .toFloatArray(),
                        0.02,
                        attention + " float16 row " + i);
                double cos = cosine(doubles(mean.get(i)), embeddings.get(i));
                assertTrue(cos >= 0.9999, attention + " float16 sentence " + i + ": " + cos);
            }
        }
    }

    /** float16- and bfloat16-saved copies load as float32 and match their own references. */
    @ParameterizedTest
    @ValueSource(strings = {"bert-fp16", "bert-bf16"})
    void halfPrecisionCheckpoints(String name) throws Exception {
        JsonArray states = BertReference.json().getAsJsonObject("dtype_copies").getAsJsonArray(name);
        try (ZooModel<String, float[]> model =
                        BertReference.load(name, String.class, float[].class, Map.of());
                NDManager manager = model.getNDManager().newSubManager()) {
            BertEncoder encoder = (BertEncoder) model.getBlock();
            assertEquals(
                    ai.djl.ndarray.types.DataType.FLOAT32,
                    encoder.weight("embeddings.word_embeddings.weight").getDataType());
            NDList batch =
                    ((SentenceEmbeddingTranslator) model.getTranslator())
                            .encode(manager, BertReference.sentences());
            NDArray hidden = encoder.lastHiddenState(batch.get(0), batch.get(1), batch.get(2));
            for (int i = 0; i < states.size(); ++i) {
                int len = BertReference.ids(i).length;
                assertClose(
                        doubles(states.get(i)),
                        hidden.get(new NDIndex(i + ", 0:" + len)).toFloatArray(),
                        HIDDEN_TOLERANCE,
                        name + " row " + i);
            }
        }
    }
}
