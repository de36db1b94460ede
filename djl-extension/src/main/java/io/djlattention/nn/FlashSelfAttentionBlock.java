/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.nn;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.List;

/**
 * A drop-in replacement for DJL's {@link ScaledDotProductAttentionBlock} whose self-attention runs
 * as one fused Q/K/V projection GEMM and the {@code bert_attention} kernel (bias, head split,
 * masked softmax attention and head merge in one pass, no score matrix, no transposes).
 *
 * <p>Same builder options, child names and order ({@code keyProjection}, {@code queryProjection},
 * {@code valueProjection}, {@code resultProjection}, {@code probabilityDropout}), block version and
 * parameter names and shapes as the stock block, so parameters saved from one load into the other.
 * The three projections stay separate parameters; their concatenation {@code [3E, E]} is derived
 * from them when the block is initialised or loaded and rebuilt whenever a parameter array is
 * replaced or after a training forward (call {@link #syncFusedParameters()} after changing
 * parameter arrays in place).
 *
 * <p>Inputs as the stock block: {@code [x]} or {@code [x, mask]} with {@code x [B, S, E]}; the mask
 * is either the additive offset {@code [B, 1, S, S]} that {@code BertBlock} builds (0 keep, -100000
 * masked) or {@code B * S * S} values of 1 (keep) and 0 (masked). Output {@code [B, S, E]}. The
 * fused path runs at inference for self-attention with no mask or with a right-padding mask (every
 * query row of batch row {@code b} sees keys {@code [0, L_b)}, {@code L_b >= 1}); it computes every
 * position, padding rows included, as the stock block does. Anything else — a training forward
 * (dropout on the probabilities), separate key/query/value inputs, a mask that is not right-padding
 * (for example causal, or a row with no valid key), dtypes other than float32/float16 — runs the
 * stock computation unchanged.
 *
 * <p>float16 inputs run the fused path in float16 (float32 accumulation) with float16 copies of the
 * projection weights; stock DJL itself cannot run float16 inputs through this block (its
 * projections are always float32).
 */
public final class FlashSelfAttentionBlock extends AbstractBlock {

    private static final byte VERSION = 1;

    private final ScaledDotProductAttentionBlock stock;
    private final int embeddingSize;
    private final int headCount;
    private final Linear keyProjection;
    private final Linear queryProjection;
    private final Linear valueProjection;
    private final Linear resultProjection;

    private final DerivedArray qkvWeight = new DerivedArray();
    private final DerivedArray qkvBias = new DerivedArray();
    private final DerivedArray resultWeight = new DerivedArray();
    private final DerivedArray resultBias = new DerivedArray();

    private FlashSelfAttentionBlock(ScaledDotProductAttentionBlock stock, int headCount) {
        super(VERSION);
        this.stock = stock;
        // The projections' output width is the embedding size (Linear's public shape inference;
        // DJL 0.36.0 has no getter for either option of the stock block).
        this.embeddingSize =
                Math.toIntExact(
                        stock.getQueryProjection().getOutputShapes(new Shape[] {new Shape(1, 1)})[
                                0].tail());
        if (headCount < 1 || embeddingSize % headCount != 0) {
            throw new IllegalArgumentException(
                    "headCount: expected a value >= 1 that divides the embedding size "
                            + embeddingSize
                            + ", got "
                            + headCount);
        }
        this.headCount = headCount;
        List<Block> children = stock.getChildren().values();
        keyProjection = addChildBlock("keyProjection", stock.getKeyProjection());
        queryProjection = addChildBlock("queryProjection", stock.getQueryProjection());
        valueProjection = addChildBlock("valueProjection", stock.getValueProjection());
        resultProjection = addChildBlock("resultProjection", stock.getResultProjection());
        addChildBlock("probabilityDropout", children.get(4));
    }

    /**
     * Wraps a stock block: the returned block shares its children and parameters (no copy), so it
     * gives the stock block's outputs with the fused kernels, and parameters saved from either
     * block are the same.
     *
     * @param stock the stock block, initialised or not
     * @param headCount the head count the stock block was built with (DJL 0.36.0 does not expose
     *     it); must divide the embedding size
     * @return a fused block over the same parameters
     * @throws IllegalArgumentException if {@code headCount} does not divide the embedding size
     */
    public static FlashSelfAttentionBlock from(ScaledDotProductAttentionBlock stock, int headCount) {
        return new FlashSelfAttentionBlock(stock, headCount);
    }

    /**
     * Creates a builder with the stock block's options.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns the stock block whose children and parameters this block shares (it runs the cases
     * the fused path does not take).
     *
     * @return the stock block
     */
    public ScaledDotProductAttentionBlock getStockBlock() {
        return stock;
    }

