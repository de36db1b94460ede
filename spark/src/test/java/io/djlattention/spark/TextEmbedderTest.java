/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.SparkException;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;

/** {@link TextEmbedder} on Spark {@code local[2,3]} against single-JVM {@code Criteria} embeddings. */
class TextEmbedderTest {

    private static final StructType SCHEMA =
            new StructType()
                    .add("id", DataTypes.LongType, false)
                    .add("text", DataTypes.StringType, true);

    private static Dataset<Row> table(List<String> texts, int partitions) {
        List<Row> rows = new ArrayList<>(texts.size());
        for (int i = 0; i < texts.size(); ++i) {
            rows.add(RowFactory.create((long) i, texts.get(i)));
        }
        SparkSession spark = SparkTestSession.spark();
        JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        return spark.createDataFrame(jsc.parallelize(rows, partitions), SCHEMA);
    }

    @Test
    void tenThousandRowsEqualSingleJvmEmbeddingsInOrder() throws Exception {
        List<String> sentences = SparkTestSession.sentences();
        float[][] reference = SparkTestSession.reference();
        Dataset<Row> input = table(sentences, 5);
        assertEquals(5, input.rdd().getNumPartitions());

        TextEmbedder embedder = new TextEmbedder().setBatchSize(32);
        List<Row> out = embedder.transform(input).collectAsList();

        assertEquals(sentences.size(), out.size());
        double worst = 0;
        for (int i = 0; i < out.size(); ++i) {
            Row row = out.get(i);
            // Order and identity: row i is id i with its own text.
            assertEquals(i, row.getLong(0), "row " + i);
            assertEquals(sentences.get(i), row.getString(1), "row " + i);
            float[] e = SparkTestSession.toFloats(row.getList(2));
            assertEquals(384, e.length);
            worst = Math.max(worst, SparkTestSession.maxAbsDiff(reference[i], e));
        }
        assertTrue(worst <= 1e-6, "max |spark - single JVM| = " + worst);
        assertEquals(0, embedder.getBadRows().getTotal());
    }

    /** Fails the first attempt of partition 1 after it has passed half its rows on. */
    private static final class FailFirstAttempt implements MapPartitionsFunction<Row, Row> {
        private static final long serialVersionUID = 1L;

        @Override
        public Iterator<Row> call(Iterator<Row> rows) {
            TaskContext task = TaskContext.get();
            boolean fail = task.partitionId() == 1 && task.attemptNumber() == 0;
            return new Iterator<>() {
                private int passed;

                @Override
                public boolean hasNext() {
                    return rows.hasNext();
                }

                @Override
                public Row next() {
                    if (fail && passed == 100) {
                        throw new IllegalStateException("injected failure of the first attempt");
                    }
                    ++passed;
                    return rows.next();
                }
            };
        }
    }

    @Test
    void failedFirstAttemptIsRetriedWithNoRowLostOrDuplicated(@TempDir Path dir) throws Exception {
        int n = 1000;
        List<String> texts = new ArrayList<>(SparkTestSession.sentences().subList(0, n));
        // Bad rows before the failure point of partition 1 (rows 250..499): counted once, though
        // the first attempt saw them too.
        texts.set(260, null);
        texts.set(270, "");
        float[][] reference = SparkTestSession.reference();

        TextEmbedder embedder = new TextEmbedder().setBatchSize(16);
        Dataset<Row> embedded = embedder.transform(table(texts, 4));
        Dataset<Row> failing = embedded.mapPartitions(new FailFirstAttempt(), Encoders.row(embedded.schema()));
        String output = dir.resolve("out.parquet").toString();
        failing.write().parquet(output);

        List<Row> back = SparkTestSession.spark().read().parquet(output).orderBy("id").collectAsList();
        assertEquals(n, back.size());
        Set<Long> ids = new HashSet<>();
        for (Row row : back) {
            assertTrue(ids.add(row.getLong(0)), "duplicate id " + row.getLong(0));
        }
        for (int i = 0; i < n; ++i) {
            Row row = back.get(i);
            assertEquals(i, row.getLong(0));
            if (i == 260 || i == 270) {
                assertTrue(row.isNullAt(2), "row " + i);
            } else {
                float[] e = SparkTestSession.toFloats(row.getList(2));
                assertTrue(SparkTestSession.maxAbsDiff(reference[i], e) <= 1e-6, "row " + i);
            }
        }
        assertEquals(2, embedder.getBadRows().getMissing());
        assertEquals(0, embedder.getBadRows().getRejected());
    }

