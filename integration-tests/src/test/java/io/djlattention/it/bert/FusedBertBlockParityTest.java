/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bert;

import static io.djlattention.it.bert.BertFixtures.assertClose;
import static io.djlattention.it.bert.BertFixtures.assertPaddingZero;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertMaskedLanguageModelBlock;
import ai.djl.training.ParameterStore;
import io.djlattention.it.TestDevice;
import io.djlattention.it.bert.BertFixtures.Config;
import io.djlattention.nn.FusedBertBlock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import java.util.stream.Stream;

/**
 * {@link FusedBertBlock} against stock DJL's {@link BertBlock}: a stock block initialised with a
 * fixed seed, every bias, norm and BatchNorm running statistic randomised, saved with {@code
 * saveParameters} and loaded into the fused block; same token ids, type ids and padding masks.
 *
 * <p>Tolerance (float32): {@value #FLOAT32_TOLERANCE} of max(1, |stock|). The fused path changes
 * only the rounding: BatchNorm folded into one scale and shift (1-2 ulp), the three projections in
 * one GEMM (another summation blocking), attention with an online softmax instead of
 * softmax-then-matmul (float32 accumulation over at most S keys). Each is ~1e-6 relative; a layer's
 * BatchNorm scales (gamma / sqrt(var) up to ~2 here) and the next layer's reductions over E and 4E
 * terms amplify it, and the errors of the layers add up: measured worst 1e-5 to 3e-5 here, so 1e-4
 * leaves a 3x margin while a real bug (a wrong mask, bias, residual or norm) gives errors of order
 * 1e-1 or more.
 */
class FusedBertBlockParityTest {

    static final double FLOAT32_TOLERANCE = 1e-4;
    static final double FLOAT16_TOLERANCE = 4e-2;

    static Stream<Arguments> lengths() {
        int s = BertFixtures.TINY.maxSeqLen();
        return Stream.of(
                Arguments.of((Object) new int[] {s, 1, 7, 12}),
                Arguments.of((Object) new int[] {1}),
                Arguments.of((Object) new int[] {2, 1, 1}),
                Arguments.of((Object) new int[] {s, s}),
                Arguments.of((Object) new int[] {s - 1, 3, s, 1, 5}));
    }

    @ParameterizedTest(name = "lens={0}")
    @MethodSource("lengths")
    void loadedFromStockMatchesStockPaddingFree(int[] lens) throws Exception {
        check(BertFixtures.TINY, lens, true, 11);
    }

    @ParameterizedTest(name = "lens={0}")
    @MethodSource("lengths")
    void loadedFromStockMatchesStockEverywhereWithoutPaddingRemoval(int[] lens) throws Exception {
        check(BertFixtures.TINY, lens, false, 12);
    }

    /**
     * The other implementation choices than the CPU defaults: attention through the {@code
     * bert_attention} (or varlen) kernel, GELU through {@code add_bias_gelu}.
     */
    @ParameterizedTest(name = "paddingFree={0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
    void kernelAttentionAndFusedGeluMatchStock(boolean paddingFree) throws Exception {
        String oldAttention = System.getProperty("djl.attn.bert.attention");
        String oldGelu = System.getProperty("djl.attn.bert.gelu");
        System.setProperty("djl.attn.bert.attention", "kernel");
        System.setProperty("djl.attn.bert.gelu", "fused");
        try {
            int s = BertFixtures.TINY.maxSeqLen();
            check(BertFixtures.TINY, new int[] {s, 1, 7, 12}, paddingFree, 14);
        } finally {
            restore("djl.attn.bert.attention", oldAttention);
            restore("djl.attn.bert.gelu", oldGelu);
        }
    }

    private static void restore(String key, String value) {
        if (value == null) {
            System.clearProperty(key);
        } else {
            System.setProperty(key, value);
        }
    }

    @Test
    void baseSizedTwoLayersMatchesStock() throws Exception {
        Config config = BertFixtures.BASE_TWO_LAYERS;
        check(config, new int[] {config.maxSeqLen(), 1, 33}, true, 13);
    }

    @Test
    void fromStockSharesParametersAndMatchesStock() {
        Config config = BertFixtures.TINY;
        int[] lens = {config.maxSeqLen(), 1, 4};
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            BertBlock stock = config.stockBuilder().build();
            Shape shape = new Shape(lens.length, config.maxSeqLen());
            BertFixtures.initialize(stock, manager, 21, shape, shape, shape);
            FusedBertBlock fused = FusedBertBlock.from(stock, config.heads());
            assertEquals(
                    stock.getParameters().keys(), fused.getParameters().keys(), "parameter names");
            NDList inputs = BertFixtures.inputs(manager, config, config.maxSeqLen(), lens, 22);
            NDList expected = BertFixtures.forward(stock, manager, inputs);
            NDList actual = BertFixtures.forward(fused, manager, inputs);
            assertClose(expected.get(0), actual.get(0), lens, FLOAT32_TOLERANCE, "sequence output");
            assertClose(expected.get(1), actual.get(1), null, FLOAT32_TOLERANCE, "pooled output");
        }
    }

