/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;
import io.djlattention.AttentionOps;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A djl_attn operator called from Java shows up in libtorch's profiler, as DJL's own operators
 * do: the C interface reaches the kernel through PyTorch's dispatcher, which records each call.
 * A user profiling a model (DJL's profiler, PagedDecodeBenchmark's operator count) sees them.
 */
class ProfilerVisibilityTest {

    @Test
    void flashAttentionIsRecordedByTheProfiler(@TempDir Path dir) throws IOException {
        Path trace = dir.resolve("trace.json");
        try (NDManager manager = NDManager.newBaseManager()) {
            NDArray q = manager.randomNormal(new Shape(1, 5, 2, 8));
            JniUtils.startProfile(false, false, false);
            try (NDArray out = AttentionOps.flashAttention(q, q, q)) {
                assertTrue(out.getShape().equals(q.getShape()), out.getShape().toString());
            } finally {
                JniUtils.stopProfile(trace.toString());
            }
        }
        String events = Files.readString(trace, StandardCharsets.UTF_8);
        assertTrue(
                events.contains("djl_attn::flash_attention"),
                "the profiler's trace names no djl_attn::flash_attention event");
    }
}
