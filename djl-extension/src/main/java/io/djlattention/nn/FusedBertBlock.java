/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.nn;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.IdEmbedding;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.djlattention.AttentionOps;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * A drop-in replacement for DJL's {@link BertBlock} that runs the encoder on fused kernels and, for
 * right-padded batches, on the valid tokens only.
 *
 * <p>Same builder options, child names and order ({@code tokenEmbedding}, {@code typeEmbedding},
 * {@code embeddingNorm}, {@code embeddingDropout}, {@code transformer_0..n-1}, {@code
 * poolingProjection}), direct parameter ({@code positionEmbedding}), block version, metadata and
 * parameter names and shapes as the stock block of DJL 0.36.0, so parameters saved from a stock
 * {@code BertBlock} ({@code saveParameters}) load into this block and the other way round. Each
 * {@code transformer_i} is a {@link FusedTransformerEncoderBlock}. {@link #from(BertBlock, int)}
 * wraps an existing stock block, sharing its parameters.
 *
 * <p>Inputs as the stock block: token ids {@code [B, S]}, type ids {@code [B, S]} and the input
 * mask {@code [B, S]} (1 = token, 0 = padding). Outputs: the sequence output {@code [B, S, E]} and
 * the pooled output {@code tanh(poolingProjection(sequence[:, 1, :]))} {@code [B, E]} (the token at
 * index 1, as stock DJL; squeezed as stock DJL, so {@code [E]} when {@code B = 1}).
 *
 * <p>At inference with a right-padding mask (each row {@code L >= 1} ones then zeros) and {@code S
 * >= 2}, the block runs the fused path: the embeddings of the valid tokens are gathered and summed
 * with the embedding BatchNorm folded into one {@code add_bias_residual_affine}, every layer runs
 * on the packed tokens (prefix sums of the lengths, attention per sequence), and the sequence
 * output is scattered back at the end. Outputs at valid positions and the pooled output equal the
 * stock block's (position 1 of a length-1 sequence is kept as an extra row for the pooled output);
 * the sequence output at padding positions is 0, where stock DJL computes values that no valid
 * position depends on. {@link Builder#optPaddingFree(boolean) optPaddingFree(false)} computes every
 * position instead (still fused), matching the stock output everywhere.
 *
 * <p>Everything else runs the stock computation unchanged: a training forward (BatchNorm batch
 * statistics over all positions, dropout), a mask that is not right-padding (a row with no token,
 * holes, values other than 0 and 1), {@code S = 1}. Stock DJL only accepts {@code S ==
 * maxSequenceLength} (it adds the whole position table); this block also accepts shorter sequences,
 * using positions {@code [0, S)}, and gives the stock result for {@code S == maxSequenceLength}.
 *
 * <p>{@link Builder#optComputeDataType optComputeDataType(FLOAT16)} runs the encoder in float16
 * (float32 accumulation and per-channel vectors) from float32 parameters, keeping float16 copies of
 * the weights; outputs are then float16. Derived arrays (fused Q/K/V weights, folded norms, float16
 * copies) are built when the block is initialised or loaded and rebuilt when a parameter array is
 * replaced or after a training forward; call {@link #syncFusedParameters()} after changing
 * parameter arrays in place.
 */
public final class FusedBertBlock extends AbstractBlock {

    private static final byte VERSION = 1;

    private final BertBlock stock;
    private final IdEmbedding tokenEmbedding;
    private final IdEmbedding typeEmbedding;
    private final Parameter positionEmbedding;
    private final BatchNorm embeddingNorm;
    private final Block embeddingDropout;
    private final List<FusedTransformerEncoderBlock> layers;
    private final Linear pooling;
    private boolean paddingFree = true;
    private DataType computeDataType;

    private final DerivedArray embeddingScale = new DerivedArray();
    private final DerivedArray embeddingShift = new DerivedArray();
    private final DerivedArray poolingWeight = new DerivedArray();
    private final DerivedArray poolingBias = new DerivedArray();

    private FusedBertBlock(BertBlock stock, int headCount) {
        super(VERSION);
        this.stock = stock;
        List<Block> children = stock.getChildren().values();
        positionEmbedding = addParameter(stock.getDirectParameters().get("positionEmbedding"));
        tokenEmbedding = addChildBlock("tokenEmbedding", (IdEmbedding) children.get(0));
        typeEmbedding = addChildBlock("typeEmbedding", (IdEmbedding) children.get(1));
        embeddingNorm = addChildBlock("embeddingNorm", (BatchNorm) children.get(2));
        embeddingDropout = addChildBlock("embeddingDropout", children.get(3));
        List<FusedTransformerEncoderBlock> fused = new ArrayList<>();
        for (int i = 4; i < children.size() - 1; ++i) {
            fused.add(
                    addChildBlock(
                            "transformer_" + (i - 4),
                            FusedTransformerEncoderBlock.from(
                                    (TransformerEncoderBlock) children.get(i), headCount)));
        }
        layers = Collections.unmodifiableList(fused);
        pooling = addChildBlock("poolingProjection", (Linear) children.get(children.size() - 1));
    }

    /**
     * Wraps a stock BertBlock: the returned block shares its children and parameters (no copy:
     * parameters saved from either are the same, and training one trains the other), and gives the
     * stock block's outputs through the fused kernels. Padding removal is on and the computation
     * runs in the parameters' dtype; change with {@link #setPaddingFree} and {@link
     * #setComputeDataType}.
     *
     * @param stock the stock block, initialised (or loaded) or not
     * @param headCount the attention head count the stock block was built with (DJL 0.36.0 does
     *     not expose it); must divide the embedding size
     * @return a fused block over the same parameters
     * @throws IllegalArgumentException if {@code headCount} does not divide the embedding size
     */
    public static FusedBertBlock from(BertBlock stock, int headCount) {
        return new FusedBertBlock(stock, headCount);
    }

    /**
     * Creates a builder with the stock builder's options (and the same defaults), plus {@code
     * optPaddingFree} and {@code optComputeDataType}.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Creates a 3D attention mask from a 2D input mask, as {@link
     * BertBlock#createAttentionMaskFromInputMask}.
     *
     * @param ids 2D tensor {@code [B, F]}
     * @param mask 2D tensor {@code [B, T]}
     * @return float tensor {@code [B, F, T]}
     */
    public static NDArray createAttentionMaskFromInputMask(NDArray ids, NDArray mask) {
        return BertBlock.createAttentionMaskFromInputMask(ids, mask);
    }

    /**
     * Returns the stock block whose children and parameters this block shares (for example to build
     * DJL's {@code BertMaskedLanguageModelBlock} or {@code BertPretrainingBlock} heads).
     *
     * @return the stock block
     */
    public BertBlock getStockBlock() {
        return stock;
    }

    /**
     * Returns the token embedding.
     *
     * @return the token embedding
     */
    public IdEmbedding getTokenEmbedding() {
        return tokenEmbedding;
    }

    /**
     * Returns the embedding size {@code E}.
     *
     * @return the embedding size
     */
    public int getEmbeddingSize() {
        return stock.getEmbeddingSize();
    }

    /**
     * Returns the size of the token dictionary.
     *
     * @return the size of the token dictionary
     */
    public int getTokenDictionarySize() {
        return stock.getTokenDictionarySize();
    }

    /**
     * Returns the size of the type dictionary.
     *
     * @return the size of the type dictionary
     */
    public int getTypeDictionarySize() {
        return stock.getTypeDictionarySize();
    }

    /**
     * Returns the longest sequence the position embedding covers.
     *
     * @return the maximum sequence length
     */
    public int getMaxSequenceLength() {
        return (int) positionEmbedding.getShape().get(0);
    }

    /**
     * Returns the encoder layers.
     *
     * @return the fused encoder layers, in order
     */
    public List<FusedTransformerEncoderBlock> getTransformerEncoderBlocks() {
        return layers;
    }

    /**
     * Sets whether right-padded batches run on their valid tokens only (default: yes).
     *
     * @param paddingFree whether to remove padding
     * @return this block
     */
    public FusedBertBlock setPaddingFree(boolean paddingFree) {
        this.paddingFree = paddingFree;
        return this;
    }

    /**
     * Returns whether right-padded batches run on their valid tokens only.
     *
     * @return whether padding is removed
     */
    public boolean isPaddingFree() {
        return paddingFree;
    }

    /**
     * Sets the dtype the fused path computes in: float32, float16, or {@code null} for the dtype of
     * the parameters (default).
     *
     * @param computeDataType the compute dtype, or {@code null}
     * @return this block
     */
    public FusedBertBlock setComputeDataType(DataType computeDataType) {
        if (computeDataType != null && !FlashSelfAttentionBlock.isFusedType(computeDataType)) {
            throw new IllegalArgumentException(
                    "computeDataType: expected float32, float16 or null, got " + computeDataType);
        }
        this.computeDataType = computeDataType;
        return this;
    }

    /**
     * Returns the dtype the fused path computes in, or {@code null} for the parameters' dtype.
     *
     * @return the compute dtype, or {@code null}
     */
    public DataType getComputeDataType() {
        return computeDataType;
    }

    /**
     * Rebuilds every derived array (fused Q/K/V weights, folded norms, float16 copies) from the
     * parameters: needed only after parameter arrays were modified in place outside a training
     * forward.
     */
    public void syncFusedParameters() {
        for (FusedTransformerEncoderBlock layer : layers) {
            layer.syncFusedParameters();
        }
        embeddingScale.invalidate();
        embeddingShift.invalidate();
        poolingWeight.invalidate();
        poolingBias.invalidate();
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return stock.getOutputShapes(inputShapes);
    }

    /** {@inheritDoc} */
    @Override
    public void initializeChildBlocks(NDManager manager, DataType dataType, Shape... inputShapes) {
        inputNames = Arrays.asList("tokenIds", "typeIds", "masks");
        // The stock block draws the parameters in its own order, so a seed gives the same values.
        stock.initialize(manager, dataType, inputShapes);
        Shape[] embeddingOutput = tokenEmbedding.getOutputShapes(new Shape[] {inputShapes[0]});
        for (FusedTransformerEncoderBlock layer : layers) {
            layer.initialize(manager, dataType, embeddingOutput);
        }
        syncFusedParameters();
    }

    /** {@inheritDoc} */
    @Override
    public void loadParameters(NDManager manager, DataInputStream is)
            throws IOException, MalformedModelException {
        super.loadParameters(manager, is);
        syncFusedParameters();
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore ps, NDList inputs, boolean training, PairList<String, Object> params) {
        NDArray tokenIds = inputs.get(0);
        Shape shape = tokenIds.getShape();
        int maxSeqLen = getMaxSequenceLength();
        if (shape.dimension() == 2 && shape.get(1) > maxSeqLen) {
            throw new IllegalArgumentException(
                    "tokenIds: expected a sequence length <= maxSequenceLength = "
                            + maxSeqLen
                            + ", got "
                            + shape.get(1));
        }
        if (training) {
            syncFusedParameters();
            return stockForward(ps, inputs, true, params);
        }
        if (shape.dimension() != 2 || shape.get(1) < 2 || inputs.size() != 3) {
            return stockForward(ps, inputs, false, params);
        }
        int batch = (int) shape.get(0);
        int seqLen = (int) shape.get(1);
        Device device = tokenIds.getDevice();
        NDArray tokenTable = tokenEmbedding.getValue(ps, device, false);
        DataType paramType = tokenTable.getDataType();
        DataType type = computeDataType != null ? computeDataType : paramType;
        int[] lens = PaddingMasks.fromInputMask(inputs.get(2), batch, seqLen);
        if (lens == null
                || !FlashSelfAttentionBlock.isFusedType(paramType)
                || inputs.get(1).getShape().size() != (long) batch * seqLen) {
            return stockForward(ps, inputs, false, params);
        }
        try (NDManager scope = NDManager.subManagerOf(tokenIds)) {
            scope.tempAttachAll(inputs);
            RaggedBatch ragged =
                    paddingFree
                            ? RaggedBatch.packed(scope, seqLen, lens, true)
                            : RaggedBatch.padded(scope, seqLen, lens);
            NDArray rows = embed(ps, inputs, ragged, scope, paramType, type);
            for (FusedTransformerEncoderBlock layer : layers) {
                NDArray next = layer.forwardRows(ps, rows, ragged);
                rows.close();
                rows = next;
            }
            long width = rows.getShape().get(1);
            NDArray sequence;
            if (ragged.isDense()) {
                sequence = rows.reshape(batch, seqLen, width);
            } else {
                NDArray real =
                        ragged.extraSources.length == 0
                                ? rows
                                : rows.get(new NDIndex("0:" + ragged.realRows));
                sequence = AttentionOps.restorePadding(real, ragged.cuSeqlensArray(), seqLen);
            }
            NDArray firstToken = rows.get(scope.create(ragged.secondTokenRows())).squeeze();
            NDArray weight =
                    poolingWeight.get(
                            type,
                            a -> FlashSelfAttentionBlock.castTo(a[0], type),
                            FlashSelfAttentionBlock.value(ps, pooling, "weight", device));
            NDArray bias =
                    poolingBias.get(
                            type,
                            a -> FlashSelfAttentionBlock.castTo(a[0], type),
                            FlashSelfAttentionBlock.value(ps, pooling, "bias", device));
            NDArray pooled = Linear.linear(firstToken, weight, bias).head().tanh();
            return scope.ret(new NDList(sequence, pooled));
        }
    }

    /**
     * The embeddings of the rows of {@code ragged}: token + type + position, then the embedding
     * BatchNorm as a per-channel affine (dropout is the identity at inference).
     *
     * @return {@code [N, E]} in {@code type}
     */
    private NDArray embed(
            ParameterStore ps,
            NDList inputs,
            RaggedBatch ragged,
            NDManager scope,
            DataType paramType,
            DataType type) {
        Device device = inputs.head().getDevice();
        int rows = ragged.rows();
        long[] flat = ragged.flatPositions();
        long[] positions = new long[rows];
        for (int i = 0; i < rows; ++i) {
            positions[i] = flat[i] % ragged.seqLen;
        }
        NDArray tokenIds = inputs.get(0).reshape(-1);
        NDArray typeIds = inputs.get(1).reshape(-1);
        if (!ragged.isDense()) {
            NDArray index = scope.create(flat);
            tokenIds = tokenIds.get(index);
            typeIds = typeIds.get(index);
        }
        // The gathers of IdEmbedding, and the sum in stock DJL's order: (tokens + types) +
        // positions.
        NDArray tokens =
                tokenEmbedding.getValue(ps, device, false).gatherNd(tokenIds.reshape(1, rows));
        NDArray types =
                typeEmbedding.getValue(ps, device, false).gatherNd(typeIds.reshape(1, rows));
        NDArray positionTable = ps.getValue(positionEmbedding, device, false);
        NDArray position = positionTable.gatherNd(scope.create(positions).reshape(1, rows));
        // Gathers from a table attach to the table's manager; move them to this forward's scope.
        tokens.attach(scope);
        types.attach(scope);
        position.attach(scope);
        NDArray sum = tokens.add(types);
        tokens.close();
        types.close();
        NDArray[] norm =
                FusedTransformerEncoderBlock.foldedNorm(
                        ps, embeddingNorm, embeddingScale, embeddingShift, device);
        NDArray out = AttentionOps.addBiasResidualAffine(sum, null, position, norm[0], norm[1]);
        sum.close();
        position.close();
        if (type != paramType) {
            NDArray cast = out.toType(type, true);
            out.close();
            return cast;
        }
        return out;
    }

    /**
     * The stock computation, for the inputs the fused path does not take; for sequences shorter
     * than maxSequenceLength it adds positions {@code [0, S)} instead of failing.
     */
    private NDList stockForward(
            ParameterStore ps, NDList inputs, boolean training, PairList<String, Object> params) {
        NDArray tokenIds = inputs.get(0);
        if (tokenIds.getShape().dimension() != 2
                || tokenIds.getShape().get(1) == getMaxSequenceLength()) {
            return stock.forward(ps, inputs, training, params);
        }
        long seqLen = tokenIds.getShape().get(1);
        NDArray typeIds = inputs.get(1);
        NDArray masks = inputs.get(2);
        NDManager initScope = NDManager.subManagerOf(tokenIds);
        initScope.tempAttachAll(inputs);
        NDArray tokens =
                tokenEmbedding.forward(ps, new NDList(tokenIds), training).singletonOrThrow();
        NDArray types = typeEmbedding.forward(ps, new NDList(typeIds), training).singletonOrThrow();
        NDArray positions =
                ps.getValue(positionEmbedding, tokenIds.getDevice(), training)
                        .get(new NDIndex("0:" + seqLen));
        NDArray embedding = tokens.add(types).add(positions);
        NDList normalized = embeddingNorm.forward(ps, new NDList(embedding), training);
        NDList lastOutput = embeddingDropout.forward(ps, normalized, training);
        NDArray mask = BertBlock.createAttentionMaskFromInputMask(tokenIds, masks);
        Shape maskShape = mask.getShape();
        NDArray offsetMask =
                mask.reshape(maskShape.get(0), 1, maskShape.get(1), maskShape.get(2))
                        .toType(DataType.FLOAT32, false)
                        .mul(-1f)
                        .add(1f)
                        .mul(PaddingMasks.MASK_OFFSET);
        initScope.ret(lastOutput);
        initScope.ret(offsetMask);
        initScope.close();
        for (FusedTransformerEncoderBlock layer : layers) {
            NDList input = new NDList(lastOutput.head(), offsetMask);
            try (NDManager innerScope = NDManager.subManagerOf(input)) {
                innerScope.tempAttachAll(input);
                lastOutput =
                        innerScope.ret(layer.getStockBlock().forward(ps, input, training, params));
            }
        }
        NDArray firstToken = lastOutput.head().get(new NDIndex(":,1,:")).squeeze();
        NDArray pooled = pooling.forward(ps, new NDList(firstToken), training).head().tanh();
        lastOutput.add(pooled);
        return lastOutput;
    }

    /** Builds a {@link FusedBertBlock}: the stock builder's options and defaults. */
    public static final class Builder {

        private final BertBlock.Builder stock = BertBlock.builder();
        // DJL 0.36.0's BertBlock.Builder has no getter for it: kept here, with its default and
        // the values of its presets (nano 4, micro 8, base 12, large 16).
        private int attentionHeadCount = 12;
        private boolean paddingFree = true;
        private DataType computeDataType;

        Builder() {}

        /**
         * Sets the number of tokens in the dictionary (required).
         *
         * @param tokenDictionarySize the number of tokens
         * @return this builder
         */
        public Builder setTokenDictionarySize(int tokenDictionarySize) {
            stock.setTokenDictionarySize(tokenDictionarySize);
            return this;
        }

        /**
         * Sets the number of token types (default 16).
         *
         * @param typeDictionarySize the number of token types
         * @return this builder
         */
        public Builder optTypeDictionarySize(int typeDictionarySize) {
            stock.optTypeDictionarySize(typeDictionarySize);
            return this;
        }

        /**
         * Sets the embedding size {@code E} (default 768); must be divisible by the head count.
         *
         * @param embeddingSize the embedding size
         * @return this builder
         */
        public Builder optEmbeddingSize(int embeddingSize) {
            stock.optEmbeddingSize(embeddingSize);
            return this;
        }

        /**
         * Sets the number of encoder layers (default 12).
         *
         * @param transformerBlockCount the number of layers
         * @return this builder
         */
        public Builder optTransformerBlockCount(int transformerBlockCount) {
            stock.optTransformerBlockCount(transformerBlockCount);
            return this;
        }

        /**
         * Sets the number of attention heads per layer (default 12).
         *
         * @param attentionHeadCount the number of heads
         * @return this builder
         */
        public Builder optAttentionHeadCount(int attentionHeadCount) {
            stock.optAttentionHeadCount(attentionHeadCount);
            this.attentionHeadCount = attentionHeadCount;
            return this;
        }

        /**
         * Sets the hidden size of the feed-forward blocks (default 3072).
         *
         * @param hiddenSize the hidden size
         * @return this builder
         */
        public Builder optHiddenSize(int hiddenSize) {
            stock.optHiddenSize(hiddenSize);
            return this;
        }

        /**
         * Sets the dropout probability after the embeddings (training only; default 0.1).
         *
         * @param hiddenDropoutProbability the dropout probability
         * @return this builder
         */
        public Builder optHiddenDropoutProbability(float hiddenDropoutProbability) {
            stock.optHiddenDropoutProbability(hiddenDropoutProbability);
            return this;
        }

        /**
         * Sets the maximum sequence length, the rows of the position embedding (default 512).
         *
         * @param maxSequenceLength the maximum sequence length
         * @return this builder
         */
        public Builder optMaxSequenceLength(int maxSequenceLength) {
            stock.optMaxSequenceLength(maxSequenceLength);
            return this;
        }

        /**
         * Sets whether right-padded batches run on their valid tokens only (default: yes).
         *
         * @param paddingFree whether to remove padding
         * @return this builder
         */
        public Builder optPaddingFree(boolean paddingFree) {
            this.paddingFree = paddingFree;
            return this;
        }

        /**
         * Sets the dtype the fused path computes in: float32, float16, or {@code null} for the
         * parameters' dtype (default).
         *
         * @param computeDataType the compute dtype, or {@code null}
         * @return this builder
         */
        public Builder optComputeDataType(DataType computeDataType) {
            this.computeDataType = computeDataType;
            return this;
        }

        /**
         * Sets the stock "nano" configuration (E 256, 4 layers, 4 heads, max length 128).
         *
         * @return this builder
         */
        public Builder nano() {
            stock.nano();
            attentionHeadCount = 4;
            return this;
        }

        /**
         * Sets the stock "micro" configuration (E 512, 12 layers, 8 heads, max length 128).
         *
         * @return this builder
         */
        public Builder micro() {
            stock.micro();
            attentionHeadCount = 8;
            return this;
        }

        /**
         * Sets the stock BERT-base configuration (E 768, 12 layers, 12 heads, max length 256).
         *
         * @return this builder
         */
        public Builder base() {
            stock.base();
            attentionHeadCount = 12;
            return this;
        }

        /**
         * Sets the stock BERT-large configuration (E 1024, 24 layers, 16 heads, max length 512).
         *
         * @return this builder
         */
        public Builder large() {
            stock.large();
            attentionHeadCount = 16;
            return this;
        }

        /**
         * Builds the block; rejects a missing token dictionary size as the stock builder does.
         *
         * @return the block
         */
        public FusedBertBlock build() {
            FusedBertBlock block = new FusedBertBlock(stock.build(), attentionHeadCount);
            block.setPaddingFree(paddingFree);
            block.setComputeDataType(computeDataType);
            return block;
        }
    }
}
