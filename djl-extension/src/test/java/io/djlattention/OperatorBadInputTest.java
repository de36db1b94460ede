/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.ByteBuffer;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Every {@link Operator} the Java API calls, rejecting a bad argument through its {@link
 * AttentionOps} wrapper: an {@link IllegalArgumentException} whose message is the operator's own
 * ({@code "<operator>: <argument>: expected ..."}, validated once in C++ for Java and Python
 * alike), and the same call with that one argument corrected succeeds, so a row cannot pass by the
 * operator rejecting everything. An operator added to {@link Operator} without a row here fails
 * {@link #everyOperatorHasARow()}. The full per-argument tables are {@code
 * native-ops/tests/test_bad_inputs.py}; this test is the Java caller's end of them.
 */
class OperatorBadInputTest {

    private NDManager manager;

    /**
     * One call through the Java API: {@code good} selects the corrected argument, otherwise the
     * bad one.
     */
    @FunctionalInterface
    interface Call {
        Object run(NDManager m, boolean good);
    }

    /** A bad call: the operator, the argument its message names, the rule it states. */
    record Row(Operator op, String arg, String rule, Call call) {
        @Override
        public String toString() {
            return op.schemaName() + " " + arg + ": " + rule;
        }
    }

    private static NDArray randn(NDManager m, long... shape) {
        return m.randomNormal(new Shape(shape));
    }

    /** UINT8 e4m3fn bytes of values in [-1.75, 1.75] (exponent fields 0 .. 7). */
    private static NDArray e4m3(NDManager m, long... shape) {
        byte[] bytes = new byte[(int) new Shape(shape).size()];
        Random random = new Random(bytes.length);
        for (int i = 0; i < bytes.length; ++i) {
            bytes[i] = (byte) (random.nextInt(64) | (random.nextBoolean() ? 0x80 : 0));
        }
        return m.create(ByteBuffer.wrap(bytes), new Shape(shape), DataType.UINT8);
    }

    private static NDArray ints(NDManager m, int... values) {
        return m.create(values);
    }

    private static NDList varlen(
            NDManager m, NDArray q, NDArray cuQ, NDArray cuK, long maxQ, long maxK) {
        // 3 sequences of 3, 0 and 4 queries and 5, 2 and 4 keys; 4 query heads, 2 KV heads.
        return AttentionOps.flashAttentionVarlen(
                q, randn(m, 11, 2, 32), randn(m, 11, 2, 32), cuQ, cuK, maxQ, maxK,
                AttentionOptions.builder().optCausal(true).build());
    }

    /** Paged calls: 2 sequences of 20 and 9 tokens in a cache of 4 blocks of 16, 2 KV heads. */
    private static NDArray paged(NDManager m, NDArray tables) {
        return AttentionOps.pagedAttention(
                randn(m, 2, 4, 64),
                randn(m, 4, 16, 2, 64),
                randn(m, 4, 16, 2, 64),
                tables,
                ints(m, 20, 9),
                20,
                PagedAttentionOptions.builder().optScale(0.125f).build());
    }

    private static NDArray prefill(NDManager m, int maxSeqlenQ) {
        return AttentionOps.pagedPrefillAttention(
                randn(m, 5, 4, 64),
                randn(m, 4, 16, 2, 64),
                randn(m, 4, 16, 2, 64),
                m.create(new int[] {2, 0, 3, 1}, new Shape(2, 2)),
                ints(m, 0, 3, 5),
                ints(m, 20, 9),
                maxSeqlenQ,
                PagedAttentionOptions.builder().optScale(0.125f).build());
    }

    /**
     * A decoder layer (C 16, 2 query heads, 1 KV head of 8, MLP 24) on one sequence of 3 new
     * tokens, its down projection {@code inter} columns wide; returns the stream's shape.
     */
    private static Shape decoderLayer(int inter) {
        // On the CPU: the binding's checks are the same for every device.
        try (NDManager m = NDManager.newBaseManager(Device.cpu());
                PagedKvCache cache =
                PagedKvCache.builder()
                        .setManager(m)
                        .setNumLayers(1)
                        .setNumKvHeads(1)
                        .setHeadDim(8)
                        .optBlockSize(8)
                        .optNumBlocks(2)
                        .build()) {
            cache.allocate(0, 3);
            try (PagedBatch batch = cache.prepare(new long[] {0}, new int[] {3}, m)) {
                NDArray hidden = randn(m, 3, 16);
                DecoderLayerOps.decoderLayer(
                        hidden,
                        m.arange(0, 3, 1, DataType.INT64),
                        cache,
                        0,
                        batch,
                        DecoderLayerWeights.builder()
                                .setAttentionNorm(m.ones(new Shape(16)), null)
                                .setQkv(randn(m, 32, 16), null)
                                .setOut(randn(m, 16, 16), null)
                                .setMlpNorm(m.ones(new Shape(16)), null)
                                .setUp(randn(m, 48, 16), null)
                                .setDown(randn(m, 16, inter), null)
                                .build(),
                        DecoderLayerOptions.builder().setNumHeads(2).setScale(0.35f).build());
                return hidden.getShape();
            }
        }
    }

