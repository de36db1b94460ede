/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;

import org.apache.spark.SparkContext;
import org.apache.spark.ml.Transformer;
import org.apache.spark.ml.param.BooleanParam;
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
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import java.util.List;

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
public final class TextGenerator extends Transformer {

    private static final long serialVersionUID = 1L;

    /** The default model: stories260K from this project's zoo. */
    public static final String DEFAULT_MODEL = "djl://io.djlattention/stories260K";

    /** The type of token-id columns. */
    public static final ArrayType IDS_TYPE = DataTypes.createArrayType(DataTypes.IntegerType, true);

    private final String uid;
    private final Param<String> inputCol;
    private final Param<String> outputCol;
    private final Param<String> model;
    private final Param<String> tokenizer;
    private final IntParam maxNewTokens;
    private final FloatParam temperature;
    private final IntParam topK;
    private final LongParam seed;
    private final IntParam batchSize;
    private final Param<String> device;
    private final IntParam threads;
    private final BooleanParam validateOnDriver;
    private transient BadRows badRows;

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
        this.uid = uid;
        inputCol = new Param<>(this, "inputCol", "the prompts: array<int> token ids or string");
        outputCol = new Param<>(this, "outputCol", "the generated ids or text");
        model = new Param<>(this, "model", "a decoder model URL (djl://...) or checkpoint path");
        tokenizer = new Param<>(this, "tokenizer", "a tokenizer.json for string prompts, or ''");
        maxNewTokens =
                new IntParam(
                        this, "maxNewTokens", "tokens generated per row at most", ParamValidators.gtEq(1));
        temperature =
                new FloatParam(
                        this, "temperature", "0 for greedy, > 0 to sample", ParamValidators.gtEq(0));
        topK = new IntParam(this, "topK", "sampling: the k most likely tokens, 0 for all", ParamValidators.gtEq(0));
        seed = new LongParam(this, "seed", "sampling: the base seed of the rows");
        batchSize =
                new IntParam(
                        this,
                        "batchSize",
                        "the most sequences the executor's engine decodes together",
                        ParamValidators.gtEq(1));
        device = new Param<>(this, "device", "auto (the task's GPU, else CPU), cpu, gpu or gpu:N");
        threads =
                new IntParam(
                        this,
                        "threads",
                        "PyTorch intra-op threads on the CPU, 0 for spark.task.cpus",
                        ParamValidators.gtEq(0));
        validateOnDriver =
                new BooleanParam(
                        this, "validateOnDriver", "load the model on the driver before the job");
        setDefault(inputCol, "prompt");
        setDefault(outputCol, "generated");
        setDefault(model, DEFAULT_MODEL);
        setDefault(tokenizer, "");
        setDefault(maxNewTokens, 64);
        setDefault(temperature, 0f);
        setDefault(topK, 0);
        setDefault(seed, 0L);
        setDefault(batchSize, 32);
        setDefault(device, TaskDevice.AUTO);
        setDefault(threads, 0);
        setDefault(validateOnDriver, true);
    }

    @Override
    public String uid() {
        return uid;
    }

    // Spark finds a transformer's params through public no-argument methods named after them.

    /**
     * Returns the inputCol param.
     *
     * @return the param
     */
    public Param<String> inputCol() {
        return inputCol;
    }

    /**
     * Returns the outputCol param.
     *
     * @return the param
     */
    public Param<String> outputCol() {
        return outputCol;
    }

    /**
     * Returns the model param.
     *
     * @return the param
     */
    public Param<String> model() {
        return model;
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
     * Returns the batchSize param.
     *
     * @return the param
     */
    public IntParam batchSize() {
        return batchSize;
    }

    /**
     * Returns the device param.
     *
     * @return the param
     */
    public Param<String> device() {
        return device;
    }

    /**
     * Returns the threads param.
     *
     * @return the param
     */
    public IntParam threads() {
        return threads;
    }

    /**
     * Returns the validateOnDriver param.
     *
     * @return the param
     */
    public BooleanParam validateOnDriver() {
        return validateOnDriver;
    }

    /**
     * Sets the prompt column (default {@code prompt}).
     *
     * @param value an array&lt;int&gt; or string column
     * @return this
     */
    public TextGenerator setInputCol(String value) {
        set(inputCol, value);
        return this;
    }

    /**
     * Sets the output column (default {@code generated}).
     *
     * @param value a column name not in the input
     * @return this
     */
    public TextGenerator setOutputCol(String value) {
        set(outputCol, value);
        return this;
    }

    /**
     * Sets the model (default {@link #DEFAULT_MODEL}).
     *
     * @param value a model URL or a checkpoint path every executor can read
     * @return this
     */
    public TextGenerator setModel(String value) {
        set(model, value);
        return this;
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

    /**
     * Sets the most sequences an executor's engine decodes together (default 32).
     *
     * @param value at least 1
     * @return this
     */
    public TextGenerator setBatchSize(int value) {
        set(batchSize, value);
        return this;
    }

    /**
     * Sets the device (default {@code auto}).
     *
     * @param value auto, cpu, gpu or gpu:N
     * @return this
     */
    public TextGenerator setDevice(String value) {
        set(device, TaskDevice.check(value));
        return this;
    }

    /**
     * Sets PyTorch's intra-op threads on the CPU (default 0: {@code spark.task.cpus}).
     *
     * @param value at least 0
     * @return this
     */
    public TextGenerator setThreads(int value) {
        set(threads, value);
        return this;
    }

    /**
     * Sets whether {@link #transform} loads the model on the driver first (default true).
     *
     * @param value false for a driver that cannot hold the model
     * @return this
     */
    public TextGenerator setValidateOnDriver(boolean value) {
        set(validateOnDriver, value);
        return this;
    }

    /**
     * Returns the counters of the last {@link #transform}.
     *
     * @return the counters, or null before the first call
     */
    public BadRows getBadRows() {
        return badRows;
    }

    @Override
    public StructType transformSchema(StructType schema) {
        String in = getOrDefault(inputCol);
        String out = getOrDefault(outputCol);
        List<String> names = List.of(schema.fieldNames());
        if (!names.contains(in)) {
            throw new IllegalArgumentException(
                    "inputCol: no column '" + in + "' in " + schema.simpleString());
        }
        DataType type = schema.apply(in).dataType();
        boolean text = type.equals(DataTypes.StringType);
        boolean ids =
                type instanceof ArrayType
                        && ((ArrayType) type).elementType().equals(DataTypes.IntegerType);
        if (!text && !ids) {
            throw new IllegalArgumentException(
                    "inputCol: column '" + in + "' must be array<int> (token ids) or string, got "
                            + type.simpleString());
        }
        if (names.contains(out)) {
            throw new IllegalArgumentException(
                    "outputCol: column '" + out + "' already exists in " + schema.simpleString());
        }
        return schema.add(out, text ? DataTypes.StringType : IDS_TYPE, true);
    }

    @Override
    public Dataset<Row> transform(Dataset<?> dataset) {
        StructType in = dataset.schema();
        StructType out = transformSchema(in);
        int column = in.fieldIndex(getOrDefault(inputCol));
        boolean text = in.fields()[column].dataType().equals(DataTypes.StringType);
        SparkSession spark = dataset.sparkSession();
        SparkContext sc = spark.sparkContext();
        int n = (Integer) getOrDefault(threads);
        if (n == 0) {
            n = sc.getConf().getInt("spark.task.cpus", 1);
        }
        String tok = getOrDefault(tokenizer);
        GenerationModelSpec spec =
                new GenerationModelSpec(
                        getOrDefault(model),
                        TaskDevice.check(getOrDefault(device)),
                        tok.isEmpty() ? null : tok,
                        (Integer) getOrDefault(batchSize),
                        n);
        if ((Boolean) getOrDefault(validateOnDriver)) {
            GenerationModelSpec.Loaded loaded =
                    spec.get(sc.isLocal() ? TaskDevice.resolve(spec.device()) : Device.cpu());
            if (text && loaded.tokenizer() == null) {
                throw new IllegalArgumentException(
                        "inputCol: column '" + getOrDefault(inputCol) + "' holds text, but model "
                                + spec.model() + " has no tokenizer: give token ids (array<int>)"
                                + " or set tokenizer to a tokenizer.json");
            }
        }
        BadRows bad = BadRows.register(sc, uid);
        badRows = bad;
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
