/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bert;

import static io.djlattention.it.bert.BertFixtures.assertClose;
import static io.djlattention.it.bert.BertFixtures.assertPaddingZero;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import io.djlattention.it.TestDevice;
import io.djlattention.nn.FlashSelfAttentionBlock;
import io.djlattention.nn.FusedBertBlock;
import io.djlattention.nn.FusedTransformerEncoderBlock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import java.util.Random;
import java.util.stream.Stream;

/**
 * {@link FusedTransformerEncoderBlock} and {@link FlashSelfAttentionBlock} against stock DJL's
 * {@link TransformerEncoderBlock} and {@link ScaledDotProductAttentionBlock}: stock blocks with a
 * fixed seed and randomised biases, norms and running statistics, saved and loaded into the fused
 * blocks (or wrapped with {@code from}); random inputs {@code [B, S, E]} and masks in both forms
 * the stock blocks take (BertBlock's additive 4-D offsets, and 0/1 values).
 *
 * <p>Tolerances, float32: one layer {@value #LAYER_TOLERANCE} of max(1, |stock|) (folded BatchNorm,
 * one fused QKV GEMM and an online softmax change the rounding by ~1e-6 relative, amplified by
 * BatchNorm scales up to ~2: measured worst ~3e-6); attention alone {@value #ATTENTION_TOLERANCE}
 * (measured ~1e-6). float16: {@value #FLOAT16_TOLERANCE} against the stock float32 block, which is
 * the only stock reference (stock projections are always float32): float16 rounding of activations
 * and weight copies (2^-11 relative) over the ~10 ops of a layer: measured worst 5e-3.
 */
class FusedTransformerEncoderBlockParityTest {

    static final double LAYER_TOLERANCE = 3e-5;
    static final double ATTENTION_TOLERANCE = 1e-5;
    static final double FLOAT16_TOLERANCE = 2e-2;
    static final int E = 64;
    static final int HEADS = 4;
    static final int HIDDEN = 96;

    static Stream<Arguments> cases() {
        return Stream.of(
                Arguments.of(new int[] {13, 1, 6}, true, true),
                Arguments.of(new int[] {13, 1, 6}, true, false),
                Arguments.of(new int[] {13, 1, 6}, false, true),
                Arguments.of(new int[] {13, 1, 6}, false, false),
                Arguments.of(new int[] {1}, true, true),
                Arguments.of(new int[] {5, 5}, true, true),
                Arguments.of(new int[] {2, 37, 1, 20}, true, true));
    }

