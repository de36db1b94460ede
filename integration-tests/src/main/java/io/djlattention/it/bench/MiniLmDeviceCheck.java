/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.MiniLm;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The zoo's all-MiniLM-L6-v2 on DJL's default device (the GPU when the engine sees one) in float32
 * and float16, against ONNX Runtime (float32, CPU) running the Maven Central ONNX file on the same
 * tokens: 1 − the smallest cosine and the largest |difference| of the L2-normalised sentence
 * embeddings, over real sentences and random word-piece sequences of awkward lengths (1 to 300
 * tokens) embedded as one padded batch.
 *
 * <p>Run: {@code java -cp <integration-tests class path>
 * io.djlattention.it.bench.MiniLmDeviceCheck} ({@code gpu-java-suite.sh} runs it when the ONNX
 * file is on the class path).
 */
public final class MiniLmDeviceCheck {

    private static final String[] SENTENCES = {
        "Hello",
        "Where is the train station?",
        "Photosynthesis converts light energy into chemical energy stored in sugars.",
        "After weeks of negotiations, the union and the company reached an agreement that raises"
                + " wages and improves safety standards at every plant.",
        "Volcanic eruptions can cool the global climate for a year or two, because sulfur"
                + " aerosols in the stratosphere reflect sunlight back into space.",
    };

    private MiniLmDeviceCheck() {}

    /**
     * Prints one Markdown table row per dtype.
     *
     * @param args unused
     * @throws Exception if the model or the reference cannot be loaded
     */
    public static void main(String[] args) throws Exception {
        Device device = Engine.getEngine("PyTorch").defaultDevice();
        List<String> texts = new ArrayList<>(List.of(SENTENCES));
        List<long[]> ids = new ArrayList<>();
        List<long[]> masks = new ArrayList<>();
        try (HuggingFaceTokenizer tokenizer =
                HuggingFaceTokenizer.builder()
                        .optTokenizerPath(MiniLm.tokenizerFile())
                        .optMaxLength(512)
                        .build()) {
            for (String text : texts) {
                Encoding e = tokenizer.encode(text);
                ids.add(e.getIds());
                masks.add(e.getAttentionMask());
            }
            // Random word pieces decoded to text, so that the zoo's translator tokenises the same
            // ids back (ids 1000+ are plain word pieces).
            Random random = new Random(2026);
            for (int len : new int[] {1, 7, 31, 65, 113, 300}) {
                long[] piece = new long[len];
                for (int i = 0; i < len; ++i) {
                    piece[i] = 2000 + random.nextInt(28000);
                }
                String text = tokenizer.decode(piece, true);
                Encoding e = tokenizer.encode(text);
                texts.add(text);
                ids.add(e.getIds());
                masks.add(e.getAttentionMask());
            }
        }
        // One right-padded batch for ONNX Runtime (ids 0, mask 0 past each text's end).
        int longest = ids.stream().mapToInt(a -> a.length).max().orElse(0);
        long[][] paddedIds = new long[texts.size()][longest];
        long[][] paddedMask = new long[texts.size()][longest];
        for (int i = 0; i < texts.size(); ++i) {
            System.arraycopy(ids.get(i), 0, paddedIds[i], 0, ids.get(i).length);
            System.arraycopy(masks.get(i), 0, paddedMask[i], 0, masks.get(i).length);
        }
        float[][] reference;
        try (OrtMiniLm ort = OrtMiniLm.create(Runtime.getRuntime().availableProcessors())) {
            reference = ort.embed(paddedIds, paddedMask);
        }
        System.out.printf(
                Locale.ROOT,
                "MiniLM on %s vs ONNX Runtime (float32, CPU), %d texts of 3 to %d tokens, one"
                        + " batch%n%n",
                device,
                texts.size(),
                longest);
        System.out.printf("| dtype | 1 - min cosine | max abs diff |%n| --- | --- | --- |%n");
        // float16 is a GPU dtype for the zoo's encoder (refused on the CPU).
        String[] dtypes =
                device.isGpu() ? new String[] {"float32", "float16"} : new String[] {"float32"};
        for (String dtype : dtypes) {
            Criteria<String, float[]> criteria =
                    Criteria.builder()
                            .setTypes(String.class, float[].class)
                            .optModelUrls("djl://io.djlattention/all-MiniLM-L6-v2")
                            .optEngine("PyTorch")
                            .optDevice(device)
                            .optArgument("dtype", dtype)
                            .build();
            List<float[]> ours;
            try (ZooModel<String, float[]> model = criteria.loadModel();
                    Predictor<String, float[]> predictor = model.newPredictor()) {
                ours = predictor.batchPredict(texts);
            }
            double minCos = 1;
            double maxDiff = 0;
            for (int i = 0; i < texts.size(); ++i) {
                float[] a = ours.get(i);
                float[] b = reference[i];
                double dot = 0;
                double na = 0;
                double nb = 0;
                for (int d = 0; d < a.length; ++d) {
                    dot += (double) a[d] * b[d];
                    na += (double) a[d] * a[d];
                    nb += (double) b[d] * b[d];
                    maxDiff = Math.max(maxDiff, Math.abs(a[d] - b[d]));
                }
                minCos = Math.min(minCos, dot / Math.sqrt(na * nb));
            }
            System.out.printf(Locale.ROOT, "| %s | %.2e | %.2e |%n", dtype, 1 - minCos, maxDiff);
        }
    }
}
