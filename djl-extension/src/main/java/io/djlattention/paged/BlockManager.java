/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The block tables of all sequences over one {@link BlockAllocator}: allocation for new sequences,
 * slots for new tokens, forks that share blocks, and copy-on-write.
 *
 * <p>Sharing: {@link #fork} gives the child the parent's blocks (reference counts + 1), so parallel
 * samples and requests with a shared prompt prefix hold one copy of the prefix. Full blocks are
 * never written again, so they stay shared for good. Only a partially filled last block can be
 * written: when a sequence appends to one that others still hold, it gets a private copy first
 * ({@link #appendSlots} returns the {@link BlockCopy} the cache must perform).
 *
 * <p>Prefix sharing between separate sequences: once a sequence's full blocks hold written K/V,
 * {@link #registerWritten} enters them in the {@link PrefixCache} (keyed by their content and
 * everything before them), and {@link #allocateWithCachedPrefix} starts a new sequence with the
 * longest indexed prefix of its tokens (reference counts + 1, as fork does), so it computes only
 * the rest. Only full blocks are ever indexed, so copy-on-write never applies to them; a block
 * leaves the index when its last reference is released.
 *
 * <p>Every operation checks that enough blocks are free before it changes anything and throws
 * {@link OutOfBlocksException} otherwise, so a failure never leaves a table half-grown and never
 * touches another sequence. Not thread-safe.
 */
public final class BlockManager {

    private final BlockAllocator allocator;
    private final int blockSize;
    private final Map<Long, BlockTable> tables = new HashMap<>();
    private final PrefixCache prefixCache;

    /**
     * Creates the manager of a pool of {@code numBlocks} blocks of {@code blockSize} tokens.
     *
     * @param numBlocks the number of blocks
     * @param blockSize the tokens per block
     */
    public BlockManager(int numBlocks, int blockSize) {
        this(numBlocks, blockSize, null);
    }

    /** A test hook: a manager over a given prefix index (null: a default one). */
    BlockManager(int numBlocks, int blockSize, PrefixCache prefixCache) {
        if (blockSize < 1) {
            throw new IllegalArgumentException("blockSize: expected >= 1, got " + blockSize);
        }
        this.allocator = new BlockAllocator(numBlocks);
        this.blockSize = blockSize;
        this.prefixCache = prefixCache != null ? prefixCache : new PrefixCache(blockSize);
    }

    /**
     * Returns the index of full written blocks that new sequences can share.
     *
     * @return the prefix index
     */
    public PrefixCache getPrefixCache() {
        return prefixCache;
    }

    /**
     * Returns the allocator (reference counts, free blocks).
     *
     * @return the allocator
     */
    public BlockAllocator getAllocator() {
        return allocator;
    }

    /**
     * Returns the tokens per block.
     *
     * @return the block size
     */
    public int getBlockSize() {
        return blockSize;
    }

    /**
     * Returns the number of free blocks.
     *
     * @return the free blocks
     */
    public int getNumFreeBlocks() {
        return allocator.getNumFree();
    }

    /**
     * Returns the number of blocks {@code numTokens} tokens occupy.
     *
     * @param numTokens the tokens
     * @return {@code ceil(numTokens / blockSize)}
     */
    public int blocksFor(int numTokens) {
        return (numTokens + blockSize - 1) / blockSize;
    }

    /**
     * Returns whether a sequence is known.
     *
     * @param sequenceId the sequence id
     * @return true if it holds a table
     */
    public boolean contains(long sequenceId) {
        return tables.containsKey(sequenceId);
    }

    /**
     * Returns the ids of the sequences holding tables.
     *
     * @return an unmodifiable view of the ids
     */
    public java.util.Set<Long> getSequenceIds() {
        return Collections.unmodifiableSet(tables.keySet());
    }

    /**
     * Returns a sequence's block table.
     *
     * @param sequenceId the sequence id
     * @return its table
     */
    public BlockTable getTable(long sequenceId) {
        BlockTable table = tables.get(sequenceId);
        if (table == null) {
            throw new IllegalArgumentException("unknown sequence " + sequenceId);
        }
        return table;
    }

    /**
     * Creates the table of a new sequence holding {@code numTokens} token slots.
     *
     * @param sequenceId the new sequence's id
     * @param numTokens its tokens (the prompt), at least 0
     * @throws OutOfBlocksException if fewer than {@code blocksFor(numTokens)} blocks are free
     */
    public void allocate(long sequenceId, int numTokens) {
        if (tables.containsKey(sequenceId)) {
            throw new IllegalArgumentException("sequence " + sequenceId + " already exists");
        }
        if (numTokens < 0) {
            throw new IllegalArgumentException("numTokens: expected >= 0, got " + numTokens);
        }
        int needed = blocksFor(numTokens);
        if (needed > allocator.getNumFree()) {
            throw new OutOfBlocksException(
                    needed,
                    allocator.getNumFree(),
                    allocator.getNumBlocks(),
                    "a sequence of " + numTokens + " tokens");
        }
        BlockTable table = new BlockTable(sequenceId, blockSize);
        for (int i = 0; i < needed; ++i) {
            table.mutableBlocks().add(allocator.allocate());
        }
        table.setNumTokens(numTokens);
        tables.put(sequenceId, table);
    }

    /**
     * Returns the free blocks {@link #appendSlots} would need for {@code n} more tokens, counting a
     * copy-on-write of a shared partial last block.
     *
     * @param sequenceId the sequence
     * @param n the new tokens
     * @return the blocks needed
     */
    public int blocksToAppend(long sequenceId, int n) {
        BlockTable table = getTable(sequenceId);
        int tokens = table.getNumTokens();
        int needed = blocksFor(tokens + n) - table.mutableBlocks().size();
        if (n > 0 && needsCopy(table)) {
            ++needed;
        }
        return needed;
    }

    /**
     * Extends a sequence by {@code n} token slots (positions {@code getNumTokens() ..
     * getNumTokens() + n - 1}), taking new blocks as needed. If its last block is partially filled
     * and shared with another sequence, it is replaced by a private copy first.
     *
     * @param sequenceId the sequence
     * @param n the new tokens, at least 0
     * @return the block copies to perform before writing the new tokens (at most one)
     * @throws OutOfBlocksException if too few blocks are free (nothing changed)
     */
    public List<BlockCopy> appendSlots(long sequenceId, int n) {
        if (n < 0) {
            throw new IllegalArgumentException("n: expected >= 0, got " + n);
        }
        BlockTable table = getTable(sequenceId);
        int needed = blocksToAppend(sequenceId, n);
        if (needed > allocator.getNumFree()) {
            throw new OutOfBlocksException(
                    needed,
                    allocator.getNumFree(),
                    allocator.getNumBlocks(),
                    "appending " + n + " tokens to sequence " + sequenceId);
        }
        List<BlockCopy> copies = new ArrayList<>(1);
        List<Integer> blocks = table.mutableBlocks();
        if (n > 0 && needsCopy(table)) {
            int last = blocks.size() - 1;
            int shared = blocks.get(last);
            int copy = allocator.allocate();
            release(shared);
            blocks.set(last, copy);
            copies.add(new BlockCopy(shared, copy));
        }
        int tokens = table.getNumTokens() + n;
        while (blocks.size() < blocksFor(tokens)) {
            blocks.add(allocator.allocate());
        }
        table.setNumTokens(tokens);
        return copies;
    }

    /**
     * Makes {@code childId} a new sequence sharing all of {@code parentId}'s blocks and tokens.
     *
     * @param parentId the existing sequence
     * @param childId the new sequence
     */
    public void fork(long parentId, long childId) {
        BlockTable parent = getTable(parentId);
        if (tables.containsKey(childId)) {
            throw new IllegalArgumentException("sequence " + childId + " already exists");
        }
        BlockTable child = new BlockTable(childId, blockSize);
        for (int block : parent.mutableBlocks()) {
            allocator.retain(block);
            child.mutableBlocks().add(block);
        }
        child.setNumTokens(parent.getNumTokens());
        child.indexedBlocks = parent.indexedBlocks;
        child.lastIndexed = parent.lastIndexed;
        child.indexStopped = parent.indexStopped;
        tables.put(childId, child);
    }

    /**
     * Returns how many leading tokens of {@code tokens[0 .. maxTokens)} a new sequence would find
     * in indexed blocks ({@link #allocateWithCachedPrefix}): a multiple of the block size. Changes
     * nothing.
     *
     * @param tokens the new sequence's token ids
     * @param maxTokens how many leading tokens may be shared, in {@code [0, tokens.length]}; pass
     *     at most {@code tokens.length - 1} when the last token's logits are needed
     * @return the tokens that would be shared
     */
    public int findCachedPrefix(int[] tokens, int maxTokens) {
        Objects.requireNonNull(tokens, "tokens");
        return prefixCache.match(tokens, maxTokens).size() * blockSize;
    }

    /**
     * Creates the table of a new sequence starting with the indexed blocks that hold the longest
     * prefix of {@code tokens[0 .. maxTokens)} (whole blocks; reference counts + 1, as {@link
     * #fork} does). Its token count is the shared tokens: the caller gives slots to the rest with
     * {@link #appendSlots} and computes only those. Takes no free block, so it never runs out.
     *
     * @param sequenceId the new sequence's id
     * @param tokens its token ids
     * @param maxTokens how many leading tokens may be shared, in {@code [0, tokens.length]}
     * @return the shared tokens, a multiple of the block size (0 when nothing matched)
     */
    public int allocateWithCachedPrefix(long sequenceId, int[] tokens, int maxTokens) {
        Objects.requireNonNull(tokens, "tokens");
        if (tables.containsKey(sequenceId)) {
            throw new IllegalArgumentException("sequence " + sequenceId + " already exists");
        }
        List<PrefixCache.Entry> matched = prefixCache.match(tokens, maxTokens);
        BlockTable table = new BlockTable(sequenceId, blockSize);
        for (PrefixCache.Entry e : matched) {
            allocator.retain(e.getBlock());
            table.mutableBlocks().add(e.getBlock());
        }
        table.setNumTokens(matched.size() * blockSize);
        table.indexedBlocks = matched.size();
        table.lastIndexed = matched.isEmpty() ? null : matched.get(matched.size() - 1);
        tables.put(sequenceId, table);
        return matched.size() * blockSize;
    }

    /**
     * Enters a sequence's full blocks whose K/V is written in the prefix index, so later sequences
     * with the same leading tokens can share them. Blocks indexed before are skipped; a block whose
     * prefix another block already stands for stays private.
     *
     * @param sequenceId the sequence
     * @param tokens its token ids, at least {@code numWritten} of them (positions 0 ..)
     * @param numWritten how many leading tokens' K/V is written in the cache, at most its token
     *     count
     */
    public void registerWritten(long sequenceId, int[] tokens, int numWritten) {
        Objects.requireNonNull(tokens, "tokens");
        BlockTable table = getTable(sequenceId);
        if (numWritten < 0 || numWritten > table.getNumTokens() || numWritten > tokens.length) {
            throw new IllegalArgumentException(
                    "numWritten: expected a value in [0, min(token count "
                            + table.getNumTokens()
                            + ", token ids "
                            + tokens.length
                            + ")], got "
                            + numWritten);
        }
        List<Integer> blocks = table.mutableBlocks();
        int full = numWritten / blockSize;
        while (!table.indexStopped && table.indexedBlocks < full) {
            int i = table.indexedBlocks;
            PrefixCache.Entry e =
                    prefixCache.register(table.lastIndexed, tokens, i * blockSize, blocks.get(i));
            if (e == null) {
                table.indexStopped = true;
            } else {
                table.lastIndexed = e;
                table.indexedBlocks = i + 1;
            }
        }
    }

    /**
     * Drops a sequence: releases its references; blocks nobody else holds become free.
     *
     * @param sequenceId the sequence
     */
    public void free(long sequenceId) {
        BlockTable table = tables.remove(sequenceId);
        if (table == null) {
            throw new IllegalArgumentException("unknown sequence " + sequenceId);
        }
        for (int block : table.mutableBlocks()) {
            release(block);
        }
        table.mutableBlocks().clear();
        table.setNumTokens(0);
        table.indexedBlocks = 0;
        table.lastIndexed = null;
    }

    /** Drops one reference; a block that becomes free leaves the prefix index. */
    private void release(int block) {
        if (allocator.release(block)) {
            prefixCache.remove(block);
        }
    }

    private boolean needsCopy(BlockTable table) {
        List<Integer> blocks = table.mutableBlocks();
        return table.getNumTokens() % blockSize != 0
                && allocator.getRefCount(blocks.get(blocks.size() - 1)) > 1;
    }
}
