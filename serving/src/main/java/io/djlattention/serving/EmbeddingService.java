/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import io.djlattention.zoo.generate.LatencyHistogram;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Embeds texts for many callers on one worker thread, batching the inputs of requests that wait
 * together into one {@link EmbeddingModel#embed} call (up to {@link Builder#optMaxBatchInputs}),
 * with a bounded queue. When a merged batch fails, its requests are run again one by one so that
 * only the request at fault fails.
 */
public final class EmbeddingService implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(EmbeddingService.class.getName());

    private final EmbeddingModel model;
    private final int maxBatchInputs;
    private final int maxQueue;
    private final LinkedBlockingDeque<Job> queue = new LinkedBlockingDeque<>();
    private final Thread thread;
    private final CountDownLatch terminated = new CountDownLatch(1);
    private final Object admission = new Object();
    private boolean accepting = true; // guarded by admission
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong inputs = new AtomicLong();
    private final AtomicLong rejected = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong batches = new AtomicLong();
    private final LatencyHistogram latency = new LatencyHistogram();

    private EmbeddingService(Builder b) {
        model = b.model;
        maxBatchInputs = b.maxBatchInputs;
        maxQueue = b.maxQueue;
        thread = new Thread(this::loop, "embedding-service");
        thread.setDaemon(true);
        thread.start();
    }

    /**
     * Returns a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns the model.
     *
     * @return the model
     */
    public EmbeddingModel getModel() {
        return model;
    }

    /**
     * Queues texts to embed.
     *
     * @param texts non-empty texts
     * @return the future of one embedding per text; it fails with the model's exception (an
     *     {@link IllegalArgumentException} when the input is at fault)
     * @throws RejectedExecutionException if {@link Builder#optMaxQueue} requests are queued
     * @throws IllegalStateException if the service is shutting down
     */
    public CompletableFuture<List<float[]>> submit(List<String> texts) {
        Job job = new Job(List.copyOf(texts));
        synchronized (admission) {
            if (!accepting) {
                throw new IllegalStateException("the embedding service is shutting down");
            }
            if (queue.size() >= maxQueue) {
                rejected.incrementAndGet();
                throw new RejectedExecutionException(
                        "the embedding queue is full (" + maxQueue + " requests waiting)");
            }
            queue.addLast(job);
        }
        requests.incrementAndGet();
        inputs.addAndGet(texts.size());
        return job.future;
    }

    /**
     * Returns the requests waiting.
     *
     * @return the queue length
     */
    public int getQueueLength() {
        return queue.size();
    }

    /**
     * Returns the requests accepted.
     *
     * @return the count
     */
    public long getRequests() {
        return requests.get();
    }

    /**
     * Returns the texts accepted.
     *
     * @return the count
     */
    public long getInputs() {
        return inputs.get();
    }

    /**
     * Returns the requests refused because the queue was full.
     *
     * @return the count
     */
    public long getRejected() {
        return rejected.get();
    }

    /**
     * Returns the requests that failed.
     *
     * @return the count
     */
    public long getFailed() {
        return failed.get();
    }

    /**
     * Returns the model calls made.
     *
     * @return the count
     */
    public long getBatches() {
        return batches.get();
    }

    /**
     * Returns the time from submission to result, per request.
     *
     * @return the histogram (seconds)
     */
    public LatencyHistogram getLatency() {
        return latency;
    }

    /**
     * Stops accepting, embeds what is queued, ends the worker and closes the model. A second call
     * waits for the first.
     */
    @Override
    public void close() {
        synchronized (admission) {
            accepting = false;
        }
        try {
            terminated.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void loop() {
        try {
            while (true) {
                Job first = queue.pollFirst(50, TimeUnit.MILLISECONDS);
                if (first == null) {
                    synchronized (admission) {
                        if (!accepting && queue.isEmpty()) {
                            break;
                        }
                    }
                    continue;
                }
                List<Job> jobs = new ArrayList<>();
                jobs.add(first);
                int total = first.texts.size();
                while (true) {
                    Job next = queue.peekFirst();
                    if (next == null || total + next.texts.size() > maxBatchInputs) {
                        break;
                    }
                    jobs.add(queue.pollFirst());
                    total += next.texts.size();
                }
                run(jobs);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            for (Job j = queue.pollFirst(); j != null; j = queue.pollFirst()) {
                j.future.completeExceptionally(
                        new IllegalStateException("the embedding service was closed"));
            }
            try {
                model.close();
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "closing the embedding model failed", e);
            }
            terminated.countDown();
        }
    }

    private void run(List<Job> jobs) {
        List<String> texts = new ArrayList<>();
        for (Job j : jobs) {
            texts.addAll(j.texts);
        }
        List<float[]> out;
        try {
            batches.incrementAndGet();
            out = model.embed(texts);
            if (out.size() != texts.size()) {
                throw new IllegalStateException(
                        "the embedding model returned " + out.size() + " for " + texts.size());
            }
        } catch (Exception | StackOverflowError e) {
            if (jobs.size() > 1) {
                for (Job j : jobs) {
                    run(List.of(j));
                }
                return;
            }
            failed.incrementAndGet();
            complete(jobs.get(0), null, e);
            return;
        }
        int at = 0;
        for (Job j : jobs) {
            complete(j, out.subList(at, at + j.texts.size()), null);
            at += j.texts.size();
        }
    }

    private void complete(Job j, List<float[]> result, Throwable error) {
        latency.observe((System.nanoTime() - j.submitNanos) / 1e9);
        if (error != null) {
            j.future.completeExceptionally(error);
        } else {
            j.future.complete(new ArrayList<>(result));
        }
    }

    /** One request. */
    private static final class Job {
        final List<String> texts;
        final CompletableFuture<List<float[]>> future = new CompletableFuture<>();
        final long submitNanos = System.nanoTime();

        Job(List<String> texts) {
            this.texts = texts;
        }
    }

    /** Builds an {@link EmbeddingService}. */
    public static final class Builder {

        private EmbeddingModel model;
        private int maxBatchInputs = 32;
        private int maxQueue = 256;

        Builder() {}

        /**
         * Sets the model (required); the service closes it when it closes.
         *
         * @param model the model
         * @return this builder
         */
        public Builder setModel(EmbeddingModel model) {
            this.model = model;
            return this;
        }

        /**
         * Sets the most texts merged into one model call (default 32; 1 turns batching off).
         *
         * @param maxBatchInputs at least 1
         * @return this builder
         */
        public Builder optMaxBatchInputs(int maxBatchInputs) {
            this.maxBatchInputs = maxBatchInputs;
            return this;
        }

        /**
         * Sets the most requests waiting before {@link #submit} refuses more (default 256).
         *
         * @param maxQueue at least 1
         * @return this builder
         */
        public Builder optMaxQueue(int maxQueue) {
            this.maxQueue = maxQueue;
            return this;
        }

        /**
         * Builds the service and starts its worker.
         *
         * @return the service
         */
        public EmbeddingService build() {
            if (model == null) {
                throw new IllegalArgumentException("EmbeddingService: setModel is required");
            }
            if (maxBatchInputs < 1 || maxQueue < 1) {
                throw new IllegalArgumentException(
                        "EmbeddingService: optMaxBatchInputs and optMaxQueue: expected >= 1, got "
                                + maxBatchInputs
                                + " and "
                                + maxQueue);
            }
            return new EmbeddingService(this);
        }
    }
}