    /**
     * Pointwise linear projection of the keys.
     *
     * @return the key projection
     */
    public Linear getKeyProjection() {
        return keyProjection;
    }

    /**
     * Pointwise linear projection of the queries.
     *
     * @return the query projection
     */
    public Linear getQueryProjection() {
        return queryProjection;
    }

    /**
     * Pointwise linear projection of the values.
     *
     * @return the value projection
     */
    public Linear getValueProjection() {
        return valueProjection;
    }

    /**
     * Pointwise linear projection of the results.
     *
     * @return the result projection
     */
    public Linear getResultProjection() {
        return resultProjection;
    }

    /**
     * Returns the number of attention heads.
     *
     * @return the number of heads
     */
    public int getHeadCount() {
        return headCount;
    }

    /**
     * Rebuilds the fused Q/K/V weight (and the float16 copies) from the parameters now: needed only
     * after parameter arrays were modified in place outside a training forward.
     */
    public void syncFusedParameters() {
        qkvWeight.invalidate();
        qkvBias.invalidate();
        resultWeight.invalidate();
        resultBias.invalidate();
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return stock.getOutputShapes(inputShapes);
    }

    /** {@inheritDoc} */
    @Override
    protected void initializeChildBlocks(
            NDManager manager, DataType dataType, Shape... inputShapes) {
        // The stock block initialises the shared children (always in float32, as stock DJL).
        stock.initialize(manager, dataType, inputShapes);
        syncFusedParameters();
        buildFused(null, DataType.FLOAT32);
    }

    /** {@inheritDoc} */
    @Override
    public void loadParameters(NDManager manager, DataInputStream is)
            throws IOException, MalformedModelException {
        super.loadParameters(manager, is);
        syncFusedParameters();
        buildFused(null, DataType.FLOAT32);
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore ps, NDList inputs, boolean training, PairList<String, Object> params) {
        if (training) {
            syncFusedParameters();
            return stock.forward(ps, inputs, true, params);
        }
        NDArray x = inputs.head();
        Shape shape = x.getShape();
        if (inputs.size() > 2
                || shape.dimension() != 3
                || shape.get(2) != embeddingSize
                || !isFusedType(x.getDataType())) {
            return stock.forward(ps, inputs, false, params);
        }
        long batch = shape.get(0);
        long seqLen = shape.get(1);
        int[] lens = null;
        if (inputs.size() == 2) {
            lens = PaddingMasks.fromAttentionMask(inputs.get(1), batch, seqLen);
            if (lens == null) {
                return stock.forward(ps, inputs, false, params);
            }
        }
        try (NDManager scope = NDManager.subManagerOf(x)) {
            scope.tempAttachAll(inputs);
            NDArray kvLens = null;
            if (lens != null) {
                boolean full = true;
                for (int len : lens) {
                    full &= len == seqLen;
                }
                kvLens = full ? null : scope.create(lens);
            }
            NDList qkvParams = fusedQkv(ps, x.getDevice(), x.getDataType());
            NDArray qkv = Linear.linear(x, qkvParams.get(0), qkvParams.get(1)).head();
            NDArray merged =
                    AttentionOps.bertAttention(qkv, null, kvLens, headCount, softmaxScale());
            NDList out = resultProjection(ps, x.getDevice(), x.getDataType());
            return scope.ret(Linear.linear(merged, out.get(0), out.get(1)));
        }
    }

    /** The scale stock DJL applies: {@code 1f / (float) Math.sqrt(H)}, in float. */
    double softmaxScale() {
        return 1f / (float) Math.sqrt(embeddingSize / headCount);
    }

    static boolean isFusedType(DataType type) {
        return type == DataType.FLOAT32 || type == DataType.FLOAT16;
    }

    /** The fused projection {@code [W_q; W_k; W_v]} {@code [3E, E]} and its bias {@code [3E]}. */
    NDList fusedQkv(ParameterStore ps, Device device, DataType type) {
        NDArray[] weights = {
            value(ps, queryProjection, "weight", device),
            value(ps, keyProjection, "weight", device),
            value(ps, valueProjection, "weight", device)
        };
        NDArray[] biases = {
            value(ps, queryProjection, "bias", device),
            value(ps, keyProjection, "bias", device),
            value(ps, valueProjection, "bias", device)
        };
        return new NDList(
                qkvWeight.get(type, a -> concatAs(a, type), weights),
                qkvBias.get(type, a -> concatAs(a, type), biases));
    }

