/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import io.djlattention.spark.TableIo;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;

import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/** The options the Spark jobs share: input, output, master, partitions, device. */
final class SparkOptions {

    @Spec(Spec.Target.MIXEE)
    CommandSpec spec;

    @Option(
            names = "--input",
            required = true,
            paramLabel = "PATH",
            description = "the table: CSV with a header, Parquet, or text (one row per line)")
    String input;

    @Option(
            names = "--format",
            paramLabel = "FORMAT",
            defaultValue = "auto",
            description = "csv, parquet, text or auto (by extension; default ${DEFAULT-VALUE})")
    String format;

    @Option(
            names = "--output",
            required = true,
            paramLabel = "PATH",
            description = "where the Parquet output goes (a directory)")
    String output;

    @Option(
            names = "--overwrite",
            description = "replace an existing output (default: an existing output is an error)")
    boolean overwrite;

    @Option(
            names = "--master",
            paramLabel = "URL",
            description =
                    "Spark master (default: spark-submit's, else local[*]: every core of this"
                            + " machine)")
    String master;

    @Option(
            names = "--partitions",
            paramLabel = "N",
            description = "repartition the input into N partitions (default: as read)")
    Integer partitions;

    @Option(
            names = "--device",
            paramLabel = "DEVICE",
            defaultValue = "auto",
            description =
                    "auto (the task's GPU from spark.task.resource.gpu.amount, else the CPU), cpu,"
                            + " gpu or gpu:N (default ${DEFAULT-VALUE})")
    String device;

    @Option(
            names = "--threads",
            paramLabel = "N",
            defaultValue = "0",
            description = "PyTorch intra-op threads per executor on the CPU (default: spark.task.cpus)")
    int threads;

    /**
     * Starts (or joins) the Spark session: spark-submit's master, else {@code --master}, else
     * {@code local[*]}.
     *
     * @param job the application's name
     * @return the session
     */
    SparkSession session(String job) {
        if (partitions != null && partitions < 1) {
            throw new ParameterException(
                    spec.commandLine(), "--partitions: expected >= 1, got " + partitions);
        }
        if (threads < 0) {
            throw new ParameterException(spec.commandLine(), "--threads: expected >= 0, got " + threads);
        }
        SparkSession.Builder b = SparkSession.builder().appName("djl-attention " + job);
        if (master != null) {
            b.master(master);
        } else if (System.getProperty("spark.master") == null) {
            b.master("local[*]");
        }
        // A batch job on one machine needs no web UI (and no port).
        b.config("spark.ui.enabled", System.getProperty("spark.ui.enabled", "false"));
        // Spark packs files into partitions of at least 4 MB by default (openCostInBytes), which
        // for text to embed is an hour of one core's work in a single task: let small inputs split
        // over every core (file splits keep the rows' order).
        b.config(
                "spark.sql.files.openCostInBytes",
                System.getProperty("spark.sql.files.openCostInBytes", "8192"));
        return b.getOrCreate();
    }

    /**
     * Reads the input, repartitioned when asked.
     *
     * @param spark the session
     * @param column the name a text file's column gets
     * @return the rows
     */
    Dataset<Row> read(SparkSession spark, String column) {
        Dataset<Row> rows;
        try {
            rows = TableIo.read(spark, input, format, column);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), "--" + e.getMessage());
        }
        return partitions == null ? rows : rows.repartition(partitions);
    }

    /**
     * Writes the output as Parquet.
     *
     * @param rows the rows
     */
    void write(Dataset<Row> rows) {
        rows.write().mode(overwrite ? SaveMode.Overwrite : SaveMode.ErrorIfExists).parquet(output);
    }
}
