/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import io.djlattention.spark.BadRows;
import io.djlattention.spark.TextEmbedder;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

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
 * {@code spark-embed}: embeds a table's text column on Apache Spark with {@link TextEmbedder}
 * (all-MiniLM-L6-v2 by default) and writes every row, its columns and its embedding, as Parquet.
 * Runs in {@code local[*]} unless spark-submit or {@code --master} says otherwise.
 */
@Command(
        name = "spark-embed",
        mixinStandardHelpOptions = true,
        description = {
            "Embed a table's text column on Apache Spark (local[*] by default) and write it as"
                    + " Parquet with an array<float> column."
        })
public final class SparkEmbedCommand implements Callable<Integer> {

    @Spec CommandSpec spec;

    @Mixin SparkOptions spark;

    @Option(
            names = "--column",
            paramLabel = "NAME",
            defaultValue = "text",
            description = "the text column (a text file's lines get this name; default ${DEFAULT-VALUE})")
    String column;

    @Option(
            names = "--output-column",
            paramLabel = "NAME",
            defaultValue = "embedding",
            description = "the embedding column (default ${DEFAULT-VALUE})")
    String outputColumn;

    @Option(
            names = {"-m", "--model"},
            paramLabel = "URL|PATH",
            defaultValue = TextEmbedder.DEFAULT_MODEL,
            description = "a model URL or an encoder checkpoint directory (default ${DEFAULT-VALUE})")
    String model;

    @Option(
            names = {"-b", "--batch-size"},
            paramLabel = "N",
            defaultValue = "32",
            description = "rows per model call (default ${DEFAULT-VALUE})")
    int batchSize;

    @Option(names = "--no-normalize", description = "skip L2 normalisation of the embeddings")
    boolean noNormalize;

    @Override
    public Integer call() {
        if (batchSize < 1) {
            throw new ParameterException(
                    spec.commandLine(), "--batch-size: expected >= 1, got " + batchSize);
        }
        PrintWriter out = spec.commandLine().getOut();
        SparkSession session = spark.session("spark-embed");
        try {
            Dataset<Row> rows = spark.read(session, column);
            TextEmbedder embedder =
                    new TextEmbedder()
                            .setInputCol(column)
                            .setOutputCol(outputColumn)
                            .setModel(model)
                            .setBatchSize(batchSize)
                            .setDevice(spark.device)
                            .setNormalize(!noNormalize)
                            .setThreads(spark.threads);
            Dataset<Row> embedded;
            try {
                // Loads the model on the driver first: a bad model fails here, before the job.
                embedded = embedder.transform(rows);
            } catch (IllegalArgumentException e) {
                throw new ParameterException(spec.commandLine(), e.getMessage());
            }
            long started = System.nanoTime();
            spark.write(embedded);
            double seconds = (System.nanoTime() - started) / 1e9;
            long count = session.read().parquet(spark.output).count();
            BadRows bad = embedder.getBadRows();
            out.printf(
                    Locale.ROOT,
                    "spark-embed: %d rows (%d partitions, master %s) -> %s%n",
                    count,
                    rows.rdd().getNumPartitions(),
                    session.sparkContext().master(),
                    spark.output);
            out.printf(
                    Locale.ROOT,
                    "  model %s, column %s -> %s (array<float>)%n",
                    model,
                    column,
                    outputColumn);
            out.printf(
                    Locale.ROOT,
                    "  null embeddings: %d null or empty rows, %d longer than the model's context%n",
                    bad.getMissing(),
                    bad.getRejected());
            out.printf(
                    Locale.ROOT,
                    "  %.2f s read + embed + write (model loaded before), %.1f rows/s%n",
                    seconds,
                    count / seconds);
            return 0;
        } finally {
            session.stop();
        }
    }
}
