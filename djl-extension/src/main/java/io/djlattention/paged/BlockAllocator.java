/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import java.util.ArrayDeque;

/**
 * The pool of physical KV-cache blocks: a free list and a reference count per block.
 *
 * <p>A block is free iff its reference count is 0. {@link #allocate} takes a free block (count 1);
 * {@link #retain} lets another sequence share it (fork, shared prefix); {@link #release} drops one
 * reference and returns the block to the free list when the last one goes. Counts never go
 * negative: releasing a free block is an error, as is touching an id outside the pool.
 *
 * <p>Pure bookkeeping, no native memory; not thread-safe (the scheduler owns it).
 */
public final class BlockAllocator {

    private final int numBlocks;
    private final int[] refCounts;
    private final ArrayDeque<Integer> freeList;

    /**
     * Creates a pool of {@code numBlocks} free blocks with ids {@code 0 .. numBlocks - 1}.
     *
     * @param numBlocks the number of blocks, at least 1
     */
    public BlockAllocator(int numBlocks) {
        if (numBlocks < 1) {
            throw new IllegalArgumentException("numBlocks: expected >= 1, got " + numBlocks);
        }
        this.numBlocks = numBlocks;
        this.refCounts = new int[numBlocks];
        this.freeList = new ArrayDeque<>(numBlocks);
        for (int i = 0; i < numBlocks; ++i) {
            freeList.addLast(i);
        }
    }

    /**
     * Returns the number of blocks in the pool.
     *
     * @return the number of blocks
     */
    public int getNumBlocks() {
        return numBlocks;
    }

    /**
     * Returns the number of free blocks.
     *
     * @return the free blocks
     */
    public int getNumFree() {
        return freeList.size();
    }

    /**
     * Takes a free block; its reference count becomes 1.
     *
     * @return the block id
     * @throws OutOfBlocksException if no block is free
     */
    public int allocate() {
        Integer id = freeList.pollFirst();
        if (id == null) {
            throw new OutOfBlocksException(1, 0, numBlocks, "allocate");
        }
        refCounts[id] = 1;
        return id;
    }

    /**
     * Adds a reference to an allocated block (another sequence now shares it).
     *
     * @param id the block id
     */
    public void retain(int id) {
        checkAllocated(id, "retain");
        ++refCounts[id];
    }

    /**
     * Drops one reference; the block is free again when its last reference is dropped.
     *
     * @param id the block id
     * @return true if the block became free
     */
    public boolean release(int id) {
        checkAllocated(id, "release");
        if (--refCounts[id] == 0) {
            freeList.addLast(id);
            return true;
        }
        return false;
    }

    /**
     * Returns the reference count of a block (0 when free).
     *
     * @param id the block id
     * @return its reference count
     */
    public int getRefCount(int id) {
        checkId(id);
        return refCounts[id];
    }

    private void checkId(int id) {
        if (id < 0 || id >= numBlocks) {
            throw new IllegalArgumentException(
                    "block id: expected a value in [0, " + numBlocks + "), got " + id);
        }
    }

    private void checkAllocated(int id, String what) {
        checkId(id);
        if (refCounts[id] == 0) {
            throw new IllegalStateException(what + ": block " + id + " is free");
        }
    }
}
