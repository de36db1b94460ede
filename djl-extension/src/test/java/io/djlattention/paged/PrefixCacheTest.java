/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;

/**
 * Prefix sharing between separate sequences ({@link PrefixCache} through {@link BlockManager}):
 * property-based runs of random allocate-with-prefix / reserve / write+register / fork / free
 * sequences, and the individual rules.
 *
 * <p>The property runs keep a model of the cache contents in which a slot holds the exact token
 * prefix whose K/V it stores (the tokens up to and including its position), written when a sequence
 * writes that position and erased when its block becomes free. After every operation each sequence
 * must read, at every written position, exactly its own token prefix: so a matched block was
 * written, and was written for the same tokens. With a hash that maps everything to a few values,
 * the chained hashes collide all the time, and the same must hold.
 */
class PrefixCacheTest {

    private static final int ITERATIONS = 3000;

    /** Every block hashes to one of two values: almost every lookup meets a collision. */
    private static final PrefixCache.ChainHash TINY =
            (previous, tokens, from, to) -> tokens[from] & 1;

    static Stream<Arguments> runs() {
        List<Arguments> runs = new ArrayList<>();
        for (long seed : new long[] {1, 2, 3, 17, 99}) {
            runs.add(Arguments.of(seed, false));
            runs.add(Arguments.of(seed, true));
        }
        return runs.stream();
    }

    @ParameterizedTest(name = "seed {0}, tiny hash {1}")
    @MethodSource("runs")
    void randomOperationsNeverShareWrongBlocks(long seed, boolean tinyHash) {
        Random random = new Random(seed);
        int blockSize = new int[] {1, 2, 4}[random.nextInt(3)];
        int numBlocks = 12 + random.nextInt(30);
        PrefixCache index =
                tinyHash ? new PrefixCache(blockSize, TINY) : new PrefixCache(blockSize);
        BlockManager blocks = new BlockManager(numBlocks, blockSize, index);
        Model model = new Model(numBlocks, blockSize);
        // A few long base sequences: new sequences start with a random part of one of them, so
        // prefixes overlap often; tokens from {0, 1, 2} make equal blocks common besides.
        int[][] bases = new int[3][6 * blockSize];
        for (int[] base : bases) {
            for (int i = 0; i < base.length; ++i) {
                base[i] = random.nextInt(3);
            }
        }
        long nextId = 0;
        long sharedTokens = 0;
        int outOfBlocks = 0;
        for (int it = 0; it < ITERATIONS; ++it) {
            List<Long> live = new ArrayList<>(model.sequences.keySet());
            int op = random.nextInt(20);
            try {
                if (op < 5 || live.isEmpty()) {
                    long id = nextId++;
                    int[] base = bases[random.nextInt(bases.length)];
                    int keep = random.nextInt(base.length + 1);
                    int[] tokens = Arrays.copyOf(base, keep + random.nextInt(2 * blockSize + 1));
                    for (int i = keep; i < tokens.length; ++i) {
                        tokens[i] = random.nextInt(3);
                    }
                    if (tokens.length == 0) {
                        continue;
                    }
                    // Mostly the scheduler's cap (the last token is always computed).
                    int max = random.nextInt(4) == 0 ? tokens.length : tokens.length - 1;
                    int expected = blocks.findCachedPrefix(tokens, max);
                    int shared = blocks.allocateWithCachedPrefix(id, tokens, max);
                    assertEquals(expected, shared);
                    assertEquals(0, shared % blockSize);
                    assertTrue(shared <= max);
                    sharedTokens += shared;
                    Seq seq = new Seq();
                    for (int i = 0; i < shared; ++i) {
                        seq.ids.add(tokens[i]);
                    }
                    seq.written = shared; // shared blocks hold written K/V
                    model.sequences.put(id, seq);
                } else if (op < 10) {
                    long id = live.get(random.nextInt(live.size()));
                    Seq seq = model.sequences.get(id);
                    int n = 1 + random.nextInt(2 * blockSize);
                    model.copy(blocks.appendSlots(id, n)); // nothing written yet
                    for (int i = 0; i < n; ++i) {
                        seq.ids.add(random.nextInt(3));
                    }
                } else if (op < 15) {
                    long id = live.get(random.nextInt(live.size()));
                    Seq seq = model.sequences.get(id);
                    int upTo = seq.written + random.nextInt(seq.ids.size() - seq.written + 1);
                    model.write(blocks, id, seq, upTo);
                    blocks.registerWritten(id, seq.tokens(), upTo);
                } else if (op < 17) {
                    long parent = live.get(random.nextInt(live.size()));
                    long child = nextId++;
                    blocks.fork(parent, child);
                    Seq copy = new Seq();
                    copy.ids.addAll(model.sequences.get(parent).ids);
                    copy.written = model.sequences.get(parent).written;
                    model.sequences.put(child, copy);
                } else {
                    long id = live.get(random.nextInt(live.size()));
                    List<Integer> held = new ArrayList<>(blocks.getTable(id).getBlocks());
                    blocks.free(id);
                    model.sequences.remove(id);
                    model.eraseFreed(blocks, held);
                }
            } catch (OutOfBlocksException e) {
                ++outOfBlocks;
            }
            checkInvariants(blocks, model);
        }
        for (long id : new ArrayList<>(model.sequences.keySet())) {
            blocks.free(id);
        }
        assertEquals(numBlocks, blocks.getNumFreeBlocks(), "blocks leaked");
        assertEquals(0, index.size(), "freed blocks left in the index");
        for (int b = 0; b < numBlocks; ++b) {
            assertEquals(0, blocks.getAllocator().getRefCount(b));
        }
        assertTrue(sharedTokens > 0, "no prefix was shared");
        assertTrue(outOfBlocks > 0, "no operation ran out of blocks");
    }

