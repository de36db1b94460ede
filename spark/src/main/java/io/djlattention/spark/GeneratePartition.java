/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationEngine;
import io.djlattention.zoo.generate.GenerationResult;

import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.util.TaskCompletionListener;

import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;

/**
 * One task of {@link TextGenerator}: submits its partition's rows to the JVM's engine, a window
 * of them at a time, and hands them out in input order as they finish.
 */
final class GeneratePartition implements MapPartitionsFunction<Row, Row> {

    private static final long serialVersionUID = 1L;

    /**
     * The per-row settings.
     *
     * @param column the prompt column's index
     * @param text whether prompts are strings (else token ids)
     * @param maxNewTokens tokens per row at most
     * @param temperature 0 for greedy
     * @param topK sampling's k, 0 for all
     * @param seed the base seed
     */
    record Settings(
            int column, boolean text, int maxNewTokens, float temperature, int topK, long seed)
            implements Serializable {}

    private final GenerationModelSpec spec;
    private final Settings settings;
    private final BadRows bad;

    GeneratePartition(GenerationModelSpec spec, Settings settings, BadRows bad) {
        this.spec = spec;
        this.settings = settings;
        this.bad = bad;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> rows) {
        GenerationModelSpec.Loaded loaded = spec.get();
        if (settings.text() && loaded.tokenizer() == null) {
            throw new IllegalArgumentException(
                    "model " + spec.model() + " has no tokenizer for string prompts");
        }
        TaskContext task = TaskContext.get();
        long partition = task == null ? 0 : task.partitionId();
        // Two batches' worth per task: enough to keep the engine's batch full, little enough
        // that several tasks share its queue.
        int window = 2 * loaded.engine().getMaxBatchSize();
        ArrayDeque<Pending> pending = new ArrayDeque<>();
        if (task != null) {
            // A killed or failed task leaves nothing running: its sequences' KV blocks are freed.
            task.addTaskCompletionListener(
                    (TaskCompletionListener)
                            t -> {
                                for (Pending p : pending) {
                                    if (p.handle != null) {
                                        p.handle.cancel();
                                    }
                                }
                            });
        }
        return new Iterator<>() {
            private long index;

            @Override
            public boolean hasNext() {
                while (pending.size() < window && rows.hasNext()) {
                    pending.add(submit(loaded, rows.next(), partition, index++, pending));
                }
                return !pending.isEmpty();
            }

            @Override
            public Row next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                Pending p = pending.poll();
                return p.toRow(loaded.tokenizer(), settings.text());
            }
        };
    }

    private Pending submit(
            GenerationModelSpec.Loaded loaded,
            Row row,
            long partition,
            long index,
            ArrayDeque<Pending> ahead) {
        int[] prompt = prompt(row, loaded.tokenizer());
        if (prompt == null) {
            return new Pending(row, null);
        }
        GenerationConfig.Builder config =
                GenerationConfig.builder()
                        .setMaxNewTokens(settings.maxNewTokens())
                        .optEosTokenId(loaded.eosTokenId());
        if (settings.temperature() > 0) {
            config.optSampling(
                    settings.temperature(),
                    settings.topK(),
                    settings.seed() + (partition << 32) + index);
        }
        GenerationConfig c = config.build();
        while (true) {
            try {
                return new Pending(row, loaded.engine().submit(prompt, c, null));
            } catch (IllegalArgumentException e) {
                // Too long for the model, an id outside the vocabulary: this row can never run.
                bad.addRejected();
                return new Pending(row, null);
            } catch (RejectedExecutionException e) {
                // The engine's queue is full of other tasks' rows: wait for one of ours.
                waitForOne(ahead);
            }
        }
    }

    private static void waitForOne(ArrayDeque<Pending> ahead) {
        for (Pending p : ahead) {
            if (p.handle != null && !p.handle.getResult().isDone()) {
                try {
                    p.handle.getResult().get();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted while waiting for the engine", e);
                } catch (ExecutionException e) {
                    // reported when that row is read
                }
                return;
            }
        }
        try {
            Thread.sleep(10);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the engine", e);
        }
    }

    /** The row's prompt ids, or null (counted) when it has none. */
    private int[] prompt(Row row, HuggingFaceTokenizer tokenizer) {
        int column = settings.column();
        if (row.isNullAt(column)) {
            bad.addMissing();
            return null;
        }
        if (settings.text()) {
            String text = row.getString(column);
            if (text.isBlank()) {
                bad.addMissing();
                return null;
            }
            long[] ids = tokenizer.encode(text).getIds();
            int[] prompt = new int[ids.length];
            for (int i = 0; i < ids.length; ++i) {
                prompt[i] = (int) ids[i];
            }
            return prompt;
        }
        List<Integer> ids = row.getList(column);
        if (ids.isEmpty()) {
            bad.addMissing();
            return null;
        }
        int[] prompt = new int[ids.size()];
        for (int i = 0; i < prompt.length; ++i) {
            Integer id = ids.get(i);
            if (id == null) {
                bad.addRejected();
                return null;
            }
            prompt[i] = id;
        }
        return prompt;
    }

    /** A row and its request (null for a bad row). */
    private static final class Pending {

        final Row row;
        final GenerationEngine.Handle handle;

        Pending(Row row, GenerationEngine.Handle handle) {
            this.row = row;
            this.handle = handle;
        }

        Row toRow(HuggingFaceTokenizer tokenizer, boolean text) {
            Object value = null;
            if (handle != null) {
                GenerationResult r = result(handle.getResult());
                if (r.finishReason() == GenerationResult.FinishReason.FAILED
                        || r.finishReason() == GenerationResult.FinishReason.CANCELLED) {
                    // Not the row's fault (a failed forward pass): fail the task, Spark retries it.
                    throw new IllegalStateException(
                            "generation of a row " + r.finishReason() + ": " + r.error());
                }
                int[] ids = r.generated();
                if (text) {
                    long[] longs = new long[ids.length];
                    for (int i = 0; i < ids.length; ++i) {
                        longs[i] = ids[i];
                    }
                    value = tokenizer.decode(longs, true);
                } else {
                    Integer[] boxed = new Integer[ids.length];
                    for (int i = 0; i < ids.length; ++i) {
                        boxed[i] = ids[i];
                    }
                    value = boxed;
                }
            }
            Object[] values = new Object[row.length() + 1];
            for (int i = 0; i < row.length(); ++i) {
                values[i] = row.get(i);
            }
            values[row.length()] = value;
            return RowFactory.create(values);
        }

        private static GenerationResult result(CompletableFuture<GenerationResult> f) {
            try {
                return f.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for the engine", e);
            } catch (ExecutionException e) {
                throw new IllegalStateException("generation failed: " + e.getCause().getMessage(), e.getCause());
            }
        }
    }
}
