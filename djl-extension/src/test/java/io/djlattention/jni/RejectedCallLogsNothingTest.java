/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import io.djlattention.PagedAttentionOptions;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A call the operator rejects reaches Java as an {@link IllegalArgumentException} and leaves
 * nothing on the process's stderr. libtorch 2.7.1's C shim logs every exception thrown through
 * {@code aoti_torch_call_dispatcher} ({@code Exception in aoti_torch: ...}) straight to file
 * descriptor 2, which a test cannot capture inside its own JVM, so the rejected calls run in a
 * child JVM ({@link RejectedCalls}) whose stderr the test reads whole.
 */
class RejectedCallLogsNothingTest {

    @Test
    void rejectedCallsLeaveStderrEmpty() throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        for (Map.Entry<Object, Object> e : System.getProperties().entrySet()) {
            String key = e.getKey().toString();
            if (key.startsWith("ai.djl.") || key.startsWith("org.bytedeco.") || key.startsWith("djl.")) {
                command.add("-D" + key + "=" + e.getValue());
            }
        }
        command.add(RejectedCalls.class.getName());
        Process child = new ProcessBuilder(command).start();
        child.getOutputStream().close();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Thread outReader = copy(child.getInputStream(), out);
        Thread errReader = copy(child.getErrorStream(), err);
        assertTrue(child.waitFor(120, TimeUnit.SECONDS), "the child JVM did not finish in 120 s");
        outReader.join();
        errReader.join();
        String stdout = out.toString(StandardCharsets.UTF_8);
        String stderr = err.toString(StandardCharsets.UTF_8);
        assertEquals(0, child.exitValue(), "child failed:\n" + stdout + "\n" + stderr);
        // The child reports each rejection on stdout: every call was rejected with its message.
        assertTrue(stdout.contains("rejected: flash_attention: kv_lens: expected values in [0, Sk = 3]"), stdout);
        assertTrue(stdout.contains("rejected: flash_attention: q: expected 4 dims"), stdout);
        assertTrue(stdout.contains("rejected: paged_attention: block_tables: expected block ids"), stdout);
        assertTrue(stdout.contains("rejected: bert_attention: num_heads: expected a value >= 1"), stdout);
        assertFalse(stderr.contains("aoti_torch"), stderr);
    }

    private static Thread copy(InputStream in, ByteArrayOutputStream to) {
        Thread t =
                new Thread(
                        () -> {
                            try {
                                in.transferTo(to);
                            } catch (IOException ignored) {
                                // The stream closes when the child exits.
                            }
                        });
        t.start();
        return t;
    }

    /** The child JVM: makes calls every operator rejects and prints each message to stdout. */
    public static final class RejectedCalls {

        private RejectedCalls() {}

        /**
         * Runs the rejected calls.
         *
         * @param args unused
         */
        public static void main(String[] args) {
            try (NDManager manager = NDManager.newBaseManager()) {
                NDArray q = manager.randomNormal(new Shape(2, 3, 4, 8));
                NDArray badLens = manager.create(new int[] {3, 4});
                expectRejected(
                        () ->
                                AttentionOps.flashAttention(
                                        q, q, q,
                                        AttentionOptions.builder().optKvLens(badLens).build()));
                expectRejected(() -> AttentionOps.flashAttention(q.get(0), q, q));
                NDArray query = manager.randomNormal(new Shape(2, 4, 64));
                NDArray cache = manager.randomNormal(new Shape(3, 16, 2, 64));
                NDArray tables = manager.create(new int[][] {{0, 1}, {2, 3}});
                NDArray lens = manager.create(new int[] {20, 20});
                expectRejected(
                        () ->
                                AttentionOps.pagedAttention(
                                        query,
                                        cache,
                                        cache,
                                        tables,
                                        lens,
                                        20,
                                        PagedAttentionOptions.builder().optScale(0.125f).build()));
                NDArray qkv = manager.randomNormal(new Shape(1, 2, 48), DataType.FLOAT32);
                expectRejected(() -> AttentionOps.bertAttention(qkv, null, null, 0, 0.5));
            }
        }

        private static void expectRejected(Runnable call) {
            try {
                call.run();
                throw new AssertionError("the call was not rejected");
            } catch (IllegalArgumentException e) {
                System.out.println("rejected: " + e.getMessage());
            }
        }
    }
}
