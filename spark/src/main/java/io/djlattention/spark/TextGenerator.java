/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;

import org.apache.spark.SparkContext;
import org.apache.spark.ml.Transformer;
import org.apache.spark.ml.param.FloatParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.LongParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.ml.util.Identifiable$;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Text generation as a Spark ML {@link Transformer}: each row's prompt in {@code inputCol} runs
 * through the continuous-batching engine ({@code GenerationEngine} over the paged KV cache) and
 * its generated continuation goes to {@code outputCol}.
 *
 * <p>Prompts are token ids ({@code array<int>}; the output is then the generated ids, {@code
 * array<int>}, the EOS token included when it ended the row) or strings ({@code string}, with a
 * tokenizer: the model's own {@code tokenizer.json} or {@code tokenizer}; the output is the
 * decoded text without special tokens). stories260K, the default model, has no tokenizer and
 * takes ids.
 *
 * <p>Each executor JVM loads the model and starts one engine per model and device; all of its
 * tasks submit their rows to it, so rows of concurrent partitions decode in the same batches
 * ({@code batchSize} sequences at most). Every input row comes out once, in order, with all its
 * columns. Greedy decoding ({@code temperature} 0, the default) gives the engine's own tokens; with
 * {@code temperature > 0} each row samples with the seed {@code seed + (partition << 32) + row
 * index in the partition}, so a retried task draws the same tokens. A null, empty or blank prompt,
 * and one the model refuses (its max positions or more, a token id outside the vocabulary, a null
 * id) gives null, counted in {@link #getBadRows()}. Loading and devices work as in {@link
 * TextEmbedder}.
 */
public final class TextGenerator extends ModelTransformer<TextGenerator> {

    private static final long serialVersionUID = 1L;

    /** The default model: stories260K from this project's zoo. */
    public static final String DEFAULT_MODEL = "djl://io.djlattention/stories260K";

    /** The default input column. */
    public static final String DEFAULT_INPUT_COL = "prompt";

    /** The default output column. */
    public static final String DEFAULT_OUTPUT_COL = "generated";

    /** The type of token-id columns. */
    public static final ArrayType IDS_TYPE = DataTypes.createArrayType(DataTypes.IntegerType, true);

    private final Param<String> tokenizer;
    private final IntParam maxNewTokens;
    private final FloatParam temperature;
    private final IntParam topK;
    private final LongParam seed;

    /** Creates a transformer with the defaults. */
    public TextGenerator() {
        this(Identifiable$.MODULE$.randomUID("djlTextGenerator"));
    }

    /**
     * Creates a transformer with a given uid (Spark's copies use it).
     *
     * @param uid the uid
     */
    public TextGenerator(String uid) {
        super(
                uid,
                "the prompts: array<int> token ids or string",
                "the generated ids or text",
                "a decoder model URL (djl://...) or checkpoint path",
                "the most sequences the executor's engine decodes together");
        tokenizer = new Param<>(this, "tokenizer", "a tokenizer.json for string prompts, or ''");
        maxNewTokens =
                new IntParam(
                        this, "maxNewTokens", "tokens generated per row at most", ParamValidators.gtEq(1));
        temperature =
                new FloatParam(
                        this, "temperature", "0 for greedy, > 0 to sample", ParamValidators.gtEq(0));
        topK = new IntParam(this, "topK", "sampling: the k most likely tokens, 0 for all", ParamValidators.gtEq(0));
        seed = new LongParam(this, "seed", "sampling: the base seed of the rows");
        setDefault(inputCol(), DEFAULT_INPUT_COL);
        setDefault(outputCol(), DEFAULT_OUTPUT_COL);
        setDefault(model(), DEFAULT_MODEL);
        setDefault(tokenizer, "");
        setDefault(maxNewTokens, 64);
        setDefault(temperature, 0f);
        setDefault(topK, 0);
        setDefault(seed, 0L);
    }

