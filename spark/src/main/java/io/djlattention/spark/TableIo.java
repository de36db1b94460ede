/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

import java.util.Locale;

/**
 * Reads the tables the batch jobs take: CSV with a header row, Parquet, or plain text (one row
 * per line), chosen by the path's extension or named. CSV is read line by line (Spark's {@code
 * multiLine} off) so that a large file splits over many tasks: a quoted field may not hold a line
 * break.
 */
public final class TableIo {

    private TableIo() {}

    /**
     * Reads a table.
     *
     * @param spark the session
     * @param input a file or directory (local, HDFS, S3, ... whatever Spark reads)
     * @param format csv, parquet, text, or auto (by extension: .csv, .parquet, .txt/.text; a path
     *     without one is Parquet, as Spark writes directories of it)
     * @param textColumn the name a text file's single column gets
     * @return the rows
     * @throws IllegalArgumentException naming {@code format} for an unknown format
     */
    public static Dataset<Row> read(
            SparkSession spark, String input, String format, String textColumn) {
        switch (resolveFormat(input, format)) {
            case "csv":
                return spark.read().option("header", "true").csv(input);
            case "text":
                return spark.read().text(input).withColumnRenamed("value", textColumn);
            default:
                return spark.read().parquet(input);
        }
    }

    /**
     * Resolves {@code auto} from the path's extension.
     *
     * @param input the path
     * @param format csv, parquet, text or auto
     * @return csv, parquet or text
     */
    static String resolveFormat(String input, String format) {
        String f = format.trim().toLowerCase(Locale.ROOT);
        switch (f) {
            case "csv":
            case "parquet":
            case "text":
                return f;
            case "auto":
                String name = input.toLowerCase(Locale.ROOT).replaceAll("/+$", "");
                if (name.endsWith(".csv")) {
                    return "csv";
                }
                if (name.endsWith(".txt") || name.endsWith(".text")) {
                    return "text";
                }
                return "parquet";
            default:
                throw new IllegalArgumentException(
                        "format: expected auto, csv, parquet or text, got '" + format + "'");
        }
    }
}