    static Stream<Arguments> notRightPadded() {
        return Stream.of(
                Arguments.of("a hole", new int[] {1, 1, 0, 1, 1, 1}),
                Arguments.of("a row without tokens", new int[] {0, 0, 0, 0, 0, 0}),
                Arguments.of("left padding", new int[] {0, 0, 1, 1, 1, 1}),
                Arguments.of("a value other than 0 and 1", new int[] {1, 1, 2, 0, 0, 0}));
    }

    /** Masks the fused path does not take run the stock computation: bit-identical outputs. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("notRightPadded")
    void otherMasksRunTheStockComputation(String what, int[] secondRow) {
        Config config = BertFixtures.TINY;
        int seqLen = config.maxSeqLen();
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            BertBlock stock = config.stockBuilder().build();
            Shape shape = new Shape(2, seqLen);
            BertFixtures.initialize(stock, manager, 31, shape, shape, shape);
            FusedBertBlock fused = FusedBertBlock.from(stock, config.heads());
            NDList inputs = BertFixtures.inputs(manager, config, seqLen, new int[] {seqLen, 9}, 32);
            int[] mask = inputs.get(2).toIntArray();
            System.arraycopy(secondRow, 0, mask, seqLen, secondRow.length);
            inputs.set(2, manager.create(mask, shape));
            NDList expected = BertFixtures.forward(stock, manager, inputs);
            NDList actual = BertFixtures.forward(fused, manager, inputs);
            assertTrue(expected.get(0).contentEquals(actual.get(0)), "sequence output");
            assertTrue(expected.get(1).contentEquals(actual.get(1)), "pooled output");
        }
    }

    /**
     * Stock DJL only runs S == maxSequenceLength; the fused block also runs shorter batches. Their
     * valid positions must equal the stock block's on the same tokens padded to maxSequenceLength
     * (padding keys are masked, so the extra padding changes nothing there).
     */
    @ParameterizedTest(name = "paddingFree={0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
    void shorterSequencesMatchStockOnTheSameTokensPadded(boolean paddingFree) {
        Config config = BertFixtures.TINY;
        int[] lens = {7, 1, 3};
        int shortLen = 7;
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            BertBlock stock = config.stockBuilder().build();
            Shape shape = new Shape(lens.length, config.maxSeqLen());
            BertFixtures.initialize(stock, manager, 41, shape, shape, shape);
            FusedBertBlock fused = FusedBertBlock.from(stock, config.heads()).setPaddingFree(paddingFree);
            NDList full = BertFixtures.inputs(manager, config, config.maxSeqLen(), lens, 42);
            NDList shortInputs = new NDList();
            for (NDArray array : full) {
                shortInputs.add(array.get(":, 0:" + shortLen));
            }
            NDList expected = BertFixtures.forward(stock, manager, full);
            NDList actual = BertFixtures.forward(fused, manager, shortInputs);
            assertClose(
                    expected.get(0).get(":, 0:" + shortLen),
                    actual.get(0),
                    lens,
                    FLOAT32_TOLERANCE,
                    "sequence output");
            assertClose(expected.get(1), actual.get(1), null, FLOAT32_TOLERANCE, "pooled output");
        }
    }

