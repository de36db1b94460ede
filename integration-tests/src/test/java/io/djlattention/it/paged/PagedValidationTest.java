/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.AttentionOps;
import io.djlattention.PagedAttentionOptions;
import io.djlattention.it.TestDevice;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.generate.ContinuousBatchingScheduler;
import io.djlattention.zoo.generate.GenerationConfig;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import java.lang.reflect.Proxy;

/**
 * Bad inputs to the paged operators, cache and scheduler give clear errors: the operators' own
 * messages (validated once, in C++) as {@link IllegalArgumentException}, and Java's checks for what
 * Java owns (bfloat16, builders, bookkeeping).
 */
class PagedValidationTest {

    private NDManager manager;
    private NDArray query;
    private NDArray keyCache;
    private NDArray valueCache;
    private NDArray blockTables;
    private NDArray contextLens;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager(TestDevice.get());
        // 2 sequences of 20 and 9 tokens in a cache of 4 blocks of 16.
        query = manager.randomNormal(new Shape(2, 4, 64));
        keyCache = manager.randomNormal(new Shape(4, 16, 2, 64));
        valueCache = manager.randomNormal(new Shape(4, 16, 2, 64));
        blockTables = manager.create(new int[] {2, 0, 3, 1}, new Shape(2, 2));
        contextLens = manager.create(new int[] {20, 9});
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    private NDArray decode() {
        return AttentionOps.pagedAttention(
                query,
                keyCache,
                valueCache,
                blockTables,
                contextLens,
                20,
                PagedAttentionOptions.builder().optScale(0.125f).build());
    }

    private static void assertRejected(String expected, Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(
                e.getMessage().contains(expected),
                "message '" + e.getMessage() + "' lacks '" + expected + "'");
    }

    @Test
    void validInputsPass() {
        assertEquals(new Shape(2, 4, 64), decode().getShape());
    }

    @Test
    void blockIdsOutOfRange() {
        blockTables = manager.create(new int[] {2, 4, 3, 1}, new Shape(2, 2));
        assertRejected(
                "paged_attention: block_tables: expected block ids in [0, num_blocks = 4)",
                this::decode);
        blockTables = manager.create(new int[] {2, 0, -1, 1}, new Shape(2, 2));
        assertRejected("block_tables: expected block ids in [0, num_blocks = 4)", this::decode);
    }

