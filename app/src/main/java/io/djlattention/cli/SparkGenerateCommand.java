/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import io.djlattention.spark.BadRows;
import io.djlattention.spark.TextGenerator;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

import java.io.PrintWriter;
import java.util.Locale;

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
                    + " The prompt column (--column) holds text (needs a tokenizer), or token ids"
                    + " as array<int> or, with --ids, as space-separated integers in a string."
        })
public final class SparkGenerateCommand extends SparkModelCommand<TextGenerator> {

    @Option(
            names = "--ids",
            description =
                    "the prompt column holds token ids as space-separated integers (what a CSV or"
                            + " text file can carry; stories260K has no tokenizer)")
    boolean ids;

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

    /** The options at {@link TextGenerator}'s defaults. */
    public SparkGenerateCommand() {
        super(
                "spark-generate",
                TextGenerator.DEFAULT_INPUT_COL,
                TextGenerator.DEFAULT_OUTPUT_COL,
                TextGenerator.DEFAULT_MODEL);
    }

    @Override
    Dataset<Row> prepare(Dataset<Row> rows) {
        if (!ids) {
            return rows;
        }
        if (!rows.schema().apply(column).dataType().equals(DataTypes.StringType)) {
            throw new ParameterException(
                    spec.commandLine(), "--ids: column '" + column + "' is not a string");
        }
        // "1 403 27" -> [1, 403, 27]; a malformed id gives a null element, a refused row.
        return rows.withColumn(
                inputColumn(),
                functions.expr(
                        "transform(filter(split(trim(`" + column + "`), '\\\\s+'),"
                                + " x -> x != ''), x -> try_cast(x AS INT))"));
    }

    @Override
    String inputColumn() {
        return ids ? column + "_ids" : column;
    }

    @Override
    TextGenerator transformer() {
        return new TextGenerator()
                .setTokenizer(tokenizer)
                .setMaxNewTokens(maxNewTokens)
                .setTemperature(temperature)
                .setTopK(topK)
                .setSeed(seed);
    }

    @Override
    void report(PrintWriter out, BadRows bad) {
        out.printf(
                Locale.ROOT,
                "  null generations: %d null or empty prompts, %d the model refuses%n",
                bad.getMissing(),
                bad.getRejected());
    }
}