    /** DJL's masked-LM head on top: the same log-probabilities from either encoder. */
    @Test
    void maskedLanguageModelHeadOnTopMatchesStock() throws Exception {
        Config config = BertFixtures.TINY;
        int seqLen = config.maxSeqLen();
        int[] lens = {seqLen, 1, 6};
        int[][] masked = {{0, 5, 18}, {0, 0, 0}, {1, 2, 5}};
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            BertBlock stock = config.stockBuilder().build();
            Shape shape = new Shape(lens.length, seqLen);
            BertFixtures.initialize(stock, manager, 51, shape, shape, shape);
            FusedBertBlock fused =
                    FusedBertBlock.builder()
                            .setTokenDictionarySize(config.vocab())
                            .optTypeDictionarySize(2)
                            .optEmbeddingSize(config.embedding())
                            .optAttentionHeadCount(config.heads())
                            .optHiddenSize(config.hidden())
                            .optTransformerBlockCount(config.layers())
                            .optMaxSequenceLength(seqLen)
                            .build();
            BertFixtures.load(fused, manager, BertFixtures.save(stock));

            BertMaskedLanguageModelBlock head =
                    new BertMaskedLanguageModelBlock(stock, Activation::gelu);
            NDArray indices = manager.create(masked);
            ParameterStore ps = new ParameterStore(manager, false);
            NDArray table = stock.getTokenEmbedding().getValue(ps, manager.getDevice(), false);
            BertFixtures.initialize(
                    head,
                    manager,
                    52,
                    new Shape(lens.length, seqLen, config.embedding()),
                    indices.getShape(),
                    table.getShape());

            NDList inputs = BertFixtures.inputs(manager, config, seqLen, lens, 53);
            NDArray stockSequence = BertFixtures.forward(stock, manager, inputs).get(0);
            NDArray fusedSequence = BertFixtures.forward(fused, manager, inputs).get(0);
            NDArray expected =
                    head.forward(ps, new NDList(stockSequence, indices, table), false).head();
            NDArray actual =
                    head.forward(ps, new NDList(fusedSequence, indices, table), false).head();
            assertClose(expected, actual, null, FLOAT32_TOLERANCE, "masked-LM log-probabilities");
        }
    }

    /**
     * float16: stock DJL cannot run a float16 BertBlock on the CPU (its attention projections are
     * always float32, so a float16 input fails in the first Linear), so the fused float16 path
     * (float16 activations and weights, float32 accumulation and per-channel vectors) is held
     * against the stock float32 block on the same parameters. Tolerance {@value #FLOAT16_TOLERANCE}
     * of max(1, |stock|): every activation is rounded to float16 (2^-11 = 4.9e-4 relative) after
     * each of the ~10 ops of a layer, BatchNorm scales up to ~2 amplify it, float16 copies of the
     * weights add their own rounding (2^-12 relative), and two layers compound it; measured worst
     * 1.3e-2 to 1.9e-2 (tanh of the pooled output included), so 4e-2 leaves a 2x margin, while a
     * wrong mask, bias or norm gives errors of order 1e-1.
     */
    @ParameterizedTest(name = "paddingFree={0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
    void float16MatchesStockFloat32(boolean paddingFree) {
        Config config = BertFixtures.TINY;
        int seqLen = config.maxSeqLen();
        int[] lens = {seqLen, 1, 11, 2};
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            BertBlock stock = config.stockBuilder().build();
            Shape shape = new Shape(lens.length, seqLen);
            BertFixtures.initialize(stock, manager, 61, shape, shape, shape);
            FusedBertBlock fused =
                    FusedBertBlock.from(stock, config.heads())
                            .setPaddingFree(paddingFree)
                            .setComputeDataType(DataType.FLOAT16);
            NDList inputs = BertFixtures.inputs(manager, config, seqLen, lens, 62);
            NDList expected = BertFixtures.forward(stock, manager, inputs);
            NDList actual = BertFixtures.forward(fused, manager, inputs);
            assertEquals(DataType.FLOAT16, actual.get(0).getDataType());
            assertEquals(DataType.FLOAT16, actual.get(1).getDataType());
            assertClose(
                    expected.get(0),
                    actual.get(0),
                    paddingFree ? lens : null,
                    FLOAT16_TOLERANCE,
                    "sequence output");
            assertClose(expected.get(1), actual.get(1), null, FLOAT16_TOLERANCE, "pooled output");
        }
    }

    /** Why the float16 test compares with stock float32: stock DJL rejects a float16 BertBlock. */
    @Test
    void stockBertBlockCannotRunFloat16OnCpu() {
        Config config = BertFixtures.TINY;
        try (NDManager manager = NDManager.newBaseManager(ai.djl.Device.cpu())) {
            BertBlock stock = config.stockBuilder().build();
            Shape shape = new Shape(1, config.maxSeqLen());
            stock.initialize(manager, DataType.FLOAT16, shape, shape, shape);
            NDList inputs =
                    BertFixtures.inputs(manager, config, config.maxSeqLen(), new int[] {3}, 71);
            org.junit.jupiter.api.Assertions.assertThrows(
                    RuntimeException.class, () -> BertFixtures.forward(stock, manager, inputs));
        }
    }

    private static void check(Config config, int[] lens, boolean paddingFree, long seed)
            throws Exception {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            int seqLen = config.maxSeqLen();
            BertBlock stock = config.stockBuilder().build();
            Shape shape = new Shape(lens.length, seqLen);
            BertFixtures.initialize(stock, manager, seed, shape, shape, shape);
            byte[] saved = BertFixtures.save(stock);

            FusedBertBlock fused =
                    FusedBertBlock.builder()
                            .setTokenDictionarySize(config.vocab())
                            .optTypeDictionarySize(2)
                            .optEmbeddingSize(config.embedding())
                            .optAttentionHeadCount(config.heads())
                            .optHiddenSize(config.hidden())
                            .optTransformerBlockCount(config.layers())
                            .optMaxSequenceLength(config.maxSeqLen())
                            .optPaddingFree(paddingFree)
                            .build();
            BertFixtures.load(fused, manager, saved);
            assertArrayEquals(saved, BertFixtures.save(fused), "saving the loaded block");

            NDList inputs = BertFixtures.inputs(manager, config, seqLen, lens, seed + 1);
            NDList expected = BertFixtures.forward(stock, manager, inputs);
            NDList actual = BertFixtures.forward(fused, manager, inputs);
            assertEquals(2, actual.size());
            assertClose(
                    expected.get(0),
                    actual.get(0),
                    paddingFree ? lens : null,
                    FLOAT32_TOLERANCE,
                    "sequence output");
            if (paddingFree) {
                assertPaddingZero(actual.get(0), lens);
            }
            assertClose(expected.get(1), actual.get(1), null, FLOAT32_TOLERANCE, "pooled output");
        }
    }
}