    @Test
    void contextLongerThanTheTable() {
        contextLens = manager.create(new int[] {33, 9});
        assertRejected(
                "context_lens: expected values in [0, max_blocks * block_size = 32]",
                () ->
                        AttentionOps.pagedAttention(
                                query,
                                keyCache,
                                valueCache,
                                blockTables,
                                contextLens,
                                40,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
        contextLens = manager.create(new int[] {20, 9});
        assertRejected(
                "context_lens: expected values <= max_context_len = 19",
                () ->
                        AttentionOps.pagedAttention(
                                query,
                                keyCache,
                                valueCache,
                                blockTables,
                                contextLens,
                                19,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
    }

    @Test
    void wrongDtypes() {
        NDArray tables64 = blockTables.toType(DataType.INT64, false);
        assertRejected(
                "block_tables: expected dtype int32",
                () ->
                        AttentionOps.pagedAttention(
                                query,
                                keyCache,
                                valueCache,
                                tables64,
                                contextLens,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
        NDArray lens64 = contextLens.toType(DataType.INT64, false);
        assertRejected(
                "context_lens: expected dtype int32",
                () ->
                        AttentionOps.pagedAttention(
                                query,
                                keyCache,
                                valueCache,
                                blockTables,
                                lens64,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
        NDArray q64 = query.toType(DataType.FLOAT64, false);
        assertRejected(
                "query: expected dtype in",
                () ->
                        AttentionOps.pagedAttention(
                                q64,
                                keyCache,
                                valueCache,
                                blockTables,
                                contextLens,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
        NDArray q16 = query.toType(DataType.FLOAT16, false);
        assertRejected(
                "key_cache: expected the dtype of query",
                () ->
                        AttentionOps.pagedAttention(
                                q16,
                                keyCache,
                                valueCache,
                                blockTables,
                                contextLens,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
        NDArray key = manager.randomNormal(new Shape(3, 2, 64));
        NDArray slots32 = manager.create(new int[] {0, 1, 2});
        assertRejected(
                "reshape_and_cache: slot_mapping: expected dtype int64",
                () -> AttentionOps.reshapeAndCache(key, key, keyCache, valueCache, slots32));
    }

    @Test
    void unsupportedSizes() {
        // Every head dim in [1, 256] runs (docs/operators.md); 257 does not.
        NDArray q257 = manager.randomNormal(new Shape(2, 4, 257));
        NDArray cache257 = manager.randomNormal(new Shape(4, 16, 2, 257));
        assertRejected(
                "query: expected a head dim D in [1, 256], got 257",
                () ->
                        AttentionOps.pagedAttention(
                                q257,
                                cache257,
                                cache257,
                                blockTables,
                                contextLens,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
        NDArray cache4 = keyCache.reshape(16, 4, 2, 64);
        assertRejected(
                "key_cache: expected a block size in {8, 16, 32}, got 4",
                () ->
                        AttentionOps.pagedAttention(
                                query,
                                cache4,
                                cache4,
                                blockTables,
                                contextLens,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
    }

    @Test
    void slotOutOfRangeWritesNothing() {
        NDArray key = manager.randomNormal(new Shape(3, 2, 64));
        NDArray before = keyCache.duplicate();
        NDArray slots = manager.create(new long[] {0, 5, 64});
        assertRejected(
                "slot_mapping: expected slots < num_blocks * block_size = 64",
                () -> AttentionOps.reshapeAndCache(key, key, keyCache, valueCache, slots));
        assertEquals(before, keyCache);
    }

    @Test
    void prefillChunkLongerThanItsContextIsFlashAttentionsSqAboveSk() {
        // Once refused; now FlashAttention's bottom-right alignment: the 10 rows of sequence 0
        // are positions -1..8 of its 9 keys, so its first causal row sees no key and gives 0
        // (djl-extension's PagedKvCacheSemanticsTest holds the values against a reference).
        NDArray q = manager.randomNormal(new Shape(12, 4, 64));
        NDArray cu = manager.create(new int[] {0, 10, 12});
        NDArray lens = manager.create(new int[] {9, 9});
        NDArray out =
                AttentionOps.pagedPrefillAttention(
                        q,
                        keyCache,
                        valueCache,
                        blockTables,
                        cu,
                        lens,
                        10,
                        PagedAttentionOptions.builder().optScale(0.125f).build());
        assertEquals(new Shape(12, 4, 64), out.getShape());
        float[] values = out.toFloatArray();
        for (int i = 0; i < 4 * 64; ++i) {
            assertEquals(0f, values[i], "row 0 sees no key");
        }
        assertTrue(out.get("1:").abs().max().getFloat() > 0f, "the other rows see keys");
    }

    @Test
    void bfloat16AndNullsAreRejectedInJava() {
        NDArray bf16 = standIn(DataType.BFLOAT16);
        assertRejected(
                "query: bfloat16 is not supported from Java",
                () ->
                        AttentionOps.pagedAttention(
                                bf16,
                                keyCache,
                                valueCache,
                                blockTables,
                                contextLens,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
        assertRejected(
                "keyCache: bfloat16 is not supported from Java",
                () -> AttentionOps.reshapeAndCache(query, query, bf16, valueCache, contextLens));
        assertThrows(
                NullPointerException.class,
                () ->
                        AttentionOps.pagedAttention(
                                query,
                                null,
                                valueCache,
                                blockTables,
                                contextLens,
                                20,
                                PagedAttentionOptions.builder().optScale(0.125f).build()));
    }

    @Test
    void cacheBuilderAndLifecycle() {
        assertRejected("setManager is required", () -> PagedKvCache.builder().build());
        assertRejected(
                "setNumKvHeads is required",
                () ->
                        PagedKvCache.builder()
                                .setManager(manager)
                                .setNumLayers(1)
                                .setHeadDim(64)
                                .optNumBlocks(4)
                                .build());
        assertRejected(
                "exactly one of optNumBlocks and optMemoryBudget",
                () ->
                        PagedKvCache.builder()
                                .setManager(manager)
                                .setNumLayers(1)
                                .setNumKvHeads(2)
                                .setHeadDim(64)
                                .build());
        assertRejected(
                "optDataType: expected float32 or float16",
                () ->
                        PagedKvCache.builder()
                                .setManager(manager)
                                .setNumLayers(1)
                                .setNumKvHeads(2)
                                .setHeadDim(64)
                                .optNumBlocks(2)
                                .optDataType(DataType.FLOAT64)
                                .build());
        // A budget of 3.5 blocks (2 layers x K/V x 16 tokens x 2 heads x 64 x 2 bytes each).
        long perBlock = PagedKvCache.bytesPerBlock(2, 16, 2, 64, DataType.FLOAT16);
        assertEquals(2L * 2 * 16 * 2 * 64 * 2, perBlock);
        PagedKvCache cache =
                PagedKvCache.builder()
                        .setManager(manager)
                        .setNumLayers(2)
                        .setNumKvHeads(2)
                        .setHeadDim(64)
                        .optDataType(DataType.FLOAT16)
                        .optMemoryBudget(perBlock * 7 / 2)
                        .build();
        assertEquals(3, cache.getNumBlocks());
        assertEquals(3 * perBlock, cache.getAllocatedBytes());
        assertEquals(new Shape(3, 16, 2, 64), cache.getKeyCache(1).getShape());
        assertEquals(DataType.FLOAT16, cache.getValueCache(0).getDataType());
        cache.close();
        cache.close(); // idempotent
        IllegalStateException e =
                assertThrows(IllegalStateException.class, () -> cache.getKeyCache(0));
        assertTrue(e.getMessage().contains("closed"));
    }

    @Test
    void batchOfUnknownSequenceOrTooManyNewTokens() {
        try (PagedKvCache cache =
                PagedKvCache.builder()
                        .setManager(manager)
                        .setNumLayers(1)
                        .setNumKvHeads(2)
                        .setHeadDim(64)
                        .optNumBlocks(4)
                        .build()) {
            cache.allocate(0, 5);
            assertRejected(
                    "unknown sequence 9",
                    () -> cache.prepare(new long[] {9}, new int[] {1}, manager));
            assertRejected(
                    "queryLens: expected values in [0, context length 5]",
                    () -> cache.prepare(new long[] {0}, new int[] {6}, manager));
            try (PagedBatch batch = cache.prepare(new long[] {0}, new int[] {2}, manager)) {
                assertEquals(new Shape(2), batch.getSlotMapping().getShape());
                batch.close(); // idempotent
            }
        }
    }

    @Test
    void schedulerRejectsRequestsThatCanNeverRun() {
        Decoder decoder =
                new Decoder(
                        DecoderConfig.builder()
                                .setArchitecture(DecoderConfig.Architecture.GPT2)
                                .setVocabSize(50)
                                .setHiddenSize(64)
                                .setIntermediateSize(64)
                                .setNumLayers(1)
                                .setNumHeads(1)
                                .optMaxPositions(64)
                                .build());
        decoder.initializeRandom(manager, 1, 0.1f);
        try (PagedKvCache cache =
                decoder.newCacheBuilder(manager).optBlockSize(8).optNumBlocks(2).build()) {
            ContinuousBatchingScheduler scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .build();
            assertRejected(
                    "prompt: expected token ids in [0, 50), got 50",
                    () -> scheduler.submit(new int[] {1, 50}, GenerationConfig.greedy(1)));
            assertRejected(
                    "needs 3 blocks, the cache has 2",
                    () -> scheduler.submit(new int[] {1, 2}, GenerationConfig.greedy(20)));
            assertRejected(
                    "leave no room under max positions 64",
                    () -> scheduler.submit(new int[64], GenerationConfig.greedy(1)));
            assertRejected("setMaxNewTokens is required", () -> GenerationConfig.builder().build());
        }
        try (PagedKvCache wrong =
                        PagedKvCache.builder()
                                .setManager(manager)
                                .setNumLayers(1)
                                .setNumKvHeads(2)
                                .setHeadDim(64)
                                .optNumBlocks(2)
                                .build();
                NDManager m = manager.newSubManager()) {
            wrong.allocate(0, 1);
            try (PagedBatch batch = wrong.prepare(new long[] {0}, new int[] {1}, m)) {
                assertRejected(
                        "cache: expected layers 1, Hkv 1, D >= 64, float32 keys and values (use"
                                + " newCacheBuilder), got layers 1, Hkv 2, D 64, float32",
                        () ->
                                decoder.forwardPaged(
                                        wrong,
                                        batch,
                                        m.create(new long[] {1}),
                                        m.create(new long[] {0}),
                                        Decoder.PrefillAttention.PAGED));
            }
        }
        assertRejected(
                "GPT-2 uses multi-head attention",
                () ->
                        DecoderConfig.builder()
                                .setArchitecture(DecoderConfig.Architecture.GPT2)
                                .setVocabSize(8)
                                .setHiddenSize(64)
                                .setIntermediateSize(64)
                                .setNumLayers(1)
                                .setNumHeads(2)
                                .optNumKvHeads(1)
                                .build());
    }

    /** An NDArray of no engine that reports the given dtype; any other call fails the test. */
    private NDArray standIn(DataType dataType) {
        return (NDArray)
                Proxy.newProxyInstance(
                        NDArray.class.getClassLoader(),
                        new Class<?>[] {NDArray.class},
                        (proxy, method, args) -> {
                            switch (method.getName()) {
                                case "getDataType":
                                    return dataType;
                                case "getShape":
                                    return new Shape(2, 4, 64);
                                case "getManager":
                                    return manager;
                                default:
                                    throw new AssertionError("unexpected call " + method);
                            }
                        });
    }
}
