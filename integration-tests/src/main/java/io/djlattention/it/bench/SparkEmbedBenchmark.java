/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.Device;
import ai.djl.inference.Predictor;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.spark.TableIo;
import io.djlattention.spark.TextEmbedder;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * Rows/s of the Spark embedding job in {@code local[2]} against the single-JVM {@code embed} job on
 * the same sentences, in one process and alternating, so both see the same machine load (issue
 * 26, docs/benchmarks.md).
 *
 * <p>Single JVM: what {@code embed} times as "fused DJL" — all-MiniLM-L6-v2 through {@code
 * Criteria}, one predictor, batches of 32, PyTorch's 2 intra-op threads, a warm model. Spark:
 * what {@code spark-embed} runs — read the sentences as a text file, {@link TextEmbedder} (2 tasks
 * of 1 intra-op thread each, batches of 32), write Parquet — timed from the action's start, the
 * model loaded before (as the job's driver check does), Spark's start not counted. Each phase
 * also reports rows per CPU second of the whole process (every thread, Spark's included): on a
 * machine shared with other work, wall-clock rates follow the other work's bursts, CPU time does
 * not.
 *
 * <p>{@code mvn -B -Ddjl.attn.cuda=OFF -Pspark-bench -DskipTests verify -pl integration-tests -am}
 * with {@code -Dspark.bench.args="--sentences 2000 --rounds 3"}.
 */
public final class SparkEmbedBenchmark {

    private SparkEmbedBenchmark() {}

    /**
     * Runs the benchmark.
     *
     * @param args {@code --sentences N} (default 2000), {@code --rounds R} (default 3)
     * @throws Exception if a model fails
     */
    public static void main(String[] args) throws Exception {
        int n = 2000;
        int rounds = 3;
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--sentences":
                    n = Integer.parseInt(args[i + 1]);
                    break;
                case "--rounds":
                    rounds = Integer.parseInt(args[i + 1]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        List<String> sentences = sentences(n);
        Path dir = Files.createTempDirectory("spark-bench");
        Path input = dir.resolve("sentences.txt");
        Files.write(input, sentences);
        String output = dir.resolve("out.parquet").toString();

        SparkSession spark =
                SparkSession.builder()
                        .master("local[2]")
                        .appName("spark-embed benchmark")
                        .config("spark.ui.enabled", "false")
                        .config("spark.sql.files.openCostInBytes", "8192")
                        .getOrCreate();
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls(TextEmbedder.DEFAULT_MODEL)
                        .optEngine("PyTorch")
                        .optDevice(Device.cpu())
                        .build();
        double[] single = new double[rounds];
        double[] onSpark = new double[rounds];
        double[] singleCpu = new double[rounds];
        double[] sparkCpu = new double[rounds];
        int partitions = 0;
        try (ZooModel<String, float[]> model = criteria.loadModel();
                Predictor<String, float[]> predictor = model.newPredictor()) {
            for (int r = 0; r < rounds; ++r) {
                // Single JVM, 2 intra-op threads (the embed job's default on 2 cores).
                JniUtils.setNumThreads(2);
                if (r == 0) {
                    embed(predictor, sentences.subList(0, 64));
                }
                long c0 = cpuNanos();
                long t0 = System.nanoTime();
                embed(predictor, sentences);
                single[r] = n / ((System.nanoTime() - t0) / 1e9);
                singleCpu[r] = n / ((cpuNanos() - c0) / 1e9);

                // Spark local[2]: 2 tasks, 1 intra-op thread each (spark.task.cpus).
                TextEmbedder embedder = new TextEmbedder().setBatchSize(32).setThreads(1);
                Dataset<Row> rows = TableIo.read(spark, input.toString(), "text", "text");
                Dataset<Row> embedded = embedder.transform(rows); // loads the model (once)
                JniUtils.setNumThreads(1);
                partitions = rows.rdd().getNumPartitions();
                long c1 = cpuNanos();
                long t1 = System.nanoTime();
                embedded.write().mode(SaveMode.Overwrite).parquet(output);
                onSpark[r] = n / ((System.nanoTime() - t1) / 1e9);
                sparkCpu[r] = n / ((cpuNanos() - c1) / 1e9);
                System.out.printf(
                        Locale.ROOT,
                        "round %d: single JVM %.1f sentences/s (%.1f per CPU second), spark local[2]"
                                + " (%d partitions) %.1f rows/s (%.1f per CPU second), ratio %.3f"
                                + " (per CPU second %.3f)%n",
                        r + 1,
                        single[r],
                        singleCpu[r],
                        partitions,
                        onSpark[r],
                        sparkCpu[r],
                        onSpark[r] / single[r],
                        sparkCpu[r] / singleCpu[r]);
            }
        } finally {
            spark.stop();
        }
        double s = median(single);
        double k = median(onSpark);
        double sc = median(singleCpu);
        double kc = median(sparkCpu);
        System.out.printf(
                Locale.ROOT,
                "%d sentences, %d rounds (medians): single JVM %.1f sentences/s, spark-embed"
                        + " local[2] %.1f rows/s: overhead %.1f %%; per CPU second of the process"
                        + " %.1f vs %.1f: overhead %.1f %%%n",
                n,
                rounds,
                s,
                k,
                100 * (1 - k / s),
                sc,
                kc,
                100 * (1 - kc / sc));
        System.exit(0);
    }

    private static void embed(Predictor<String, float[]> p, List<String> sentences)
            throws Exception {
        for (int from = 0; from < sentences.size(); from += 32) {
            p.batchPredict(sentences.subList(from, Math.min(sentences.size(), from + 32)));
        }
    }

    /** Short sentences: 2 to 13 words of a small vocabulary, seeded. */
    static List<String> sentences(int n) {
        String[] words = (
                "the a cat dog sleeps runs quickly market bank raised rates guitar plays music on"
                        + " under warm cold window river city night morning reads book children"
                        + " laugh loudly rain falls softly over")
                .split(" ");
        Random random = new Random(26);
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; ++i) {
            int k = 2 + random.nextInt(12);
            StringBuilder sb = new StringBuilder();
            for (int w = 0; w < k; ++w) {
                sb.append(w == 0 ? "" : " ").append(words[random.nextInt(words.length)]);
            }
            out.add(sb.append('.').toString());
        }
        return out;
    }

    /** CPU time of the whole process (every thread: PyTorch's, Spark's, the JIT's). */
    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean)
                        java.lang.management.ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
