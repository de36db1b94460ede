/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/** A {@link ContinuousBatchingScheduler} test hook called before every forward pass (faults). */
@FunctionalInterface
public interface ForwardHook {

    /**
     * Called before a forward pass; throwing makes that pass fail (the scheduler then isolates
     * the failing sequences, see {@link ContinuousBatchingScheduler}).
     *
     * @param requestIds the requests in the pass
     */
    void beforeForward(long[] requestIds);
}