    private static void checkInvariants(BlockManager blocks, Model model) {
        int numBlocks = blocks.getAllocator().getNumBlocks();
        int[] holders = new int[numBlocks];
        assertEquals(model.sequences.keySet(), blocks.getSequenceIds());
        for (long id : blocks.getSequenceIds()) {
            BlockTable table = blocks.getTable(id);
            Seq seq = model.sequences.get(id);
            List<Integer> ids = table.getBlocks();
            assertEquals(seq.ids.size(), table.getNumTokens(), "token count of " + id);
            assertEquals(blocks.blocksFor(table.getNumTokens()), ids.size(), "table size");
            assertEquals(ids.size(), ids.stream().distinct().count(), "block twice in a table");
            for (int b : ids) {
                ++holders[b];
            }
            for (int p = 0; p < seq.written; ++p) {
                assertEquals(
                        seq.ids.subList(0, p + 1),
                        model.slots[(int) table.slotOf(p)],
                        "sequence " + id + " reads another prefix's K/V at position " + p);
            }
        }
        int zero = 0;
        for (int b = 0; b < numBlocks; ++b) {
            int ref = blocks.getAllocator().getRefCount(b);
            assertTrue(ref >= 0, "negative reference count");
            assertEquals(holders[b], ref, "reference count of block " + b);
            if (ref == 0) {
                ++zero;
                assertFalse(blocks.getPrefixCache().contains(b), "free block " + b + " indexed");
            }
        }
        assertEquals(zero, blocks.getNumFreeBlocks(), "free count");
    }

    @Test
    void sharesOnlyFullWrittenBlocks() {
        BlockManager blocks = new BlockManager(16, 4);
        int[] a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        blocks.allocate(0, a.length);
        blocks.registerWritten(0, a, 5); // block 0 written in full, block 1 in part
        assertEquals(1, blocks.getPrefixCache().size());
        int[] b = {1, 2, 3, 4, 5, 6, 7, 8, 42};
        assertEquals(4, blocks.findCachedPrefix(b, b.length - 1));
        blocks.registerWritten(0, a, 10); // now block 1 is full and written; block 2 is partial
        assertEquals(2, blocks.getPrefixCache().size());
        assertEquals(8, blocks.allocateWithCachedPrefix(1, b, b.length - 1));
        assertEquals(blocks.getTable(0).getBlocks().subList(0, 2), blocks.getTable(1).getBlocks());
        assertEquals(8, blocks.getTable(1).getNumTokens());
        for (int block : blocks.getTable(1).getBlocks()) {
            assertEquals(2, blocks.getAllocator().getRefCount(block));
        }
        // Shared blocks are full: appending takes a fresh block and copies nothing.
        assertTrue(blocks.appendSlots(1, 1).isEmpty());
        assertEquals(3, blocks.getTable(1).getBlocks().size());
        assertEquals(16 - 3 - 1, blocks.getNumFreeBlocks());
        blocks.free(0);
        blocks.free(1);
        assertEquals(16, blocks.getNumFreeBlocks());
        assertEquals(0, blocks.getPrefixCache().size());
    }

