/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import io.djlattention.spark.BadRows;
import io.djlattention.spark.ModelTransformer;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * What {@code spark-embed} and {@code spark-generate} share: the options of the table and the
 * session ({@link SparkOptions}) and of the model transformer (columns, model, batch size, whose
 * defaults are the transformer's own), and the job: start the session, read, transform (the model
 * loads on the driver first, so a bad model or column fails before the job), write, report.
 *
 * @param <T> the transformer
 */
abstract class SparkModelCommand<T extends ModelTransformer<T>> implements Callable<Integer> {

    @Spec CommandSpec spec;

    @Mixin SparkOptions spark;

    @Option(
            names = "--column",
            paramLabel = "NAME",
            description = "the input column; a text file's lines get this name (default ${DEFAULT-VALUE})")
    String column;

    @Option(
            names = "--output-column",
            paramLabel = "NAME",
            description = "the column written (default ${DEFAULT-VALUE})")
    String outputColumn;

    @Option(
            names = {"-m", "--model"},
            paramLabel = "URL|PATH",
            description = "a model URL or checkpoint path (default ${DEFAULT-VALUE})")
    String model;

    @Option(
            names = {"-b", "--batch-size"},
            paramLabel = "N",
            description = "rows per model call; for generation, the most sequences an executor"
                    + " decodes together (default ${DEFAULT-VALUE})")
    int batchSize;

    private final String job;

    /**
     * The options start at the transformer's defaults, given as its constants: picocli makes
     * every subcommand when the app starts, and a transformer instance would load Spark for every
     * command (+80 MB resident for {@code serve}).
     *
     * @param job the command's name, which starts its report
     * @param inputCol the transformer's default input column
     * @param outputCol its default output column
     * @param model its default model
     */
    SparkModelCommand(String job, String inputCol, String outputCol, String model) {
        this.job = job;
        column = inputCol;
        outputColumn = outputCol;
        this.model = model;
        batchSize = ModelTransformer.DEFAULT_BATCH_SIZE;
    }

    /**
     * Returns the input as the transformer reads it (spark-generate turns id strings into ids).
     *
     * @param rows the table as read
     * @return the rows to transform; {@link #inputColumn} names their input column
     */
    Dataset<Row> prepare(Dataset<Row> rows) {
        return rows;
    }

    /** The column the transformer reads, in the rows {@link #prepare} returns. */
    String inputColumn() {
        return column;
    }

    /**
     * Returns the transformer with the command's own settings; the shared ones are set after.
     *
     * @return a new transformer
     */
    abstract T transformer();

    /**
     * Prints the report's lines on the rows without output, and anything else of the command's.
     *
     * @param out where
     * @param bad the transformer's counters
     */
    abstract void report(PrintWriter out, BadRows bad);

    @Override
    public final Integer call() {
        if (batchSize < 1) {
            throw new ParameterException(
                    spec.commandLine(), "--batch-size: expected >= 1, got " + batchSize);
        }
        PrintWriter out = spec.commandLine().getOut();
        SparkSession session = spark.session(job);
        try {
            Dataset<Row> rows = spark.read(session, column);
            Dataset<Row> input = prepare(rows);
            T transformer;
            Dataset<Row> result;
            try {
                transformer =
                        transformer()
                                .setInputCol(inputColumn())
                                .setOutputCol(outputColumn)
                                .setModel(model)
                                .setBatchSize(batchSize)
                                .setDevice(spark.device)
                                .setThreads(spark.threads);
                // Loads the model on the driver first: a bad model fails here, before the job.
                result = transformer.transform(input);
            } catch (IllegalArgumentException e) {
                throw new ParameterException(spec.commandLine(), e.getMessage());
            }
            long started = System.nanoTime();
            spark.write(result);
            double seconds = (System.nanoTime() - started) / 1e9;
            long count = session.read().parquet(spark.output).count();
            out.printf(
                    Locale.ROOT,
                    "%s: %d rows (%d partitions, master %s) -> %s%n",
                    job,
                    count,
                    rows.rdd().getNumPartitions(),
                    session.sparkContext().master(),
                    spark.output);
            report(out, transformer.getBadRows());
            out.printf(
                    Locale.ROOT,
                    "  %.2f s read + %s + write (model loaded before), %.1f rows/s%n",
                    seconds,
                    job.substring("spark-".length()),
                    count / seconds);
            return 0;
        } finally {
            session.stop();
        }
    }
}
