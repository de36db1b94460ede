/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The index of full KV blocks by content, for sharing identical prompt prefixes between separate
 * requests (vLLM's automatic prefix caching, without retention of freed blocks).
 *
 * <p>An entry describes one full, written block: its physical id, its {@code blockSize} token ids
 * and the entry of the block before it (none for a sequence's first block), so an entry stands for
 * the whole token prefix up to the block's end. It is found through a chained hash, {@code h_i =
 * hash(h_{i-1}, tokens of block i)}, as vLLM keys its blocks; a hit counts only if the candidate's
 * token ids equal the query's and its previous-block entry is the very entry matched for the block
 * before (object identity). By induction every matched block then holds the K/V of exactly the
 * query's token prefix, so a hash collision can cost a miss but never share wrong K/V.
 *
 * <p>{@link BlockManager} keeps it: it registers a sequence's blocks once their K/V is written
 * ({@link BlockManager#registerWritten}), looks up new sequences' prompts ({@link
 * BlockManager#allocateWithCachedPrefix}) and removes a block when its last reference is released,
 * so only blocks some sequence holds are ever matched. Blocks that are the same prefix as an
 * indexed one (computed before the indexed one was registered) stay private and unindexed. Not
 * thread-safe.
 */
public final class PrefixCache {

    /** The hash of the empty prefix, where every chain starts. */
    static final long ROOT_HASH = 0x6a09e667f3bcc908L;

    /** How a block's hash is chained from the hash of all preceding tokens. */
    @FunctionalInterface
    interface ChainHash {

        /**
         * Returns the hash of a prefix ending with {@code tokens[from .. to)}.
         *
         * @param previous the hash of the prefix before the block
         * @param tokens the token ids
         * @param from the block's first token
         * @param to one past its last token
         * @return the chained hash
         */
        long hash(long previous, int[] tokens, int from, int to);
    }

    /** One indexed block. */
    static final class Entry {
        final long hash;
        final int block;
        final int[] tokens;
        final Entry previous;

        Entry(long hash, int block, int[] tokens, Entry previous) {
            this.hash = hash;
            this.block = block;
            this.tokens = tokens;
            this.previous = previous;
        }

        int getBlock() {
            return block;
        }

        boolean sameAs(Entry previousEntry, int[] ids, int from, int to) {
            return previous == previousEntry
                    && Arrays.equals(tokens, 0, tokens.length, ids, from, to);
        }
    }

    private final int blockSize;
    private final ChainHash chainHash;
    private final Map<Long, List<Entry>> byHash = new HashMap<>();
    private final Map<Integer, Entry> byBlock = new HashMap<>();

    /** Creates an empty index of blocks of {@code blockSize} tokens ({@link BlockManager} does). */
    PrefixCache(int blockSize) {
        this(blockSize, PrefixCache::mix);
    }

    /** A test hook: an index with its own hash (a tiny one forces collisions). */
    PrefixCache(int blockSize, ChainHash chainHash) {
        if (blockSize < 1) {
            throw new IllegalArgumentException("blockSize: expected >= 1, got " + blockSize);
        }
        this.blockSize = blockSize;
        this.chainHash = chainHash;
    }

    /**
     * Returns the number of indexed blocks.
     *
     * @return the indexed blocks
     */
    public int size() {
        return byBlock.size();
    }

    /**
     * Returns whether a physical block is indexed.
     *
     * @param block the block id
     * @return true if a later sequence can match it
     */
    public boolean contains(int block) {
        return byBlock.containsKey(block);
    }

    /**
     * Returns the indexed blocks that hold the longest cached prefix of {@code tokens[0 ..
     * maxTokens)}, whole blocks only. Changes nothing.
     *
     * @param tokens the token ids
     * @param maxTokens how many leading tokens may be matched, at most {@code tokens.length}
     * @return the entries of the matched blocks, in logical order
     */
    List<Entry> match(int[] tokens, int maxTokens) {
        if (maxTokens < 0 || maxTokens > tokens.length) {
            throw new IllegalArgumentException(
                    "maxTokens: expected a value in [0, " + tokens.length + "], got " + maxTokens);
        }
        List<Entry> matched = new ArrayList<>();
        Entry previous = null;
        long hash = ROOT_HASH;
        for (int from = 0; from + blockSize <= maxTokens; from += blockSize) {
            int to = from + blockSize;
            hash = chainHash.hash(hash, tokens, from, to);
            Entry hit = find(hash, previous, tokens, from, to);
            if (hit == null) {
                break;
            }
            matched.add(hit);
            previous = hit;
        }
        return matched;
    }

    /**
     * Indexes a full, written block as the prefix {@code previous} followed by {@code tokens[from
     * .. from + blockSize)}. If that prefix is indexed already (by another block), nothing is added
     * and the existing entry is returned, so that sequences chain on to the one indexed copy.
     *
     * @param previous the entry of the prefix before the block, null for a first block
     * @param tokens the token ids
     * @param from the block's first token
     * @param block the physical block holding those tokens' K/V
     * @return the entry now standing for this prefix, or null if {@code block} is indexed as
     *     another prefix (the caller stops indexing that sequence)
     */
    Entry register(Entry previous, int[] tokens, int from, int block) {
        int to = from + blockSize;
        if (from < 0 || to > tokens.length) {
            throw new IllegalArgumentException(
                    "a block at token "
                            + from
                            + " needs "
                            + blockSize
                            + " token ids, "
                            + tokens.length
                            + " given");
        }
        Entry indexed = byBlock.get(block);
        if (indexed != null) {
            return indexed.sameAs(previous, tokens, from, to) ? indexed : null;
        }
        long hash = chainHash.hash(previous == null ? ROOT_HASH : previous.hash, tokens, from, to);
        Entry existing = find(hash, previous, tokens, from, to);
        if (existing != null) {
            return existing;
        }
        Entry entry = new Entry(hash, block, Arrays.copyOfRange(tokens, from, to), previous);
        byHash.computeIfAbsent(hash, h -> new ArrayList<>(1)).add(entry);
        byBlock.put(block, entry);
        return entry;
    }

    /**
     * Drops a block from the index (its last reference was released); nothing if not indexed.
     *
     * @param block the block id
     */
    void remove(int block) {
        Entry entry = byBlock.remove(block);
        if (entry == null) {
            return;
        }
        List<Entry> bucket = byHash.get(entry.hash);
        bucket.remove(entry);
        if (bucket.isEmpty()) {
            byHash.remove(entry.hash);
        }
    }

    private Entry find(long hash, Entry previous, int[] tokens, int from, int to) {
        List<Entry> bucket = byHash.get(hash);
        if (bucket != null) {
            for (Entry e : bucket) {
                if (e.sameAs(previous, tokens, from, to)) {
                    return e;
                }
            }
        }
        return null;
    }

    /** A 64-bit chained hash (splitmix64 finaliser per token). */
    static long mix(long previous, int[] tokens, int from, int to) {
        long h = previous;
        for (int i = from; i < to; ++i) {
            h = finish(h ^ (tokens[i] * 0x9e3779b97f4a7c15L + 0x632be59bd9b4e019L));
        }
        return finish(h + (to - from));
    }

    private static long finish(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
