/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import io.djlattention.zoo.generate.LatencyHistogram;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Embeds texts for many callers on one worker thread. Each model call ({@link EmbeddingModel#embed})
 * takes at most {@link Builder#optMaxBatchInputs} texts, so the model's working memory is bounded
 * by the batch whatever a request holds; a request with more texts is embedded over several calls.
 * The texts of a call are shared out evenly among the requests waiting (round robin, one text
 * each in turn), so a small request arriving behind a large one finishes within a call or two
 * instead of after all of the large one. At most {@link Builder#optMaxQueue} requests wait or run.
 * When a call fails, each request's share is run again alone, so that only the request at fault
 * fails; a request whose caller cancelled its future is dropped before its next share. Once no
 * request has come for {@link #RELEASE_AFTER_IDLE_MILLIS} after a call, the worker asks the model
 * to return the memory its calls freed ({@link EmbeddingModel#releaseMemory}), so the process's
 * resident size falls back after a burst instead of staying at its peak.
 */
public final class EmbeddingService implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(EmbeddingService.class.getName());

    /**
     * How long the service waits with nothing to do after a call before it releases memory
     * (milliseconds). Long enough that a client sending requests one after another (a gap of a
     * round trip) keeps the memory its next request reuses; short enough that the resident size
     * is back within a second or two of a burst's end.
     */
    public static final long RELEASE_AFTER_IDLE_MILLIS = 1000;

    private final EmbeddingModel model;
    private final int maxBatchInputs;
    private final int maxQueue;
    private final LinkedBlockingDeque<Job> queue = new LinkedBlockingDeque<>();
    private final ArrayDeque<Job> active = new ArrayDeque<>(); // worker thread only
    private final Thread thread;
    private final CountDownLatch terminated = new CountDownLatch(1);
    private final Object admission = new Object();
    private boolean accepting = true; // guarded by admission
    private final AtomicInteger pending = new AtomicInteger();
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong inputs = new AtomicLong();
    private final AtomicLong rejected = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong batches = new AtomicLong();
    private final LatencyHistogram latency = new LatencyHistogram();
    private boolean calledSinceRelease; // worker thread only
    private long lastCallEndNanos; // worker thread only

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
     *     {@link IllegalArgumentException} when the input is at fault); cancelling it drops the
     *     texts not yet embedded
     * @throws RejectedExecutionException if {@link Builder#optMaxQueue} requests are waiting or
     *     running
     * @throws IllegalStateException if the service is shutting down
     */
    public CompletableFuture<List<float[]>> submit(List<String> texts) {
        Job job = new Job(List.copyOf(texts));
        synchronized (admission) {
            if (!accepting) {
                throw new IllegalStateException("the embedding service is shutting down");
            }
            if (pending.get() >= maxQueue) {
                rejected.incrementAndGet();
                throw new RejectedExecutionException(
                        "the embedding queue is full (" + maxQueue + " requests waiting)");
            }
            pending.incrementAndGet();
            queue.addLast(job);
        }
        requests.incrementAndGet();
        inputs.addAndGet(texts.size());
        return job.future;
    }

    /**
     * Returns the requests waiting or partly embedded.
     *
     * @return the queue length
     */
    public int getQueueLength() {
        return pending.get();
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
                if (active.isEmpty()) {
                    Job first = queue.pollFirst(50, TimeUnit.MILLISECONDS);
                    if (first == null) {
                        releaseMemoryIfIdle();
                        synchronized (admission) {
                            if (!accepting && queue.isEmpty()) {
                                break;
                            }
                        }
                        continue;
                    }
                    active.addLast(first);
                }
                queue.drainTo(active);
                active.removeIf(this::dropFinished);
                if (!active.isEmpty()) {
                    runOneBatch();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            List<Job> left = new ArrayList<>(active);
            queue.drainTo(left);
            for (Job j : left) {
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

    /**
     * Once a burst is over, the memory its calls freed goes back to the system; not after every
     * call, so that under a sustained load the next call reuses it (docs/serving.md, "Memory").
     */
    private void releaseMemoryIfIdle() {
        long idle = System.nanoTime() - lastCallEndNanos;
        if (!calledSinceRelease || idle < TimeUnit.MILLISECONDS.toNanos(RELEASE_AFTER_IDLE_MILLIS)) {
            return;
        }
        calledSinceRelease = false;
        try {
            model.releaseMemory();
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "releasing the embedding model's free memory failed", e);
        }
    }

    /** Drops a request that is answered or whose caller cancelled it. */
    private boolean dropFinished(Job j) {
        if (j.future.isDone()) {
            release(j);
            return true;
        }
        return false;
    }

    /** The job leaves the count of waiting and running requests (once). */
    private void release(Job j) {
        if (!j.released) {
            j.released = true;
            pending.decrementAndGet();
        }
    }

    /** Shares one call's texts out among the active requests, runs it, hands out the results. */
    private void runOneBatch() {
        List<Share> shares = new ArrayList<>();
        for (Job j : active) {
            shares.add(new Share(j, j.next));
        }
        int room = maxBatchInputs;
        boolean more = true;
        while (room > 0 && more) {
            more = false;
            for (Share s : shares) {
                if (room > 0 && s.from + s.count < s.job.texts.size()) {
                    ++s.count;
                    --room;
                    more = true;
                }
            }
        }
        shares.removeIf(s -> s.count == 0);
        run(shares);
        // Round robin: the request served first this time goes last.
        active.addLast(active.pollFirst());
        active.removeIf(this::dropFinished);
    }

    private void run(List<Share> shares) {
        List<String> texts = new ArrayList<>();
        for (Share s : shares) {
            texts.addAll(s.job.texts.subList(s.from, s.from + s.count));
        }
        List<float[]> out;
        try {
            batches.incrementAndGet();
            calledSinceRelease = true;
            try {
                out = model.embed(texts);
            } finally {
                lastCallEndNanos = System.nanoTime();
            }
            if (out.size() != texts.size()) {
                throw new IllegalStateException(
                        "the embedding model returned " + out.size() + " for " + texts.size());
            }
        } catch (Exception | StackOverflowError e) {
            if (shares.size() > 1) {
                for (Share s : shares) {
                    run(List.of(s));
                }
                return;
            }
            failed.incrementAndGet();
            complete(shares.get(0).job, e);
            return;
        }
        int at = 0;
        for (Share s : shares) {
            Job j = s.job;
            for (int i = 0; i < s.count; ++i) {
                j.results[s.from + i] = out.get(at++);
            }
            j.next = s.from + s.count;
            if (j.next == j.texts.size()) {
                complete(j, null);
            }
        }
    }

    private void complete(Job j, Throwable error) {
        latency.observe((System.nanoTime() - j.submitNanos) / 1e9);
        release(j); // before the caller sees the result, so the queue length is already right
        if (error != null) {
            j.future.completeExceptionally(error);
        } else {
            j.future.complete(Arrays.asList(j.results));
        }
    }

    /** One request: its texts, the embeddings so far, the first text not yet embedded. */
    private static final class Job {
        final List<String> texts;
        final float[][] results;
        final CompletableFuture<List<float[]>> future = new CompletableFuture<>();
        final long submitNanos = System.nanoTime();
        int next;
        boolean released; // worker thread only

        Job(List<String> texts) {
            this.texts = texts;
            this.results = new float[texts.size()][];
        }
    }

    /** A request's texts {@code [from, from + count)} in one call. */
    private static final class Share {
        final Job job;
        final int from;
        int count;

        Share(Job job, int from) {
            this.job = job;
            this.from = from;
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
         * Sets the most requests waiting or running before {@link #submit} refuses more (default
         * 256).
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