    @Test
    void badRowsAreNullAndCountedByTransformerAndSqlFunction() throws Exception {
        String tooLong = String.join(" ", java.util.Collections.nCopies(600, "word"));
        List<String> texts =
                Arrays.asList(
                        "A cat sleeps on the warm windowsill.",
                        null,
                        "",
                        "   ",
                        tooLong,
                        "Central banks raised rates.",
                        String.join(" ", java.util.Collections.nCopies(510, "a")));
        // 510 words of "a" are 512 tokens with [CLS] and [SEP]: exactly the context, not bad.
        float[][] reference =
                SparkTestSession.embedSingleJvm(
                        List.of(texts.get(0), texts.get(5), texts.get(6)));
        Dataset<Row> input = table(texts, 2);

        TextEmbedder embedder = new TextEmbedder();
        // No ORDER BY: a sort first samples its input, which evaluates the model (and counts the
        // bad rows) once more. Partitions come back in order.
        List<Row> out = embedder.transform(input).collectAsList();
        assertEmbeddings(out, reference);
        assertEquals(3, embedder.getBadRows().getMissing());
        assertEquals(1, embedder.getBadRows().getRejected());

        TextEmbedder sql = new TextEmbedder();
        sql.registerSqlFunction(SparkTestSession.spark());
        input.createOrReplaceTempView("texts");
        List<Row> viaSql =
                SparkTestSession.spark()
                        .sql("SELECT id, text, djl_embed(text) AS embedding FROM texts")
                        .collectAsList();
        assertEmbeddings(viaSql, reference);
        assertEquals(3, sql.getBadRows().getMissing());
        assertEquals(1, sql.getBadRows().getRejected());
    }

    private static void assertEmbeddings(List<Row> out, float[][] reference) {
        assertEquals(7, out.size());
        for (int i = 0; i < out.size(); ++i) {
            assertEquals(i, out.get(i).getLong(0));
        }
        int[] good = {0, 5, 6};
        for (int g = 0; g < good.length; ++g) {
            Row row = out.get(good[g]);
            assertNotNull(row.getList(2), "row " + good[g]);
            float[] e = SparkTestSession.toFloats(row.getList(2));
            assertTrue(
                    SparkTestSession.maxAbsDiff(reference[g], e) <= 1e-6,
                    "row " + good[g] + ": " + SparkTestSession.describe(e));
        }
        for (int bad : new int[] {1, 2, 3, 4}) {
            assertNull(out.get(bad).get(2), "row " + bad);
        }
    }

    @Test
    void unloadableModelFailsBeforeTheJobWithItsReason(@TempDir Path dir) {
        String missing = dir.resolve("no-such-model").toString();
        Dataset<Row> input = table(List.of("a", "b"), 2);
        ModelLoadException e =
                assertThrows(
                        ModelLoadException.class,
                        () -> new TextEmbedder().setModel(missing).transform(input));
        assertTrue(e.getMessage().contains(missing), e.getMessage());
        assertTrue(e.getMessage().contains("cannot load model"), e.getMessage());

        // Without the driver's check, the tasks fail with the same reason, and the job stops.
        long started = System.nanoTime();
        SparkException job =
                assertThrows(
                        SparkException.class,
                        () ->
                                new TextEmbedder()
                                        .setModel(missing)
                                        .setValidateOnDriver(false)
                                        .transform(input)
                                        .count());
        double seconds = (System.nanoTime() - started) / 1e9;
        assertTrue(job.getMessage().contains("cannot load model"), job.getMessage());
        assertTrue(job.getMessage().contains(missing), job.getMessage());
        assertTrue(seconds < 30, "the failing job took " + seconds + " s");
    }

    @Test
    void badParametersNameTheParameter() {
        Dataset<Row> input = table(List.of("a"), 1);
        IllegalArgumentException column =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> new TextEmbedder().setInputCol("sentence").transform(input));
        assertTrue(column.getMessage().startsWith("inputCol:"), column.getMessage());
        IllegalArgumentException type =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> new TextEmbedder().setInputCol("id").transform(input));
        assertTrue(type.getMessage().contains("must be a string"), type.getMessage());
        IllegalArgumentException out =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> new TextEmbedder().setOutputCol("text").transform(input));
        assertTrue(out.getMessage().startsWith("outputCol:"), out.getMessage());
        IllegalArgumentException device =
                assertThrows(IllegalArgumentException.class, () -> new TextEmbedder().setDevice("tpu"));
        assertTrue(device.getMessage().startsWith("device:"), device.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new TextEmbedder().setBatchSize(0));
    }
}
