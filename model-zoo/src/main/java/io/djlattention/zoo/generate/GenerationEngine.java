/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;

import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.KvCacheScales;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DeviceDecodeStep;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The token-id request API of the generation models, with streaming of tokens to a callback: a
 * thread-safe front of one {@link ContinuousBatchingScheduler} over one {@link PagedKvCache}.
 *
 * <p>Any thread may {@link #submit} a request (prompt token ids, a {@link GenerationConfig}, a
 * {@link TokenListener}); a single engine thread runs the scheduler's {@link
 * ContinuousBatchingScheduler#step} loop, so requests from many callers are batched together.
 * Each token goes to the request's listener as soon as it is sampled (on the engine thread: keep
 * the listener short), and the request's {@link Handle#getResult() future} completes with its
 * {@link GenerationResult} when it finishes. A handle's {@link Handle#cancel} frees the
 * sequence's KV blocks at the next iteration boundary (one step at most) and completes the future
 * with {@link GenerationResult.FinishReason#CANCELLED}.
 *
 * <p>Admission is bounded: {@link #submit} throws {@link RejectedExecutionException} while {@link
 * Builder#optMaxQueue} requests are queued (accepted but not running, preempted ones included),
 * and {@link IllegalArgumentException} (naming {@code prompt} or the size) for a request that could
 * never run. A failure in one request's forward pass finishes that request as {@link
 * GenerationResult.FinishReason#FAILED} (see {@link ContinuousBatchingScheduler}); the others go
 * on. {@link #close} is graceful: it stops accepting, lets in-flight requests finish for up to
 * {@link Builder#optShutdownGrace}, cancels what is left, frees the cache and ends the thread.
 *
 * <p>{@link #getMetrics} and the latency histograms may be read from any thread.
 */
public final class GenerationEngine implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(GenerationEngine.class.getName());

    private final Decoder decoder;
    private final NDManager manager;
    private final PagedKvCache cache;
    private final DeviceDecodeStep deviceStep;
    private final ContinuousBatchingScheduler scheduler;
    private final int maxQueue;
    private final int maxBatchSize;
    private final Duration shutdownGrace;
    private final LinkedBlockingQueue<Runnable> commands = new LinkedBlockingQueue<>();
    private final Map<Long, Handle> bySchedulerId = new HashMap<>(); // engine thread only
    private final List<Handle> listenerFailures = new ArrayList<>(); // engine thread only
    // {nanoTime, tokens} per step with tokens over the last RATE_WINDOW_NANOS; guarded by itself
    // (the engine thread adds, readers of the metrics prune and sum, so the rate decays to 0
    // when nothing runs instead of freezing at the last step's value).
    private final Thread thread;
    private final CountDownLatch terminated = new CountDownLatch(1);
    private final AtomicLong nextId = new AtomicLong();

    private final Object admission = new Object();
    private int inboxSubmits; // guarded by admission
    private int publishedWaiting; // guarded by admission
    private boolean accepting = true; // guarded by admission
    private volatile long shutdownDeadline = Long.MAX_VALUE;

    private volatile int running;
    private volatile int freeBlocks;
    private final EngineCounters counters = new EngineCounters();

    private GenerationEngine(Builder b) {
        decoder = b.decoder;
        Device device =
                b.device != null
                        ? b.device
                        : decoder.getParameters().valueAt(0).getArray().getDevice();
        manager = NDManager.newBaseManager(device);
        try {
            cache = EngineCaches.build(decoder, manager, b.blockSize, b.kvCacheDtype,
                    b.kvCacheScales, b.numBlocks, b.memoryBudget, b.maxBatchSize);
            deviceStep = DeviceDecodeStep.create(b.deviceStep, decoder, cache);
            scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .optMaxBatchSize(b.maxBatchSize)
                            .optPrefillAttention(b.prefill)
                            .optMaxPrefillChunk(b.maxPrefillChunk)
                            .optPrefixSharing(b.prefixSharing)
                            .optBatchInvariant(b.batchInvariant)
                            .optForwardHook(b.forwardHook)
                            .optTokenListener(this::onToken)
                            .optDeviceStep(deviceStep)
                            .build();
        } catch (RuntimeException e) {
            manager.close();
            throw e;
        }
        maxQueue = b.maxQueue;
        maxBatchSize = b.maxBatchSize;
        shutdownGrace = b.shutdownGrace;
        freeBlocks = cache.getNumFreeBlocks();
        thread = new Thread(this::loop, b.threadName);
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
     * @return the decoder
     */
    public Decoder getDecoder() {
        return decoder;
    }

    /**
     * Returns the most sequences run in one batch.
     *
     * @return the max batch size
     */
    public int getMaxBatchSize() {
        return maxBatchSize;
    }

    /**
     * Returns the most requests queued before {@link #submit} refuses more.
     *
     * @return the max queue
     */
    public int getMaxQueue() {
        return maxQueue;
    }

    /**
     * Queues a request; its tokens go to {@code listener} as they are produced.
     *
     * @param prompt the prompt's token ids, at least one, each in {@code [0, vocab)}
     * @param config how it generates
     * @param listener receives each token on the engine thread (may be null); if it throws, the
     *     request is cancelled
     * @return the request's handle
     * @throws IllegalArgumentException if the request could never run (too long for the model or
     *     the cache, token ids out of range); the message names the argument
     * @throws RejectedExecutionException if the queue is full (try again later)
     * @throws IllegalStateException if the engine is shutting down or closed
     */
    public Handle submit(int[] prompt, GenerationConfig config, TokenListener listener) {
        scheduler.validate(prompt, config, 1);
        Handle h = new Handle(nextId.getAndIncrement(), prompt.clone(), config, listener);
        synchronized (admission) {
            if (!accepting) {
                throw new IllegalStateException("the generation engine is shutting down");
            }
            if (inboxSubmits + publishedWaiting >= maxQueue) {
                counters.rejected.incrementAndGet();
                throw new RejectedExecutionException(
                        "the generation queue is full (" + maxQueue + " requests waiting)");
            }
            ++inboxSubmits;
            h.submitNanos = System.nanoTime();
            commands.add(() -> admit(h));
        }
        counters.submitted.incrementAndGet();
        counters.promptTokens.addAndGet(prompt.length);
        return h;
    }

    /**
     * Returns a snapshot of the engine's state and counters.
     *
     * @return the metrics
     */
    public EngineMetrics getMetrics() {
        int queued;
        synchronized (admission) {
            queued = inboxSubmits + publishedWaiting;
        }
        return new EngineMetrics(
                queued,
                running,
                cache.getNumBlocks(),
                freeBlocks,
                scheduler.getPreemptions(),
                counters.submitted.get(),
                counters.rejected.get(),
                counters.completed.get(),
                counters.cancelled.get(),
                counters.failed.get(),
                counters.promptTokens.get(),
                counters.generatedTokens.get(),
                counters.steps.get(),
                counters.tokensPerSecond());
    }

    /**
     * Returns the time from submission to the first token, per request.
     *
     * @return the histogram (seconds)
     */
    public LatencyHistogram getTimeToFirstToken() {
        return counters.timeToFirstToken;
    }

    /**
     * Returns the time between consecutive tokens of a request (after the first).
     *
     * @return the histogram (seconds)
     */
    public LatencyHistogram getTimePerOutputToken() {
        return counters.timePerOutputToken;
    }

    /**
     * Returns the time from submission to the end, per request (every outcome).
     *
     * @return the histogram (seconds)
     */
    public LatencyHistogram getRequestLatency() {
        return counters.requestLatency;
    }

    /**
     * Shuts down gracefully: refuses new requests, lets in-flight ones finish for up to {@code
     * grace}, cancels the rest (their futures complete as CANCELLED), frees the cache and ends the
     * engine thread. Later calls wait for the first to end.
     *
     * @param grace how long in-flight requests may still run
     * @throws InterruptedException if interrupted while waiting
     */
    public void shutdown(Duration grace) throws InterruptedException {
        synchronized (admission) {
            if (accepting) {
                accepting = false;
                shutdownDeadline = System.nanoTime() + grace.toNanos();
            }
        }
        commands.add(() -> {}); // wake the loop
        terminated.await();
    }

    /**
     * Returns whether the engine thread has ended (after {@link #shutdown} or {@link #close}).
     *
     * @return true once terminated
     */
    public boolean isTerminated() {
        return terminated.getCount() == 0;
    }

    /** Shuts down with {@link Builder#optShutdownGrace}; a second call is harmless. */
    @Override
    public void close() {
        try {
            shutdown(shutdownGrace);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- the engine thread -------------------------------------------------------------------

    private void loop() {
        try {
            while (true) {
                Runnable c =
                        scheduler.hasUnfinished()
                                ? commands.poll()
                                : commands.poll(50, TimeUnit.MILLISECONDS);
                while (c != null) {
                    c.run();
                    c = commands.poll();
                }
                publish();
                boolean open;
                synchronized (admission) {
                    open = accepting || inboxSubmits > 0;
                }
                if (scheduler.hasUnfinished()) {
                    if (System.nanoTime() - shutdownDeadline > 0) {
                        cancelAll();
                    } else {
                        step();
                    }
                    publish();
                } else if (!open) {
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException | Error e) {
            LOG.log(Level.SEVERE, "generation engine thread failed", e);
        } finally {
            synchronized (admission) {
                accepting = false; // also when the loop died: later submits fail at once
            }
            cancelAll();
            for (Runnable c = commands.poll(); c != null; c = commands.poll()) {
                c.run(); // submits still queued: admitted, then cancelled below
            }
            cancelAll();
            if (deviceStep != null) {
                deviceStep.close();
            }
            cache.close();
            manager.close();
            publish();
            terminated.countDown();
        }
    }

    private void admit(Handle h) {
        synchronized (admission) {
            --inboxSubmits;
        }
        if (h.cancelRequested || !isAlive()) {
            finish(h, h.cancelledResult());
            return;
        }
        h.schedulerId = scheduler.submit(h.prompt, h.config);
        bySchedulerId.put(h.schedulerId, h);
    }

    private boolean isAlive() {
        return terminated.getCount() > 0 && !Thread.currentThread().isInterrupted();
    }

    private void cancelOnEngine(Handle h) {
        if (h.schedulerId < 0 || h.getResult().isDone()) {
            return; // not admitted yet (admit sees cancelRequested) or already finished
        }
        GenerationResult r = scheduler.cancel(h.schedulerId);
        if (r != null) {
            finish(h, r);
        }
    }

    private void cancelAll() {
        for (Handle h : new ArrayList<>(bySchedulerId.values())) {
            GenerationResult r = scheduler.cancel(h.schedulerId);
            finish(h, r != null ? r : h.cancelledResult());
        }
    }

    private void step() {
        List<GenerationResult> done;
        long before = counters.generatedTokens.get();
        try {
            done = scheduler.step();
        } catch (RuntimeException e) {
            // Not a per-sequence failure (those are isolated by the scheduler): fail everything
            // in flight and start clean.
            LOG.log(Level.SEVERE, "scheduler step failed; failing all in-flight requests", e);
            String message = e.getMessage() == null ? e.getClass().getName() : e.getMessage();
            for (Handle h : new ArrayList<>(bySchedulerId.values())) {
                GenerationResult r = scheduler.cancel(h.schedulerId);
                GenerationResult base = r != null ? r : h.cancelledResult();
                finish(
                        h,
                        new GenerationResult(
                                h.schedulerId,
                                base.prompt(),
                                base.generated(),
                                GenerationResult.FinishReason.FAILED,
                                base.preemptions(),
                                message));
            }
            return;
        }
        counters.steps.incrementAndGet();
        for (GenerationResult r : done) {
            Handle h = bySchedulerId.get(r.requestId());
            if (h != null) {
                finish(h, r);
            }
        }
        for (Handle h : listenerFailures) {
            cancelOnEngine(h);
        }
        listenerFailures.clear();
        long now = System.nanoTime();
        long produced = counters.generatedTokens.get() - before;
        counters.produced(now, produced);
    }

    private void onToken(long schedulerId, int token) {
        Handle h = bySchedulerId.get(schedulerId);
        if (h == null) {
            return;
        }
        long now = System.nanoTime();
        if (h.numTokens == 0) {
            counters.timeToFirstToken.observe((now - h.submitNanos) / 1e9);
        } else {
            counters.timePerOutputToken.observe((now - h.lastTokenNanos) / 1e9);
        }
        h.lastTokenNanos = now;
        ++h.numTokens;
        counters.generatedTokens.incrementAndGet();
        if (h.listener != null && !h.cancelRequested) {
            try {
                h.listener.onToken(h.id, token);
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "token listener of request " + h.id + " failed", e);
                h.cancelRequested = true;
                listenerFailures.add(h);
            }
        }
    }

    private void finish(Handle h, GenerationResult r) {
        if (h.schedulerId >= 0) {
            bySchedulerId.remove(h.schedulerId);
        }
        switch (r.finishReason()) {
            case CANCELLED:
                counters.cancelled.incrementAndGet();
                break;
            case FAILED:
                counters.failed.incrementAndGet();
                break;
            default:
                counters.completed.incrementAndGet();
        }
        counters.requestLatency.observe((System.nanoTime() - h.submitNanos) / 1e9);
        publish(); // the metrics a caller reads once its result is in already show it
        h.future.complete(
                new GenerationResult(
                        h.id,
                        r.prompt(),
                        r.generated(),
                        r.finishReason(),
                        r.preemptions(),
                        r.error()));
    }

    private void publish() {
        running = scheduler.getNumRunning();
        freeBlocks = cache.getNumFreeBlocks();
        synchronized (admission) {
            publishedWaiting = scheduler.getNumWaiting();
        }
    }

    /** One request: its id, its result's future and {@link #cancel}. */
    public final class Handle {

        private final long id;
        private final int[] prompt;
        private final GenerationConfig config;
        private final TokenListener listener;
        private final CompletableFuture<GenerationResult> future = new CompletableFuture<>();
        private long schedulerId = -1; // engine thread
        private long submitNanos;
        private long lastTokenNanos; // engine thread
        private int numTokens; // engine thread
        private volatile boolean cancelRequested;

        Handle(long id, int[] prompt, GenerationConfig config, TokenListener listener) {
            this.id = id;
            this.prompt = prompt;
            this.config = config;
            this.listener = listener;
        }

        /**
         * Returns the request's id (the one its listener and result carry).
         *
         * @return the id
         */
        public long getId() {
            return id;
        }

        /**
         * Returns the future of the request's result. It always completes normally: with the
         * finish reason LENGTH, EOS, STOP or MAX_POSITIONS, CANCELLED (the tokens so far), or FAILED
         * (with the error message).
         *
         * @return the future
         */
        public CompletableFuture<GenerationResult> getResult() {
            return future;
        }

        /**
         * Cancels the request: no more tokens go to its listener, its blocks are freed within one
         * iteration and its future completes as CANCELLED (unless it finished first). Harmless
         * when done already or called twice; any thread may call it.
         */
        public void cancel() {
            if (future.isDone() || cancelRequested) {
                return;
            }
            cancelRequested = true;
            commands.add(() -> cancelOnEngine(this));
        }

        GenerationResult cancelledResult() {
            return new GenerationResult(
                    schedulerId,
                    prompt.clone(),
                    new int[0],
                    GenerationResult.FinishReason.CANCELLED,
                    0);
        }
    }

    /** Builds a {@link GenerationEngine}. */
    public static final class Builder {

        private Decoder decoder;
        private Device device;
        private int blockSize = 16;
        private int numBlocks;
        private long memoryBudget;
        private int maxBatchSize = 32;
        private int maxQueue = 256;
        private PrefillAttention prefill = PrefillAttention.FLASH;
        private int maxPrefillChunk;
        private boolean prefixSharing = true;
        private boolean batchInvariant;
        private DeviceDecodeStep.Mode deviceStep = DeviceDecodeStep.Mode.AUTO;
        private FailingPrompts failingPrompts;
        private KvCacheDtype kvCacheDtype = KvCacheDtype.AUTO;
        private KvCacheScales kvCacheScales;
        private ForwardHook forwardHook;
        private Duration shutdownGrace = Duration.ofSeconds(30);
        private String threadName = "generation-engine";

        Builder() {}

        /**
         * Sets the model (required). The engine does not close it.
         *
         * @param decoder the decoder
         * @return this builder
         */
        public Builder setDecoder(Decoder decoder) {
            this.decoder = decoder;
            return this;
        }

        /**
         * Sets the device of the KV cache (default: the device of the model's parameters).
         *
         * @param device the device
         * @return this builder
         */
        public Builder optDevice(Device device) {
            this.device = device;
            return this;
        }

        /**
         * Sets the tokens per KV block (default 16).
         *
         * @param blockSize at least 1
         * @return this builder
         */
        public Builder optBlockSize(int blockSize) {
            this.blockSize = blockSize;
            return this;
        }

        /**
         * Sets the KV cache's blocks (default: a full batch of full-length sequences, at most 512
         * MiB).
         *
         * @param numBlocks at least 1
         * @return this builder
         */
        public Builder optNumBlocks(int numBlocks) {
            this.numBlocks = numBlocks;
            return this;
        }

        /**
         * Sizes the KV cache to at most this many bytes (instead of {@link #optNumBlocks}).
         *
         * @param bytes the budget
         * @return this builder
         */
        public Builder optMemoryBudget(long bytes) {
            this.memoryBudget = bytes;
            return this;
        }

        /**
         * Sets what the KV cache stores (default AUTO: the model's data type; FP8_E4M3 holds
         * twice the tokens of float16 in the same memory, see {@link KvCacheDtype}).
         *
         * @param kvCacheDtype AUTO, FP8_E4M3 or FP8_E5M2
         * @return this builder
         */
        public Builder optKvCacheDtype(KvCacheDtype kvCacheDtype) {
            this.kvCacheDtype = kvCacheDtype;
            return this;
        }

        /**
         * Sets the scales of an FP8 cache (default {@link KvCacheScales#unit()}).
         *
         * @param kvCacheScales the scales, or null for the default
         * @return this builder
         */
        public Builder optKvCacheScales(KvCacheScales kvCacheScales) {
            this.kvCacheScales = kvCacheScales;
            return this;
        }

        /**
         * Sets the most sequences running at once (default 32).
         *
         * @param maxBatchSize at least 1
         * @return this builder
         */
        public Builder optMaxBatchSize(int maxBatchSize) {
            this.maxBatchSize = maxBatchSize;
            return this;
        }

        /**
         * Sets the most requests queued (accepted, not running) before {@link #submit} refuses
         * more (default 256).
         *
         * @param maxQueue at least 1
         * @return this builder
         */
        public Builder optMaxQueue(int maxQueue) {
            this.maxQueue = maxQueue;
            return this;
        }

        /**
         * Sets the prefill kernel (default FLASH).
         *
         * @param prefill FLASH or PAGED
         * @return this builder
         */
        public Builder optPrefillAttention(PrefillAttention prefill) {
            this.prefill = prefill;
            return this;
        }

        /**
         * Sets the prefill chunk (default 0: whole prompts), see {@link
         * ContinuousBatchingScheduler.Builder#optMaxPrefillChunk}.
         *
         * @param maxPrefillChunk tokens per chunk, 0 for no limit
         * @return this builder
         */
        public Builder optMaxPrefillChunk(int maxPrefillChunk) {
            this.maxPrefillChunk = maxPrefillChunk;
            return this;
        }

        /**
         * Sets how decode steps run (default {@link DeviceDecodeStep.Mode#AUTO}: on a GPU, a
         * CUDA graph per batch bucket replayed as one launch, tokens chosen on the device).
         *
         * @param mode the mode
         * @return this builder
         */
        public Builder optDeviceStep(DeviceDecodeStep.Mode mode) {
            this.deviceStep = Objects.requireNonNull(mode, "mode");
            return this;
        }

        /**
         * Runs batch-invariant; see {@link ContinuousBatchingScheduler.Builder#optBatchInvariant}.
         *
         * @param batchInvariant whether outputs must not depend on the batch or on preemption
         * @return this builder
         */
        public Builder optBatchInvariant(boolean batchInvariant) {
            this.batchInvariant = batchInvariant;
            return this;
        }

        /**
         * Shares identical prompt prefixes between requests (default true), see {@link
         * ContinuousBatchingScheduler.Builder#optPrefixSharing}.
         *
         * @param prefixSharing whether to share
         * @return this builder
         */
        public Builder optPrefixSharing(boolean prefixSharing) {
            this.prefixSharing = prefixSharing;
            return this;
        }

        /**
         * Sets a test hook called before every forward pass with the scheduler's ids of the
         * requests in it; throwing fails the pass (fault injection). See {@link
         * #optFailingPrompt} for the usual use.
         *
         * @param forwardHook the hook
         * @return this builder
         */
        public Builder optForwardHook(ForwardHook forwardHook) {
            this.forwardHook = forwardHook;
            return this;
        }

        /**
         * Test hook: every forward pass that contains a request whose prompt matches {@code
         * failing} throws, so that request (and only it) fails.
         *
         * @param failing which prompts fail
         * @return this builder
         */
        public Builder optFailingPrompt(Predicate<int[]> failing) {
            FailingPrompts hook = new FailingPrompts(failing);
            this.forwardHook = hook;
            this.failingPrompts = hook;
            return this;
        }

        /**
         * Sets how long {@link #close} lets in-flight requests finish (default 30 s).
         *
         * @param grace the grace period
         * @return this builder
         */
        public Builder optShutdownGrace(Duration grace) {
            this.shutdownGrace = grace;
            return this;
        }

        /**
         * Sets the engine thread's name (default "generation-engine").
         *
         * @param threadName the name
         * @return this builder
         */
        public Builder optThreadName(String threadName) {
            this.threadName = threadName;
            return this;
        }

        /**
         * Builds the engine and starts its thread.
         *
         * @return the engine
         */
        public GenerationEngine build() {
            if (decoder == null) {
                throw new IllegalArgumentException("GenerationEngine: setDecoder is required");
            }
            if (maxQueue < 1) {
                throw new IllegalArgumentException(
                        "GenerationEngine: optMaxQueue: expected >= 1, got " + maxQueue);
            }
            if (kvCacheDtype == null) {
                throw new IllegalArgumentException(
                        "GenerationEngine: optKvCacheDtype: expected a KvCacheDtype, got null");
            }
            if (shutdownGrace == null || shutdownGrace.isNegative()) {
                throw new IllegalArgumentException(
                        "GenerationEngine: optShutdownGrace: expected a duration >= 0");
            }
            GenerationEngine engine = new GenerationEngine(this);
            if (failingPrompts != null) {
                failingPrompts.promptOf =
                        id -> {
                            Handle h = engine.bySchedulerId.get(id);
                            return h == null ? null : h.prompt;
                        };
            }
            return engine;
        }
    }
}
