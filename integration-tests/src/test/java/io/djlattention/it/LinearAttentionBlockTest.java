/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import static io.djlattention.it.FlashAttentionParityTest.assertWithin;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.NormalInitializer;
import ai.djl.util.Pair;
import io.djlattention.nn.LinearAttentionBlock;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link LinearAttentionBlock} as a drop-in for DJL's {@link ScaledDotProductAttentionBlock}:
 * parameters saved from the stock block load into it, name for name and shape for shape, and its
 * output equals linear attention computed with stock DJL ops in float64 from the stock block's
 * own projection weights ({@link StockLinearAttention} between the four projections).
 *
 * <p>Tolerance 1e-5 of max(1, |reference|): the block's four projections are float32 GEMMs over
 * E = 48 or 64 terms and the attention runs in float32 (see {@link LinearAttentionParityTest}),
 * each costing a few 1e-7 relative; the weights (σ = 0.2) keep every intermediate within a few
 * units, so the errors stay there.
 */
class LinearAttentionBlockTest {

    private static final double TOLERANCE = 1e-5;

    static Stream<Arguments> configurations() {
        List<Arguments> cases = new ArrayList<>();
        for (int[] shape : new int[][] {{2, 37, 64, 4}, {3, 1, 48, 3}, {1, 129, 64, 1}}) {
            for (boolean causal : new boolean[] {false, true}) {
                cases.add(Arguments.of(shape[0], shape[1], shape[2], shape[3], causal));
            }
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "B={0} L={1} E={2} N={3} causal={4}")
    @MethodSource("configurations")
    void loadsStockParametersAndComputesLinearAttention(
            int batch, int length, int embedding, int heads, boolean causal)
            throws IOException, MalformedModelException {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            ScaledDotProductAttentionBlock stock = stockBlock(manager, embedding, heads, length);
            byte[] saved = save(stock);

            LinearAttentionBlock block =
                    LinearAttentionBlock.builder()
                            .setEmbeddingSize(embedding)
                            .setHeadCount(heads)
                            .optAttentionProbsDropoutProb(0.2f)
                            .optCausal(causal)
                            .build();
            block.loadParameters(manager, new DataInputStream(new ByteArrayInputStream(saved)));

            assertEquals(describe(stock), describe(block));
            // What it saves back is byte for byte what the stock block saved.
            assertArrayEquals(saved, save(block));

            NDArray x = manager.randomNormal(new Shape(batch, length, embedding));
            NDArray out = forward(manager, block, new NDList(x));
            assertEquals(new Shape(batch, length, embedding), out.getShape());
            assertWithin(reference(stock, x, x, x, heads, causal), out, TOLERANCE, "out");
        }
    }

