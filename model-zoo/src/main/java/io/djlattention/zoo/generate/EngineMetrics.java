/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/**
 * A snapshot of a {@link GenerationEngine}'s state and counters (counters count since start).
 *
 * @param queued requests accepted but not running (new, or preempted and waiting to be recomputed)
 * @param running sequences in the running batch
 * @param kvBlocksTotal the KV cache's blocks
 * @param kvBlocksFree its free blocks
 * @param preemptions sequences preempted (freed and requeued for recomputation)
 * @param submitted requests accepted
 * @param rejected requests refused because the queue was full
 * @param completed requests that finished (length, EOS, stop token, max positions)
 * @param cancelled requests cancelled (by their caller or at shutdown)
 * @param failed requests whose forward pass failed
 * @param promptTokens prompt tokens of accepted requests
 * @param generatedTokens tokens generated
 * @param steps scheduler iterations run
 * @param tokensPerSecond generated tokens per second over the last few seconds
 */
public record EngineMetrics(
        int queued,
        int running,
        int kvBlocksTotal,
        int kvBlocksFree,
        long preemptions,
        long submitted,
        long rejected,
        long completed,
        long cancelled,
        long failed,
        long promptTokens,
        long generatedTokens,
        long steps,
        double tokensPerSecond) {}
