/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import io.djlattention.spark.BadRows;
import io.djlattention.spark.TextEmbedder;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.util.Locale;

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
                    + " Parquet with an array<float> column (the embedding column)."
        })
public final class SparkEmbedCommand extends SparkModelCommand<TextEmbedder> {

    @Option(names = "--no-normalize", description = "skip L2 normalisation of the embeddings")
    boolean noNormalize;

    /** The options at {@link TextEmbedder}'s defaults. */
    public SparkEmbedCommand() {
        super(
                "spark-embed",
                TextEmbedder.DEFAULT_INPUT_COL,
                TextEmbedder.DEFAULT_OUTPUT_COL,
                TextEmbedder.DEFAULT_MODEL);
    }

    @Override
    TextEmbedder transformer() {
        return new TextEmbedder().setNormalize(!noNormalize);
    }

    @Override
    void report(PrintWriter out, BadRows bad) {
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
    }
}
