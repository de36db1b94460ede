/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.CudaGraph;
import io.djlattention.it.TestDevice;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.decoder.DeviceDecodeStep;
import io.djlattention.zoo.decoder.DeviceDecodeStep.Mode;
import io.djlattention.zoo.decoder.StepSampling;
import io.djlattention.zoo.generate.ContinuousBatchingScheduler;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationResult;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

/**
 * The device decode step ({@link DeviceDecodeStep}: embed, fused layers, head and the token
 * choice on the device, only ids read back) against the host path it replaces ({@code
 * Decoder.forwardPaged} and the host sampler), on the Hugging Face checkpoints of {@code
 * make_decoders.py}, through the scheduler: prompts of awkward lengths, batches that shrink as
 * sequences finish (so a run crosses batch buckets, and width buckets as contexts grow).
 *
 * <p>On the CPU the device step runs its operator calls eagerly; on a GPU (the GPU suite) each
 * bucket's step is a captured CUDA graph, checked against the eager calls and the host path.
 */
class DeviceDecodeStepTest {

    private static final long SEED = new Random().nextLong();

    /** The device step this run can test: captured on a GPU, eager on the CPU. */
    private static Mode tested() {
        return TestDevice.isGpu() ? Mode.CAPTURED : Mode.EAGER;
    }

    private static Map<Long, GenerationResult> generate(
            Decoder decoder, NDManager manager, Mode mode, List<int[]> prompts,
            List<GenerationConfig> configs, int[] graphs) {
        return generate(decoder, manager, mode, prompts, configs, graphs, 16);
    }

    private static Map<Long, GenerationResult> generate(
            Decoder decoder, NDManager manager, Mode mode, List<int[]> prompts,
            List<GenerationConfig> configs, int[] graphs, int maxBatch) {
        int blocks = 0;
        for (int i = 0; i < prompts.size(); ++i) {
            blocks += (prompts.get(i).length + configs.get(i).getMaxNewTokens()) / 16 + 2;
        }
        try (PagedKvCache cache =
                        decoder.newCacheBuilder(manager).optNumBlocks(Math.max(256, blocks)).build();
                DeviceDecodeStep step = DeviceDecodeStep.create(mode, decoder, cache)) {
            ContinuousBatchingScheduler scheduler =
                    ContinuousBatchingScheduler.builder()
                            .setDecoder(decoder)
                            .setCache(cache)
                            .optMaxBatchSize(maxBatch)
                            .optDeviceStep(step)
                            .build();
            for (int i = 0; i < prompts.size(); ++i) {
                scheduler.submit(prompts.get(i), configs.get(i));
            }
            Map<Long, GenerationResult> out = scheduler.runToCompletion();
            if (step != null && graphs != null) {
                graphs[0] = step.getNumGraphs();
                assertTrue(step.getGraphReplays() > 0 || mode != Mode.CAPTURED);
                assertTrue(step.getNumGraphs() == 0 || step.getMemoryBytes() > 0);
            }
            return out;
        }
    }