    /** The result projection's weight {@code [E, E]} and bias {@code [E]} in {@code type}. */
    NDList resultProjection(ParameterStore ps, Device device, DataType type) {
        return new NDList(
                resultWeight.get(
                        type,
                        a -> castTo(a[0], type),
                        value(ps, resultProjection, "weight", device)),
                resultBias.get(
                        type,
                        a -> castTo(a[0], type),
                        value(ps, resultProjection, "bias", device)));
    }

    /**
     * Self-attention of a ragged batch laid out as rows: the fused projection, then attention per
     * sequence with merged heads, without the result projection.
     *
     * @param rows the layer input {@code [N, E]}
     * @return the merged heads {@code [N, E]}, attached to the manager of {@code rows}
     */
    NDArray attendRows(ParameterStore ps, NDArray rows, RaggedBatch batch) {
        NDList qkvParams = fusedQkv(ps, rows.getDevice(), rows.getDataType());
        NDArray qkv = Linear.linear(rows, qkvParams.get(0), qkvParams.get(1)).head(); // [N, 3E]
        long e = embeddingSize;
        double scale = softmaxScale();
        if (useGemmAttention()) {
            NDArray merged = attendWithGemms(qkv, batch);
            qkv.close();
            return merged;
        }
        if (batch.padded || batch.isDense()) {
            NDArray lens = batch.allFull ? null : batch.lensArray();
            NDArray out =
                    AttentionOps.bertAttention(
                            qkv.reshape(batch.batch, batch.seqLen, 3 * e),
                            null,
                            lens,
                            headCount,
                            scale);
            return out.reshape(batch.rows(), e);
        }
        int real = batch.realRows;
        NDArray realQkv = batch.extraSources.length == 0 ? qkv : qkv.get(new NDIndex("0:" + real));
        long d = e / headCount;
        NDArray split = realQkv.reshape(real, 3, headCount, d);
        NDArray cuSeqlens = batch.cuSeqlensArray();
        NDList out =
                AttentionOps.flashAttentionVarlen(
                        split.get(new NDIndex(":, 0")),
                        split.get(new NDIndex(":, 1")),
                        split.get(new NDIndex(":, 2")),
                        cuSeqlens,
                        cuSeqlens,
                        batch.maxLen(),
                        batch.maxLen(),
                        AttentionOptions.builder().optScale((float) scale).build());
        out.get(1).close();
        NDArray merged = out.get(0).reshape(real, e);
        if (batch.extraSources.length > 0) {
            NDArray copies = merged.get(batch.extraSourcesArray());
            merged = NDArrays.concat(new NDList(merged, copies), 0);
        }
        return merged;
    }

    /**
     * Which attention runs the fused layers on this device. {@code kernel}: {@code bert_attention}
     * / {@code flash_attention_varlen}. {@code gemm}: per sequence (or per group of equal lengths)
     * two batched GEMMs of libtorch around a softmax, on the Q/K/V views of the fused projection;
     * no mask is needed since each sequence sees only its own keys. The default ({@code auto}) is
     * {@code kernel} on every device: since the CPU flash kernel was rewritten with
     * register-blocked micro-kernels it beats libtorch's matmul-softmax-matmul by 2.6-7.6x
     * (docs/design/flash-cpu.md). The system property {@code djl.attn.bert.attention}
     * overrides it.
     */
    static boolean useGemmAttention() {
        String choice = System.getProperty("djl.attn.bert.attention", "auto");
        switch (choice) {
            case "gemm":
                return true;
            case "kernel":
                return false;
            case "auto":
                return false;
            default:
                throw new IllegalArgumentException(
                        "djl.attn.bert.attention: expected auto, kernel or gemm, got " + choice);
        }
    }

    /** The {@code gemm} attention of {@link #useGemmAttention}: merged heads {@code [N, E]}. */
    private NDArray attendWithGemms(NDArray qkv, RaggedBatch batch) {
        long e = embeddingSize;
        long d = e / headCount;
        float scale = (float) softmaxScale();
        int[] lens = batch.lens;
        boolean equal = true;
        for (int len : lens) {
            equal &= len == lens[0];
        }
        NDList parts = new NDList();
        if (equal && (!batch.padded || batch.allFull)) {
            // One batched call over B sequences of the same length L (no padding to skip).
            int len = lens[0];
            NDArray real = qkv.get(new NDIndex("0:" + (long) batch.batch * len));
            parts.add(attendGroup(real.reshape(batch.batch, len, 3, headCount, d), len, scale));
        } else {
            for (int b = 0; b < batch.batch; ++b) {
                long start = batch.padded ? (long) b * batch.seqLen : batch.cuSeqlens[b];
                long queries = batch.padded ? batch.seqLen : lens[b];
                NDArray rows = qkv.get(new NDIndex(start + ":" + (start + queries)));
                NDArray split = rows.reshape(1, queries, 3, headCount, d);
                parts.add(attendGroup(split, lens[b], scale));
            }
        }
        NDArray merged = parts.size() == 1 ? parts.head() : NDArrays.concat(parts, 0);
        if (batch.extraSources.length > 0) {
            NDArray copies = merged.get(batch.extraSourcesArray());
            merged = NDArrays.concat(new NDList(merged, copies), 0);
        }
        return merged;
    }