    static List<Row> rows() {
        return List.of(
                new Row(Operator.FLASH_ATTENTION, "k", "expected size 32 for D (the head dim of q)",
                        (m, good) -> AttentionOps.flashAttention(
                                randn(m, 2, 5, 4, 32), randn(m, 2, 7, 2, good ? 32 : 16),
                                randn(m, 2, 7, 2, 32))),
                new Row(Operator.FLASH_ATTENTION_VARLEN, "q",
                        "expected 3 dims [total_q, Hq, D], got 4 dims",
                        (m, good) -> varlen(m, good ? randn(m, 7, 4, 32) : randn(m, 1, 7, 4, 32),
                                ints(m, 0, 3, 3, 7), ints(m, 0, 5, 7, 11), 4, 5)),
                new Row(Operator.FLASH_ATTENTION_VARLEN, "cu_seqlens_q",
                        "expected 0 at index 0, got 1",
                        (m, good) -> varlen(m, randn(m, 7, 4, 32), ints(m, good ? 0 : 1, 3, 3, 7),
                                ints(m, 0, 5, 7, 11), 4, 5)),
                new Row(Operator.FLASH_ATTENTION_VARLEN, "cu_seqlens_q",
                        "expected dtype int32, got int64",
                        (m, good) -> varlen(m, randn(m, 7, 4, 32),
                                good ? ints(m, 0, 3, 3, 7) : m.create(new long[] {0, 3, 3, 7}),
                                ints(m, 0, 5, 7, 11), 4, 5)),
                new Row(Operator.FLASH_ATTENTION_VARLEN, "cu_seqlens_k",
                        "expected size 4 for B + 1 (the size of cu_seqlens_q), got 3",
                        (m, good) -> varlen(m, randn(m, 7, 4, 32), ints(m, 0, 3, 3, 7),
                                good ? ints(m, 0, 5, 7, 11) : ints(m, 0, 5, 11), 4, 5)),
                new Row(Operator.FLASH_ATTENTION_VARLEN, "max_seqlen_q",
                        "expected a value in [0, total_q = 7], got 8",
                        (m, good) -> varlen(m, randn(m, 7, 4, 32), ints(m, 0, 3, 3, 7),
                                ints(m, 0, 5, 7, 11), good ? 4 : 8, 5)),
                new Row(Operator.FLASH_ATTENTION_VARLEN, "cu_seqlens_k",
                        "expected sequence lengths <= max_seqlen_k = 3, got 5 for sequence 0",
                        (m, good) -> varlen(m, randn(m, 7, 4, 32), ints(m, 0, 3, 3, 7),
                                ints(m, 0, 5, 7, 11), 4, good ? 5 : 3)),
                new Row(Operator.FLASH_ATTENTION_FP8, "k_descale",
                        "expected size 2 for Hkv (the heads of k), got 3",
                        // D = 128: the CUDA kernel's head dim, so the row runs on a Hopper GPU too.
                        (m, good) -> AttentionOps.flashAttentionFp8(
                                e4m3(m, 2, 5, 4, 128), e4m3(m, 2, 7, 2, 128),
                                e4m3(m, 2, 7, 2, 128), null,
                                m.ones(new Shape(2, good ? 2 : 3)), null,
                                AttentionOptions.defaults())),
                new Row(Operator.BERT_ATTENTION, "qkv",
                        "expected a last dim 3 * H * D divisible by 3 * num_heads (num_heads = 5),"
                                + " got 72",
                        (m, good) -> AttentionOps.bertAttention(
                                randn(m, 2, 5, 72), randn(m, 72), ints(m, 5, 2), good ? 2 : 5)),
                new Row(Operator.ADD_BIAS_RESIDUAL_LAYERNORM, "gamma",
                        "expected size 24 for C (the last dim of x), got 23",
                        (m, good) -> AttentionOps.addBiasResidualLayerNorm(
                                randn(m, 2, 3, 24), randn(m, 24), randn(m, 2, 3, 24),
                                randn(m, good ? 24 : 23), randn(m, 24), 1e-5)),
                new Row(Operator.ADD_BIAS_GELU, "bias",
                        "expected size 24 for C (the last dim of x), got 12",
                        (m, good) -> AttentionOps.addBiasGelu(
                                randn(m, 2, 3, 24), randn(m, good ? 24 : 12), false)),
                new Row(Operator.ADD_BIAS_RESIDUAL_AFFINE, "shift",
                        "expected size 24 for C (the last dim of x), got 8",
                        (m, good) -> AttentionOps.addBiasResidualAffine(
                                randn(m, 2, 3, 24), null, randn(m, 2, 3, 24), randn(m, 24),
                                randn(m, good ? 24 : 8))),
                new Row(Operator.REMOVE_PADDING, "lens",
                        "expected values in [0, S = 5], got 6 at index 2",
                        (m, good) -> AttentionOps.removePadding(
                                randn(m, 3, 5, 8), ints(m, 5, 0, good ? 2 : 6))),
                new Row(Operator.RESTORE_PADDING, "cu_seqlens",
                        "expected lengths cu_seqlens[b + 1] - cu_seqlens[b] in [0, seqlen = 4],"
                                + " got 5 at b = 0",
                        (m, good) -> AttentionOps.restorePadding(
                                randn(m, 7, 8), ints(m, 0, 5, 5, 7), good ? 5 : 4)),
                new Row(Operator.CAUSAL_DOT_PRODUCT, "v",
                        "expected size 6 for L (the length of q), got 5",
                        (m, good) -> AttentionOps.causalLinearAttention(
                                randn(m, 2, 2, 6, 8), randn(m, 2, 2, 6, 8),
                                randn(m, 2, 2, good ? 6 : 5, 12))),
                new Row(Operator.RESHAPE_AND_CACHE, "slot_mapping",
                        "expected slots < num_blocks * block_size = 64 (or negative to skip),"
                                + " got 64 at index 2",
                        (m, good) -> {
                            NDArray key = randn(m, 3, 2, 64);
                            AttentionOps.reshapeAndCache(
                                    key, key, randn(m, 4, 16, 2, 64), randn(m, 4, 16, 2, 64),
                                    m.create(new long[] {0, 5, good ? 63 : 64}));
                            return key;
                        }),
                new Row(Operator.PAGED_ATTENTION, "block_tables",
                        "expected block ids in [0, num_blocks = 4) for the 1 blocks sequence 1"
                                + " uses, got 4 at [1, 0]",
                        (m, good) -> paged(m, m.create(
                                new int[] {2, 0, good ? 3 : 4, 1}, new Shape(2, 2)))),
                new Row(Operator.PAGED_PREFILL_ATTENTION, "max_seqlen_q",
                        "expected >= every chunk length, got 2 < 3 for sequence 0",
                        (m, good) -> prefill(m, good ? 3 : 2)),
                new Row(Operator.DECODER_LAYER, "down_weight",
                        "expected size 24 for in (the intermediate size I of up_weight), got 23",
                        (m, good) -> decoderLayer(good ? 24 : 23)),
                new Row(Operator.EMBED_TOKENS, "token_ids",
                        "expected values in [0, V, the rows of embedding = 5), got 5 at index 0",
                        (m, good) -> {
                            NDArray hidden = m.zeros(new Shape(3, 8));
                            StepOps.embedTokens(
                                    hidden, m.create(new long[] {good ? 4 : 5, 2, 3}),
                                    randn(m, 5, 8), null, null, 1f, true);
                            return hidden;
                        }),
                new Row(Operator.DECODER_HEAD, "logits",
                        "expected size 3 for R (the rows of hidden), got 2",
                        (m, good) -> {
                            NDArray logits = m.zeros(new Shape(good ? 3 : 2, 5));
                            StepOps.decoderHead(
                                    logits, randn(m, 3, 8), null, m.ones(new Shape(8)), null,
                                    randn(m, 5, 8), DecoderLayerOptions.Norm.RMS, 1e-5f, 0f,
                                    true);
                            return logits;
                        }),
                new Row(Operator.COPY_FROM_HOST, "src",
                        "expected 4 elements (those of dst), got 5",
                        (m, good) -> {
                            NDArray dst = m.zeros(new Shape(4));
                            try (NDManager host = NDManager.newBaseManager(Device.cpu())) {
                                StepOps.copyFromHost(dst, host.zeros(new Shape(good ? 4 : 5)));
                            }
                            return dst;
                        }),
                new Row(Operator.SAMPLE_TOKENS, "top_p",
                        "expected values in (0, 1] (1: every token), got 0 at index 1",
                        (m, good) -> SamplingOps.sampleTokens(
                                randn(m, 2, 50), m.create(new float[] {0f, 0.8f}),
                                ints(m, 0, 5), m.create(new float[] {1f, good ? 0.9f : 0f}),
                                m.create(new long[] {1, 2}), m.create(new long[] {0, 0}))),
                new Row(Operator.ENCODER_LAYER, "down_weight",
                        "expected size 24 for in (the intermediate size I, up_weight's out), got 23",
                        (m, good) -> encoderLayer(good ? 24 : 23)),
                new Row(Operator.GEMM_PACK_WEIGHT, "weight",
                        "expected dtype float32, got float16",
                        (m, good) -> {
                            try (NDManager cpu = NDManager.newBaseManager(Device.cpu())) {
                                NDArray w = randn(cpu, 8, 4);
                                return EncoderLayerOps.packWeight(
                                                good ? w : w.toType(DataType.FLOAT16, false),
                                                GemmMode.INT8)
                                        .getShape();
                            }
                        }));
    }