    /**
     * Returns the tokenizer param.
     *
     * @return the param
     */
    public Param<String> tokenizer() {
        return tokenizer;
    }

    /**
     * Returns the maxNewTokens param.
     *
     * @return the param
     */
    public IntParam maxNewTokens() {
        return maxNewTokens;
    }

    /**
     * Returns the temperature param.
     *
     * @return the param
     */
    public FloatParam temperature() {
        return temperature;
    }

    /**
     * Returns the topK param.
     *
     * @return the param
     */
    public IntParam topK() {
        return topK;
    }

    /**
     * Returns the seed param.
     *
     * @return the param
     */
    public LongParam seed() {
        return seed;
    }

    /**
     * Sets the tokenizer for string prompts (default: the model's own).
     *
     * @param value a tokenizer.json path every executor can read, or "" for the model's
     * @return this
     */
    public TextGenerator setTokenizer(String value) {
        set(tokenizer, value == null ? "" : value);
        return this;
    }

    /**
     * Sets the most tokens generated per row (default 64).
     *
     * @param value at least 1
     * @return this
     */
    public TextGenerator setMaxNewTokens(int value) {
        set(maxNewTokens, value);
        return this;
    }

    /**
     * Sets the sampling temperature (default 0: greedy).
     *
     * @param value at least 0
     * @return this
     */
    public TextGenerator setTemperature(float value) {
        set(temperature, value);
        return this;
    }

    /**
     * Sets top-k sampling (default 0: every token).
     *
     * @param value at least 0
     * @return this
     */
    public TextGenerator setTopK(int value) {
        set(topK, value);
        return this;
    }

    /**
     * Sets the base seed of sampled rows (default 0).
     *
     * @param value the seed
     * @return this
     */
    public TextGenerator setSeed(long value) {
        set(seed, value);
        return this;
    }

    @Override
    public StructType transformSchema(StructType schema) {
        DataType type = checkColumns(schema).dataType();
        boolean text = type.equals(DataTypes.StringType);
        boolean ids =
                type instanceof ArrayType
                        && ((ArrayType) type).elementType().equals(DataTypes.IntegerType);
        if (!text && !ids) {
            throw new IllegalArgumentException(
                    "inputCol: column '" + getInputCol() + "' must be array<int> (token ids) or string, got "
                            + type.simpleString());
        }
        return schema.add(getOutputCol(), text ? DataTypes.StringType : IDS_TYPE, true);
    }

    @Override
    public Dataset<Row> transform(Dataset<?> dataset) {
        StructType in = dataset.schema();
        StructType out = transformSchema(in);
        int column = in.fieldIndex(getInputCol());
        boolean text = in.fields()[column].dataType().equals(DataTypes.StringType);
        SparkContext sc = dataset.sparkSession().sparkContext();
        String tok = getOrDefault(tokenizer);
        GenerationModelSpec spec =
                new GenerationModelSpec(
                        getModel(), getDevice(), tok.isEmpty() ? null : tok, getBatchSize(), taskThreads(sc));
        Device driver = driverDevice(sc);
        if (driver != null && text && spec.get(driver).tokenizer() == null) {
            throw new IllegalArgumentException(
                    "inputCol: column '" + getInputCol() + "' holds text, but model "
                            + spec.model() + " has no tokenizer: give token ids (array<int>)"
                            + " or set tokenizer to a tokenizer.json");
        }
        BadRows bad = newBadRows(sc, uid());
        GeneratePartition.Settings settings =
                new GeneratePartition.Settings(
                        column,
                        text,
                        (Integer) getOrDefault(maxNewTokens),
                        (Float) getOrDefault(temperature),
                        (Integer) getOrDefault(topK),
                        (Long) getOrDefault(seed));
        return dataset.toDF()
                .mapPartitions(new GeneratePartition(spec, settings, bad), Encoders.row(out));
    }

    @Override
    public TextGenerator copy(ParamMap extra) {
        return (TextGenerator) defaultCopy(extra);
    }
}
