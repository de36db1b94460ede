/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * Property-based checks of {@link BlockManager} and {@link BlockAllocator} under long random
 * sequences of allocate / append / fork / free, with a seeded {@link Random} per run.
 *
 * <p>Besides the bookkeeping invariants (reference count of every block = the number of table
 * entries that hold it, free iff 0, the free count = the blocks at 0, no block twice in one table,
 * nothing changed by an operation that ran out of blocks), a model of the cache contents checks
 * that sharing is safe: each token writes a unique tag into its slot (after performing the returned
 * copy-on-write copies), and every sequence must read back exactly its own tags through its table
 * after every operation — so a write never lands in a block another sequence reads.
 */
class BlockManagerPropertyTest {

    private static final int ITERATIONS = 4000;

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3, 42, 1234})
    void randomOperationsKeepInvariants(long seed) {
        Random random = new Random(seed);
        int blockSize = new int[] {1, 4, 16}[random.nextInt(3)];
        int numBlocks = 8 + random.nextInt(40);
        BlockManager blocks = new BlockManager(numBlocks, blockSize);
        Model model = new Model(numBlocks, blockSize);
        long nextId = 0;
        int outOfBlocks = 0;
        int forks = 0;
        int copies = 0;
        for (int it = 0; it < ITERATIONS; ++it) {
            List<Long> live = new ArrayList<>(model.tokens.keySet());
            int op = random.nextInt(10);
            Snapshot before = new Snapshot(blocks);
            try {
                if (op < 3 || live.isEmpty()) {
                    long id = nextId++;
                    int n = random.nextInt(3 * blockSize + 2);
                    blocks.allocate(id, n);
                    model.tokens.put(id, new ArrayList<>());
                    model.write(blocks, id, 0, n);
                } else if (op < 7) {
                    long id = live.get(random.nextInt(live.size()));
                    int n = 1 + random.nextInt(blockSize + 1);
                    int start = blocks.getTable(id).getNumTokens();
                    List<BlockCopy> done = blocks.appendSlots(id, n);
                    copies += done.size();
                    model.copy(done);
                    model.write(blocks, id, start, n);
                } else if (op < 8) {
                    long parent = live.get(random.nextInt(live.size()));
                    long child = nextId++;
                    blocks.fork(parent, child);
                    model.tokens.put(child, new ArrayList<>(model.tokens.get(parent)));
                    ++forks;
                } else {
                    long id = live.get(random.nextInt(live.size()));
                    blocks.free(id);
                    model.tokens.remove(id);
                }
            } catch (OutOfBlocksException e) {
                ++outOfBlocks;
                assertEquals(before, new Snapshot(blocks), "a failed operation changed state");
                assertTrue(e.getMessage().contains("out of blocks"), e.getMessage());
            }
            checkInvariants(blocks, model);
        }
        for (long id : new ArrayList<>(model.tokens.keySet())) {
            blocks.free(id);
        }
        assertEquals(numBlocks, blocks.getNumFreeBlocks(), "blocks leaked");
        for (int b = 0; b < numBlocks; ++b) {
            assertEquals(0, blocks.getAllocator().getRefCount(b));
        }
        // The runs must exercise every path, or they prove little.
        assertTrue(outOfBlocks > 0, "no operation ran out of blocks");
        assertTrue(forks > 0, "no fork happened");
        // Blocks of one token are never partially filled, so they never need a copy.
        assertTrue(copies > 0 || blockSize == 1, "no copy-on-write happened");
    }

    private static void checkInvariants(BlockManager blocks, Model model) {
        int numBlocks = blocks.getAllocator().getNumBlocks();
        int[] holders = new int[numBlocks];
        assertEquals(model.tokens.keySet(), blocks.getSequenceIds());
        for (long id : blocks.getSequenceIds()) {
            BlockTable table = blocks.getTable(id);
            List<Integer> ids = table.getBlocks();
            assertEquals(blocks.blocksFor(table.getNumTokens()), ids.size(), "table size");
            assertEquals(ids.size(), ids.stream().distinct().count(), "block twice in a table");
            for (int b : ids) {
                ++holders[b];
            }
            // Each sequence reads back exactly its own tokens.
            List<Long> expected = model.tokens.get(id);
            assertEquals(expected.size(), table.getNumTokens());
            for (int p = 0; p < expected.size(); ++p) {
                assertEquals(
                        expected.get(p).longValue(),
                        model.slots[(int) table.slotOf(p)],
                        "sequence " + id + " token " + p);
            }
        }
        int zero = 0;
        for (int b = 0; b < numBlocks; ++b) {
            int ref = blocks.getAllocator().getRefCount(b);
            assertTrue(ref >= 0, "negative reference count");
            assertEquals(holders[b], ref, "reference count of block " + b);
            if (ref == 0) {
                ++zero;
            }
        }
        assertEquals(zero, blocks.getNumFreeBlocks(), "free count");
    }

    @Test
    void forkSharesBlocksAndCopiesOnlyThePartialLastBlock() {
        BlockManager blocks = new BlockManager(10, 4);
        blocks.allocate(0, 6); // one full block, one partial
        blocks.fork(0, 1);
        assertEquals(blocks.getTable(0).getBlocks(), blocks.getTable(1).getBlocks());
        assertEquals(8, blocks.getNumFreeBlocks());
        List<BlockCopy> copies = blocks.appendSlots(1, 1);
        assertEquals(1, copies.size());
        int shared = blocks.getTable(0).getBlocks().get(1);
        assertEquals(shared, copies.get(0).source());
        assertEquals(blocks.getTable(1).getBlocks().get(1), copies.get(0).destination());
        // The full first block stays shared; the parent now owns its partial block alone.
        assertEquals(blocks.getTable(0).getBlocks().get(0), blocks.getTable(1).getBlocks().get(0));
        assertEquals(2, blocks.getAllocator().getRefCount(blocks.getTable(0).getBlocks().get(0)));
        assertEquals(1, blocks.getAllocator().getRefCount(shared));
        assertTrue(blocks.appendSlots(0, 1).isEmpty(), "sole owner writes in place");
        blocks.free(0);
        blocks.free(1);
        assertEquals(10, blocks.getNumFreeBlocks());
    }

    @Test
    void forkAtABlockBoundaryNeedsNoCopy() {
        BlockManager blocks = new BlockManager(4, 4);
        blocks.allocate(0, 4);
        blocks.fork(0, 1);
        assertTrue(blocks.appendSlots(1, 1).isEmpty());
        assertTrue(blocks.appendSlots(0, 1).isEmpty());
        assertEquals(1, blocks.getNumFreeBlocks());
    }

    @Test
    void outOfBlocksIsClearAndChangesNothing() {
        BlockManager blocks = new BlockManager(3, 8);
        blocks.allocate(0, 17);
        OutOfBlocksException e =
                assertThrows(OutOfBlocksException.class, () -> blocks.allocate(1, 9));
        assertEquals(2, e.getNeeded());
        assertEquals(0, e.getFree());
        assertTrue(e.getMessage().contains("needs 2 free blocks, 0 of 3 are free"), e.getMessage());
        assertFalse(blocks.contains(1));
        assertThrows(OutOfBlocksException.class, () -> blocks.appendSlots(0, 8));
        assertEquals(17, blocks.getTable(0).getNumTokens());
        blocks.appendSlots(0, 7); // fills the last block exactly
        assertEquals(24, blocks.getTable(0).getNumTokens());
    }

    @Test
    void misuseIsRejected() {
        BlockAllocator allocator = new BlockAllocator(2);
        assertThrows(IllegalArgumentException.class, () -> new BlockAllocator(0));
        int b = allocator.allocate();
        assertTrue(allocator.release(b));
        IllegalStateException e =
                assertThrows(IllegalStateException.class, () -> allocator.release(b));
        assertTrue(e.getMessage().contains("is free"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> allocator.retain(2));
        assertThrows(IllegalArgumentException.class, () -> allocator.getRefCount(-1));
        BlockManager blocks = new BlockManager(2, 4);
        blocks.allocate(7, 1);
        assertThrows(IllegalArgumentException.class, () -> blocks.allocate(7, 1));
        assertThrows(IllegalArgumentException.class, () -> blocks.free(8));
        assertThrows(IllegalArgumentException.class, () -> blocks.fork(8, 9));
        assertThrows(IllegalArgumentException.class, () -> blocks.getTable(7).slotOf(1));
    }

    /** What the cache should hold: a tag per slot, and each sequence's tags in order. */
    private static final class Model {
        final long[] slots;
        final Map<Long, List<Long>> tokens = new HashMap<>();
        final int blockSize;
        long nextTag = 1;

        Model(int numBlocks, int blockSize) {
            this.slots = new long[numBlocks * blockSize];
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

        void write(BlockManager blocks, long id, int start, int n) {
            BlockTable table = blocks.getTable(id);
            List<Long> seq = tokens.get(id);
            for (int p = start; p < start + n; ++p) {
                long tag = nextTag++;
                slots[(int) table.slotOf(p)] = tag;
                seq.add(tag);
            }
        }
    }

    /** The observable state, to check that a failed operation changed nothing. */
    private static final class Snapshot {
        final Map<Long, List<Integer>> tables = new HashMap<>();
        final Map<Long, Integer> lengths = new HashMap<>();
        final int[] refs;

        Snapshot(BlockManager blocks) {
            for (long id : blocks.getSequenceIds()) {
                tables.put(id, new ArrayList<>(blocks.getTable(id).getBlocks()));
                lengths.put(id, blocks.getTable(id).getNumTokens());
            }
            refs = new int[blocks.getAllocator().getNumBlocks()];
            for (int b = 0; b < refs.length; ++b) {
                refs[b] = blocks.getAllocator().getRefCount(b);
            }
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Snapshot)) {
                return false;
            }
            Snapshot s = (Snapshot) o;
            assertArrayEquals(refs, s.refs);
            return tables.equals(s.tables) && lengths.equals(s.lengths);
        }

        @Override
        public int hashCode() {
            return tables.hashCode();
        }
    }
}