    /**
     * An encoder layer (C 16, 2 heads, FFN 24) on sequences of 2 and 3 tokens, its down
     * projection {@code inter} columns wide; on the CPU, the only device with a kernel.
     */
    private static Shape encoderLayer(int inter) {
        try (NDManager m = NDManager.newBaseManager(Device.cpu())) {
            NDArray hidden = randn(m, 5, 16);
            NDArray c = m.zeros(new Shape(16));
            EncoderLayerOps.encoderLayer(
                    hidden,
                    ints(m, 0, 2, 5),
                    3,
                    new EncoderLayerWeights(
                            randn(m, 48, 16), m.zeros(new Shape(48)), randn(m, 16, 16), c,
                            m.ones(new Shape(16)), c, randn(m, 24, 16), m.zeros(new Shape(24)),
                            randn(m, 16, inter), c, m.ones(new Shape(16)), c),
                    2,
                    1e-12f,
                    0.35f,
                    false);
            return hidden.getShape();
        }
    }

    static Stream<Arguments> rowArguments() {
        return rows().stream().map(Arguments::of);
    }

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager(testDevice());
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    @Test
    void everyOperatorHasARow() {
        Set<Operator> covered =
                rows().stream().map(Row::op).collect(Collectors.toCollection(
                        () -> EnumSet.noneOf(Operator.class)));
        // The CUDA graph operators take GPU tensors only: their refusals (of CPU tensors, bad
        // arenas, dead graph ids) are tested in native-ops/tests/test_step_ops.py, and their use
        // from Java by DeviceDecodeStepTest on the GPU.
        Set<Operator> expected = EnumSet.allOf(Operator.class);
        expected.removeAll(
                EnumSet.of(
                        Operator.CUDA_GRAPH_MEASURE_BEGIN,
                        Operator.CUDA_GRAPH_MEASURE_END,
                        Operator.CUDA_GRAPH_CAPTURE_BEGIN,
                        Operator.CUDA_GRAPH_CAPTURE_END,
                        Operator.CUDA_GRAPH_REPLAY,
                        Operator.CUDA_GRAPH_RELEASE));
        assertEquals(expected, covered, "operators without a bad-input row");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rowArguments")
    void rejectedNamingTheArgument(Row row) {
        try (NDManager m = manager.newSubManager()) {
            // The call with the argument corrected runs.
            row.call().run(m, true);
            IllegalArgumentException e =
                    assertThrows(IllegalArgumentException.class, () -> row.call().run(m, false));
            String message = e.getMessage();
            String prefix = row.op().schemaName() + ": " + row.arg() + ": expected";
            assertTrue(message.contains(prefix), () -> "'" + message + "' lacks '" + prefix + "'");
            assertTrue(message.contains(row.rule()),
                    () -> "'" + message + "' lacks '" + row.rule() + "'");
        }
    }

    /**
     * The device named by {@code djl.attn.test.device} (how the Java GPU suite picks it for every
     * module's tests; integration-tests' {@code TestDevice} reads the same property), else DJL's
     * default device.
     */
    private static Device testDevice() {
        String name = System.getProperty("djl.attn.test.device");
        Engine engine = Engine.getEngine("PyTorch");
        if (name == null || name.isBlank()) {
            return engine.defaultDevice();
        }
        Device device = Device.fromName(name.trim(), engine);
        return device.isGpu() && device.getDeviceId() < 0 ? Device.gpu() : device;
    }
}
