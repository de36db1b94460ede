/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import io.djlattention.spark.BadRows;
import io.djlattention.spark.TextGenerator;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * {@code spark-generate}: runs a table's prompts through the continuous-batching engine on Apache
 * Spark with {@link TextGenerator} (stories260K by default) and writes every row with its
 * generation as Parquet.
 */
@Command(
        name = "spark-generate",
        mixinStandardHelpOptions = true,
        description = {
            "Generate from a table's prompts on Apache Spark (local[*] by default) through the"
                    + " continuous-batching engine; write the rows and their generations as Parquet."
        })
public final class SparkGenerateCommand implements Callable<Integer> {

    @Spec CommandSpec spec;

    @Mixin SparkOptions spark;

    @Option(
            names = "--column",
            paramLabel = "NAME",
            defaultValue = "prompt",
            description =
                    "the prompt column: text (needs a tokenizer), or token ids as array<int> or as"
                            + " space-separated integers in a string with --ids (default"
                            + " ${DEFAULT-VALUE})")
    String column;

    @Option(
            names = "--ids",
            description =
                    "the prompt column holds token ids as space-separated integers (what a CSV or"
                            + " text file can carry; stories260K has no tokenizer)")
    boolean ids;

    @Option(
            names = "--output-column",
            paramLabel = "NAME",
            defaultValue = "generated",
            description = "the generation column (default ${DEFAULT-VALUE})")
    String outputColumn;

    @Option(
            names = {"-m", "--model"},
            paramLabel = "URL|PATH",
            defaultValue = TextGenerator.DEFAULT_MODEL,
            description = "a decoder model URL or checkpoint path (default ${DEFAULT-VALUE})")
    String model;

    @Option(
            names = "--tokenizer",
            paramLabel = "PATH",
            description = "a tokenizer.json for text prompts (default: the model's own)")
    String tokenizer;

    @Option(
            names = "--max-new-tokens",
            paramLabel = "N",
            defaultValue = "64",
            description = "tokens generated per row at most (default ${DEFAULT-VALUE})")
    int maxNewTokens;

    @Option(
            names = "--temperature",
            paramLabel = "T",
            defaultValue = "0",
            description = "0 for greedy (default), > 0 to sample")
    float temperature;

    @Option(
            names = "--top-k",
            paramLabel = "K",
            defaultValue = "0",
            description = "sampling: the k most likely tokens, 0 for all (default ${DEFAULT-VALUE})")
    int topK;

    @Option(
            names = "--seed",
            paramLabel = "N",
            defaultValue = "0",
            description = "sampling: the base seed (default ${DEFAULT-VALUE})")
    long seed;

    @Option(
            names = {"-b", "--batch-size"},
            paramLabel = "N",
            defaultValue = "32",
            description = "the most sequences an executor decodes together (default ${DEFAULT-VALUE})")
    int batchSize;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        SparkSession session = spark.session("spark-generate");
        try {
            Dataset<Row> rows = spark.read(session, column);
            String input = column;
            if (ids) {
                if (!rows.schema().apply(column).dataType().equals(DataTypes.StringType)) {
                    throw new ParameterException(
                            spec.commandLine(), "--ids: column '" + column + "' is not a string");
                }
                // "1 403 27" -> [1, 403, 27]; a malformed id gives a null element, a refused row.
                input = column + "_ids";
                rows =
                        rows.withColumn(
                                input,
                                org.apache.spark.sql.functions.expr(
                                        "transform(filter(split(trim(`" + column + "`), '\\\\s+'),"
                                                + " x -> x != ''), x -> try_cast(x AS INT))"));
            }
            TextGenerator generator;
            Dataset<Row> generated;
            try {
                generator =
                        new TextGenerator()
                                .setInputCol(input)
                                .setOutputCol(outputColumn)
                                .setModel(model)
                                .setTokenizer(tokenizer)
                                .setMaxNewTokens(maxNewTokens)
                                .setTemperature(temperature)
                                .setTopK(topK)
                                .setSeed(seed)
                                .setBatchSize(batchSize)
                                .setDevice(spark.device)
                                .setThreads(spark.threads);
                generated = generator.transform(rows);
            } catch (IllegalArgumentException e) {
                throw new ParameterException(spec.commandLine(), e.getMessage());
            }
            long started = System.nanoTime();
            spark.write(generated);
            double seconds = (System.nanoTime() - started) / 1e9;
            long count = session.read().parquet(spark.output).count();
            BadRows bad = generator.getBadRows();
            out.printf(
                    Locale.ROOT,
                    "spark-generate: %d rows (%d partitions, master %s) -> %s%n",
                    count,
                    rows.rdd().getNumPartitions(),
                    session.sparkContext().master(),
                    spark.output);
            out.printf(
                    Locale.ROOT,
                    "  null generations: %d null or empty prompts, %d the model refuses%n",
                    bad.getMissing(),
                    bad.getRejected());
            out.printf(
                    Locale.ROOT,
                    "  %.2f s read + generate + write (model loaded before), %.1f rows/s%n",
                    seconds,
                    count / seconds);
            return 0;
        } finally {
            session.stop();
        }
    }
}
