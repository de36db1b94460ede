/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * One sequence's block table: logical block {@code i} of the sequence (its tokens {@code i *
 * blockSize .. (i + 1) * blockSize - 1}) lives in physical block {@code getBlocks().get(i)}, and
 * token {@code p} in slot {@code getBlocks().get(p / blockSize) * blockSize + p % blockSize}.
 *
 * <p>Read-only to users; {@link BlockManager} changes it.
 */
public final class BlockTable {

    private final long sequenceId;
    private final int blockSize;
    private final List<Integer> blocks = new ArrayList<>();
    private int numTokens;

    // Prefix-index state (BlockManager): blocks 0 .. indexedBlocks - 1 are in the index (or are
    // private copies of indexed prefixes), lastIndexed is the entry standing for them, and a
    // stopped table indexes nothing more.
    int indexedBlocks;
    PrefixCache.Entry lastIndexed;
    boolean indexStopped;

    BlockTable(long sequenceId, int blockSize) {
        this.sequenceId = sequenceId;
        this.blockSize = blockSize;
    }

    /**
     * Returns the sequence id.
     *
     * @return the sequence id
     */
    public long getSequenceId() {
        return sequenceId;
    }

    /**
     * Returns the physical block ids, in logical order.
     *
     * @return an unmodifiable view of the block ids
     */
    public List<Integer> getBlocks() {
        return Collections.unmodifiableList(blocks);
    }

    /**
     * Returns the number of token slots the sequence holds (its context length once written).
     *
     * @return the number of tokens
     */
    public int getNumTokens() {
        return numTokens;
    }

    /**
     * Returns the slot of a token position: {@code block * blockSize + offset}.
     *
     * @param position the token position, in {@code [0, getNumTokens())}
     * @return the slot
     */
    public long slotOf(int position) {
        if (position < 0 || position >= numTokens) {
            throw new IllegalArgumentException(
                    "position: expected a value in [0, " + numTokens + "), got " + position);
        }
        return (long) blocks.get(position / blockSize) * blockSize + position % blockSize;
    }

    List<Integer> mutableBlocks() {
        return blocks;
    }

    void setNumTokens(int numTokens) {
        this.numTokens = numTokens;
    }
}