    /**
     * Attention of {@code G} sequences of {@code L} query rows that see their first {@code keys}
     * keys: {@code split [G, L, 3, H, D]} to merged heads {@code [G * L, H * D]}.
     */
    private static NDArray attendGroup(NDArray split, long keys, float scale) {
        Shape shape = split.getShape();
        long groups = shape.get(0);
        long queries = shape.get(1);
        // Scaling q (L x E values) instead of the scores (L x Lk x H) saves a pass over the
        // largest array; for power-of-two scales (D = 16, 64, 256) it is also bit-identical.
        NDArray q = split.get(new NDIndex(":, :, 0")).transpose(0, 2, 1, 3).mul(scale);
        NDArray kv = keys == queries ? split : split.get(new NDIndex(":, 0:" + keys));
        NDArray k = kv.get(new NDIndex(":, :, 1")).transpose(0, 2, 3, 1); // [G, H, D, Lk]
        NDArray v = kv.get(new NDIndex(":, :, 2")).transpose(0, 2, 1, 3); // [G, H, Lk, D]
        NDArray scores = q.matMul(k); // [G, H, L, Lk]
        q.close();
        NDArray probs = scores.softmax(3);
        scores.close();
        NDArray out = probs.matMul(v); // [G, H, L, D]
        probs.close();
        NDArray merged =
                out.transpose(0, 2, 1, 3).reshape(groups * queries, shape.get(3) * shape.get(4));
        out.close();
        return merged;
    }

    static NDArray value(ParameterStore ps, Block block, String name, Device device) {
        Parameter parameter = block.getDirectParameters().get(name);
        return ps.getValue(parameter, device, false);
    }

    static NDArray castTo(NDArray array, DataType type) {
        return array.getDataType() == type ? array : array.toType(type, true);
    }

    private static NDArray concatAs(NDArray[] arrays, DataType type) {
        NDArray joined = NDArrays.concat(new NDList(arrays), 0);
        if (joined.getDataType() == type) {
            return joined;
        }
        NDArray cast = joined.toType(type, true);
        joined.close();
        return cast;
    }

    private void buildFused(ParameterStore unused, DataType type) {
        if (queryProjection.getDirectParameters().get("weight").isInitialized()) {
            Device device =
                    queryProjection.getDirectParameters().get("weight").getArray().getDevice();
            NDManager manager =
                    queryProjection.getDirectParameters().get("weight").getArray().getManager();
            fusedQkv(new ParameterStore(manager, false), device, type);
        }
    }

    /** Builds a {@link FlashSelfAttentionBlock}; the options of the stock builder. */
    public static final class Builder {

        private int embeddingSize;
        private int headCount;
        private float attentionProbsDropoutProb = 0.1f;

        Builder() {}

        /**
         * Sets the embedding size {@code E} of the token representation (required).
         *
         * @param embeddingSize the embedding size
         * @return this builder
         */
        public Builder setEmbeddingSize(int embeddingSize) {
            this.embeddingSize = embeddingSize;
            return this;
        }

        /**
         * Sets the number of attention heads (required); must divide the embedding size.
         *
         * @param headCount the number of heads
         * @return this builder
         */
        public Builder setHeadCount(int headCount) {
            this.headCount = headCount;
            return this;
        }

        /**
         * Sets the dropout probability on the attention probabilities (training only; default 0.1).
         *
         * @param attentionProbsDropoutProb the dropout probability
         * @return this builder
         */
        public Builder optAttentionProbsDropoutProb(float attentionProbsDropoutProb) {
            this.attentionProbsDropoutProb = attentionProbsDropoutProb;
            return this;
        }

        /**
         * Builds the block; rejects a missing embedding size or head count, or a head count that
         * does not divide the embedding size, with the stock block's messages.
         *
         * @return the block
         */
        public FlashSelfAttentionBlock build() {
            return new FlashSelfAttentionBlock(
                    ScaledDotProductAttentionBlock.builder()
                            .setEmbeddingSize(embeddingSize)
                            .setHeadCount(headCount)
                            .optAttentionProbsDropoutProb(attentionProbsDropoutProb)
                            .build(),
                    headCount);
        }
    }
}
