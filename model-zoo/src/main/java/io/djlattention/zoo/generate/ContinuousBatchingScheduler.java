/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

import io.djlattention.paged.OutOfBlocksException;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DeviceDecodeStep;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Continuous batching over a {@link PagedKvCache} (vLLM's scheduler, first come first served).
 *
 * <p>Each {@link #step}:
 *
 * <ol>
 *   <li>gives every running sequence a slot for its next token; when the pool is out of blocks it
 *       preempts the most recently admitted running sequence (frees its blocks and requeues it at
 *       the head of the waiting queue; it is recomputed from its prompt plus the tokens it has
 *       generated when readmitted), until the rest fit;
 *   <li>if nothing was preempted, admits waiting requests while their prompts fit in the free
 *       blocks and the batch has room, and prefills them in one call (the first token of each comes
 *       from its prefill);
 *   <li>runs one decode step ({@code paged_attention}) for all sequences that were running;
 *   <li>finishes sequences that reached their max new tokens, EOS or the model's max positions and
 *       frees their blocks at once.
 * </ol>
 *
 * <p>Prefix sharing ({@link Builder#optPrefixSharing}, on by default): a full block whose K/V a
 * sequence has written is entered in the cache's {@link io.djlattention.paged.PrefixCache}; a
 * request admitted later starts with the indexed blocks holding the longest prefix of its tokens
 * (shared, reference counts + 1) and prefills only the rest, through the same (chunked) prefill
 * path with positions starting after the prefix. At most {@code (length - 1)} tokens rounded down
 * to whole blocks are shared, so the last token is always computed (its logits give the first new
 * token). A request whose prefix a running sequence is still prefilling waits until that prefix is
 * written (it would otherwise compute a private copy of it). A preempted sequence releases its
 * references like any other; when readmitted it may match the prefix again.
 *
 * <p>Every sequence's tokens depend only on its own request (sampling draws from the request's own
 * seeded generator), so a request gives the same tokens in any batch as alone, up to floating-point
 * rounding: with prefix sharing a shared prefix's keys and values were computed in another
 * request's prefill, whose batch may round differently (float32 ties that flip a greedy choice
 * are rare; the tests compare token for token). When every request
 * has finished, every block is free again.
 *
 * <p>A request can be cancelled ({@link #cancel}: its blocks are freed at once); each sampled token
 * goes to the {@link Builder#optTokenListener token listener} as it is produced. When a batched
 * forward pass throws, the batch's sequences are run again one at a time so that only the ones
 * whose own forward fails are finished as {@link GenerationResult.FinishReason#FAILED}; the others
 * continue (rewriting the same K/V to the same slots). Not thread-safe: {@link GenerationEngine}
 * runs it on one thread for many callers.
 */
public final class ContinuousBatchingScheduler {

    private final Decoder decoder;
    private final PagedKvCache cache;
    private final int maxBatchSize;
    private final int maxPrefillChunk;
    private final boolean prefixSharing;
    private final boolean batchInvariant;
    private final Deque<Sequence> waiting = new ArrayDeque<>();
    private final List<Sequence> running = new ArrayList<>();
    private final BatchRunner runner;
    private long nextId;
    private int preemptions;
    private int iterations;
    private long sharedPromptTokens;
    private long prefilledTokens;

    private ContinuousBatchingScheduler(Builder b) {
        decoder = b.decoder;
        cache = b.cache;
        maxBatchSize = b.maxBatchSize;
        maxPrefillChunk = b.maxPrefillChunk;
        batchInvariant = b.batchInvariant;
        prefixSharing = b.prefixSharing && !b.batchInvariant;
        runner =
                new BatchRunner(
                        decoder,
                        cache,
                        running,
                        b.prefill,
                        prefixSharing,
                        batchInvariant,
                        b.tokenListener,
                        b.forwardHook,
                        b.logitsHook,
                        b.deviceStep);
    }

    /**
     * Returns a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Queues a request.
     *
     * @param prompt its prompt tokens, at least one
     * @param config how it generates
     * @return its request id
     * @throws IllegalArgumentException if it could never fit the cache or the model
     */
    public long submit(int[] prompt, GenerationConfig config) {
        return submitSamples(prompt, config, 1)[0];
    }

    /**
     * Queues a request for {@code numSamples} parallel samples of one prompt. The prompt is
     * prefilled once; the samples then fork from it and share its blocks (a shared partial last
     * block is copied when a sample first writes to it). Sample {@code i} draws from a generator
     * seeded with {@code config.getSeed() + i}, so it generates what a single request with that
     * seed would.
     *
     * @param prompt its prompt tokens, at least one
     * @param config how each sample generates
     * @param numSamples the samples, at least 1
     * @return the request id of each sample
     * @throws IllegalArgumentException if it could never fit the cache or the model
     */
    public long[] submitSamples(int[] prompt, GenerationConfig config, int numSamples) {
        validate(prompt, config, numSamples);
        long[] ids = new long[numSamples];
        Sequence first = new Sequence(nextId++, prompt, config, config.getSeed());
        ids[0] = first.id;
        for (int i = 1; i < numSamples; ++i) {
            Sequence sample = new Sequence(nextId++, prompt, config, config.getSeed() + i);
            first.pendingForks.add(sample);
            ids[i] = sample.id;
        }
        waiting.addLast(first);
        return ids;
    }

    /**
     * Checks a request as {@link #submitSamples} would, without queueing it. It reads only the
     * model's configuration and the cache's size, so any thread may call it.
     *
     * @param prompt its prompt tokens, at least one
     * @param config how it generates
     * @param numSamples the samples, at least 1
     * @throws IllegalArgumentException naming {@code prompt}, {@code numSamples} or the request's
     *     size if it could never fit the cache or the model
     */
    public void validate(int[] prompt, GenerationConfig config, int numSamples) {
        if (prompt == null || config == null) {
            throw new IllegalArgumentException("prompt and config: expected non-null values");
        }
        if (numSamples < 1 || numSamples > maxBatchSize) {
            throw new IllegalArgumentException(
                    "numSamples: expected a value in [1, maxBatchSize = "
                            + maxBatchSize
                            + "], got "
                            + numSamples);
        }
        if (prompt.length == 0) {
            throw new IllegalArgumentException("prompt: expected at least one token");
        }
        int vocab = decoder.getConfig().getVocabSize();
        for (int t : prompt) {
            if (t < 0 || t >= vocab) {
                throw new IllegalArgumentException(
                        "prompt: expected token ids in [0, " + vocab + "), got " + t);
            }
        }
        int maxPositions = decoder.getConfig().getMaxPositions();
        if (prompt.length >= maxPositions) {
            throw new IllegalArgumentException(
                    "prompt: "
                            + prompt.length
                            + " tokens leave no room under max positions "
                            + maxPositions);
        }
        int longest = Math.min(prompt.length + config.getMaxNewTokens(), maxPositions);
        int needed = cache.blocksFor(longest);
        if (needed > cache.getNumBlocks()) {
            throw new IllegalArgumentException(
                    "request of up to "
                            + longest
                            + " tokens needs "
                            + needed
                            + " blocks, the cache has "
                            + cache.getNumBlocks());
        }
    }

    /**
     * Cancels a waiting or running request: a running one's blocks are freed at once. Samples
     * forked from it that have not started yet are kept (the next takes its place in the queue).
     *
     * @param requestId the id {@code submit} returned
     * @return its result ({@link GenerationResult.FinishReason#CANCELLED}, the tokens generated so
     *     far), or null if it is not waiting or running
     */
    public GenerationResult cancel(long requestId) {
        for (Sequence s : waiting) {
            if (s.id == requestId) {
                waiting.remove(s);
                promoteForks(s, true);
                return s.result(GenerationResult.FinishReason.CANCELLED, null);
            }
        }
        for (Sequence s : running) {
            if (s.id == requestId) {
                cache.free(s.id);
                running.remove(s);
                promoteForks(s, true);
                return s.result(GenerationResult.FinishReason.CANCELLED, null);
            }
        }
        for (Iterable<Sequence> group : List.<Iterable<Sequence>>of(waiting, running)) {
            for (Sequence s : group) {
                for (Sequence fork : s.pendingForks) {
                    if (fork.id == requestId) {
                        s.pendingForks.remove(fork);
                        return fork.result(GenerationResult.FinishReason.CANCELLED, null);
                    }
                }
            }
        }
        return null;
    }

    /** The first not-yet-forked sample of {@code s} takes its place at the head of the queue. */
    private void promoteForks(Sequence s, boolean requeue) {
        if (s.pendingForks.isEmpty() || !requeue) {
            return;
        }
        Sequence heir = s.pendingForks.remove(0);
        heir.pendingForks.addAll(s.pendingForks);
        s.pendingForks.clear();
        waiting.addFirst(heir);
    }

    /**
     * Returns the number of blocks the cache has.
     *
     * @return the blocks
     */
    public int getNumBlocks() {
        return cache.getNumBlocks();
    }

    /**
     * Returns the number of free blocks.
     *
     * @return the free blocks
     */
    public int getNumFreeBlocks() {
        return cache.getNumFreeBlocks();
    }

    /**
     * Returns whether requests are waiting or running.
     *
     * @return true while work remains
     */
    public boolean hasUnfinished() {
        return !waiting.isEmpty() || !running.isEmpty();
    }

    /**
     * Returns the number of running sequences.
     *
     * @return running
     */
    public int getNumRunning() {
        return running.size();
    }

    /**
     * Returns the number of waiting requests.
     *
     * @return waiting
     */
    public int getNumWaiting() {
        return waiting.size();
    }

    /**
     * Returns how many preemptions happened.
     *
     * @return preemptions
     */
    public int getPreemptions() {
        return preemptions;
    }

    /**
     * Returns the iterations run.
     *
     * @return iterations
     */
    public int getIterations() {
        return iterations;
    }

    /**
     * Returns the most blocks in use at once.
     *
     * @return peak used blocks
     */
    public int getPeakUsedBlocks() {
        return runner.getPeakUsedBlocks();
    }

    /**
     * Returns the prompt tokens (recomputed prompts of preempted sequences included) whose K/V came
     * from blocks shared with other requests instead of being prefilled.
     *
     * @return the shared prompt tokens
     */
    public long getSharedPromptTokens() {
        return sharedPromptTokens;
    }

    /**
     * Returns the tokens computed by prefill steps (all chunks, recomputation included).
     *
     * @return the prefilled tokens
     */
    public long getPrefilledTokens() {
        return prefilledTokens;
    }

    /**
     * Runs until every request has finished.
     *
     * @return the results by request id, in finishing order
     */
    public Map<Long, GenerationResult> runToCompletion() {
        Map<Long, GenerationResult> results = new LinkedHashMap<>();
        while (hasUnfinished()) {
            for (GenerationResult r : step()) {
                results.put(r.requestId(), r);
            }
        }
        return results;
    }

    /**
     * Runs one iteration: reserve decode slots (preempting if needed), admit, prefill (the next
     * chunk of each prefilling sequence), decode.
     *
     * @return the requests that finished in this iteration
     */
    public List<GenerationResult> step() {
        ++iterations;
        List<Sequence> decoding = new ArrayList<>();
        for (Sequence s : running) {
            if (s.prefilled) {
                decoding.add(s);
            }
        }
        List<Sequence> prefilling = new ArrayList<>();
        boolean preempted = false;
        for (int i = 0; i < decoding.size(); ++i) {
            Sequence s = decoding.get(i);
            if (!reserve(s, 1, decoding, prefilling)) {
                preempted = true;
                if (!decoding.contains(s)) {
                    --i;
                }
            }
        }
        if (!preempted) {
            while (!waiting.isEmpty()) {
                Sequence s = waiting.peekFirst();
                if (running.size() + 1 + s.pendingForks.size() > maxBatchSize) {
                    break;
                }
                // The last token is always computed: its logits give the next token.
                int shareable = s.tokens.length - 1;
                int shared = prefixSharing ? cache.findCachedPrefix(s.tokens, shareable) : 0;
                if (prefixSharing && pendingPrefix(s, shareable) > shared) {
                    break; // a running prefill is about to write a longer prefix of it
                }
                // Admit only what fits whole, so a chunked prefill is not preempted midway by
                // its own later chunks.
                int needed = cache.blocksFor(s.tokens.length) - shared / cache.getBlockSize();
                if (needed > cache.getNumFreeBlocks()) {
                    break;
                }
                if (prefixSharing) {
                    s.cached = cache.allocateWithCachedPrefix(s.id, s.tokens, shareable);
                } else {
                    cache.allocate(s.id, 0);
                    s.cached = 0;
                }
                sharedPromptTokens += s.cached;
                waiting.pollFirst();
                s.prefilled = false;
                running.add(s);
            }
        }
        for (Sequence s : running) {
            if (!s.prefilled) {
                prefilling.add(s);
            }
        }
        List<Integer> chunks = new ArrayList<>();
        for (int i = 0; i < prefilling.size(); ++i) {
            Sequence s = prefilling.get(i);
            // Batch-invariant: a recomputed sequence prefills only its prompt, in the chunks it
            // first had, and replays its generated tokens by decode steps (see optBatchInvariant).
            int left = (batchInvariant ? s.promptLength : s.tokens.length) - s.cached;
            int n = maxPrefillChunk == 0 ? left : Math.min(maxPrefillChunk, left);
            if (reserve(s, n, decoding, prefilling)) {
                chunks.add(n);
            } else if (!prefilling.contains(s)) {
                --i;
            } else {
                chunks.add(n);
            }
        }
        if (running.isEmpty() && !waiting.isEmpty()) {
            throw new IllegalStateException(
                    "the request at the head of the queue does not fit the empty cache");
        }
        runner.notePeak();
        List<GenerationResult> finished = new ArrayList<>();
        if (!prefilling.isEmpty()) {
            int[] n = new int[prefilling.size()];
            for (int i = 0; i < n.length; ++i) {
                n[i] = chunks.get(i);
                prefilledTokens += n[i];
            }
            runner.runAll(prefilling, n, finished);
        }
        if (!decoding.isEmpty()) {
            int[] ones = new int[decoding.size()];
            Arrays.fill(ones, 1);
            runner.runAll(decoding, ones, finished);
        }
        return finished;
    }

    /**
     * Gives {@code s} {@code n} more slots, preempting the most recently admitted running sequences
     * while the pool is short (they leave {@code decoding} and {@code prefilling}).
     *
     * @return true if nothing was preempted; if {@code s} itself was, it is no longer running
     */
    private boolean reserve(Sequence s, int n, List<Sequence> decoding, List<Sequence> prefilling) {
        boolean clean = true;
        while (true) {
            try {
                cache.appendSlots(s.id, n);
                return clean;
            } catch (OutOfBlocksException e) {
                Sequence victim = running.get(running.size() - 1);
                preempt(victim);
                decoding.remove(victim);
                prefilling.remove(victim);
                clean = false;
                if (victim == s) {
                    return false;
                }
            }
        }
    }

    /**
     * Returns the leading tokens of {@code s} (whole blocks, at most {@code shareable}) that a
     * running sequence still prefilling will have written once its prefill is done.
     */
    private int pendingPrefix(Sequence s, int shareable) {
        int blockSize = cache.getBlockSize();
        int best = 0;
        for (Sequence r : running) {
            if (r.prefilled) {
                continue;
            }
            int common = Arrays.mismatch(s.tokens, r.tokens);
            if (common < 0) {
                common = s.tokens.length;
            }
            common = Math.min(common, shareable);
            best = Math.max(best, common / blockSize * blockSize);
        }
        return best;
    }

    private void preempt(Sequence victim) {
        cache.free(victim.id);
        running.remove(victim);
        victim.cached = 0;
        victim.prefilled = false;
        victim.preemptions++;
        preemptions++;
        waiting.addFirst(victim);
    }

    /** Builds a {@link ContinuousBatchingScheduler}. */
    public static final class Builder {

        private Decoder decoder;
        private PagedKvCache cache;
        private int maxBatchSize = 32;
        private PrefillAttention prefill = PrefillAttention.FLASH;
        private int maxPrefillChunk;
        private boolean prefixSharing = true;
        private boolean batchInvariant;
        private TokenListener tokenListener;
        private ForwardHook forwardHook;
        private LogitsHook logitsHook;
        private DeviceDecodeStep deviceStep;

        Builder() {}

        /**
         * Sets the device step that runs the decode steps (a captured CUDA graph per batch
         * bucket on a GPU), owned by the caller; default none: every step through {@link
         * Decoder#forwardPaged} and the host-side sampler. With it, a sampling request draws from
         * the device sampler's generator (reproducible per seed, not {@link TokenSampler}'s
         * draws); greedy ids are the same. A logits hook turns it off.
         *
         * @param deviceStep the step, over this builder's decoder and cache, or null
         * @return this builder
         */
        public Builder optDeviceStep(DeviceDecodeStep deviceStep) {
            this.deviceStep = deviceStep;
            return this;
        }

        /**
         * Sets a hook that sees every logits row a token is chosen from (default none); with it,
         * greedy steps read back the whole row instead of the argmax.
         *
         * @param logitsHook the hook, called on the thread that runs {@link #step}
         * @return this builder
         */
        public Builder optLogitsHook(LogitsHook logitsHook) {
            this.logitsHook = logitsHook;
            return this;
        }

        /**
         * Sets a listener that receives every sampled token as it is produced (default none).
         *
         * @param tokenListener the listener, called on the thread that runs {@link #step}
         * @return this builder
         */
        public Builder optTokenListener(TokenListener tokenListener) {
            this.tokenListener = tokenListener;
            return this;
        }

        /**
         * Sets a hook called before every forward pass with the requests in it (default none); a
         * test throws from it to inject a fault.
         *
         * @param forwardHook the hook
         * @return this builder
         */
        public Builder optForwardHook(ForwardHook forwardHook) {
            this.forwardHook = forwardHook;
            return this;
        }

        /**
         * Shares identical prompt prefixes between requests (default true): full blocks whose K/V
         * one sequence has written serve every later request starting with the same tokens, which
         * then prefills only the rest; a request whose prefix a running sequence is still
         * prefilling waits for it (one copy, not two). The shared K/V was computed from the same
         * tokens at the same positions, so generation differs from sharing off only by summation
         * order in another prefill (the tests see identical tokens in float32).
         *
         * @param prefixSharing whether to share prefixes
         * @return this builder
         */
        public Builder optPrefixSharing(boolean prefixSharing) {
            this.prefixSharing = prefixSharing;
            return this;
        }

        /**
         * Makes every output independent of the batch it ran in and of preemption (default false):
         * each sequence gets its own forward pass (batch of 1, so no GEMM or attention kernel sees
         * another sequence's rows and every reduction has the same shape and order as when it runs
         * alone); prompts are prefilled in the same chunks whatever runs beside them; prefix
         * sharing is off (a shared prefix would come from another request's prefill); and a
         * preempted sequence is recomputed by prefilling its prompt only and replaying its
         * generated tokens by decode steps, so its cache is rebuilt by the very computations that
         * first wrote it. Greedy and seeded outputs then equal the request's solo run bit for bit
         * on the same device and build. The cost is the batching: one forward per sequence per
         * step (docs/benchmarks.md).
         *
         * @param batchInvariant whether to run batch-invariant
         * @return this builder
         */
        public Builder optBatchInvariant(boolean batchInvariant) {
            this.batchInvariant = batchInvariant;
            return this;
        }

        /**
         * Prefills long prompts in chunks of at most this many tokens per iteration, interleaved
         * with the decode steps of the running sequences (default 0: whole prompts). Later chunks
         * attend to the cached earlier ones through {@code paged_prefill_attention}.
         *
         * @param maxPrefillChunk tokens per chunk, 0 for no limit
         * @return this builder
         */
        public Builder optMaxPrefillChunk(int maxPrefillChunk) {
            this.maxPrefillChunk = maxPrefillChunk;
            return this;
        }

        /**
         * Sets the model (required).
         *
         * @param decoder the decoder
         * @return this builder
         */
        public Builder setDecoder(Decoder decoder) {
            this.decoder = decoder;
            return this;
        }

        /**
         * Sets the KV cache (required; from {@link Decoder#newCacheBuilder}).
         *
         * @param cache the cache
         * @return this builder
         */
        public Builder setCache(PagedKvCache cache) {
            this.cache = cache;
            return this;
        }

        /**
         * Sets the most sequences running at once (default 32).
         *
         * @param maxBatchSize at least 1
         * @return this builder
         */
        public Builder optMaxBatchSize(int maxBatchSize) {
            this.maxBatchSize = maxBatchSize;
            return this;
        }

        /**
         * Sets the prefill kernel (default FLASH).
         *
         * @param prefill FLASH or PAGED
         * @return this builder
         */
        public Builder optPrefillAttention(PrefillAttention prefill) {
            this.prefill = prefill;
            return this;
        }

        /**
         * Builds the scheduler.
         *
         * @return the scheduler
         */
        public ContinuousBatchingScheduler build() {
            if (decoder == null || cache == null) {
                throw new IllegalArgumentException(
                        "ContinuousBatchingScheduler: setDecoder and setCache are required");
            }
            if (maxPrefillChunk < 0) {
                throw new IllegalArgumentException(
                        "ContinuousBatchingScheduler: optMaxPrefillChunk: expected >= 0, got "
                                + maxPrefillChunk);
            }
            if (maxBatchSize < 1) {
                throw new IllegalArgumentException(
                        "ContinuousBatchingScheduler: optMaxBatchSize: expected >= 1, got "
                                + maxBatchSize);
            }
            if (cache.getNumFreeBlocks() != cache.getNumBlocks()) {
                throw new IllegalArgumentException(
                        "ContinuousBatchingScheduler: the cache must be empty");
            }
            return new ContinuousBatchingScheduler(this);
        }
    }
}