    private static List<int[]> prompts(int vocab, Random random, int n) {
        List<int[]> prompts = new ArrayList<>();
        int[] lengths = {1, 7, 2, 13, 5, 16, 3, 9, 11, 4};
        for (int i = 0; i < n; ++i) {
            int[] p = new int[lengths[i % lengths.length]];
            for (int j = 0; j < p.length; ++j) {
                p[j] = random.nextInt(vocab);
            }
            prompts.add(p);
        }
        return prompts;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama", "llama3", "gpt2", "mistral", "gemma2"})
    void greedyIdsAreTheHostPathsAcrossBuckets(String name) throws Exception {
        try (ZooModel<int[], int[]> model =
                HfDecoderParityTest.criteria(name, int[].class, int[].class, "paged")
                        .loadModel()) {
            Decoder decoder = DecoderModels.generationBlock(model).getDecoder();
            NDManager manager = model.getNDManager();
            Random random = new Random(SEED ^ name.hashCode());
            List<int[]> prompts = prompts(decoder.getConfig().getVocabSize(), random, 9);
            List<GenerationConfig> configs = new ArrayList<>();
            for (int i = 0; i < prompts.size(); ++i) {
                // Sequences finish at different steps: the batch falls through 9 -> 1 rows.
                configs.add(GenerationConfig.greedy(4 + 3 * i));
            }
            int[] graphs = new int[1];
            Map<Long, GenerationResult> host =
                    generate(decoder, manager, Mode.OFF, prompts, configs, null);
            Map<Long, GenerationResult> device =
                    generate(decoder, manager, tested(), prompts, configs, graphs);
            for (long id : host.keySet()) {
                assertArrayEquals(
                        host.get(id).generated(),
                        device.get(id).generated(),
                        name + " sequence " + id + " (seed " + SEED + ")");
            }
            if (tested() == Mode.CAPTURED) {
                // 9, then fewer rows: the buckets 16, 8, 4, 2, 1 each captured once.
                assertTrue(graphs[0] >= 4, "graphs captured: " + graphs[0]);
                Map<Long, GenerationResult> eager =
                        generate(decoder, manager, Mode.EAGER, prompts, configs, null);
                for (long id : eager.keySet()) {
                    assertArrayEquals(eager.get(id).generated(), device.get(id).generated());
                }
            }
        }
    }

    @Test
    void seededSamplingIsReproducibleAndDoesNotDependOnTheBatch() throws Exception {
        try (ZooModel<int[], int[]> model =
                HfDecoderParityTest.criteria("llama", int[].class, int[].class, "paged")
                        .loadModel()) {
            Decoder decoder = DecoderModels.generationBlock(model).getDecoder();
            NDManager manager = model.getNDManager();
            Random random = new Random(SEED);
            List<int[]> prompts = prompts(decoder.getConfig().getVocabSize(), random, 6);
            List<GenerationConfig> configs = new ArrayList<>();
            for (int i = 0; i < prompts.size(); ++i) {
                configs.add(
                        GenerationConfig.builder()
                                .setMaxNewTokens(12 + i)
                                .optSampling(0.9f, i % 2 == 0 ? 0 : 7, 1000 + i)
                                .optTopP(i % 3 == 0 ? 1f : 0.8f)
                                .build());
            }
            Map<Long, GenerationResult> batched =
                    generate(decoder, manager, tested(), prompts, configs, null);
            Map<Long, GenerationResult> again =
                    generate(decoder, manager, tested(), prompts, configs, null);
            // By request id: the scheduler numbers requests in submission order.
            List<GenerationResult> b = new ArrayList<>(new TreeMap<>(batched).values());
            List<GenerationResult> a = new ArrayList<>(new TreeMap<>(again).values());
            boolean anyDiffersFromGreedy = false;
            for (int i = 0; i < prompts.size(); ++i) {
                assertArrayEquals(b.get(i).generated(), a.get(i).generated(), "run to run");
                // Alone in its batch, each sequence draws the same tokens.
                GenerationResult solo =
                        generate(decoder, manager, tested(), List.of(prompts.get(i)),
                                        List.of(configs.get(i)), null)
                                .values()
                                .iterator()
                                .next();
                assertArrayEquals(b.get(i).generated(), solo.generated(), "batch " + i);
                GenerationResult greedy =
                        generate(decoder, manager, tested(), List.of(prompts.get(i)),
                                        List.of(GenerationConfig.greedy(12 + i)), null)
                                .values()
                                .iterator()
                                .next();
                anyDiffersFromGreedy |=
                        !Arrays.equals(b.get(i).generated(), greedy.generated());
            }
            assertTrue(anyDiffersFromGreedy, "temperature 0.9 sampled only greedy tokens");
        }
    }

    /** A LLaMA-style random model with room for 256 generated tokens. */
    private static Decoder randomLlama(NDManager manager) {
        return randomLlama(manager, DataType.FLOAT32);
    }

    private static Decoder randomLlama(NDManager manager, DataType dataType) {
        DecoderConfig config =
                DecoderConfig.builder()
                        .optDataType(dataType)
                        .setArchitecture(DecoderConfig.Architecture.LLAMA)
                        .setVocabSize(512)
                        .setHiddenSize(64)
                        .setIntermediateSize(128)
                        .setNumLayers(2)
                        .setNumHeads(4)
                        .optMaxPositions(512)
                        .build();
        Decoder decoder = new Decoder(config);
        decoder.initializeRandom(manager, SEED, 0.2f);
        return decoder;
    }

    @Test
    void everyBucketRunsManyStepsAlikeOnBothPaths() {
        // On a GPU: the captured graphs against the eager calls (bit-identical by construction)
        // over 256 steps in every batch bucket, in float32 and in float16 (whose buckets up to 8
        // rows run the skinny GEMM kernel with its fused norms, activation and residuals; larger
        // ones cuBLASLt; DJL 0.36 has no bfloat16 model weights); on the CPU: the eager device
        // step against the host path in float32 over fewer steps and buckets (its cost on two
        // cores).
        boolean gpu = TestDevice.isGpu();
        int[] sizes = gpu ? new int[] {1, 2, 4, 8, 16, 32, 64, 128, 256} : new int[] {1, 3, 16};
        int steps = gpu ? 256 : 40;
        Mode reference = gpu ? Mode.EAGER : Mode.OFF;
        DataType[] types =
                gpu
                        ? new DataType[] {DataType.FLOAT32, DataType.FLOAT16}
                        : new DataType[] {DataType.FLOAT32};
        for (DataType type : types) {
            runsAlike(type, sizes, steps, reference);
        }
    }

    private static void runsAlike(DataType type, int[] sizes, int steps, Mode reference) {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            Decoder decoder = randomLlama(manager, type);
            Random random = new Random(SEED);
            for (int n : sizes) {
                List<int[]> prompts = new ArrayList<>();
                List<GenerationConfig> configs = new ArrayList<>();
                for (int i = 0; i < n; ++i) {
                    prompts.add(new int[] {random.nextInt(512), random.nextInt(512)});
                    configs.add(GenerationConfig.greedy(steps));
                }
                Map<Long, GenerationResult> expected =
                        generate(decoder, manager, reference, prompts, configs, null, 256);
                Map<Long, GenerationResult> actual =
                        generate(decoder, manager, tested(), prompts, configs, null, 256);
                for (long id : expected.keySet()) {
                    assertArrayEquals(
                            expected.get(id).generated(),
                            actual.get(id).generated(),
                            type + ", " + n + " sequences, sequence " + id + " (seed " + SEED
                                    + ")");
                    assertEquals(steps, actual.get(id).generated().length);
                }
            }
        }
    }

