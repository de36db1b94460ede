/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;

import io.djlattention.SamplingOps;
import io.djlattention.zoo.decoder.DeviceDecodeStep;
import io.djlattention.zoo.decoder.StepSampling;

import java.util.List;

/**
 * How {@link ContinuousBatchingScheduler} hands token choices to the device when it has a {@link
 * DeviceDecodeStep}: which steps the device step runs whole, and the device sampler's choice from
 * the logits of the steps it does not (a prefill), so that every token of a sequence is drawn by
 * the same sampler.
 */
final class DeviceChoices {

    private DeviceChoices() {}

    /**
     * Whether the device step takes this batch: a decode step (one new token per sequence, the
     * last of its tokens, so that each chooses its next one) with no fork waiting to share logits.
     */
    static boolean takes(List<Sequence> seqs, int[] queryLens) {
        if (seqs.size() > DeviceDecodeStep.MAX_SEQUENCES) {
            return false;
        }
        for (int s = 0; s < seqs.size(); ++s) {
            Sequence seq = seqs.get(s);
            if (queryLens[s] != 1
                    || seq.cached + 1 != seq.tokens.length
                    || !seq.pendingForks.isEmpty()) {
                return false;
            }
        }
        return true;
    }

    static boolean noForks(List<Sequence> seqs) {
        for (Sequence seq : seqs) {
            if (!seq.pendingForks.isEmpty()) {
                return false;
            }
        }
        return true;
    }

    /** Each sequence's choice from its logits row by the device sampler (sample_tokens). */
    static long[] choose(NDArray logits, List<Sequence> seqs) {
        StepSampling sampling = sampling(seqs);
        NDManager m = logits.getManager();
        return SamplingOps.sampleTokens(
                        logits,
                        m.create(sampling.temperatures()),
                        m.create(sampling.topKs()),
                        m.create(sampling.topPs()),
                        m.create(sampling.seeds()),
                        m.create(sampling.offsets()))
                .toLongArray();
    }

    private static StepSampling sampling(List<Sequence> seqs) {
        StepSampling sampling = new StepSampling(seqs.size());
        for (int s = 0; s < seqs.size(); ++s) {
            Sequence seq = seqs.get(s);
            GenerationConfig c = seq.config;
            if (c.isSampling()) {
                sampling.set(s, c.getTemperature(), c.getTopK(), c.getTopP(), seq.seed, seq.generated);
            }
        }
        return sampling;
    }

    /** The batch's next tokens from the device step: only the ids cross to the host. */
    static long[] decode(DeviceDecodeStep deviceStep, List<Sequence> seqs) {
        int n = seqs.size();
        long[] ids = new long[n];
        long[] tokens = new long[n];
        long[] positions = new long[n];
        for (int s = 0; s < n; ++s) {
            Sequence seq = seqs.get(s);
            ids[s] = seq.id;
            tokens[s] = seq.tokens[seq.cached];
            positions[s] = seq.cached;
        }
        return deviceStep.step(ids, tokens, positions, sampling(seqs));
    }
}
