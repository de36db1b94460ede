/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import org.apache.spark.sql.SparkSession;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * What the Spark tests share: one local session for the whole test JVM ({@code local[2,3]}: two
 * task threads, a task tried up to three times, as on a cluster), the generated sentences, and
 * their single-JVM reference embeddings, computed once through DJL's {@code Criteria} with a model
 * of their own (not the executors' shared one).
 */
final class SparkTestSession {

    /** Sentences the tests embed. */
    static final int SENTENCES = 10_000;

    private static SparkSession spark;
    private static List<String> sentences;
    private static float[][] reference;

    private SparkTestSession() {}

    static synchronized SparkSession spark() {
        if (spark == null) {
            spark =
                    SparkSession.builder()
                            .master("local[2,3]")
                            .appName("djl-attention spark tests")
                            .config("spark.ui.enabled", "false")
                            .config("spark.sql.shuffle.partitions", "4")
                            .getOrCreate();
        }
        return spark;
    }

    /** Short random sentences (2 to 9 words of a small vocabulary; seeded), some repeated. */
    static synchronized List<String> sentences() {
        if (sentences == null) {
            String[] words = (
                    "the a cat dog sleeps runs quickly market bank raised rates guitar plays music"
                            + " on under warm cold window river city night morning reads book"
                            + " children laugh loudly rain falls softly")
                    .split(" ");
            Random random = new Random(26);
            List<String> out = new ArrayList<>(SENTENCES);
            for (int i = 0; i < SENTENCES; ++i) {
                int n = 2 + random.nextInt(8);
                StringBuilder sb = new StringBuilder();
                for (int w = 0; w < n; ++w) {
                    sb.append(w == 0 ? "" : " ").append(words[random.nextInt(words.length)]);
                }
                out.add(random.nextInt(4) == 0 ? sb.append('.').toString() : sb.toString());
            }
            sentences = out;
        }
        return sentences;
    }

    /** The single-JVM embeddings of {@link #sentences()}, in order. */
    static synchronized float[][] reference() throws Exception {
        if (reference == null) {
            reference = embedSingleJvm(sentences());
        }
        return reference;
    }

    /**
     * Embeds texts in this JVM with a model of its own: two threads, a predictor each, batches
     * of 32.
     */
    static float[][] embedSingleJvm(List<String> texts) throws Exception {
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls(TextEmbedder.DEFAULT_MODEL)
                        .optEngine("PyTorch")
                        .optDevice(Device.cpu())
                        .build();
        float[][] out = new float[texts.size()][];
        try (ZooModel<String, float[]> model = criteria.loadModel()) {
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try {
                int half = texts.size() / 2;
                List<Future<?>> parts = new ArrayList<>();
                for (int[] range : new int[][] {{0, half}, {half, texts.size()}}) {
                    parts.add(
                            pool.submit(
                                    () -> {
                                        try (Predictor<String, float[]> p = model.newPredictor()) {
                                            for (int from = range[0]; from < range[1]; from += 32) {
                                                int to = Math.min(range[1], from + 32);
                                                List<float[]> batch = p.batchPredict(texts.subList(from, to));
                                                for (int i = from; i < to; ++i) {
                                                    out[i] = batch.get(i - from);
                                                }
                                            }
                                        }
                                        return null;
                                    }));
                }
                for (Future<?> f : parts) {
                    f.get();
                }
            } finally {
                pool.shutdown();
            }
        }
        return out;
    }

    static double maxAbsDiff(float[] a, float[] b) {
        if (a.length != b.length) {
            throw new AssertionError("lengths " + a.length + " vs " + b.length);
        }
        double worst = 0;
        for (int i = 0; i < a.length; ++i) {
            worst = Math.max(worst, Math.abs((double) a[i] - b[i]));
        }
        return worst;
    }

    static float[] toFloats(List<Float> list) {
        float[] out = new float[list.size()];
        for (int i = 0; i < out.length; ++i) {
            out[i] = list.get(i);
        }
        return out;
    }

    static String describe(float[] v) {
        return Arrays.toString(Arrays.copyOf(v, Math.min(4, v.length)));
    }
}
