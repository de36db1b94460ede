/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bert;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.MalformedModelException;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Random;

/** Shared setup of the BERT parity tests: stock blocks with non-trivial parameters, inputs. */
final class BertFixtures {

    private BertFixtures() {}

    /** A BertBlock configuration. */
    record Config(int vocab, int embedding, int heads, int hidden, int layers, int maxSeqLen) {

        BertBlock.Builder stockBuilder() {
            return BertBlock.builder()
                    .setTokenDictionarySize(vocab)
                    .optTypeDictionarySize(2)
                    .optEmbeddingSize(embedding)
                    .optAttentionHeadCount(heads)
                    .optHiddenSize(hidden)
                    .optTransformerBlockCount(layers)
                    .optMaxSequenceLength(maxSeqLen);
        }

        @Override
        public String toString() {
            return "E" + embedding + "/H" + heads + "/I" + hidden + "/L" + layers + "/S"
                    + maxSeqLen;
        }
    }

    static final Config TINY = new Config(97, 48, 4, 80, 2, 19);
    static final Config BASE_TWO_LAYERS = new Config(300, 768, 12, 3072, 2, 64);

    /**
     * Initialises a block with a fixed seed, then replaces every bias, norm scale and shift and
     * BatchNorm running statistic (DJL initialises them to 0 or 1) by random values, so that no
     * term of the computation is trivial. Running variances are in [0.5, 2].
     */
    static void initialize(Block block, NDManager manager, long seed, Shape... inputShapes) {
        Engine.getInstance().setRandomSeed((int) seed);
        block.initialize(manager, DataType.FLOAT32, inputShapes);
        Random random = new Random(seed);
        for (Pair<String, Parameter> pair : block.getParameters()) {
            Parameter parameter = pair.getValue();
            NDArray array = parameter.getArray();
            float[] values = new float[(int) array.size()];
            switch (parameter.getType()) {
                case BIAS:
                case BETA:
                case RUNNING_MEAN:
                    fill(values, random, -0.5f, 0.5f);
                    break;
                case GAMMA:
                    fill(values, random, 0.5f, 1.5f);
                    break;
                case RUNNING_VAR:
                    fill(values, random, 0.5f, 2f);
                    break;
                default:
                    continue;
            }
            try (NDArray replacement = manager.create(values, array.getShape())) {
                array.muli(0).addi(replacement);
            }
        }
    }

    private static void fill(float[] values, Random random, float low, float high) {
        for (int i = 0; i < values.length; ++i) {
            values[i] = low + (high - low) * random.nextFloat();
        }
    }

    /** The block's parameters as DJL saves them. */
    static byte[] save(Block block) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream os = new DataOutputStream(bytes)) {
            block.saveParameters(os);
        }
        return bytes.toByteArray();
    }

    /** Loads saved parameters into a block, as DJL does (positionally, names checked). */
    static void load(Block block, NDManager manager, byte[] saved)
            throws IOException, MalformedModelException {
        try (DataInputStream is = new DataInputStream(new ByteArrayInputStream(saved))) {
            block.loadParameters(manager, is);
            assertEquals(-1, is.read(), "the loaded block must consume every saved byte");
        }
    }

    /** Token ids, type ids and a right-padding mask for the given lengths, int32 [B, S]. */
    static NDList inputs(NDManager manager, Config config, int seqLen, int[] lens, long seed) {
        Random random = new Random(seed);
        int batch = lens.length;
        int[] tokens = new int[batch * seqLen];
        int[] types = new int[batch * seqLen];
        int[] mask = new int[batch * seqLen];
        for (int b = 0; b < batch; ++b) {
            for (int s = 0; s < seqLen; ++s) {
                int i = b * seqLen + s;
                // Padding positions hold token 0 (as a tokenizer pads); valid ones any token.
                tokens[i] = s < lens[b] ? random.nextInt(config.vocab()) : 0;
                types[i] = s < lens[b] && s >= lens[b] / 2 ? 1 : 0;
                mask[i] = s < lens[b] ? 1 : 0;
            }
        }
        Shape shape = new Shape(batch, seqLen);
        return new NDList(
                manager.create(tokens, shape),
                manager.create(types, shape),
                manager.create(mask, shape));
    }

    static NDList forward(Block block, NDManager manager, NDList inputs) {
        return block.forward(new ParameterStore(manager, false), inputs, false);
    }

    /**
     * Asserts {@code |actual - expected| <= tolerance * max(1, |expected|)} elementwise over the
     * rows {@code [b, s]} with {@code s < lens[b]} (or every row when {@code lens} is null).
     */
    static void assertClose(
            NDArray expected, NDArray actual, int[] lens, double tolerance, String what) {
        assertArrayEquals(
                expected.getShape().getShape(), actual.getShape().getShape(), what + ": shape");
        float[] e = expected.toType(DataType.FLOAT32, false).toFloatArray();
        float[] a = actual.toType(DataType.FLOAT32, false).toFloatArray();
        Shape shape = expected.getShape();
        long seqLen = lens == null ? 1 : shape.get(1);
        long width = lens == null ? 1 : shape.size() / (shape.get(0) * seqLen);
        double worst = 0;
        int worstAt = -1;
        for (int i = 0; i < e.length; ++i) {
            if (lens != null) {
                long b = i / (seqLen * width);
                long s = (i / width) % seqLen;
                if (s >= lens[(int) b]) {
                    continue;
                }
            }
            assertTrue(Float.isFinite(a[i]), what + ": non-finite value at " + i);
            double err = Math.abs(a[i] - e[i]) / Math.max(1.0, Math.abs(e[i]));
            if (err > worst) {
                worst = err;
                worstAt = i;
            }
        }
        System.out.printf("%s: worst error %.3g (tolerance %.3g)%n", what, worst, tolerance);
        assertTrue(
                worst <= tolerance,
                what + ": error " + worst + " > " + tolerance + " at flat index " + worstAt);
    }

    /** Asserts that every padding position [b, s >= lens[b]] of [B, S, E] is exactly 0. */
    static void assertPaddingZero(NDArray actual, int[] lens) {
        Shape shape = actual.getShape();
        long seqLen = shape.get(1);
        long width = shape.get(2);
        float[] a = actual.toType(DataType.FLOAT32, false).toFloatArray();
        for (int i = 0; i < a.length; ++i) {
            long b = i / (seqLen * width);
            long s = (i / width) % seqLen;
            if (s >= lens[(int) b]) {
                assertEquals(0f, a[i], "padding output at flat index " + i);
            }
        }
    }
}
