/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import java.util.function.LongFunction;
import java.util.function.Predicate;

/**
 * The test hook of {@link GenerationEngine.Builder#optFailingPrompt}: a forward pass that holds a
 * request whose prompt matches throws, so that request (and only it) fails.
 */
final class FailingPrompts implements ForwardHook {

    private final Predicate<int[]> failing;
    /** A running request's prompt by its scheduler id (null: not the engine's); set by build. */
    volatile LongFunction<int[]> promptOf = id -> null;

    FailingPrompts(Predicate<int[]> failing) {
        this.failing = failing;
    }

    @Override
    public void beforeForward(long[] requestIds) {
        for (long id : requestIds) {
            int[] prompt = promptOf.apply(id);
            if (prompt != null && failing.test(prompt)) {
                throw new IllegalStateException(
                        "injected failure in the forward pass of request " + id);
            }
        }
    }
}
