/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Several Java threads calling the operators at once. */
class ConcurrencyTest {

    private static final int THREADS = 8;
    private static final int CALLS_PER_THREAD = 50;

    @Test
    void eightThreadsGetCorrectResults() throws Exception {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            // Distinct inputs per thread, with references computed up front by stock DJL ops,
            // so a result delivered to the wrong caller or corrupted by a shared buffer fails.
            List<NDArray[]> inputs = new ArrayList<>();
            List<NDArray> expected = new ArrayList<>();
            for (int t = 0; t < THREADS; ++t) {
                int seq = 33 + 17 * t;
                NDArray q = manager.randomNormal(new Shape(2, seq, 4, 64));
                NDArray k = manager.randomNormal(new Shape(2, seq, 2, 64));
                NDArray v = manager.randomNormal(new Shape(2, seq, 2, 64));
                inputs.add(new NDArray[] {q, k, v});
                expected.add(StockAttention.attention(q, k, v, true, 0.125, null).get(0));
            }
            ExecutorService pool = Executors.newFixedThreadPool(THREADS);
            try {
                List<Future<Double>> errors = new ArrayList<>();
                for (int t = 0; t < THREADS; ++t) {
                    NDArray[] in = inputs.get(t);
                    NDArray want = expected.get(t);
                    errors.add(pool.submit(() -> worstError(manager, in, want)));
                }
                for (Future<Double> error : errors) {
                    assertTrue(error.get() <= 1e-5, "max error " + error.get());
                }
            } finally {
                // Every task must be finished before the manager closes its arrays under them.
                pool.shutdown();
                assertTrue(pool.awaitTermination(5, TimeUnit.MINUTES), "tasks still running");
            }
        }
    }

    @Test
    void errorsStayWithTheThreadThatCausedThem() throws Exception {
        // The bridge keeps the last error per thread: a failing call on one thread must report
        // its own message while other threads keep succeeding.
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            NDArray q = manager.randomNormal(new Shape(1, 8, 4, 32));
            NDArray bad = manager.randomNormal(new Shape(1, 8, 3, 32));
            ExecutorService pool = Executors.newFixedThreadPool(4);
            try {
                List<Future<?>> tasks = new ArrayList<>();
                for (int t = 0; t < 4; ++t) {
                    boolean failing = t % 2 == 0;
                    tasks.add(
                            pool.submit(
                                    () -> {
                                        for (int i = 0; i < 200; ++i) {
                                            if (failing) {
                                                IllegalArgumentException e =
                                                        assertThrows(
                                                                IllegalArgumentException.class,
                                                                () ->
                                                                        AttentionOps.flashAttention(
                                                                                q, bad, bad));
                                                assertTrue(
                                                        e.getMessage().contains("Hkv = 3"),
                                                        e.getMessage());
                                            } else {
                                                try (NDManager call = manager.newSubManager()) {
                                                    NDArray out =
                                                            AttentionOps.flashAttention(q, q, q);
                                                    out.attach(call);
                                                    assertEquals(q.getShape(), out.getShape());
                                                }
                                            }
                                        }
                                        return null;
                                    }));
                }
                for (Future<?> task : tasks) {
                    task.get();
                }
            } finally {
                // Every task must be finished before the manager closes its arrays under them.
                pool.shutdown();
                assertTrue(pool.awaitTermination(5, TimeUnit.MINUTES), "tasks still running");
            }
        }
    }

    private static double worstError(NDManager parent, NDArray[] in, NDArray expected) {
        double worst = 0;
        AttentionOptions options = AttentionOptions.builder().optCausal(true).build();
        for (int i = 0; i < CALLS_PER_THREAD; ++i) {
            try (NDManager call = parent.newSubManager()) {
                NDArray out = AttentionOps.flashAttention(in[0], in[1], in[2], options);
                out.attach(call);
                double error =
                        out.toType(DataType.FLOAT64, false).sub(expected).abs().max().getDouble();
                worst = Math.max(worst, error);
            }
        }
        return worst;
    }
}
