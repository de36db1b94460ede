/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.BertEncoder;
import io.djlattention.zoo.encoder.MiniLm;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Random;

/**
 * The zoo's all-MiniLM-L6-v2 against ONNX Runtime running the same ONNX file on the same tokens:
 * sentence embeddings of real English sentences (1 word to more than 200 tokens, one padded batch
 * on our side, one unpadded sentence at a time on ONNX Runtime's) through DJL's front door, and
 * token embeddings (the encoder's last hidden state, before pooling) of the fused and stock paths
 * on random ids of awkward lengths.
 */
class MiniLmOnnxRuntimeParityTest {

    /** Real sentences of very different lengths; the last is over 200 word pieces. */
    static final List<String> SENTENCES =
            List.of(
                    "Hello",
                    "Thanks!",
                    "Where is the train station?",
                    "The cat sat on the mat.",
                    "A man is playing a guitar on stage.",
                    "Interest rates rose for the third time this year.",
                    "She finished the marathon in just under four hours.",
                    "Photosynthesis converts light energy into chemical energy stored in sugars.",
                    "The committee postponed its decision until more data becomes available.",
                    "My grandmother's recipe for apple pie uses cinnamon, nutmeg and a pinch of"
                            + " salt.",
                    "Can you recommend a good book about the history of mathematics?",
                    "The new bridge will reduce commuting times between the two cities by half.",
                    "Antibiotics do not work against viral infections such as the common cold.",
                    "He forgot his umbrella, so he arrived at the office soaked to the skin.",
                    "Quantum computers exploit superposition and entanglement to solve certain"
                            + " problems faster than classical machines.",
                    "The museum's new exhibition features paintings from the Dutch Golden Age,"
                            + " including several works never before shown in public.",
                    "After weeks of negotiations, the union and the company reached an agreement"
                            + " that raises wages and improves safety standards at every plant.",
                    "Volcanic eruptions can cool the global climate for a year or two, because"
                            + " sulfur aerosols in the stratosphere reflect sunlight back into"
                            + " space.",
                    "Electric vehicles are becoming cheaper as battery prices fall.",
                    "The children built a sandcastle with towers, a moat and a drawbridge made of"
                            + " driftwood.",
                    "Please remember to water the plants while I am away next week.",
                    "The history of the printing press begins long before Johannes Gutenberg."
                            + " Woodblock printing was practised in China and Korea for centuries,"
                            + " and movable type made of ceramic and later metal appeared there"
                            + " well before it reached Europe. Gutenberg's contribution, around"
                            + " the middle of the fifteenth century, was a practical system that"
                            + " combined a hand mould for casting uniform metal type, an oil-based"
                            + " ink that adhered to metal, and a screw press adapted from those"
                            + " used to make wine and paper. The result transformed the"
                            + " economics of books: a single workshop could produce hundreds of"
                            + " copies of a text in the time a scribe needed to copy one. Within"
                            + " fifty years, presses operated in more than two hundred European"
                            + " towns, and millions of volumes had been printed. Historians still"
                            + " debate how quickly literacy followed, but few doubt that cheaper"
                            + " books accelerated the spread of new ideas in science, religion"
                            + " and politics, and changed how knowledge was stored and shared."
                            + " Printers also standardised spelling and punctuation, published"
                            + " maps, calendars and pamphlets, and created a market for news that"
                            + " would eventually grow into the modern newspaper, while censors and"
                            + " licensing authorities struggled to keep up.");

    @Test
    void sentenceEmbeddingsMatchOnnxRuntime() throws Exception {
        long[][] ids;
        long[][] mask;
        try (HuggingFaceTokenizer tokenizer = tokenizer()) {
            Encoding[] enc = tokenizer.batchEncode(SENTENCES);
            ids = new long[enc.length][];
            mask = new long[enc.length][];
            for (int i = 0; i < enc.length; ++i) {
                ids[i] = enc[i].getIds();
                mask[i] = enc[i].getAttentionMask();
            }
        }
        int[] lengths = new int[ids.length];
        for (int i = 0; i < ids.length; ++i) {
            for (long m : mask[i]) {
                lengths[i] += (int) m;
            }
        }
        assertEquals(3, lengths[0], "'Hello' is [CLS] hello [SEP]");
        int longest = lengths[lengths.length - 1];
        assertTrue(longest > 200 && longest <= 512, "longest sentence: " + longest + " tokens");
        assertTrue(SENTENCES.size() >= 20);

        // ONNX Runtime embeds each sentence alone, unpadded (cheaper than the padded batch, and
        // independent of how padding is handled); ours gets all of them in one padded batch.
        float[][] reference = new float[ids.length][];
        try (OrtMiniLm ort = OrtMiniLm.create(2)) {
            for (int i = 0; i < ids.length; ++i) {
                long[][] one = {java.util.Arrays.copyOf(ids[i], lengths[i])};
                long[][] ones = {java.util.Arrays.copyOf(mask[i], lengths[i])};
                reference[i] = ort.embed(one, ones)[0];
            }
        }

        // Through DJL's front door: the zoo's provider resolves the URL to the built-in MiniLM.
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls("djl://io.djlattention/all-MiniLM-L6-v2")
                        .optEngine("PyTorch")
                        .optDevice(Device.cpu())
                        .build();
        List<float[]> ours;
        try (ZooModel<String, float[]> model = criteria.loadModel();
                Predictor<String, float[]> predictor = model.newPredictor()) {
            ours = predictor.batchPredict(SENTENCES);
        }
        assertEquals(SENTENCES.size(), ours.size());
        double worst = 1;
        for (int i = 0; i < ours.size(); ++i) {
            float[] a = ours.get(i);
            assertEquals(OrtMiniLm.DIM, a.length);
            double cos = cosine(a, reference[i]);
            assertTrue(
                    cos >= 0.99999,
                    "sentence " + i + " (" + lengths[i] + " tokens): cosine " + cos);
            assertEquals(1.0, norm(a), 1e-5, "sentence " + i + " is L2-normalised");
            worst = Math.min(worst, cos);
        }
        System.out.printf(
                "MiniLM vs ONNX Runtime: 1 - smallest cosine = %.2e over %d sentences%n",
                1 - worst, ours.size());
    }

