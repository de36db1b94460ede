/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.repository.zoo.Criteria;

import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The models of one JVM (a Spark executor, or the driver in local mode), loaded once per key and
 * shared by every task that runs there.
 *
 * <p>A key names everything a load depends on (model, device, options), so tasks on different
 * GPUs of one executor get a model each. The first task that asks for a key loads it; the others
 * wait for that load and share its result. A failed load is remembered too: a retried task on the
 * same JVM fails at once with the same reason instead of loading again. Everything loaded is
 * closed by a shutdown hook when the JVM exits (executors have no other end-of-life callback).
 */
final class ExecutorModels {

    private static final Logger LOG = Logger.getLogger(ExecutorModels.class.getName());

    private static final Map<String, CompletableFuture<AutoCloseable>> MODELS =
            new ConcurrentHashMap<>();

    static {
        Runtime.getRuntime()
                .addShutdownHook(new Thread(ExecutorModels::closeAll, "djl-attention-models-close"));
    }

    /** Loads a model; may throw anything, which is then the reason every later get reports. */
    @FunctionalInterface
    interface Loader<T extends AutoCloseable> {
        T load() throws Exception;
    }

    private ExecutorModels() {}

    /**
     * Returns the model of {@code key}, loading it on first use.
     *
     * @param key what the model depends on (model, device, options)
     * @param loader loads it (called at most once per key and JVM)
     * @param <T> the model's type
     * @return the shared model; callers must not close it
     * @throws ModelLoadException if this load, or an earlier one of the same key, failed
     */
    @SuppressWarnings("unchecked")
    static <T extends AutoCloseable> T get(String key, Loader<T> loader) {
        CompletableFuture<AutoCloseable> mine = new CompletableFuture<>();
        CompletableFuture<AutoCloseable> existing = MODELS.putIfAbsent(key, mine);
        if (existing == null) {
            try {
                mine.complete(loader.load());
            } catch (Throwable e) {
                mine.completeExceptionally(e);
            }
            existing = mine;
        }
        try {
            return (T) existing.get();
        } catch (ExecutionException e) {
            throw new ModelLoadException(key, e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ModelLoadException(key, e);
        }
    }

    /**
     * Starts the criteria of a model on PyTorch: from a URL ({@code djl://...}) or a path, on a
     * device. On the CPU PyTorch first gets the task's threads, not the machine's: every task slot
     * runs its own batches (2 tasks x 2 threads on 2 cores ran slower than 2 x 1).
     *
     * @param input the model's input type
     * @param output the model's output type
     * @param model a model URL or a checkpoint path
     * @param on the device
     * @param threads PyTorch's intra-op threads on the CPU
     * @param <I> the input type
     * @param <O> the output type
     * @return the builder, for the model's own arguments
     */
    static <I, O> Criteria.Builder<I, O> criteria(
            Class<I> input, Class<O> output, String model, Device on, int threads) {
        if (Device.Type.CPU.equals(on.getDeviceType())) {
            System.setProperty("ai.djl.pytorch.num_threads", String.valueOf(threads));
            Engine.getEngine("PyTorch");
            JniUtils.setNumThreads(threads);
        }
        Criteria.Builder<I, O> b =
                Criteria.builder().setTypes(input, output).optEngine("PyTorch").optDevice(on);
        return model.contains("://") ? b.optModelUrls(model) : b.optModelPath(Paths.get(model));
    }

    /** Closes and forgets every model (the shutdown hook; tests). */
    static void closeAll() {
        List<CompletableFuture<AutoCloseable>> loaded = new ArrayList<>(MODELS.values());
        MODELS.clear();
        for (CompletableFuture<AutoCloseable> f : loaded) {
            AutoCloseable model = f.getNow(null);
            if (model != null && !f.isCompletedExceptionally()) {
                try {
                    model.close();
                } catch (Exception e) {
                    LOG.log(Level.WARNING, "closing a model at exit failed", e);
                }
            }
        }
    }
}
