/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

/**
 * Thrown when the paged KV cache has fewer free blocks than an operation needs. The operation that
 * throws has changed nothing: no block was taken and no sequence's table was modified, so a
 * scheduler can catch it, preempt a sequence and retry.
 */
public class OutOfBlocksException extends IllegalStateException {

    private static final long serialVersionUID = 1L;

    private final int needed;
    private final int free;

    /**
     * Constructs the exception.
     *
     * @param needed the blocks the operation needed
     * @param free the blocks that were free
     * @param total the blocks of the pool
     * @param what the operation, for the message
     */
    public OutOfBlocksException(int needed, int free, int total, String what) {
        super(
                "paged KV cache out of blocks: "
                        + what
                        + " needs "
                        + needed
                        + " free blocks, "
                        + free
                        + " of "
                        + total
                        + " are free (free finished sequences, preempt one, or size the cache"
                        + " larger)");
        this.needed = needed;
        this.free = free;
    }

    /**
     * Returns the blocks the failed operation needed.
     *
     * @return the blocks needed
     */
    public int getNeeded() {
        return needed;
    }

    /**
     * Returns the blocks that were free when it failed.
     *
     * @return the free blocks
     */
    public int getFree() {
        return free;
    }
}