    @ParameterizedTest(name = "lens={0} offsetMask={1} paddingFree={2}")
    @MethodSource("cases")
    void encoderLoadedFromStockMatchesStock(int[] lens, boolean offsetMask, boolean paddingFree)
            throws Exception {
        int seqLen = max(lens);
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            TransformerEncoderBlock stock =
                    new TransformerEncoderBlock(E, HEADS, HIDDEN, 0.1f, Activation::gelu);
            Shape shape = new Shape(lens.length, seqLen, E);
            BertFixtures.initialize(stock, manager, 101, shape);
            byte[] saved = BertFixtures.save(stock);
            FusedTransformerEncoderBlock fused =
                    new FusedTransformerEncoderBlock(E, HEADS, HIDDEN, 0.1f, Activation::gelu)
                            .setPaddingFree(paddingFree);
            BertFixtures.load(fused, manager, saved);
            assertArrayEquals(saved, BertFixtures.save(fused), "saving the loaded block");

            NDArray x = randomInput(manager, shape, 102);
            NDList inputs = new NDList(x, mask(manager, lens, seqLen, offsetMask));
            NDArray expected = BertFixtures.forward(stock, manager, inputs).head();
            NDArray actual = BertFixtures.forward(fused, manager, inputs).head();
            assertClose(
                    expected, actual, paddingFree ? lens : null, LAYER_TOLERANCE, "layer output");
            if (paddingFree) {
                assertPaddingZero(actual, lens);
            }
        }
    }

    /**
     * Every implementation choice of the fused layer (attention through the {@code bert_attention}
     * / varlen kernels or through libtorch GEMMs per sequence; GELU through {@code add_bias_gelu}
     * or libtorch), which the block otherwise picks per device.
     */
    @ParameterizedTest(name = "attention={0} gelu={1}")
    @org.junit.jupiter.params.provider.CsvSource({
        "kernel, fused",
        "kernel, torch",
        "gemm, fused",
        "gemm, torch"
    })
    void encoderMatchesStockWithEveryImplementationChoice(String attention, String gelu) {
        int[] lens = {13, 1, 6};
        String oldAttention = System.getProperty("djl.attn.bert.attention");
        String oldGelu = System.getProperty("djl.attn.bert.gelu");
        System.setProperty("djl.attn.bert.attention", attention);
        System.setProperty("djl.attn.bert.gelu", gelu);
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            TransformerEncoderBlock stock =
                    new TransformerEncoderBlock(E, HEADS, HIDDEN, 0.1f, Activation::gelu);
            Shape shape = new Shape(lens.length, 13, E);
            BertFixtures.initialize(stock, manager, 161, shape);
            NDList inputs =
                    new NDList(randomInput(manager, shape, 162), mask(manager, lens, 13, true));
            NDArray expected = BertFixtures.forward(stock, manager, inputs).head();
            for (boolean paddingFree : new boolean[] {true, false}) {
                FusedTransformerEncoderBlock fused =
                        FusedTransformerEncoderBlock.from(stock, HEADS).setPaddingFree(paddingFree);
                NDArray actual = BertFixtures.forward(fused, manager, inputs).head();
                assertClose(
                        expected,
                        actual,
                        paddingFree ? lens : null,
                        LAYER_TOLERANCE,
                        "layer output, paddingFree=" + paddingFree);
            }
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
    void encoderWithoutMaskAndFromStockWithAnotherActivation() {
        int[] lens = {9, 9};
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            // ReLU is not fused: it runs as given between the fused ops.
            TransformerEncoderBlock stock =
                    new TransformerEncoderBlock(E, HEADS, HIDDEN, 0.1f, Activation::relu);
            Shape shape = new Shape(2, 9, E);
            BertFixtures.initialize(stock, manager, 111, shape);
            FusedTransformerEncoderBlock fused = FusedTransformerEncoderBlock.from(stock, HEADS);
            NDList inputs = new NDList(randomInput(manager, shape, 112));
            assertClose(
                    BertFixtures.forward(stock, manager, inputs).head(),
                    BertFixtures.forward(fused, manager, inputs).head(),
                    null,
                    LAYER_TOLERANCE,
                    "layer output without mask");
            NDList masked = new NDList(inputs.head(), mask(manager, new int[] {9, 4}, 9, true));
            assertClose(
                    BertFixtures.forward(stock, manager, masked).head(),
                    BertFixtures.forward(fused, manager, masked).head(),
                    new int[] {9, 4},
                    LAYER_TOLERANCE,
                    "layer output with ReLU and padding");
        }
    }

    /** A causal mask is not a right-padding mask: the stock computation runs, bit-identical. */
    @Test
    void causalMaskRunsTheStockComputation() {
        int seqLen = 7;
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            TransformerEncoderBlock stock =
                    new TransformerEncoderBlock(E, HEADS, HIDDEN, 0.1f, Activation::gelu);
            Shape shape = new Shape(2, seqLen, E);
            BertFixtures.initialize(stock, manager, 121, shape);
            FusedTransformerEncoderBlock fused = FusedTransformerEncoderBlock.from(stock, HEADS);
            float[] causal = new float[2 * seqLen * seqLen];
            for (int i = 0; i < causal.length; ++i) {
                int t = (i / seqLen) % seqLen;
                int s = i % seqLen;
                causal[i] = s <= t ? 1f : 0f;
            }
            NDList inputs =
                    new NDList(
                            randomInput(manager, shape, 122),
                            manager.create(causal, new Shape(2, seqLen, seqLen)));
            NDArray expected = BertFixtures.forward(stock, manager, inputs).head();
            NDArray actual = BertFixtures.forward(fused, manager, inputs).head();
            assertTrue(expected.contentEquals(actual), "causal mask: stock computation");
        }
    }

    @ParameterizedTest(name = "lens={0} offsetMask={1}")
    @MethodSource("cases")
    void attentionLoadedFromStockMatchesStockAtEveryPosition(
            int[] lens, boolean offsetMask, boolean unused) throws Exception {
        int seqLen = max(lens);
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            ScaledDotProductAttentionBlock stock =
                    ScaledDotProductAttentionBlock.builder()
                            .setEmbeddingSize(E)
                            .setHeadCount(HEADS)
                            .build();
            Shape shape = new Shape(lens.length, seqLen, E);
            BertFixtures.initialize(stock, manager, 131, shape);
            byte[] saved = BertFixtures.save(stock);
            FlashSelfAttentionBlock fused =
                    FlashSelfAttentionBlock.builder()
                            .setEmbeddingSize(E)
                            .setHeadCount(HEADS)
                            .build();
            BertFixtures.load(fused, manager, saved);
            assertArrayEquals(saved, BertFixtures.save(fused), "saving the loaded block");

            NDList inputs =
                    new NDList(
                            randomInput(manager, shape, 132),
                            mask(manager, lens, seqLen, offsetMask));
            // Attention alone computes every row, padding rows included, as the stock block.
            assertClose(
                    BertFixtures.forward(stock, manager, inputs).head(),
                    BertFixtures.forward(fused, manager, inputs).head(),
                    null,
                    ATTENTION_TOLERANCE,
                    "attention output");
        }
    }

    /** The head count of a wrapped stock block comes from the caller and is checked. */
    @Test
    void fromStockRejectsAHeadCountThatDoesNotDivideTheEmbeddingSize() {
        TransformerEncoderBlock layer =
                new TransformerEncoderBlock(E, HEADS, HIDDEN, 0.1f, Activation::gelu);
        IllegalArgumentException bad =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> FusedTransformerEncoderBlock.from(layer, 5));
        assertEquals(
                "headCount: expected a value >= 1 that divides the embedding size 64, got 5",
                bad.getMessage());
        ScaledDotProductAttentionBlock attention =
                ScaledDotProductAttentionBlock.builder()
                        .setEmbeddingSize(E)
                        .setHeadCount(HEADS)
                        .build();
        assertEquals(
                "headCount: expected a value >= 1 that divides the embedding size 64, got 0",
                assertThrows(
                                IllegalArgumentException.class,
                                () -> FlashSelfAttentionBlock.from(attention, 0))
                        .getMessage());
        BertBlock bert = BertBlock.builder().setTokenDictionarySize(32).nano().build();
        assertEquals(
                "headCount: expected a value >= 1 that divides the embedding size 256, got 3",
                assertThrows(IllegalArgumentException.class, () -> FusedBertBlock.from(bert, 3))
                        .getMessage());
    }

    /**
     * The fused builder's presets keep the head count DJL's presets give the stock block, read
     * here (test only) from DJL 0.36.0's private field: the fused library itself never reads it.
     */
    @Test
    void builderPresetsKeepTheStockHeadCount() throws ReflectiveOperationException {
        java.lang.reflect.Field heads =
                ScaledDotProductAttentionBlock.class.getDeclaredField("headCount");
        heads.setAccessible(true);
        for (String preset : new String[] {"default", "nano", "micro", "base", "large"}) {
            FusedBertBlock.Builder builder = FusedBertBlock.builder().setTokenDictionarySize(32);
            switch (preset) {
                case "nano":
                    builder.nano();
                    break;
                case "micro":
                    builder.micro();
                    break;
                case "base":
                    builder.base();
                    break;
                case "large":
                    builder.large();
                    break;
                default:
                    break;
            }
            FusedTransformerEncoderBlock layer =
                    builder.build().getChildren().values().stream()
                            .filter(FusedTransformerEncoderBlock.class::isInstance)
                            .map(FusedTransformerEncoderBlock.class::cast)
                            .findFirst()
                            .orElseThrow();
            assertEquals(
                    heads.getInt(layer.getSelfAttentionBlock().getStockBlock()),
                    layer.getSelfAttentionBlock().getHeadCount(),
                    preset);
        }
    }

    @Test
    void attentionFromStockWithoutMaskAndWithSeparateInputs() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            ScaledDotProductAttentionBlock stock =
                    ScaledDotProductAttentionBlock.builder()
                            .setEmbeddingSize(E)
                            .setHeadCount(HEADS)
                            .build();
            Shape shape = new Shape(3, 10, E);
            BertFixtures.initialize(stock, manager, 141, shape);
            FlashSelfAttentionBlock fused = FlashSelfAttentionBlock.from(stock, HEADS);
            assertEquals(HEADS, fused.getHeadCount());
            NDArray x = randomInput(manager, shape, 142);
            assertClose(
                    BertFixtures.forward(stock, manager, new NDList(x)).head(),
                    BertFixtures.forward(fused, manager, new NDList(x)).head(),
                    null,
                    ATTENTION_TOLERANCE,
                    "attention output without mask");
            // Separate key/query/value inputs: the stock computation, bit-identical.
            NDList separate = new NDList(x, randomInput(manager, shape, 143), x);
            assertTrue(
                    BertFixtures.forward(stock, manager, separate)
                            .head()
                            .contentEquals(BertFixtures.forward(fused, manager, separate).head()));
        }
    }

    @ParameterizedTest(name = "paddingFree={0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
    void encoderFloat16MatchesStockFloat32(boolean paddingFree) {
        int[] lens = {11, 1, 4};
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            TransformerEncoderBlock stock =
                    new TransformerEncoderBlock(E, HEADS, HIDDEN, 0.1f, Activation::gelu);
            Shape shape = new Shape(3, 11, E);
            BertFixtures.initialize(stock, manager, 151, shape);
            FusedTransformerEncoderBlock fused =
                    FusedTransformerEncoderBlock.from(stock, HEADS).setPaddingFree(paddingFree);
            NDArray x = randomInput(manager, shape, 152);
            NDArray mask = mask(manager, lens, 11, true);
            NDArray expected = BertFixtures.forward(stock, manager, new NDList(x, mask)).head();
            NDArray actual =
                    BertFixtures.forward(
                                    fused,
                                    manager,
                                    new NDList(x.toType(DataType.FLOAT16, false), mask))
                            .head();
            assertEquals(DataType.FLOAT16, actual.getDataType());
            assertClose(expected, actual, lens, FLOAT16_TOLERANCE, "float16 layer output");
        }
    }

    static NDArray randomInput(NDManager manager, Shape shape, long seed) {
        Random random = new Random(seed);
        float[] values = new float[(int) shape.size()];
        for (int i = 0; i < values.length; ++i) {
            values[i] = (float) random.nextGaussian();
        }
        return manager.create(values, shape);
    }

    /**
     * A right-padding mask: BertBlock's additive offsets {@code [B, 1, S, S]} (0 keep, -100000
     * masked), or 1/0 values {@code [B, S, S]}.
     */
    static NDArray mask(NDManager manager, int[] lens, int seqLen, boolean offsets) {
        float[] values = new float[lens.length * seqLen * seqLen];
        for (int i = 0; i < values.length; ++i) {
            int b = i / (seqLen * seqLen);
            int s = i % seqLen;
            boolean keep = s < lens[b];
            values[i] = offsets ? (keep ? 0f : -100000f) : (keep ? 1f : 0f);
        }
        Shape shape =
                offsets
                        ? new Shape(lens.length, 1, seqLen, seqLen)
                        : new Shape(lens.length, seqLen, seqLen);
        return manager.create(values, shape);
    }

    private static int max(int[] values) {
        int max = 0;
        for (int v : values) {
            max = Math.max(max, v);
        }
        return max;
    }
}