    @Test
    void theLastTokenCapKeepsOneTokenToCompute() {
        BlockManager blocks = new BlockManager(8, 4);
        int[] a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        blocks.allocate(0, a.length);
        blocks.registerWritten(0, a, a.length);
        int[] same = Arrays.copyOf(a, 8); // a block-multiple prompt equal to the indexed prefix
        assertEquals(4, blocks.allocateWithCachedPrefix(1, same, same.length - 1));
        assertEquals(8, blocks.findCachedPrefix(same, same.length));
        int[] plusOne = Arrays.copyOf(a, 9);
        assertEquals(8, blocks.allocateWithCachedPrefix(2, plusOne, plusOne.length - 1));
        int[] one = {1};
        assertEquals(0, blocks.allocateWithCachedPrefix(3, one, 0));
        assertEquals(0, blocks.getTable(3).getBlocks().size());
    }

    @Test
    void hashCollisionsNeverShare() {
        // Every block hashes to the same value: only token and previous-block checks decide.
        PrefixCache index = new PrefixCache(2, (previous, tokens, from, to) -> 0L);
        BlockManager blocks = new BlockManager(16, 2, index);
        int[] a = {1, 2, 3, 4, 5};
        blocks.allocate(0, a.length);
        blocks.registerWritten(0, a, a.length);
        assertEquals(2, index.size());
        assertEquals(0, blocks.findCachedPrefix(new int[] {9, 9, 3, 4, 5}, 4), "first block");
        assertEquals(2, blocks.findCachedPrefix(new int[] {1, 2, 9, 9, 5}, 4), "second block");
        // The second block's tokens after another first block: not the same prefix.
        assertEquals(0, blocks.findCachedPrefix(new int[] {3, 4, 3, 4, 5}, 4), "chain");
        // An identical block at another position is another prefix too.
        int[] b = {3, 4, 1, 2, 0};
        blocks.allocate(1, b.length);
        blocks.registerWritten(1, b, b.length);
        assertEquals(4, index.size());
        assertEquals(4, blocks.findCachedPrefix(new int[] {3, 4, 1, 2, 7}, 4));
        assertEquals(4, blocks.findCachedPrefix(new int[] {1, 2, 3, 4, 7}, 4));
        assertEquals(2, blocks.findCachedPrefix(new int[] {1, 2, 1, 2, 7}, 4));
        int shared = blocks.allocateWithCachedPrefix(2, new int[] {3, 4, 1, 2, 8}, 4);
        assertEquals(4, shared);
        assertEquals(blocks.getTable(1).getBlocks().subList(0, 2), blocks.getTable(2).getBlocks());
        for (long id : new long[] {0, 1, 2}) {
            blocks.free(id);
        }
        assertEquals(0, index.size());
        assertEquals(16, blocks.getNumFreeBlocks());
    }

    @Test
    void aDuplicatePrefixStaysPrivateAndBlocksLeaveTheIndexWhenFreed() {
        BlockManager blocks = new BlockManager(16, 2);
        int[] a = {1, 2, 3, 4, 5};
        // Two sequences compute the same prefix independently (admitted in the same step).
        blocks.allocate(0, a.length);
        blocks.allocate(1, a.length);
        blocks.registerWritten(0, a, a.length);
        blocks.registerWritten(1, a, a.length);
        assertEquals(2, blocks.getPrefixCache().size(), "the second copy is not indexed");
        assertEquals(4, blocks.allocateWithCachedPrefix(2, a, 4));
        assertEquals(blocks.getTable(0).getBlocks().subList(0, 2), blocks.getTable(2).getBlocks());
        // Sequence 2 writes one more block after the shared ones; it chains on to them.
        assertTrue(blocks.appendSlots(2, 2).isEmpty());
        int[] longer = {1, 2, 3, 4, 5, 6, 7};
        blocks.registerWritten(2, longer, 6);
        assertEquals(3, blocks.getPrefixCache().size());
        assertEquals(6, blocks.findCachedPrefix(longer, 6));
        // The writer of the shared blocks leaves: they stay indexed while sequence 2 holds them.
        blocks.free(0);
        assertEquals(3, blocks.getPrefixCache().size());
        assertEquals(6, blocks.findCachedPrefix(longer, 6));
        blocks.free(2);
        assertEquals(0, blocks.getPrefixCache().size());
        assertEquals(0, blocks.findCachedPrefix(longer, 6));
        blocks.free(1);
        assertEquals(16, blocks.getNumFreeBlocks());
    }

