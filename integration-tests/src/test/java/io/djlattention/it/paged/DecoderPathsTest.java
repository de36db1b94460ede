/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.inference.Predictor;
import ai.djl.modality.nlp.generate.CausalLMOutput;
import ai.djl.modality.nlp.generate.SearchConfig;
import ai.djl.modality.nlp.generate.TextGenerator;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.it.TestDevice;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.decoder.CausalLmTranslator;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.ContiguousAttention;
import io.djlattention.zoo.decoder.Decoder.LayerPath;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.generate.ContinuousBatchingScheduler;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationResult;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.Arrays;
import java.util.Map;

/**
 * Generation through every attention path with fixed random weights (GPT-2-style and LLaMA-style),
 * and continuous batching against per-request generation.
 *
 * <p>Exact token equality across paths is the float32 claim: the paths differ only in summation
 * order (~1e-6 relative on logits), and the weights (std 0.1) make top-1/top-2 margins orders of
 * magnitude larger.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DecoderPathsTest {

    private static final int[][] PROMPTS = {
        {5},
        {17, 250, 3, 9, 100, 41, 7},
        {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
        {300, 12},
        {
            42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42,
            42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42
        },
        {77, 1, 77}
    };
    private static final int[] MAX_NEW = {12, 20, 7, 25, 16, 30};

    private NDManager manager;
    private Decoder gpt2;
    private Decoder llama;

    @BeforeAll
    void build() {
        manager = NDManager.newBaseManager(TestDevice.get());
        gpt2 =
                new Decoder(
                        DecoderConfig.builder()
                                .setArchitecture(DecoderConfig.Architecture.GPT2)
                                .setVocabSize(384)
                                .setHiddenSize(128)
                                .setIntermediateSize(512)
                                .setNumLayers(2)
                                .setNumHeads(2)
                                .optMaxPositions(128)
                                .build());
        gpt2.initializeRandom(manager, 2024, 0.1f);
        llama =
                new Decoder(
                        DecoderConfig.builder()
                                .setArchitecture(DecoderConfig.Architecture.LLAMA)
                                .setVocabSize(384)
                                .setHiddenSize(256)
                                .setIntermediateSize(384)
                                .setNumLayers(2)
                                .setNumHeads(4)
                                .optNumKvHeads(2)
                                .optMaxPositions(128)
                                .optRopeStyle(DecoderConfig.RopeStyle.HALF)
                                .optTieEmbeddings(false)
                                .build());
        llama.initializeRandom(manager, 7, 0.1f);
    }

    @AfterAll
    void close() {
        manager.close();
    }

    private Decoder model(DecoderConfig.Architecture a) {
        return a == DecoderConfig.Architecture.GPT2 ? gpt2 : llama;
    }

    /**
     * The arrays a paged decode step's forward creates: each one is an operator call from Java
     * (a split's views are one call), so this is the step's host cost. A change that adds
     * operators to the layer shows here first. Counted per layer from the layer's code: GPT-2
     * norm 1, c_attn 1, reshape 1, split 3, paged_attention 1, reshape 1, c_proj 1, norm 1, c_fc
     * 1, add_bias_gelu 1, c_proj 1 = 13; LLaMA RMSNorm 6, qkv 1, reshape 1, split 2, rotation 1,
     * split 2, paged_attention 1, reshape 1, o_proj 1, RMSNorm 6, gate|up 1, split 2, sigmoid 1,
     * two muls 2, down 1 = 29; reshape_and_cache creates none. The fused layer ({@link
     * LayerPath#FUSED}, the default on the CPU) creates none: one {@code decoder_layer} call per
     * layer updates the stream in place.
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("architecturesAndPaths")
    void decodeStepCreatesTheLayersArraysOnly(
            DecoderConfig.Architecture architecture, LayerPath path) {
        Decoder decoder = model(architecture).withLayerPath(path);
        boolean gpt2Model = architecture == DecoderConfig.Architecture.GPT2;
        int layers = decoder.getConfig().getNumLayers();
        try (NDManager m = manager.newSubManager();
                PagedKvCache cache = decoder.newCacheBuilder(m).optNumBlocks(8).build()) {
            // FUSED runs the fused layer on the CPU and the GPU.
            boolean fused = decoder.isFused(cache);
            assertEquals(path == LayerPath.FUSED, fused);
            int perLayer = fused ? 0 : gpt2Model ? 13 : 29;
            // GPT-2: 2 embeddings, their sum, the norm's zeros, final norm, head = 6; LLaMA:
            // embedding, rotation (gather, reshape, split 2, 2 muls, add = 7), RMSNorm 6, head =
            // 15; the fused LLaMA step has no rotation matrices: 8.
            int perStep = gpt2Model ? 6 : fused ? 8 : 15;
            long[] ids = {0, 1};
            cache.allocate(0, 5);
            cache.allocate(1, 9);
            try (PagedBatch batch = cache.prepare(ids, new int[] {1, 1}, m);
                    NDManager step = m.newSubManager()) {
                NDArray tokens = step.create(new long[] {3, 4});
                NDArray positions = step.create(new long[] {4, 8});
                int before = ((ai.djl.ndarray.BaseNDManager) step).getManagedArrays().size();
                NDArray logits =
                        decoder.forwardPaged(
                                cache, batch, tokens, positions, PrefillAttention.PAGED);
                int created =
                        ((ai.djl.ndarray.BaseNDManager) step).getManagedArrays().size() - before;
                assertEquals(new Shape(2, decoder.getConfig().getVocabSize()), logits.getShape());
                assertEquals(perLayer * layers + perStep, created, architecture + " arrays");
            }
        }
    }

    static java.util.stream.Stream<Arguments> architecturesAndPaths() {
        return Arrays.stream(DecoderConfig.Architecture.values())
                .flatMap(a -> Arrays.stream(LayerPath.values()).map(p -> Arguments.of(a, p)));
    }

    @Test
    void layersDefaultToTheFusedOperator() {
        assertEquals(LayerPath.FUSED, new Decoder(gpt2.getConfig()).getLayerPath());
    }

    @Test
    void contiguousPathDefaultsToTheFusedKernel() {
        assertEquals(
                ContiguousAttention.FLASH, new Decoder(gpt2.getConfig()).getContiguousAttention());
    }

    /**
     * setWeights stores LLaMA's q|k|v and gate|up matrices stacked, each parameter a view of its
     * rows: every parameter still reads back exactly the tensor it was given.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(DecoderConfig.Architecture.class)
    void setWeightsKeepsEveryParameterValue(DecoderConfig.Architecture architecture) {
        Decoder source = model(architecture);
        try (NDManager m = manager.newSubManager()) {
            Map<String, NDArray> given = new java.util.LinkedHashMap<>();
            for (String name : Decoder.parameterShapes(source.getConfig()).keySet()) {
                NDArray value = source.weight(name).duplicate();
                value.attach(m);
                given.put(name, value);
            }
            Decoder copy = new Decoder(source.getConfig());
            copy.setWeights(m, given);
            for (Map.Entry<String, NDArray> e : given.entrySet()) {
                NDArray got = copy.weight(e.getKey());
                assertEquals(e.getValue().getShape(), got.getShape(), e.getKey());
                assertTrue(e.getValue().contentEquals(got), e.getKey());
            }
        }
    }

    @Test
    void gpt2ParametersHaveHuggingFaceNamesAndShapes() {
        Map<String, Shape> shapes = Decoder.parameterShapes(gpt2.getConfig());
        assertEquals(new Shape(384, 128), shapes.get("wte.weight"));
        assertEquals(new Shape(128, 128), shapes.get("wpe.weight"));
        assertEquals(new Shape(128, 384), shapes.get("h.0.attn.c_attn.weight"));
        assertEquals(new Shape(384), shapes.get("h.0.attn.c_attn.bias"));
        assertEquals(new Shape(128, 512), shapes.get("h.1.mlp.c_fc.weight"));
        assertEquals(new Shape(512, 128), shapes.get("h.1.mlp.c_proj.weight"));
        assertEquals(new Shape(128), shapes.get("ln_f.bias"));
        assertEquals(2 + 12 * 2 + 2, shapes.size());
        assertEquals(
                shapes.keySet(),
                gpt2.getDirectParameters().keys().stream()
                        .collect(
                                java.util.stream.Collectors.toCollection(
                                        java.util.LinkedHashSet::new)));
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(DecoderConfig.Architecture.class)
    void everyPathGeneratesTheSameGreedyTokens(DecoderConfig.Architecture architecture)
            throws Exception {
        Decoder decoder = model(architecture);
        for (int c = 0; c < 3; ++c) {
            int[] prompt = PROMPTS[c];
            int maxNew = MAX_NEW[c];
            int[] stock = textGenerator(decoder, ContiguousAttention.STOCK, prompt, maxNew);
            assertArrayEquals(
                    stock,
                    textGenerator(decoder, ContiguousAttention.FLASH, prompt, maxNew),
                    "flash (contiguous) vs stock, prompt " + c);
            for (LayerPath path : LayerPath.values()) {
                for (PrefillAttention prefill : PrefillAttention.values()) {
                    GenerationResult alone =
                            runAlone(
                                    decoder.withLayerPath(path),
                                    prompt,
                                    GenerationConfig.greedy(maxNew),
                                    prefill,
                                    16);
                    assertArrayEquals(
                            stock,
                            alone.generated(),
                            "paged " + path + " with " + prefill + " prefill vs stock, prompt " + c);
                }
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(DecoderConfig.Architecture.class)
    void textGeneratorBatchWithLeftPaddingMatchesEachAlone(DecoderConfig.Architecture architecture)
            throws Exception {
        // DJL's TextGenerator left-pads the shorter prompt (pad id 0 here), masks it through the
        // attention mask and shifts its position ids; the decoder must honour both.
        Decoder decoder = model(architecture);
        int[] longer = PROMPTS[1];
        int[] shorter = PROMPTS[3];
        int maxNew = 10;
        long[][] batch = new long[2][longer.length];
        for (int i = 0; i < longer.length; ++i) {
            batch[0][i] = longer[i];
            int j = i - (longer.length - shorter.length);
            batch[1][i] = j < 0 ? 0 : shorter[j];
        }
        for (ContiguousAttention attention : ContiguousAttention.values()) {
            try (Model model = Model.newInstance("decoder");
                    NDManager m = manager.newSubManager()) {
                model.setBlock(decoder.withContiguousAttention(attention));
                try (Predictor<NDList, CausalLMOutput> predictor =
                        model.newPredictor(new CausalLmTranslator())) {
                    SearchConfig config = new SearchConfig();
                    config.setMaxSeqLength(longer.length + maxNew);
                    config.setPadTokenId(0);
                    long[] all =
                            new TextGenerator(predictor, "greedy", config)
                                    .generate(m.create(batch))
                                    .toLongArray();
                    int width = longer.length + maxNew;
                    int[] got0 = new int[maxNew];
                    int[] got1 = new int[maxNew];
                    for (int i = 0; i < maxNew; ++i) {
                        got0[i] = (int) all[longer.length + i];
                        got1[i] = (int) all[width + longer.length + i];
                    }
                    assertArrayEquals(
                            textGenerator(decoder, ContiguousAttention.STOCK, longer, maxNew),
                            got0,
                            attention + ": longer prompt");
                    assertArrayEquals(
                            textGenerator(decoder, ContiguousAttention.STOCK, shorter, maxNew),
                            got1,
                            attention + ": left-padded prompt");
                }
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(DecoderConfig.Architecture.class)
    void batchOfMixedLengthsMatchesEachAlone(DecoderConfig.Architecture architecture) {
        Decoder decoder = model(architecture);
        GenerationConfig[] configs = new GenerationConfig[PROMPTS.length];
        int[][] alone = new int[PROMPTS.length][];
        for (int r = 0; r < PROMPTS.length; ++r) {
            configs[r] =
                    r % 2 == 0
                            ? GenerationConfig.greedy(MAX_NEW[r])
                            : GenerationConfig.builder()
                                    .setMaxNewTokens(MAX_NEW[r])
                                    .optSampling(0.8f, 20, 100 + r)
                                    .build();
            alone[r] =
                    runAlone(decoder, PROMPTS[r], configs[r], PrefillAttention.FLASH, 8)
                            .generated();
        }
        // Ample blocks, at most 4 running: later requests are admitted while others decode.
        int[][] batched = runBatch(decoder, configs, 200, 4, 0, 0);
        // 12 blocks of 8 tokens cannot hold every running sequence: preemption and recompute.
        int[][] preempted = runBatch(decoder, configs, 12, 6, 1, 0);
        // Prompts prefilled 5 tokens per iteration, interleaved with decoding; later chunks
        // read the earlier ones from the cache (paged_prefill_attention with a prefix).
        int[][] chunked = runBatch(decoder, configs, 200, 6, 0, 5);
        for (int r = 0; r < PROMPTS.length; ++r) {
            assertArrayEquals(alone[r], batched[r], "request " + r + " batched");
            assertArrayEquals(alone[r], preempted[r], "request " + r + " with preemption");
            assertArrayEquals(alone[r], chunked[r], "request " + r + " with chunked prefill");
        }
    }

    @Test
    void parallelSamplesShareThePromptAndMatchSeparateRequests() {
        // 13 prompt tokens in blocks of 8: one full block stays shared by all samples, the
        // partial second block is copied on each sample's first write.
        int[] prompt = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43};
        GenerationConfig config =
                GenerationConfig.builder().setMaxNewTokens(10).optSampling(1.0f, 0, 500).build();
        int samples = 4;
        try (PagedKvCache cache =
                gpt2.newCacheBuilder(manager).optBlockSize(8).optNumBlocks(40).build()) {
            ContinuousBatchingScheduler scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(gpt2)
                            .setCache(cache)
                            .optPrefillAttention(PrefillAttention.PAGED)
                            .build();
            long[] ids = scheduler.submitSamples(prompt, config, samples);
            // After the prefill step, all samples hold the prompt's 2 blocks together.
            scheduler.step();
            assertEquals(samples, scheduler.getNumRunning());
            assertEquals(2, cache.getNumBlocks() - cache.getNumFreeBlocks());
            Map<Long, GenerationResult> results = scheduler.runToCompletion();
            // 1 shared full block + per sample: a copied second block and a third block.
            assertEquals(1 + 2 * samples, scheduler.getPeakUsedBlocks());
            assertEquals(cache.getNumBlocks(), cache.getNumFreeBlocks(), "blocks leaked");
            java.util.Set<String> distinct = new java.util.HashSet<>();
            for (int i = 0; i < samples; ++i) {
                GenerationConfig alone =
                        GenerationConfig.builder()
                                .setMaxNewTokens(10)
                                .optSampling(1.0f, 0, 500 + i)
                                .build();
                int[] expected =
                        runAlone(gpt2, prompt, alone, PrefillAttention.FLASH, 16).generated();
                assertArrayEquals(expected, results.get(ids[i]).generated(), "sample " + i);
                distinct.add(Arrays.toString(expected));
            }
            assertTrue(distinct.size() > 1, "samples with different seeds should differ");
        }
    }

    @Test
    void eosStopsAndFreesTheSequence() {
        GenerationResult full =
                runAlone(gpt2, PROMPTS[1], GenerationConfig.greedy(20), PrefillAttention.PAGED, 16);
        int eos = full.generated()[5];
        int firstEos = 0;
        while (full.generated()[firstEos] != eos) {
            ++firstEos;
        }
        GenerationResult stopped =
                runAlone(
                        gpt2,
                        PROMPTS[1],
                        GenerationConfig.builder().setMaxNewTokens(20).optEosTokenId(eos).build(),
                        PrefillAttention.PAGED,
                        16);
        assertEquals(GenerationResult.FinishReason.EOS, stopped.finishReason());
        assertArrayEquals(Arrays.copyOf(full.generated(), firstEos + 1), stopped.generated());
    }

    @Test
    void float16PathsStayCloseToFloat32() {
        // float16 weights and caches: the paged logits after a prompt within 0.05 of the float32
        // stock logits (|logits| ~ 5; float16 keeps ~3 decimal digits through 2 layers), and the
        // float16 stock and paged paths agree within 0.02 of each other.
        Decoder half =
                new Decoder(llama.getConfig().toBuilder().optDataType(DataType.FLOAT16).build());
        half.initializeRandom(manager, 7, 0.1f);
        int[] prompt = PROMPTS[2];
        float[] reference = lastLogits(llama, prompt, null);
        float[] stockHalf = lastLogits(half, prompt, null);
        for (PrefillAttention prefill : PrefillAttention.values()) {
            float[] paged = lastLogits(half, prompt, prefill);
            for (int i = 0; i < reference.length; ++i) {
                assertEquals(reference[i], paged[i], 0.05, "logit " + i + " " + prefill);
                assertEquals(stockHalf[i], paged[i], 0.02, "logit " + i + " " + prefill);
            }
        }
    }

    private float[] lastLogits(Decoder decoder, int[] prompt, PrefillAttention prefill) {
        try (NDManager m = manager.newSubManager()) {
            long[] ids = Arrays.stream(prompt).asLongStream().toArray();
            if (prefill == null) {
                NDArray in = m.create(ids, new Shape(1, ids.length));
                NDArray pos = m.arange(0, ids.length, 1, DataType.INT64).reshape(1, ids.length);
                NDArray mask = m.ones(new Shape(1, ids.length), DataType.INT64);
                // The stock path (a call with an attention mask runs the masked stock attention).
                NDList out =
                        decoder.withContiguousAttention(ContiguousAttention.STOCK)
                                .forward(null, new NDList(in, pos, mask), false);
                return out.get(0).get("0, -1, :").toFloatArray();
            }
            try (PagedKvCache cache = decoder.newCacheBuilder(m).optNumBlocks(8).build()) {
                cache.allocate(0, ids.length);
                try (var batch = cache.prepare(new long[] {0}, new int[] {ids.length}, m)) {
                    return decoder.forwardPaged(
                                    cache,
                                    batch,
                                    m.create(ids),
                                    m.arange(0, ids.length, 1, DataType.INT64),
                                    prefill)
                            .toFloatArray();
                }
            }
        }
    }

    private int[] textGenerator(
            Decoder decoder, ContiguousAttention attention, int[] prompt, int maxNew)
            throws Exception {
        try (Model model = Model.newInstance("decoder");
                NDManager m = manager.newSubManager()) {
            model.setBlock(decoder.withContiguousAttention(attention));
            try (Predictor<NDList, CausalLMOutput> predictor =
                    model.newPredictor(new CausalLmTranslator())) {
                SearchConfig config = new SearchConfig();
                config.setMaxSeqLength(prompt.length + maxNew);
                NDArray ids =
                        m.create(
                                Arrays.stream(prompt).asLongStream().toArray(),
                                new Shape(1, prompt.length));
                long[] all =
                        new TextGenerator(predictor, "greedy", config).generate(ids).toLongArray();
                int[] out = new int[all.length - prompt.length];
                for (int i = 0; i < out.length; ++i) {
                    out[i] = (int) all[prompt.length + i];
                }
                return out;
            }
        }
    }

    private GenerationResult runAlone(
            Decoder decoder,
            int[] prompt,
            GenerationConfig config,
            PrefillAttention prefill,
            int blockSize) {
        try (PagedKvCache cache =
                decoder.newCacheBuilder(manager).optBlockSize(blockSize).optNumBlocks(64).build()) {
            ContinuousBatchingScheduler scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .optPrefillAttention(prefill)
                            .build();
            long id = scheduler.submit(prompt, config);
            GenerationResult result = scheduler.runToCompletion().get(id);
            assertEquals(cache.getNumBlocks(), cache.getNumFreeBlocks(), "blocks leaked");
            return result;
        }
    }

    private int[][] runBatch(
            Decoder decoder,
            GenerationConfig[] configs,
            int numBlocks,
            int maxBatch,
            int minPreemptions,
            int chunk) {
        try (PagedKvCache cache =
                decoder.newCacheBuilder(manager).optBlockSize(8).optNumBlocks(numBlocks).build()) {
            ContinuousBatchingScheduler scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .optMaxBatchSize(maxBatch)
                            .optPrefillAttention(PrefillAttention.PAGED)
                            .optMaxPrefillChunk(chunk)
                            .build();
            long[] ids = new long[configs.length];
            for (int r = 0; r < configs.length; ++r) {
                ids[r] = scheduler.submit(PROMPTS[r], configs[r]);
            }
            boolean overlapped = false;
            Map<Long, GenerationResult> results = new java.util.HashMap<>();
            while (scheduler.hasUnfinished()) {
                for (GenerationResult r : scheduler.step()) {
                    results.put(r.requestId(), r);
                }
                overlapped |= scheduler.getNumRunning() > 1 && scheduler.getNumWaiting() > 0;
            }
            assertTrue(overlapped || maxBatch >= configs.length, "no admission while decoding");
            assertTrue(
                    scheduler.getPreemptions() >= minPreemptions,
                    "expected preemptions, got " + scheduler.getPreemptions());
            assertEquals(cache.getNumBlocks(), cache.getNumFreeBlocks(), "blocks leaked");
            int[][] out = new int[configs.length][];
            for (int r = 0; r < configs.length; ++r) {
                out[r] = results.get(ids[r]).generated();
                assertEquals(configs[r].getMaxNewTokens(), out[r].length);
            }
            return out;
        }
    }
}