    @Test
    void tokenEmbeddingsMatchOnnxRuntimeOnRandomIds() throws Exception {
        long seed = System.nanoTime();
        Random random = new Random(seed);
        // Awkward lengths: 1 token, a few, odd ones near the tile sizes, and a long row.
        int[] lengths = {1, 2, 7, 31, 64, 65, 113, 300};
        int batch = lengths.length;
        int seq = 300;
        long[][] ids = new long[batch][seq];
        long[][] mask = new long[batch][seq];
        long[] flatIds = new long[batch * seq];
        long[] flatMask = new long[batch * seq];
        for (int b = 0; b < batch; ++b) {
            for (int s = 0; s < lengths[b]; ++s) {
                ids[b][s] = random.nextInt(30522);
                mask[b][s] = 1;
                flatIds[b * seq + s] = ids[b][s];
                flatMask[b * seq + s] = 1;
            }
        }
        // ONNX Runtime row by row, unpadded; ours in one padded batch.
        float[][][] reference = new float[batch][][];
        try (OrtMiniLm ort = OrtMiniLm.create(2)) {
            for (int b = 0; b < batch; ++b) {
                long[][] one = {java.util.Arrays.copyOf(ids[b], lengths[b])};
                long[][] ones = {java.util.Arrays.copyOf(mask[b], lengths[b])};
                reference[b] = ort.tokenEmbeddings(one, ones)[0];
            }
        }
        try (NDManager manager = NDManager.newBaseManager(Device.cpu())) {
            BertEncoder encoder = BertEncoder.builder().setConfig(MiniLm.config()).build();
            try (NDManager temp = NDManager.newBaseManager(Device.cpu())) {
                // setWeights copies; the arrays read from the file go with temp.
                encoder.setWeights(manager, MiniLm.weights(temp), MiniLm.onnxFile().toString());
            }
            for (BertEncoder.Attention attention : BertEncoder.Attention.values()) {
                BertEncoder view = encoder.withAttention(attention);
                try (NDManager scope = manager.newSubManager()) {
                    Shape shape = new Shape(batch, seq);
                    NDArray hidden =
                            view.lastHiddenState(
                                    scope.create(flatIds, shape),
                                    null,
                                    scope.create(flatMask, shape));
                    assertEquals(new Shape(batch, seq, OrtMiniLm.DIM), hidden.getShape());
                    float[] h = hidden.toFloatArray();
                    double worst = 0;
                    for (int b = 0; b < batch; ++b) {
                        for (int s = 0; s < lengths[b]; ++s) {
                            for (int d = 0; d < OrtMiniLm.DIM; ++d) {
                                float x = h[(b * seq + s) * OrtMiniLm.DIM + d];
                                worst = Math.max(worst, Math.abs(x - reference[b][s][d]));
                            }
                        }
                    }
                    System.out.printf(
                            "MiniLM %s token embeddings vs ONNX Runtime: max |diff| %.3g%n",
                            attention, worst);
                    // Hidden states are O(1); float32 against float32 differs by ~5e-6 (measured).
                    assertTrue(
                            worst < 5e-5,
                            attention + ": max |ours - ONNX Runtime| = " + worst + " (seed "
                                    + seed + ")");
                }
            }
        }
    }

    static HuggingFaceTokenizer tokenizer() throws java.io.IOException {
        return HuggingFaceTokenizer.builder()
                .optTokenizerPath(MiniLm.tokenizerFile())
                .optMaxLength(512)
                .optTruncation(true)
                .optPadding(true)
                .build();
    }

    static double cosine(float[] a, float[] b) {
        double dot = 0;
        double na = 0;
        double nb = 0;
        for (int i = 0; i < a.length; ++i) {
            dot += (double) a[i] * b[i];
            na += (double) a[i] * a[i];
            nb += (double) b[i] * b[i];
        }
        return dot / Math.sqrt(na * nb);
    }

    private static double norm(float[] a) {
        double n = 0;
        for (float x : a) {
            n += (double) x * x;
        }
        return Math.sqrt(n);
    }
}
