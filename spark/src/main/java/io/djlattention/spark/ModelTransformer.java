/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;

import org.apache.spark.SparkContext;
import org.apache.spark.ml.Transformer;
import org.apache.spark.ml.param.BooleanParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.List;

/**
 * What {@link TextEmbedder} and {@link TextGenerator} share: the params of a transformer that runs
 * a model on a column ({@code inputCol}, {@code outputCol}, {@code model}, {@code batchSize},
 * {@code device}, {@code threads}, {@code validateOnDriver}), how they are resolved on the driver,
 * and the counters of the rows that got no output.
 *
 * <p>Spark finds a transformer's params through its public no-argument methods returning a
 * {@link Param}, inherited ones included, so each param has one here.
 *
 * @param <T> the transformer, which the setters return
 */
public abstract class ModelTransformer<T extends ModelTransformer<T>> extends Transformer {

    private static final long serialVersionUID = 1L;

    /** The default batch size. */
    public static final int DEFAULT_BATCH_SIZE = 32;

    private final String uid;
    private final Param<String> inputCol;
    private final Param<String> outputCol;
    private final Param<String> model;
    private final IntParam batchSize;
    private final Param<String> device;
    private final IntParam threads;
    private final BooleanParam validateOnDriver;
    private transient BadRows badRows;

    /**
     * Declares the shared params. Defaults: {@code batchSize} 32, {@code device} auto, {@code
     * threads} 0 ({@code spark.task.cpus}), {@code validateOnDriver} true; the subclass sets those
     * of the columns and the model.
     *
     * @param uid the uid
     * @param inputDoc what {@code inputCol} holds
     * @param outputDoc what {@code outputCol} gets
     * @param modelDoc what {@code model} names
     * @param batchSizeDoc what {@code batchSize} bounds
     */
    ModelTransformer(
            String uid, String inputDoc, String outputDoc, String modelDoc, String batchSizeDoc) {
        this.uid = uid;
        inputCol = new Param<>(this, "inputCol", inputDoc);
        outputCol = new Param<>(this, "outputCol", outputDoc);
        model = new Param<>(this, "model", modelDoc);
        batchSize = new IntParam(this, "batchSize", batchSizeDoc, ParamValidators.gtEq(1));
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
        setDefault(batchSize, DEFAULT_BATCH_SIZE);
        setDefault(device, TaskDevice.AUTO);
        setDefault(threads, 0);
        setDefault(validateOnDriver, true);
    }

    @SuppressWarnings("unchecked")
    private T self() {
        return (T) this;
    }

    @Override
    public String uid() {
        return uid;
    }

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
     * Sets the input column.
     *
     * @param value a column of the dataset
     * @return this
     */
    public T setInputCol(String value) {
        set(inputCol, value);
        return self();
    }

    /**
     * Sets the output column.
     *
     * @param value a column name not in the input
     * @return this
     */
    public T setOutputCol(String value) {
        set(outputCol, value);
        return self();
    }

    /**
     * Sets the model.
     *
     * @param value a model URL ({@code djl://...}) or a checkpoint path every executor can read
     * @return this
     */
    public T setModel(String value) {
        set(model, value);
        return self();
    }

    /**
     * Sets the batch size (default 32).
     *
     * @param value at least 1
     * @return this
     */
    public T setBatchSize(int value) {
        set(batchSize, value);
        return self();
    }

    /**
     * Sets the device (default {@code auto}).
     *
     * @param value auto, cpu, gpu or gpu:N
     * @return this
     */
    public T setDevice(String value) {
        set(device, TaskDevice.check(value));
        return self();
    }

    /**
     * Sets PyTorch's intra-op threads on the CPU (default 0: {@code spark.task.cpus}).
     *
     * @param value at least 0
     * @return this
     */
    public T setThreads(int value) {
        set(threads, value);
        return self();
    }

    /**
     * Sets whether {@link #transform} loads the model on the driver first (default true).
     *
     * @param value false for a driver that cannot hold the model
     * @return this
     */
    public T setValidateOnDriver(boolean value) {
        set(validateOnDriver, value);
        return self();
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
     * Returns the batch size.
     *
     * @return at least 1
     */
    public int getBatchSize() {
        return (Integer) getOrDefault(batchSize);
    }

    /**
     * Returns the counters of the last {@link #transform}: null, empty and refused rows. They fill
     * as actions run on its output.
     *
     * @return the counters, or null before the first call
     */
    public BadRows getBadRows() {
        return badRows;
    }

    /** The device param, checked. */
    String getDevice() {
        return TaskDevice.check(getOrDefault(device));
    }

    /** PyTorch's intra-op threads per task: the param, or {@code spark.task.cpus} for 0. */
    int taskThreads(SparkContext sc) {
        int n = (Integer) getOrDefault(threads);
        return n == 0 ? sc.getConf().getInt("spark.task.cpus", 1) : n;
    }

    /**
     * Where the driver loads the model before the job, or null when {@code validateOnDriver} is
     * off: in local mode the driver is the executor, so the tasks' own device (local jobs then load
     * it once); otherwise the CPU.
     */
    Device driverDevice(SparkContext sc) {
        if (!(Boolean) getOrDefault(validateOnDriver)) {
            return null;
        }
        return sc.isLocal() ? TaskDevice.resolve(getDevice()) : Device.cpu();
    }

    /** New counters for a call, which {@link #getBadRows()} returns from now on. */
    BadRows newBadRows(SparkContext sc, String name) {
        badRows = BadRows.register(sc, name);
        return badRows;
    }

    /**
     * Checks the shared part of a schema: {@code inputCol} is there and {@code outputCol} is not.
     *
     * @return the input column's field
     * @throws IllegalArgumentException naming the param at fault
     */
    StructField checkColumns(StructType schema) {
        List<String> names = List.of(schema.fieldNames());
        String in = getInputCol();
        if (!names.contains(in)) {
            throw new IllegalArgumentException(
                    "inputCol: no column '" + in + "' in " + schema.simpleString());
        }
        String out = getOutputCol();
        if (names.contains(out)) {
            throw new IllegalArgumentException(
                    "outputCol: column '" + out + "' already exists in " + schema.simpleString());
        }
        return schema.apply(in);
    }
}
