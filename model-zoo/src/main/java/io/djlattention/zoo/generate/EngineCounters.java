/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link GenerationEngine}'s counters and latency histograms, read by any thread ({@link
 * GenerationEngine#getMetrics}), written by the callers that submit and by the engine thread.
 */
final class EngineCounters {

    private static final long RATE_WINDOW_NANOS = TimeUnit.SECONDS.toNanos(5);

    final AtomicLong submitted = new AtomicLong();
    final AtomicLong rejected = new AtomicLong();
    final AtomicLong completed = new AtomicLong();
    final AtomicLong cancelled = new AtomicLong();
    final AtomicLong failed = new AtomicLong();
    final AtomicLong promptTokens = new AtomicLong();
    final AtomicLong generatedTokens = new AtomicLong();
    final AtomicLong steps = new AtomicLong();
    final LatencyHistogram timeToFirstToken = new LatencyHistogram();
    final LatencyHistogram timePerOutputToken = new LatencyHistogram();
    final LatencyHistogram requestLatency = new LatencyHistogram();
    /** (time, tokens) of the recent steps that produced tokens. */
    private final ArrayDeque<long[]> rateWindow = new ArrayDeque<>();
    private final long startNanos = System.nanoTime();

    /** A step at {@code now} produced {@code tokens} tokens. */
    void produced(long now, long tokens) {
        if (tokens > 0) {
            synchronized (rateWindow) {
                rateWindow.addLast(new long[] {now, tokens});
            }
        }
    }

    /**
     * Generated tokens per second over the last {@code RATE_WINDOW_NANOS} (or since the start, if
     * shorter), up to now: 0 once nothing has been generated for that long.
     */
    double tokensPerSecond() {
        long now = System.nanoTime();
        long tokens = 0;
        synchronized (rateWindow) {
            while (!rateWindow.isEmpty() && now - rateWindow.peekFirst()[0] > RATE_WINDOW_NANOS) {
                rateWindow.pollFirst();
            }
            for (long[] e : rateWindow) {
                tokens += e[1];
            }
        }
        long span =
                Math.max(
                        Math.min(now - startNanos, RATE_WINDOW_NANOS),
                        TimeUnit.MILLISECONDS.toNanos(100));
        return tokens * 1e9 / span;
    }
}
