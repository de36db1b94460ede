/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;
import ai.djl.inference.Predictor;
import ai.djl.translate.TranslateException;

import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.ml.Transformer;
import org.apache.spark.ml.param.BooleanParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.ml.util.Identifiable$;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.TaskCompletionListener;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * Sentence embeddings as a Spark ML {@link Transformer}: appends {@code outputCol}, an {@code
 * array<float>} (384 floats for the default all-MiniLM-L6-v2), to every row of a dataset whose
 * {@code inputCol} is a string column.
 *
 * <p>Each executor JVM loads the model once (per model, device and normalisation) and shares it
 * among its tasks; each task embeds its partition's rows in batches of {@code batchSize}, and
 * every input row comes out once, in order, with all its columns. A row whose text is null, empty
 * or blank, or longer than the model's context ({@code maxLength} tokens, special tokens included,
 * which the model would truncate) gets a null embedding and is counted in {@link #getBadRows()}.
 *
 * <p>{@link #transform} loads the model on the driver first ({@code validateOnDriver}, default
 * true; on the CPU, or in local mode on the tasks' own device, so local jobs load it once): a
 * model that cannot load fails the call at once with a {@link ModelLoadException} naming the
 * reason, before any task runs. An executor that cannot load it fails its tasks with the same
 * exception; a retry on that JVM fails at once (the failure is remembered) and Spark stops the job
 * after {@code spark.task.maxFailures} attempts.
 *
 * <p>The device ({@code device}, default {@code auto}) is the GPU Spark assigned the task ({@code
 * spark.task.resource.gpu.amount}), else the CPU, where PyTorch runs {@code threads} intra-op
 * threads per JVM (default {@code spark.task.cpus}).
 *
 * <p>{@link #registerSqlFunction} registers {@code djl_embed(text)} with the same settings, one
 * row per call (no batching: prefer the transformer for large tables).
 */
public final class TextEmbedder extends Transformer {

    private static final long serialVersionUID = 1L;

    /** The default model: all-MiniLM-L6-v2 from this project's zoo. */
    public static final String DEFAULT_MODEL = "djl://io.djlattention/all-MiniLM-L6-v2";

    /** The output column's type. */
    public static final ArrayType EMBEDDING_TYPE = DataTypes.createArrayType(DataTypes.FloatType, false);

    private final String uid;
    private final Param<String> inputCol;
    private final Param<String> outputCol;
    private final Param<String> model;
    private final IntParam batchSize;
    private final Param<String> device;
    private final BooleanParam normalize;
    private final IntParam threads;
    private final BooleanParam validateOnDriver;
    private transient BadRows badRows;

    /** Creates a transformer with the defaults. */
    public TextEmbedder() {
        this(Identifiable$.MODULE$.randomUID("djlTextEmbedder"));
    }

    /**
     * Creates a transformer with a given uid (Spark's copies use it).
     *
     * @param uid the uid
     */
    public TextEmbedder(String uid) {
        this.uid = uid;
        inputCol = new Param<>(this, "inputCol", "the string column to embed");
        outputCol = new Param<>(this, "outputCol", "the array<float> column written");
        model = new Param<>(this, "model", "a model URL (djl://...) or checkpoint path");
        batchSize =
                new IntParam(this, "batchSize", "rows per model call", ParamValidators.gtEq(1));
        device = new Param<>(this, "device", "auto (the task's GPU, else CPU), cpu, gpu or gpu:N");
        normalize = new BooleanParam(this, "normalize", "L2-normalise the embeddings");
        threads =
                new IntParam(
                        this,
                        "threads",
                        "PyTorch intra-op threads on the CPU, 0 for spark.task.cpus",
                        ParamValidators.gtEq(0));
        validateOnDriver =
                new BooleanParam(
                        this, "validateOnDriver", "load the model on the driver before the job");
        setDefault(inputCol, "text");
        setDefault(outputCol, "embedding");
        setDefault(model, DEFAULT_MODEL);
        setDefault(batchSize, 32);
        setDefault(device, TaskDevice.AUTO);
        setDefault(normalize, true);
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
     * Returns the normalize param.
     *
     * @return the param
     */
    public BooleanParam normalize() {
        return normalize;
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
     * Sets the input column (default {@code text}).
     *
     * @param value a string column
     * @return this
     */
    public TextEmbedder setInputCol(String value) {
        set(inputCol, value);
        return this;
    }

    /**
     * Sets the output column (default {@code embedding}).
     *
     * @param value a column name not in the input
     * @return this
     */
    public TextEmbedder setOutputCol(String value) {
        set(outputCol, value);
        return this;
    }

    /**
     * Sets the model (default {@link #DEFAULT_MODEL}).
     *
     * @param value a model URL or a checkpoint directory every executor can read
     * @return this
     */
    public TextEmbedder setModel(String value) {
        set(model, value);
        return this;
    }

    /**
     * Sets the rows per model call (default 32).
     *
     * @param value at least 1
     * @return this
     */
    public TextEmbedder setBatchSize(int value) {
        set(batchSize, value);
        return this;
    }

    /**
     * Sets the device (default {@code auto}).
     *
     * @param value auto, cpu, gpu or gpu:N
     * @return this
     */
    public TextEmbedder setDevice(String value) {
        set(device, TaskDevice.check(value));
        return this;
    }

    /**
     * Sets L2 normalisation (default true).
     *
     * @param value whether to normalise
     * @return this
     */
    public TextEmbedder setNormalize(boolean value) {
        set(normalize, value);
        return this;
    }

    /**
     * Sets PyTorch's intra-op threads on the CPU (default 0: {@code spark.task.cpus}).
     *
     * @param value at least 0
     * @return this
     */
    public TextEmbedder setThreads(int value) {
        set(threads, value);
        return this;
    }

    /**
     * Sets whether {@link #transform} loads the model on the driver first (default true).
     *
     * @param value false for a driver that cannot hold the model
     * @return this
     */
    public TextEmbedder setValidateOnDriver(boolean value) {
        set(validateOnDriver, value);
        return this;
    }

    /**
     * Returns the input column.
     *
     * @return the column name
     */
    public String getInputCol() {
        return getOrDefault(inputCol);
    }

    /**
     * Returns the output column.
     *
     * @return the column name
     */
    public String getOutputCol() {
        return getOrDefault(outputCol);
    }

    /**
     * Returns the model.
     *
     * @return a URL or path
     */
    public String getModel() {
        return getOrDefault(model);
    }

    /**
     * Returns the rows per model call.
     *
     * @return the batch size
     */
    public int getBatchSize() {
        return (Integer) getOrDefault(batchSize);
    }

    /**
     * Returns the counters of the last {@link #transform} (or {@link #registerSqlFunction}):
     * null, empty and refused rows. They fill as actions run on its output.
     *
     * @return the counters, or null before the first call
     */
    public BadRows getBadRows() {
        return badRows;
    }

    @Override
    public StructType transformSchema(StructType schema) {
        String in = getInputCol();
        String out = getOutputCol();
        if (!List.of(schema.fieldNames()).contains(in)) {
            throw new IllegalArgumentException(
                    "inputCol: no column '" + in + "' in " + schema.simpleString());
        }
        StructField field = schema.apply(in);
        if (!field.dataType().equals(DataTypes.StringType)) {
            throw new IllegalArgumentException(
                    "inputCol: column '" + in + "' must be a string, got "
                            + field.dataType().simpleString());
        }
        if (List.of(schema.fieldNames()).contains(out)) {
            throw new IllegalArgumentException(
                    "outputCol: column '" + out + "' already exists in " + schema.simpleString());
        }
        return schema.add(out, EMBEDDING_TYPE, true);
    }

    @Override
    public Dataset<Row> transform(Dataset<?> dataset) {
        StructType in = dataset.schema();
        StructType out = transformSchema(in);
        SparkSession spark = dataset.sparkSession();
        EmbeddingModelSpec spec = spec(spark);
        BadRows bad = BadRows.register(spark.sparkContext(), uid);
        badRows = bad;
        return dataset.toDF()
                .mapPartitions(
                        new EmbedPartition(spec, in.fieldIndex(getInputCol()), getBatchSize(), bad),
                        Encoders.row(out));
    }

    /**
     * Registers the SQL function {@code djl_embed(text)}, returning {@code array<float>}, with this
     * transformer's model, device and normalisation (the model loads on the driver first, as in
     * {@link #transform}). Bad rows give null and count in {@link #getBadRows()}.
     *
     * @param spark the session
     */
    public void registerSqlFunction(SparkSession spark) {
        EmbeddingModelSpec spec = spec(spark);
        BadRows bad = BadRows.register(spark.sparkContext(), uid + " djl_embed");
        badRows = bad;
        spark.udf().register("djl_embed", new EmbedFunction(spec, bad), EMBEDDING_TYPE);
    }

    @Override
    public TextEmbedder copy(ParamMap extra) {
        return (TextEmbedder) defaultCopy(extra);
    }

    /** Resolves the settings on the driver, and loads the model here first unless told not to. */
    private EmbeddingModelSpec spec(SparkSession spark) {
        SparkContext sc = spark.sparkContext();
        int n = (Integer) getOrDefault(threads);
        if (n == 0) {
            n = sc.getConf().getInt("spark.task.cpus", 1);
        }
        EmbeddingModelSpec spec =
                new EmbeddingModelSpec(
                        getModel(),
                        TaskDevice.check(getOrDefault(device)),
                        (Boolean) getOrDefault(normalize),
                        n);
        if ((Boolean) getOrDefault(validateOnDriver)) {
            // In local mode the driver is the executor: load it where the tasks will use it.
            spec.get(sc.isLocal() ? TaskDevice.resolve(spec.device()) : Device.cpu());
        }
        return spec;
    }

    /** One task's rows, embedded batch by batch, each row out once, in order. */
    private static final class EmbedPartition implements MapPartitionsFunction<Row, Row> {

        private static final long serialVersionUID = 1L;

        private final EmbeddingModelSpec spec;
        private final int column;
        private final int batchSize;
        private final BadRows bad;

        EmbedPartition(EmbeddingModelSpec spec, int column, int batchSize, BadRows bad) {
            this.spec = spec;
            this.column = column;
            this.batchSize = batchSize;
            this.bad = bad;
        }

        @Override
        public Iterator<Row> call(Iterator<Row> rows) {
            EmbeddingModelSpec.Loaded loaded = spec.get();
            Predictor<String, float[]> predictor = loaded.newPredictor();
            TaskContext task = TaskContext.get();
            if (task != null) {
                task.addTaskCompletionListener((TaskCompletionListener) t -> predictor.close());
            }
            return new Iterator<>() {
                private final List<Row> batch = new ArrayList<>(batchSize);
                private float[][] embeddings = new float[0][];
                private int next;

                @Override
                public boolean hasNext() {
                    if (next < batch.size()) {
                        return true;
                    }
                    batch.clear();
                    next = 0;
                    List<String> texts = new ArrayList<>(batchSize);
                    while (batch.size() < batchSize && rows.hasNext()) {
                        Row row = rows.next();
                        batch.add(row);
                        texts.add(row.isNullAt(column) ? null : row.getString(column));
                    }
                    if (batch.isEmpty()) {
                        return false;
                    }
                    try {
                        embeddings = loaded.embed(predictor, texts, bad);
                    } catch (TranslateException e) {
                        throw new IllegalStateException(
                                "embedding a batch of " + texts.size() + " rows failed: "
                                        + e.getMessage(),
                                e);
                    }
                    return true;
                }

                @Override
                public Row next() {
                    if (!hasNext()) {
                        throw new NoSuchElementException();
                    }
                    Row row = batch.get(next);
                    Object[] values = new Object[row.length() + 1];
                    for (int i = 0; i < row.length(); ++i) {
                        values[i] = row.get(i);
                    }
                    values[row.length()] = embeddings[next];
                    ++next;
                    return RowFactory.create(values);
                }
            };
        }
    }

    /** {@code djl_embed(text)}: one row per call, on this JVM's shared model. */
    private static final class EmbedFunction implements UDF1<String, float[]> {

        private static final long serialVersionUID = 1L;

        private final EmbeddingModelSpec spec;
        private final BadRows bad;

        EmbedFunction(EmbeddingModelSpec spec, BadRows bad) {
            this.spec = spec;
            this.bad = bad;
        }

        @Override
        public float[] call(String text) throws Exception {
            EmbeddingModelSpec.Loaded loaded = spec.get();
            try (Predictor<String, float[]> predictor = loaded.newPredictor()) {
                return loaded.embed(predictor, Collections.singletonList(text), bad)[0];
            }
        }
    }
}