    @Test
    void separateKeysQueriesAndValuesOfDifferentLengths()
            throws IOException, MalformedModelException {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            ScaledDotProductAttentionBlock stock = stockBlock(manager, 32, 4, 9);
            LinearAttentionBlock block =
                    LinearAttentionBlock.builder().setEmbeddingSize(32).setHeadCount(4).build();
            block.loadParameters(
                    manager, new DataInputStream(new ByteArrayInputStream(save(stock))));
            NDArray keys = manager.randomNormal(new Shape(2, 9, 32));
            NDArray queries = manager.randomNormal(new Shape(2, 5, 32));
            NDArray values = manager.randomNormal(new Shape(2, 9, 32));
            NDArray out = forward(manager, block, new NDList(keys, queries, values));
            assertEquals(new Shape(2, 5, 32), out.getShape());
            assertWithin(
                    reference(stock, keys, queries, values, 4, false), out, TOLERANCE, "out");
            assertArrayEquals(
                    new Shape[] {new Shape(2, 5, 32)},
                    block.getOutputShapes(
                            new Shape[] {keys.getShape(), queries.getShape(), values.getShape()}));
        }
    }

    @Test
    void initializesLikeTheStockBlock() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            LinearAttentionBlock block =
                    LinearAttentionBlock.builder().setEmbeddingSize(24).setHeadCount(3).build();
            block.initialize(manager, DataType.FLOAT32, new Shape(2, 5, 24));
            ScaledDotProductAttentionBlock stock = stockBlock(manager, 24, 3, 5);
            assertEquals(describe(stock), describe(block));
            NDArray x = manager.randomNormal(new Shape(2, 5, 24));
            assertEquals(new Shape(2, 5, 24), forward(manager, block, new NDList(x)).getShape());
        }
    }

    @Test
    void masksAreRejected() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            LinearAttentionBlock block =
                    LinearAttentionBlock.builder().setEmbeddingSize(8).setHeadCount(2).build();
            block.initialize(manager, DataType.FLOAT32, new Shape(1, 3, 8));
            NDArray x = manager.randomNormal(new Shape(1, 3, 8));
            NDArray mask = manager.ones(new Shape(1, 3, 3));
            IllegalArgumentException e =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> forward(manager, block, new NDList(x, mask)));
            assertTrue(e.getMessage().contains("cannot apply an attention mask"), e.getMessage());
            assertThrows(
                    IllegalArgumentException.class,
                    () -> block.getOutputShapes(new Shape[] {x.getShape(), mask.getShape()}));
        }
    }

    @Test
    void causalFormNeedsEqualLengthsAndSaysSo() {
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get())) {
            LinearAttentionBlock block =
                    LinearAttentionBlock.builder()
                            .setEmbeddingSize(8)
                            .setHeadCount(2)
                            .optCausal(true)
                            .build();
            block.initialize(manager, DataType.FLOAT32, new Shape(1, 3, 8));
            NDArray keys = manager.randomNormal(new Shape(1, 4, 8));
            NDArray queries = manager.randomNormal(new Shape(1, 3, 8));
            IllegalArgumentException e =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> forward(manager, block, new NDList(keys, queries, keys)));
            assertTrue(
                    e.getMessage().contains("k: expected size 3 for L (the length of q), got 4"),
                    e.getMessage());
        }
    }

    @Test
    void builderRejectsMissingOrInconsistentOptions() {
        IllegalStateException noSize =
                assertThrows(
                        IllegalStateException.class,
                        () -> LinearAttentionBlock.builder().setHeadCount(2).build());
        assertEquals(
                "embeddingSize: expected a value >= 1 (setEmbeddingSize), got 0",
                noSize.getMessage());
        IllegalStateException noHeads =
                assertThrows(
                        IllegalStateException.class,
                        () -> LinearAttentionBlock.builder().setEmbeddingSize(8).build());
        assertEquals(
                "headCount: expected a value >= 1 (setHeadCount), got 0", noHeads.getMessage());
        IllegalStateException notDivisor =
                assertThrows(
                        IllegalStateException.class,
                        () ->
                                LinearAttentionBlock.builder()
                                        .setEmbeddingSize(10)
                                        .setHeadCount(3)
                                        .build());
        assertEquals(
                "headCount: expected a divisor of the embedding size 10, got 3",
                notDivisor.getMessage());
        assertThrows(
                IllegalArgumentException.class,
                () ->
                        LinearAttentionBlock.builder()
                                .setEmbeddingSize(8)
                                .setHeadCount(2)
                                .optEps(-1e-3f)
                                .build());
        LinearAttentionBlock block =
                LinearAttentionBlock.builder()
                        .setEmbeddingSize(8)
                        .setHeadCount(2)
                        .optCausal(true)
                        .optEps(0.5f)
                        .build();
        assertTrue(block.isCausal());
        assertEquals(0.5f, block.getEps());
    }

    private static ScaledDotProductAttentionBlock stockBlock(
            NDManager manager, int embedding, int heads, int length) {
        ScaledDotProductAttentionBlock stock =
                ScaledDotProductAttentionBlock.builder()
                        .setEmbeddingSize(embedding)
                        .setHeadCount(heads)
                        .optAttentionProbsDropoutProb(0.2f)
                        .build();
        // Random biases as well as weights, so that a bias loaded into the wrong place shows.
        stock.setInitializer(new NormalInitializer(0.2f), parameter -> true);
        stock.initialize(manager, DataType.FLOAT32, new Shape(1, length, embedding));
        return stock;
    }

    private static NDArray forward(NDManager manager, Block block, NDList inputs) {
        return block.forward(new ParameterStore(manager, false), inputs, false).head();
    }

    private static byte[] save(Block block) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            block.saveParameters(out);
        }
        return bytes.toByteArray();
    }

    /** Every parameter's full name (with its child's name) and shape, in order. */
    private static List<String> describe(Block block) {
        List<String> names = new ArrayList<>();
        for (Pair<String, Parameter> parameter : block.getParameters()) {
            names.add(parameter.getKey() + " " + parameter.getValue().getArray().getShape());
        }
        for (Pair<String, Block> child : block.getChildren()) {
            names.add("child " + child.getKey() + " " + child.getValue().getClass().getName());
        }
        return names;
    }

    /**
     * The stock block's projections, then linear attention over its heads, then its result
     * projection, in float64 with stock DJL ops.
     */
    private static NDArray reference(
            ScaledDotProductAttentionBlock stock,
            NDArray keys,
            NDArray queries,
            NDArray values,
            int heads,
            boolean causal) {
        NDArray k = heads(project(stock.getKeyProjection(), keys), heads);
        NDArray q = heads(project(stock.getQueryProjection(), queries), heads);
        NDArray v = heads(project(stock.getValueProjection(), values), heads);
        NDArray attention = StockLinearAttention.attention(q, k, v, causal, 1e-6);
        Shape shape = queries.getShape();
        NDArray merged = attention.transpose(0, 2, 1, 3).reshape(shape);
        return project(stock.getResultProjection(), merged);
    }

    /** {@code x·Wᵀ + b} in float64. */
    private static NDArray project(Linear linear, NDArray x) {
        NDArray weight =
                linear.getParameters().get("weight").getArray().toType(DataType.FLOAT64, false);
        NDArray bias =
                linear.getParameters().get("bias").getArray().toType(DataType.FLOAT64, false);
        return x.toType(DataType.FLOAT64, false).matMul(weight.transpose()).add(bias);
    }

    private static NDArray heads(NDArray x, int heads) {
        Shape shape = x.getShape();
        return x.reshape(shape.get(0), shape.get(1), heads, shape.get(2) / heads)
                .transpose(0, 2, 1, 3);
    }
}
