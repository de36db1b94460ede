/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package com.example;

import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;

/**
 * djl-attention from a user's project, through DJL's {@code Criteria} only: sentence embeddings
 * with the built-in all-MiniLM-L6-v2, token generation with the built-in stories260K, and, given a
 * directory, text generation with a Hugging Face checkpoint ({@code LlamaForCausalLM}, {@code
 * MistralForCausalLM}, {@code Gemma2ForCausalLM}, {@code GPT2LMHeadModel}) that has a {@code
 * tokenizer.json}.
 *
 * <p>Usage: {@code Example [HF_CHECKPOINT_DIR [PROMPT]]}.
 */
public final class Example {

    private Example() {}

    /**
     * Runs the three examples.
     *
     * @param args an optional Hugging Face checkpoint directory and prompt
     * @throws Exception if a model fails to load or predict
     */
    public static void main(String[] args) throws Exception {
        embeddings();
        generation();
        if (args.length > 0) {
            huggingFace(Paths.get(args[0]), args.length > 1 ? args[1] : "Once upon a time");
        }
    }

    /** Sentence embeddings: the nearest sentence to a query, by cosine similarity. */
    private static void embeddings() throws Exception {
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls("djl://io.djlattention/all-MiniLM-L6-v2")
                        .optEngine("PyTorch")
                        .build();
        List<String> sentences =
                List.of(
                        "A cat sleeps on the sofa.",
                        "The stock market fell sharply today.",
                        "Kittens like to nap in warm places.",
                        // Longer than the model's 512 tokens: truncated, with a warning logged
                        // through SLF4J (slf4j-simple prints it to stderr).
                        "word ".repeat(600));
        String query = "Where do cats like to sleep?";
        try (ZooModel<String, float[]> model = criteria.loadModel();
                Predictor<String, float[]> predictor = model.newPredictor()) {
            List<float[]> vectors = predictor.batchPredict(sentences);
            float[] q = predictor.predict(query);
            System.out.println("embeddings: " + vectors.size() + " x " + q.length + " floats");
            for (int i = 0; i < sentences.size(); i++) {
                String s = sentences.get(i);
                System.out.printf(
                        "  cosine %.3f  %s%n",
                        dot(q, vectors.get(i)), s.length() > 40 ? s.substring(0, 40) + "..." : s);
            }
        }
    }

    /** Token generation with stories260K (it ships without a tokenizer: ids in, ids out). */
    private static void generation() throws Exception {
        Criteria<int[], int[]> criteria =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelUrls("djl://io.djlattention/stories260K")
                        .optEngine("PyTorch")
                        .optArgument("maxNewTokens", 16)
                        .build();
        try (ZooModel<int[], int[]> model = criteria.loadModel();
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            // Two prompts of different lengths, batched through the continuous-batching scheduler.
            List<int[]> prompts = List.of(new int[] {1, 403, 407}, new int[] {1, 283, 261, 299});
            List<int[]> generated = predictor.batchPredict(prompts);
            for (int i = 0; i < prompts.size(); i++) {
                System.out.println(
                        "stories260K: "
                                + Arrays.toString(prompts.get(i))
                                + " -> "
                                + Arrays.toString(generated.get(i)));
            }
        }
    }

    /** Text generation with a Hugging Face checkpoint directory. */
    private static void huggingFace(Path dir, String prompt) throws Exception {
        Criteria<String, String> criteria =
                Criteria.builder()
                        .setTypes(String.class, String.class)
                        .optModelPath(dir)
                        .optEngine("PyTorch")
                        .optArgument("maxNewTokens", 16)
                        .build();
        try (ZooModel<String, String> model = criteria.loadModel();
                Predictor<String, String> predictor = model.newPredictor()) {
            String continuation = predictor.predict(prompt);
            System.out.printf("%s: \"%s\" -> \"%s\"%n", dir.getFileName(), prompt, continuation);
        }
    }

    /** The cosine of two L2-normalised embeddings. */
    private static float dot(float[] a, float[] b) {
        float sum = 0;
        for (int i = 0; i < a.length; i++) {
            sum += a[i] * b[i];
        }
        return sum;
    }
}
