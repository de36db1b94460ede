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
import org.apache.spark.ml.param.ParamMap;
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
public final class TextEmbedder extends ModelTransformer<TextEmbedder> {

    private static final long serialVersionUID = 1L;

    /** The default model: all-MiniLM-L6-v2 from this project's zoo. */
    public static final String DEFAULT_MODEL = "djl://io.djlattention/all-MiniLM-L6-v2";

    /** The default input column. */
    public static final String DEFAULT_INPUT_COL = "text";

    /** The default output column. */
    public static final String DEFAULT_OUTPUT_COL = "embedding";

    /** The output column's type. */
    public static final ArrayType EMBEDDING_TYPE = DataTypes.createArrayType(DataTypes.FloatType, false);

    private final BooleanParam normalize;

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
        super(
                uid,
                "the string column to embed",
                "the array<float> column written",
                "a model URL (djl://...) or checkpoint path",
                "rows per model call");
        normalize = new BooleanParam(this, "normalize", "L2-normalise the embeddings");
        setDefault(inputCol(), DEFAULT_INPUT_COL);
        setDefault(outputCol(), DEFAULT_OUTPUT_COL);
        setDefault(model(), DEFAULT_MODEL);
        setDefault(normalize, true);
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
     * Sets L2 normalisation (default true).
     *
     * @param value whether to normalise
     * @return this
     */
    public TextEmbedder setNormalize(boolean value) {
        set(normalize, value);
        return this;
    }

    @Override
    public StructType transformSchema(StructType schema) {
        StructField field = checkColumns(schema);
        if (!field.dataType().equals(DataTypes.StringType)) {
            throw new IllegalArgumentException(
                    "inputCol: column '" + getInputCol() + "' must be a string, got "
                            + field.dataType().simpleString());
        }
        return schema.add(getOutputCol(), EMBEDDING_TYPE, true);
    }

    @Override
    public Dataset<Row> transform(Dataset<?> dataset) {
        StructType in = dataset.schema();
        StructType out = transformSchema(in);
        SparkSession spark = dataset.sparkSession();
        EmbeddingModelSpec spec = spec(spark);
        BadRows bad = newBadRows(spark.sparkContext(), uid());
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
        BadRows bad = newBadRows(spark.sparkContext(), uid() + " djl_embed");
        spark.udf().register("djl_embed", new EmbedFunction(spec, bad), EMBEDDING_TYPE);
    }

    @Override
    public TextEmbedder copy(ParamMap extra) {
        return (TextEmbedder) defaultCopy(extra);
    }

    /** Resolves the settings on the driver, and loads the model here first unless told not to. */
    private EmbeddingModelSpec spec(SparkSession spark) {
        SparkContext sc = spark.sparkContext();
        EmbeddingModelSpec spec =
                new EmbeddingModelSpec(
                        getModel(), getDevice(), (Boolean) getOrDefault(normalize), taskThreads(sc));
        Device driver = driverDevice(sc);
        if (driver != null) {
            spec.get(driver);
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
