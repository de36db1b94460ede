/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

import java.io.Serializable;

/**
 * Counters of the rows a transformer could not process and wrote as null: Spark accumulators, so
 * the driver reads the sum over every task once an action has run.
 *
 * <p>Spark adds a task's counts once per successful task: a failed attempt that Spark retries adds
 * nothing, but evaluating the same output twice (two actions on it, without caching) counts its
 * rows twice.
 */
public final class BadRows implements Serializable {

    private static final long serialVersionUID = 1L;

    private final LongAccumulator missing;
    private final LongAccumulator rejected;

    private BadRows(LongAccumulator missing, LongAccumulator rejected) {
        this.missing = missing;
        this.rejected = rejected;
    }

    /**
     * Registers a fresh pair of counters.
     *
     * @param sc the driver's context
     * @param name the prefix of their names in Spark's UI (e.g. the transformer's uid)
     * @return the counters
     */
    static BadRows register(SparkContext sc, String name) {
        return new BadRows(
                sc.longAccumulator(name + ": null or empty rows"),
                sc.longAccumulator(name + ": rows the model refuses (longer than its context)"));
    }

    void addMissing() {
        missing.add(1);
    }

    void addRejected() {
        rejected.add(1);
    }

    /**
     * Returns the rows that were null, empty or blank.
     *
     * @return the count so far
     */
    public long getMissing() {
        return missing.value();
    }

    /**
     * Returns the rows the model refuses: longer than its context (an embedding model's {@code maxLength}
     * tokens, a decoder's max positions), or otherwise impossible for the model (a token id
     * outside the vocabulary).
     *
     * @return the count so far
     */
    public long getRejected() {
        return rejected.value();
    }

    /**
     * Returns every bad row.
     *
     * @return the count so far
     */
    public long getTotal() {
        return getMissing() + getRejected();
    }

    @Override
    public String toString() {
        return "BadRows{missing=" + getMissing() + ", rejected=" + getRejected() + "}";
    }
}