    @Test
    void aMemoryBudgetReleasesTheLeastRecentlyUsedBuckets() throws Exception {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            Decoder decoder = randomLlama(manager);
            try (PagedKvCache cache = decoder.newCacheBuilder(manager).optNumBlocks(64).build();
                    DeviceDecodeStep step =
                            new DeviceDecodeStep(
                                    decoder, cache, TestDevice.isGpu(), 1)) { // 1 byte
                long[] ids = {1, 2, 3};
                for (long id : ids) {
                    cache.allocate(id, 1);
                }
                long[] tokens = {5, 6, 7};
                long[] positions = {0, 0, 0};
                long[] first = null;
                for (int n : new int[] {3, 1, 3, 2}) {
                    long[] out =
                            step.step(
                                    Arrays.copyOf(ids, n),
                                    Arrays.copyOf(tokens, n),
                                    Arrays.copyOf(positions, n),
                                    new StepSampling(n));
                    // Only the bucket just used is left, and the same inputs give the same ids.
                    assertTrue(step.getNumGraphs() <= 1, "graphs: " + step.getNumGraphs());
                    if (n == 3) {
                        if (first != null) {
                            assertArrayEquals(first, out);
                        }
                        first = out;
                    }
                }
                assertTrue(step.getMemoryBytes() > 0);
            }
            try (PagedKvCache cache = decoder.newCacheBuilder(manager).optNumBlocks(8).build()) {
                IllegalArgumentException e =
                        assertThrows(
                                IllegalArgumentException.class,
                                () -> new DeviceDecodeStep(decoder, cache, false, 0));
                assertTrue(e.getMessage().startsWith("memoryBudget: expected a positive"));
            }
        }
    }

    @Test
    void badInputsAreNamed() throws Exception {
        try (ZooModel<int[], int[]> model =
                HfDecoderParityTest.criteria("llama", int[].class, int[].class, "paged")
                        .loadModel()) {
            Decoder decoder = DecoderModels.generationBlock(model).getDecoder();
            NDManager manager = model.getNDManager();
            int vocab = decoder.getConfig().getVocabSize();
            try (PagedKvCache cache = decoder.newCacheBuilder(manager).optNumBlocks(8).build();
                    DeviceDecodeStep step = new DeviceDecodeStep(decoder, cache, false)) {
                cache.allocate(7, 3);
                StepSampling one = new StepSampling(1);
                IllegalArgumentException e =
                        assertThrows(
                                IllegalArgumentException.class,
                                () -> step.step(new long[] {7}, new long[] {vocab}, new long[] {2}, one));
                assertTrue(e.getMessage().startsWith("tokens: expected ids in [0, " + vocab), e.getMessage());
                e = assertThrows(
                        IllegalArgumentException.class,
                        () -> step.step(new long[] {7}, new long[] {1}, new long[] {1}, one));
                assertTrue(e.getMessage().contains("has 3 cached tokens, so its new token is at"
                        + " position 2, got 1"), e.getMessage());
                e = assertThrows(
                        IllegalArgumentException.class,
                        () -> step.step(new long[] {7}, new long[] {1, 2}, new long[] {2}, one));
                assertTrue(e.getMessage().startsWith("tokens, positions, sampling: expected 1"));
                e = assertThrows(
                        IllegalArgumentException.class,
                        () -> step.step(new long[257], new long[257], new long[257],
                                new StepSampling(257)));
                assertTrue(e.getMessage().startsWith("sequenceIds: at most 256"));
                e = assertThrows(IllegalArgumentException.class, () -> one.set(0, -1f, 0, 1f, 0, 0));
                assertTrue(e.getMessage().startsWith("temperature:"));
                e = assertThrows(IllegalArgumentException.class, () -> one.set(0, 1f, 0, 0f, 0, 0));
                assertTrue(e.getMessage().startsWith("topP:"));
                // A valid call after the refusals: the step still runs.
                assertEquals(1, step.step(new long[] {7}, new long[] {1}, new long[] {2}, one).length);
            }
            if (!TestDevice.isGpu()) {
                try (PagedKvCache cache = decoder.newCacheBuilder(manager).optNumBlocks(8).build()) {
                    IllegalArgumentException e =
                            assertThrows(
                                    IllegalArgumentException.class,
                                    () -> DeviceDecodeStep.create(Mode.CAPTURED, decoder, cache));
                    assertTrue(e.getMessage().startsWith("capture: CUDA graphs need a GPU"));
                    e = assertThrows(
                            IllegalArgumentException.class,
                            () -> CudaGraph.capture(manager, () -> {}));
                    assertTrue(e.getMessage().startsWith("manager: expected a GPU manager"));
                    assertEquals(null, DeviceDecodeStep.create(Mode.AUTO, decoder, cache));
                }
            }
        }
    }
}
