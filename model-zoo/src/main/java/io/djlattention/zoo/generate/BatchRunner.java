/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;

import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DeviceDecodeStep;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Runs the batches {@link ContinuousBatchingScheduler} chose: one forward pass over the paged
 * cache (or, for a decode step, the device step when there is one), then each sequence whose tokens are all cached samples its next token, forks its
 * pending samples, and finishes (EOS, stop token, length, max positions). A batch whose forward
 * throws runs again one sequence at a time, so that only the sequences whose own forward fails
 * finish as {@link GenerationResult.FinishReason#FAILED}.
 *
 * <p>The scheduler decides what runs (admission, slots, preemption, chunks); this class only
 * runs it. It shares the scheduler's running list: forks join it after their parent, finished
 * sequences leave it.
 */
final class BatchRunner {

    private final Decoder decoder;
    private final PagedKvCache cache;
    private final List<Sequence> running;
    private final PrefillAttention prefill;
    private final boolean prefixSharing;
    private final boolean batchInvariant;
    private final TokenListener tokenListener;
    private final ForwardHook forwardHook;
    private final LogitsHook logitsHook;
    private final DeviceDecodeStep deviceStep;
    private int peakUsedBlocks;

    BatchRunner(
            Decoder decoder,
            PagedKvCache cache,
            List<Sequence> running,
            PrefillAttention prefill,
            boolean prefixSharing,
            boolean batchInvariant,
            TokenListener tokenListener,
            ForwardHook forwardHook,
            LogitsHook logitsHook,
            DeviceDecodeStep deviceStep) {
        this.decoder = decoder;
        this.cache = cache;
        this.running = running;
        this.prefill = prefill;
        this.prefixSharing = prefixSharing;
        this.batchInvariant = batchInvariant;
        this.tokenListener = tokenListener;
        this.forwardHook = forwardHook;
        this.logitsHook = logitsHook;
        this.deviceStep = deviceStep;
    }

    /** The most blocks in use at once, as seen before every forward pass. */
    int getPeakUsedBlocks() {
        return peakUsedBlocks;
    }

    void notePeak() {
        peakUsedBlocks = Math.max(peakUsedBlocks, cache.getNumBlocks() - cache.getNumFreeBlocks());
    }

    /** One forward over the batch, or, batch-invariant, one per sequence. */
    void runAll(List<Sequence> seqs, int[] queryLens, List<GenerationResult> finished) {
        if (!batchInvariant) {
            run(seqs, queryLens, finished);
            return;
        }
        for (int i = 0; i < seqs.size(); ++i) {
            run(List.of(seqs.get(i)), new int[] {queryLens[i]}, finished);
        }
    }

    /**
     * One forward over the given sequences, each with {@code queryLens[s]} new tokens (its next
     * uncached ones); those whose tokens are then all cached sample their next token.
     */
    private void run(List<Sequence> seqs, int[] queryLens, List<GenerationResult> finished) {
        StepOutput output;
        try {
            output = forward(seqs, queryLens);
        } catch (RuntimeException e) {
            if (seqs.size() == 1) {
                fail(seqs.get(0), e, finished);
                return;
            }
            // Find whose forward fails: one at a time, each rewriting its own slots.
            for (int s = 0; s < seqs.size(); ++s) {
                run(List.of(seqs.get(s)), new int[] {queryLens[s]}, finished);
            }
            return;
        }
        sample(seqs, queryLens, output, finished);
    }

    private void fail(Sequence seq, RuntimeException e, List<GenerationResult> finished) {
        String message = e.getMessage() == null ? e.getClass().getName() : e.getMessage();
        cache.free(seq.id);
        running.remove(seq);
        finished.add(seq.result(GenerationResult.FinishReason.FAILED, message));
        for (Sequence fork : seq.pendingForks) {
            finished.add(fork.result(GenerationResult.FinishReason.FAILED, message));
        }
        seq.pendingForks.clear();
    }

    /** Whether any sequence of the step, or a fork waiting on it, samples its next token. */
    private static boolean anySampling(List<Sequence> seqs) {
        for (Sequence seq : seqs) {
            if (seq.config.isSampling()) {
                return true;
            }
            for (Sequence fork : seq.pendingForks) {
                if (fork.config.isSampling()) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The forward pass of {@link #run}: logits {@code [numSeqs, V]} or their argmax. */
    @SuppressWarnings("try")
    private StepOutput forward(List<Sequence> seqs, int[] queryLens) {
        int numSeqs = seqs.size();
        long[] ids = new long[numSeqs];
        int total = 0;
        for (int s = 0; s < numSeqs; ++s) {
            ids[s] = seqs.get(s).id;
            total += queryLens[s];
        }
        long[] tokens = new long[total];
        long[] positions = new long[total];
        int t = 0;
        for (int s = 0; s < numSeqs; ++s) {
            Sequence seq = seqs.get(s);
            for (int p = seq.cached; p < seq.cached + queryLens[s]; ++p) {
                tokens[t] = seq.tokens[p];
                positions[t++] = p;
            }
        }
        notePeak();
        if (forwardHook != null) {
            forwardHook.beforeForward(ids);
        }
        if (deviceStep != null && logitsHook == null && DeviceChoices.takes(seqs, queryLens)) {
            return new StepOutput(null, DeviceChoices.decode(deviceStep, seqs));
        }
        try (NDScope ignore = new NDScope();
                NDManager step = NDManager.newBaseManager(cache.getDevice());
                PagedBatch batch = cache.prepare(ids, queryLens, step)) {
            NDArray out =
                    decoder.forwardPaged(
                            cache, batch, step.create(tokens), step.create(positions), prefill);
            if (deviceStep != null && logitsHook == null && DeviceChoices.noForks(seqs)) {
                // With a device step every token is chosen by the device sampler, also after a
                // prefill: a sequence's draws must not depend on which path its step took.
                return new StepOutput(null, DeviceChoices.choose(out, seqs));
            }
            if (logitsHook != null || anySampling(seqs)) {
                return new StepOutput(out.toFloatArray(), null);
            }
            // Greedy: the same first maximum TokenSampler.argMax finds (argmax returns the first
            // of equal maxima).
            return new StepOutput(null, out.argMax(1).toLongArray());
        }
    }

    /** Samples the next token of each sequence whose tokens are now all cached. */
    private void sample(
            List<Sequence> seqs,
            int[] queryLens,
            StepOutput output,
            List<GenerationResult> finished) {
        int numSeqs = seqs.size();
        float[] logits = output.logits;
        int vocab = logits == null ? 0 : logits.length / numSeqs;
        List<Sequence> sampled = new ArrayList<>(numSeqs);
        List<float[]> rows = new ArrayList<>(numSeqs);
        List<Integer> greedyTokens = new ArrayList<>(numSeqs);
        for (int s = 0; s < numSeqs; ++s) {
            Sequence seq = seqs.get(s);
            seq.cached += queryLens[s];
            if (prefixSharing) {
                cache.registerWritten(seq.id, seq.tokens, seq.cached);
            }
            if (seq.cached < seq.tokens.length) {
                if (batchInvariant && seq.cached >= seq.promptLength) {
                    seq.prefilled = true; // recomputed: its generated tokens replay as decode steps
                }
                continue; // a chunk of a longer prefill, or a replayed token: no new token yet
            }
            seq.prefilled = true;
            // A greedy step read back the argmax of each row, not the row.
            float[] row =
                    logits == null ? null : Arrays.copyOfRange(logits, s * vocab, (s + 1) * vocab);
            int greedy = logits == null ? (int) output.argMax[s] : -1;
            sampled.add(seq);
            rows.add(row);
            greedyTokens.add(greedy);
            // Parallel samples fork from the prefilled prompt: they share its blocks and its
            // logits, and each draws its own first token.
            for (Sequence fork : seq.pendingForks) {
                cache.fork(seq.id, fork.id);
                fork.cached = seq.cached;
                fork.prefilled = true;
                running.add(running.indexOf(seq) + 1, fork);
                sampled.add(fork);
                rows.add(row);
                greedyTokens.add(greedy);
            }
            seq.pendingForks.clear();
        }
        for (int s = 0; s < sampled.size(); ++s) {
            Sequence seq = sampled.get(s);
            if (logitsHook != null) {
                logitsHook.onLogits(seq.id, rows.get(s));
            }
            int next = rows.get(s) == null ? greedyTokens.get(s) : seq.sampler.next(rows.get(s));
            seq.append(next);
            if (tokenListener != null) {
                tokenListener.onToken(seq.id, next);
            }
            GenerationResult.FinishReason reason = null;
            if (seq.config.getEosTokenId() >= 0 && next == seq.config.getEosTokenId()) {
                reason = GenerationResult.FinishReason.EOS;
            } else if (seq.config.isStopToken(next)) {
                reason = GenerationResult.FinishReason.STOP;
            } else if (seq.generated == seq.config.getMaxNewTokens()) {
                reason = GenerationResult.FinishReason.LENGTH;
            } else if (seq.tokens.length >= decoder.getConfig().getMaxPositions()) {
                reason = GenerationResult.FinishReason.MAX_POSITIONS;
            }
            if (reason != null) {
                cache.free(seq.id);
                running.remove(seq);
                finished.add(seq.result(reason, null));
            }
        }
    }
}
