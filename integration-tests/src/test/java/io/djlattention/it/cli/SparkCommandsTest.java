/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.inference.Predictor;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.cli.Main;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.generate.GenerationBlock;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code spark-embed} and {@code spark-generate} as a user runs them (Spark {@code local[2]} in
 * this JVM): the Parquet they write against single-JVM {@code Criteria} embeddings and the
 * scheduler's greedy tokens, bad rows null and reported, bad options exit 2 with a message.
 */
class SparkCommandsTest {

    @TempDir Path tmp;

    private record Run(int code, String out, String err) {}

    private static Run run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.run(new PrintWriter(out, true), new PrintWriter(err, true), args);
        return new Run(code, out.toString(), err.toString());
    }

    /** Reads what a command wrote, ordered by id, in a session of the test's own. */
    private static List<Row> readBack(Path parquet) {
        SparkSession spark =
                SparkSession.builder()
                        .master("local[2]")
                        .config("spark.ui.enabled", "false")
                        .getOrCreate();
        return spark.read()
                .parquet(parquet.toString())
                .orderBy(org.apache.spark.sql.functions.col("id").cast("int"))
                .collectAsList();
    }

    @AfterAll
    static void stopSpark() {
        SparkSession.getActiveSession().foreach(s -> {
            s.stop();
            return null;
        });
    }

    @Test
    void sparkEmbedWritesEveryRowWithItsCriteriaEmbedding() throws Exception {
        List<String> texts = new ArrayList<>();
        StringBuilder csv = new StringBuilder("id,text\n");
        for (int i = 0; i < 60; ++i) {
            String text = i == 7 ? "" : "Sentence number " + i + ", about " + (i % 3 == 0 ? "cats" : "rates") + ".";
            texts.add(text);
            csv.append(i).append(",\"").append(text).append("\"\n");
        }
        Path input = tmp.resolve("in.csv");
        Files.writeString(input, csv);
        Path output = tmp.resolve("out.parquet");

        Run r =
                run(
                        "spark-embed",
                        "--master=local[2]",
                        "--input=" + input,
                        "--column=text",
                        "--output=" + output,
                        "--partitions=3",
                        "--batch-size=8",
                        // PyTorch's thread count is per JVM: keep this one's default for the
                        // other tests (the jobs' own default is spark.task.cpus, 1 here).
                        "--threads=2");
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("spark-embed: 60 rows (3 partitions"), r.out());
        assertTrue(r.out().contains("1 null or empty rows, 0 longer"), r.out());

        List<Row> rows = readBack(output);
        assertEquals(60, rows.size());
        Criteria<String, float[]> criteria =
                Criteria.builder()
                        .setTypes(String.class, float[].class)
                        .optModelUrls("djl://io.djlattention/all-MiniLM-L6-v2")
                        .optEngine("PyTorch")
                        .optDevice(Device.cpu())
                        .build();
        try (ZooModel<String, float[]> model = criteria.loadModel();
                Predictor<String, float[]> p = model.newPredictor()) {
            for (int i = 0; i < 60; ++i) {
                Row row = rows.get(i);
                assertEquals(String.valueOf(i), row.getString(0));
                if (i == 7) {
                    assertTrue(row.isNullAt(2), "row 7 has an empty text");
                    continue;
                }
                float[] expected = p.predict(texts.get(i));
                List<Float> got = row.getList(2);
                assertEquals(expected.length, got.size());
                for (int d = 0; d < expected.length; ++d) {
                    assertEquals(expected[d], got.get(d), 1e-6, "row " + i + " dim " + d);
                }
            }
        }
    }

    @Test
    void sparkGenerateMatchesGreedyGeneration() throws Exception {
        int[][] prompts = {{1, 403, 27, 91}, {1, 55}, {1, 200, 201, 202, 203, 204, 205}};
        StringBuilder csv = new StringBuilder("id,prompt\n");
        for (int i = 0; i < prompts.length; ++i) {
            StringBuilder ids = new StringBuilder();
            for (int t : prompts[i]) {
                ids.append(ids.length() == 0 ? "" : " ").append(t);
            }
            csv.append(i).append(',').append(ids).append('\n');
        }
        csv.append("3,\n"); // no prompt
        csv.append("4,1 9999\n"); // an id past the vocabulary
        Path input = tmp.resolve("prompts.csv");
        Files.writeString(input, csv);
        Path output = tmp.resolve("generated.parquet");

        Run r =
                run(
                        "spark-generate",
                        "--master=local[2]",
                        "--input=" + input,
                        "--ids",
                        "--max-new-tokens=12",
                        "--threads=2",
                        "--output=" + output);
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("1 null or empty prompts, 1 the model refuses"), r.out());

        List<Row> rows = readBack(output);
        assertEquals(5, rows.size());
        Criteria<int[], int[]> criteria =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelUrls("djl://io.djlattention/stories260K")
                        .optEngine("PyTorch")
                        .optDevice(Device.cpu())
                        .optArgument("maxNewTokens", 12)
                        .build();
        try (ZooModel<int[], int[]> model = criteria.loadModel()) {
            GenerationBlock block = DecoderModels.generationBlock(model);
            for (int i = 0; i < prompts.length; ++i) {
                // The block's own batch API, one request alone: no Spark, no shared engine.
                int[] expected = blockGreedy(block, model, prompts[i]);
                List<Integer> got = rows.get(i).getList(rows.get(i).fieldIndex("generated"));
                assertArrayEquals(
                        expected, got.stream().mapToInt(Integer::intValue).toArray(), "row " + i);
            }
        }
        assertTrue(rows.get(3).isNullAt(rows.get(3).fieldIndex("generated")));
        assertTrue(rows.get(4).isNullAt(rows.get(4).fieldIndex("generated")));
    }

    /** Greedy tokens of the block's own batch API (one request, 12 new tokens at most). */
    private static int[] blockGreedy(GenerationBlock block, ZooModel<?, ?> model, int[] prompt) {
        try (ai.djl.ndarray.NDManager m = model.getNDManager().newSubManager()) {
            return block.generate(List.of(prompt), m).get(0).generated();
        }
    }

    @Test
    void badOptionsExitTwoWithAMessage() throws Exception {
        Path input = tmp.resolve("in.txt");
        Files.writeString(input, "a line\n");
        Run model =
                run(
                        "spark-embed",
                        "--master=local[1]",
                        "--input=" + input,
                        "--output=" + tmp.resolve("o1"),
                        "--model=" + tmp.resolve("missing"));
        assertEquals(2, model.code(), model.out() + model.err());
        assertTrue(model.err().contains("cannot load model"), model.err());
        assertTrue(model.err().contains(tmp.resolve("missing").toString()), model.err());

        Run format =
                run(
                        "spark-embed",
                        "--master=local[1]",
                        "--input=" + input,
                        "--format=json",
                        "--output=" + tmp.resolve("o2"));
        assertEquals(2, format.code());
        assertTrue(format.err().contains("--format: expected auto, csv, parquet or text"), format.err());

        Run noInput = run("spark-embed", "--output=" + tmp.resolve("o3"));
        assertEquals(2, noInput.code());
        assertTrue(noInput.err().contains("--input"), noInput.err());
    }
}
