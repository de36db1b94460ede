/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.DoubleAdder;
import java.util.concurrent.atomic.LongAdder;

/**
 * A thread-safe latency histogram with fixed upper bounds in seconds (the shape of a Prometheus
 * histogram: cumulative bucket counts, a count and a sum), recorded without locks.
 */
public final class LatencyHistogram {

    /** Bounds in seconds: 1 ms to 60 s, roughly three per decade. */
    public static final double[] DEFAULT_BOUNDS = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60
    };

    private final double[] bounds;
    private final AtomicLongArray counts; // per bucket, the last one +Inf
    private final LongAdder count = new LongAdder();
    private final DoubleAdder sum = new DoubleAdder();

    /** Creates a histogram with {@link #DEFAULT_BOUNDS}. */
    public LatencyHistogram() {
        this(DEFAULT_BOUNDS);
    }

    /**
     * Creates a histogram.
     *
     * @param bounds increasing bucket upper bounds in seconds
     */
    public LatencyHistogram(double[] bounds) {
        this.bounds = bounds.clone();
        for (int i = 1; i < bounds.length; ++i) {
            if (!(bounds[i] > bounds[i - 1])) {
                throw new IllegalArgumentException("bounds: expected increasing values");
            }
        }
        this.counts = new AtomicLongArray(bounds.length + 1);
    }

    /**
     * Records one observation.
     *
     * @param seconds the latency in seconds
     */
    public void observe(double seconds) {
        int i = Arrays.binarySearch(bounds, seconds);
        int bucket = i >= 0 ? i : -i - 1; // the first bound >= seconds, or +Inf
        counts.incrementAndGet(bucket);
        count.increment();
        sum.add(seconds);
    }

    /**
     * Returns the bucket upper bounds (without +Inf).
     *
     * @return a copy of the bounds in seconds
     */
    public double[] getBounds() {
        return bounds.clone();
    }

    /**
     * Returns the cumulative count of observations at most each bound, then the total (+Inf).
     *
     * @return {@code bounds.length + 1} cumulative counts
     */
    public long[] getCumulativeCounts() {
        long[] out = new long[counts.length()];
        long running = 0;
        for (int i = 0; i < out.length; ++i) {
            running += counts.get(i);
            out[i] = running;
        }
        return out;
    }

    /**
     * Returns the number of observations.
     *
     * @return the count
     */
    public long getCount() {
        return count.sum();
    }

    /**
     * Returns the sum of the observations in seconds.
     *
     * @return the sum
     */
    public double getSum() {
        return sum.sum();
    }
}
