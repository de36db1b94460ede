/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import ai.djl.ndarray.NDManager;

import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.KvCacheScales;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;

/** The paged KV cache a {@link GenerationEngine} makes from its builder's options. */
final class EngineCaches {

    private EngineCaches() {}

    /**
     * The cache: {@code numBlocks} blocks when given, else as many as {@code memoryBudget} bytes
     * hold when given, else room for a full batch of full-length sequences within 512 MiB.
     */
    static PagedKvCache build(
            Decoder decoder,
            NDManager manager,
            int blockSize,
            KvCacheDtype kvCacheDtype,
            KvCacheScales kvCacheScales,
            int numBlocks,
            long memoryBudget,
            int maxBatchSize) {
        PagedKvCache.Builder cb =
                decoder.newCacheBuilder(manager)
                        .optBlockSize(blockSize)
                        .optCacheDtype(kvCacheDtype)
                        .optScales(kvCacheScales);
        if (numBlocks > 0) {
            cb.optNumBlocks(numBlocks);
        } else if (memoryBudget > 0) {
            cb.optMemoryBudget(memoryBudget);
        } else {
            // Room for a full batch of full-length sequences, within 512 MiB.
            int maxPositions = decoder.getConfig().getMaxPositions();
            long perSeq = (maxPositions + blockSize - 1) / blockSize;
            long perBlock =
                    PagedKvCache.bytesPerBlock(
                            decoder.getConfig().getNumLayers(),
                            blockSize,
                            decoder.getConfig().getNumKvHeads(),
                            decoder.getCacheHeadDim(),
                            kvCacheDtype.storageType(decoder.getConfig().getDataType()));
            long blocks = Math.min(perSeq * maxBatchSize, (512L << 20) / perBlock);
            cb.optNumBlocks((int) Math.max(perSeq, blocks));
        }
        return cb.build();
    }
}