    @Test
    void forkedSequencesKeepIndexingFromTheSharedState() {
        BlockManager blocks = new BlockManager(16, 2);
        int[] a = {1, 2, 3};
        blocks.allocate(0, a.length);
        blocks.registerWritten(0, a, a.length);
        blocks.fork(0, 1);
        blocks.appendSlots(0, 1);
        blocks.appendSlots(1, 1);
        int[] a0 = {1, 2, 3, 7};
        int[] a1 = {1, 2, 3, 8};
        blocks.registerWritten(0, a0, 4);
        blocks.registerWritten(1, a1, 4);
        assertEquals(3, blocks.getPrefixCache().size());
        assertEquals(4, blocks.findCachedPrefix(new int[] {1, 2, 3, 7, 0}, 4));
        assertEquals(4, blocks.findCachedPrefix(new int[] {1, 2, 3, 8, 0}, 4));
        List<Integer> t0 = blocks.getTable(0).getBlocks();
        List<Integer> t1 = blocks.getTable(1).getBlocks();
        assertEquals(t0.get(0), t1.get(0), "the full first block stays shared");
        assertFalse(t0.get(1).equals(t1.get(1)), "the partial block was copied on write");
        assertEquals(2, blocks.getAllocator().getRefCount(t0.get(0)));
        blocks.free(0);
        blocks.free(1);
        assertEquals(0, blocks.getPrefixCache().size());
    }

    @Test
    void misuseIsRejected() {
        BlockManager blocks = new BlockManager(4, 2);
        int[] a = {1, 2, 3};
        blocks.allocate(0, 2);
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> blocks.registerWritten(0, a, 3));
        assertTrue(e.getMessage().contains("numWritten"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> blocks.registerWritten(0, a, -1));
        assertThrows(
                IllegalArgumentException.class, () -> blocks.registerWritten(0, new int[1], 2));
        assertThrows(IllegalArgumentException.class, () -> blocks.registerWritten(5, a, 0));
        assertThrows(IllegalArgumentException.class, () -> blocks.findCachedPrefix(a, 4));
        assertThrows(IllegalArgumentException.class, () -> blocks.findCachedPrefix(a, -1));
        assertThrows(
                IllegalArgumentException.class, () -> blocks.allocateWithCachedPrefix(0, a, 2));
        assertThrows(
                IllegalArgumentException.class, () -> blocks.allocateWithCachedPrefix(1, a, 4));
        assertFalse(blocks.contains(1), "a rejected call created the sequence");
        assertThrows(IllegalArgumentException.class, () -> new PrefixCache(0));
    }

    /** One sequence of the model: its token ids (one per slot) and how many are written. */
    private static final class Seq {
        final List<Integer> ids = new ArrayList<>();
        int written;

        int[] tokens() {
            return ids.stream().mapToInt(Integer::intValue).toArray();
        }
    }

    /** What the cache holds: per slot, the token prefix whose K/V it stores (null: nothing). */
    private static final class Model {
        final Object[] slots;
        final Map<Long, Seq> sequences = new HashMap<>();
        final int blockSize;

        Model(int numBlocks, int blockSize) {
            this.slots = new Object[numBlocks * blockSize];
            this.blockSize = blockSize;
        }

        void copy(List<BlockCopy> copies) {
            for (BlockCopy c : copies) {
                System.arraycopy(
                        slots,
                        c.source() * blockSize,
                        slots,
                        c.destination() * blockSize,
                        blockSize);
            }
        }

        void write(BlockManager blocks, long id, Seq seq, int upTo) {
            BlockTable table = blocks.getTable(id);
            for (int p = seq.written; p < upTo; ++p) {
                slots[(int) table.slotOf(p)] = new ArrayList<>(seq.ids.subList(0, p + 1));
            }
            seq.written = Math.max(seq.written, upTo);
        }

        void eraseFreed(BlockManager blocks, List<Integer> held) {
            for (int b : held) {
                if (blocks.getAllocator().getRefCount(b) == 0) {
                    Arrays.fill(slots, b * blockSize, (b + 1) * blockSize, null);
                }
            }
        }
    }
}
