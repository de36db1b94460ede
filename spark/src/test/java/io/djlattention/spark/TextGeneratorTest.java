/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.generate.GenerationBlock;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationEngine;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/** {@link TextGenerator} on Spark {@code local[2,3]} against the engine run directly. */
class TextGeneratorTest {

    private static final int MAX_NEW_TOKENS = 20;

    private static Dataset<Row> table(List<int[]> prompts, int partitions) {
        StructType schema =
                new StructType()
                        .add("id", DataTypes.LongType, false)
                        .add("prompt", TextGenerator.IDS_TYPE, true);
        List<Row> rows = new ArrayList<>();
        for (int i = 0; i < prompts.size(); ++i) {
            int[] p = prompts.get(i);
            Integer[] boxed = null;
            if (p != null) {
                boxed = new Integer[p.length];
                for (int t = 0; t < p.length; ++t) {
                    boxed[t] = p[t];
                }
            }
            rows.add(RowFactory.create((long) i, boxed));
        }
        SparkSession spark = SparkTestSession.spark();
        return spark.createDataFrame(
                JavaSparkContext.fromSparkContext(spark.sparkContext()).parallelize(rows, partitions),
                schema);
    }

    @Test
    void greedyOutputsEqualTheEnginesAndBadRowsAreNull() throws Exception {
        Random random = new Random(2611);
        List<int[]> prompts = new ArrayList<>();
        for (int i = 0; i < 40; ++i) {
            int[] p = new int[1 + random.nextInt(48)];
            p[0] = 1; // llama2.c's BOS
            for (int t = 1; t < p.length; ++t) {
                p[t] = 3 + random.nextInt(509);
            }
            prompts.add(p);
        }
        List<int[]> expected = engineGreedy(prompts);
        // Bad rows: no prompt, an empty one, one of the model's 512 positions, an id past the
        // 512-token vocabulary.
        prompts.add(5, null);
        prompts.add(17, new int[0]);
        int[] tooLong = new int[512];
        java.util.Arrays.fill(tooLong, 7);
        prompts.add(23, tooLong);
        prompts.add(31, new int[] {1, 600, 4});
        expected.add(5, null);
        expected.add(17, null);
        expected.add(23, null);
        expected.add(31, null);

        TextGenerator generator =
                new TextGenerator().setMaxNewTokens(MAX_NEW_TOKENS).setBatchSize(8);
        List<Row> out = generator.transform(table(prompts, 4)).collectAsList();

        assertEquals(prompts.size(), out.size());
        for (int i = 0; i < out.size(); ++i) {
            Row row = out.get(i);
            assertEquals(i, row.getLong(0));
            if (expected.get(i) == null) {
                assertNull(row.get(2), "row " + i);
            } else {
                List<Integer> got = row.getList(2);
                int[] ids = got.stream().mapToInt(Integer::intValue).toArray();
                assertArrayEquals(expected.get(i), ids, "row " + i);
            }
        }
        assertEquals(2, generator.getBadRows().getMissing());
        assertEquals(2, generator.getBadRows().getRejected());
    }

    /** The prompts' greedy continuations from an engine of this test's own, all submitted at once. */
    private static List<int[]> engineGreedy(List<int[]> prompts) throws Exception {
        Criteria<int[], int[]> criteria =
                Criteria.builder()
                        .setTypes(int[].class, int[].class)
                        .optModelUrls(TextGenerator.DEFAULT_MODEL)
                        .optEngine("PyTorch")
                        .optDevice(Device.cpu())
                        .build();
        try (ZooModel<int[], int[]> model = criteria.loadModel()) {
            GenerationBlock block = DecoderModels.generationBlock(model);
            try (GenerationEngine engine =
                    GenerationEngine.builder()
                            .setDecoder(block.getDecoder())
                            .optDevice(Device.cpu())
                            .optBlockSize(block.getBlockSize())
                            .optPrefillAttention(block.getPrefillAttention())
                            .optMaxBatchSize(16)
                            .build()) {
                GenerationConfig config =
                        GenerationConfig.builder()
                                .setMaxNewTokens(MAX_NEW_TOKENS)
                                .optEosTokenId(block.getEosTokenId())
                                .build();
                List<GenerationEngine.Handle> handles = new ArrayList<>();
                for (int[] p : prompts) {
                    handles.add(engine.submit(p, config, null));
                }
                List<int[]> out = new ArrayList<>();
                for (GenerationEngine.Handle h : handles) {
                    out.add(h.getResult().get().generated());
                }
                return out;
            }
        }
    }

    @Test
    void textPromptsWithoutTokenizerAreRefusedOnTheDriver() {
        SparkSession spark = SparkTestSession.spark();
        Dataset<Row> input = spark.sql("SELECT 'Once upon a time' AS prompt");
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> new TextGenerator().transform(input));
        assertTrue(e.getMessage().contains("has no tokenizer"), e.getMessage());
        IllegalArgumentException type =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> new TextGenerator().transform(spark.sql("SELECT 3 AS prompt")));
        assertTrue(type.getMessage().startsWith("inputCol:"), type.getMessage());
    }
}
