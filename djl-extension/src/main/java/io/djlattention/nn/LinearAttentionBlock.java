/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.nn;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.Dropout;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.djlattention.AttentionOps;

/**
 * Multi-head linear attention (Katharopoulos et al., "Transformers are RNNs"), a drop-in for DJL's
 * {@link ai.djl.nn.transformer.ScaledDotProductAttentionBlock}: the same builder options, child
 * blocks ({@code keyProjection}, {@code queryProjection}, {@code valueProjection}, {@code
 * resultProjection}, {@code probabilityDropout}), parameter names and shapes ({@code weight [E,
 * E]} and {@code bias [E]} per projection) and block version, so parameters saved from a
 * ScaledDotProductAttentionBlock load into it, and an encoder can swap attention kinds.
 *
 * <p>Where the stock block computes {@code softmax(QKᵀ/√H)·V} per head, this one computes {@code
 * φ(Q)(φ(K)ᵀV)} normalised by {@code φ(Q)·Σφ(K) + eps} with {@code φ(x) = elu(x) + 1} and no
 * scale, as fast-transformers' {@code LinearAttention} ({@link AttentionOps#linearAttention}), or
 * its causal form ({@link AttentionOps#causalLinearAttention}, the {@code causal_dot_product}
 * operator) with {@link Builder#optCausal}. Both are linear in the sequence length.
 *
 * <p>Abbreviations: B batch, E embedding size, N heads, H = E / N head size, F the key/value
 * ("from") length, T the query ("to") length. Inputs, as for the stock block:
 *
 * <ul>
 *   <li>one input {@code [(B, F, E)]}: self-attention;
 *   <li>three inputs {@code [keys (B, F, E), queries (B, T, E), values (B, F, E)]}; the causal
 *       form needs {@code T == F}.
 * </ul>
 *
 * <p>Output {@code (B, T, E)}. Linear attention never forms the {@code (B, N, T, F)} probability
 * matrix, so it cannot apply an arbitrary attention mask: the stock block's masked forms (two or
 * four inputs) are rejected with an {@link IllegalArgumentException}. For the same reason the
 * {@code probabilityDropout} child is kept (for its name, option and saved bytes) but never
 * applied. The causal form is inference only ({@code causal_dot_product} has no backward).
 */
public final class LinearAttentionBlock extends AbstractBlock {

    /** The version of ScaledDotProductAttentionBlock, checked when parameters are loaded. */
    private static final byte VERSION = 1;

    private final int embeddingSize;
    private final int headCount;
    private final boolean causal;
    private final float eps;
    private final Linear keyProjection;
    private final Linear queryProjection;
    private final Linear valueProjection;
    private final Linear resultProjection;

    private LinearAttentionBlock(Builder builder) {
        super(VERSION);
        this.embeddingSize = builder.embeddingSize;
        this.headCount = builder.headCount;
        this.causal = builder.causal;
        this.eps = builder.eps;
        // Children in the stock block's order: saved parameters are read back in this order.
        this.keyProjection = addChildBlock("keyProjection", projection(embeddingSize));
        this.queryProjection = addChildBlock("queryProjection", projection(embeddingSize));
        this.valueProjection = addChildBlock("valueProjection", projection(embeddingSize));
        this.resultProjection = addChildBlock("resultProjection", projection(embeddingSize));
        addChildBlock(
                "probabilityDropout",
                Dropout.builder().optRate(builder.attentionProbsDropoutProb).build());
    }

    private static Linear projection(int embeddingSize) {
        return Linear.builder().optBias(true).setUnits(embeddingSize).build();
    }

    /**
     * Returns the projection of the keys.
     *
     * @return the projection of the keys
     */
    public Linear getKeyProjection() {
        return keyProjection;
    }

    /**
     * Returns the projection of the queries.
     *
     * @return the projection of the queries
     */
    public Linear getQueryProjection() {
        return queryProjection;
    }

    /**
     * Returns the projection of the values.
     *
     * @return the projection of the values
     */
    public Linear getValueProjection() {
        return valueProjection;
    }

    /**
     * Returns the projection of the results.
     *
     * @return the projection of the results
     */
    public Linear getResultProjection() {
        return resultProjection;
    }

    /**
     * Returns whether query {@code j} sees only keys {@code i <= j}.
     *
     * @return whether the block is causal
     */
    public boolean isCausal() {
        return causal;
    }

    /**
     * Returns the constant added to the normaliser.
     *
     * @return eps
     */
    public float getEps() {
        return eps;
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        switch (inputShapes.length) {
            case 1:
                return new Shape[] {inputShapes[0]};
            case 3:
                return new Shape[] {inputShapes[1]};
            default:
                throw new IllegalArgumentException(
                        "Invalid number of input shapes: "
                                + inputShapes.length
                                + ", must be 1 (self-attention) or 3 (keys, queries, values);"
                                + " linear attention takes no mask");
        }
    }

    /** {@inheritDoc} */
    @Override
    public void initializeChildBlocks(NDManager manager, DataType dataType, Shape... inputShapes) {
        // As the stock block: projections see (B * S, E) and are created in float32.
        Shape projectionShape = new Shape(-1, embeddingSize);
        for (Block child : children.values()) {
            child.initialize(manager, DataType.FLOAT32, projectionShape);
        }
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        NDArray keyInput;
        NDArray queryInput;
        NDArray valueInput;
        if (inputs.size() == 1) {
            keyInput = inputs.head();
            queryInput = keyInput;
            valueInput = keyInput;
        } else if (inputs.size() == 3) {
            keyInput = inputs.get(0);
            queryInput = inputs.get(1);
            valueInput = inputs.get(2);
        } else {
            throw new IllegalArgumentException(
                    "LinearAttentionBlock: expected 1 input (self-attention) or 3 (keys, queries,"
                            + " values), got "
                            + inputs.size()
                            + "; linear attention cannot apply an attention mask");
        }
        long batch = queryInput.getShape().get(0);
        long toLength = queryInput.getShape().get(1);
        NDArray keys = heads(project(keyProjection, parameterStore, keyInput, training, params));
        NDArray queries =
                heads(project(queryProjection, parameterStore, queryInput, training, params));
        NDArray values =
                heads(project(valueProjection, parameterStore, valueInput, training, params));
        // (B, N, T, H)
        NDArray attention =
                causal
                        ? AttentionOps.causalLinearAttention(queries, keys, values, eps)
                        : AttentionOps.linearAttention(queries, keys, values, eps);
        NDArray merged = attention.transpose(0, 2, 1, 3).reshape(batch * toLength, embeddingSize);
        NDArray result =
                resultProjection
                        .forward(parameterStore, new NDList(merged), training, params)
                        .head();
        return new NDList(result.reshape(batch, toLength, embeddingSize));
    }

    /** Projects (B, S, E) as (B * S, E) and returns (B, S, E). */
    private NDArray project(
            Linear projection,
            ParameterStore parameterStore,
            NDArray input,
            boolean training,
            PairList<String, Object> params) {
        Shape shape = input.getShape();
        NDArray flat = input.reshape(shape.get(0) * shape.get(1), embeddingSize);
        NDArray out = projection.forward(parameterStore, new NDList(flat), training, params).head();
        return out.reshape(shape.get(0), shape.get(1), embeddingSize);
    }

    /** (B, S, E) to the operators' head-major (B, N, S, H), as a view. */
    private NDArray heads(NDArray embeddings) {
        Shape shape = embeddings.getShape();
        return embeddings
                .reshape(shape.get(0), shape.get(1), headCount, embeddingSize / headCount)
                .transpose(0, 2, 1, 3);
    }

    /**
     * Creates a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /** Builds {@link LinearAttentionBlock}s; the options of ScaledDotProductAttentionBlock's. */
    public static final class Builder {

        private int embeddingSize;
        private int headCount;
        private float attentionProbsDropoutProb = 0.1f;
        private boolean causal;
        private float eps = AttentionOps.DEFAULT_LINEAR_EPS;

        private Builder() {}

        /**
         * Sets the embedding size E (required).
         *
         * @param embeddingSize the embedding size
         * @return this builder
         */
        public Builder setEmbeddingSize(int embeddingSize) {
            this.embeddingSize = embeddingSize;
            return this;
        }

        /**
         * Sets the number of heads N, which must divide the embedding size (required).
         *
         * @param headCount the number of heads
         * @return this builder
         */
        public Builder setHeadCount(int headCount) {
            this.headCount = headCount;
            return this;
        }

        /**
         * Sets the rate of the {@code probabilityDropout} child (default 0.1), kept for
         * compatibility with ScaledDotProductAttentionBlock; linear attention has no probability
         * matrix, so it is never applied.
         *
         * @param attentionProbsDropoutProb the dropout rate
         * @return this builder
         */
        public Builder optAttentionProbsDropoutProb(float attentionProbsDropoutProb) {
            this.attentionProbsDropoutProb = attentionProbsDropoutProb;
            return this;
        }

        /**
         * Sets whether query {@code j} sees only keys {@code i <= j} (default false).
         *
         * @param causal whether the block is causal
         * @return this builder
         */
        public Builder optCausal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /**
         * Sets the constant added to the normaliser (default 1e-6, as fast-transformers).
         *
         * @param eps a finite value {@code >= 0}
         * @return this builder
         */
        public Builder optEps(float eps) {
            this.eps = eps;
            return this;
        }

        /**
         * Builds the block.
         *
         * @return the block
         * @throws IllegalStateException if the embedding size or head count is missing, or the
         *     head count does not divide the embedding size
         * @throws IllegalArgumentException if eps is negative or not finite
         */
        public LinearAttentionBlock build() {
            if (embeddingSize < 1) {
                throw new IllegalStateException(
                        "embeddingSize: expected a value >= 1 (setEmbeddingSize), got "
                                + embeddingSize);
            }
            if (headCount < 1) {
                throw new IllegalStateException(
                        "headCount: expected a value >= 1 (setHeadCount), got " + headCount);
            }
            if (embeddingSize % headCount != 0) {
                throw new IllegalStateException(
                        "headCount: expected a divisor of the embedding size "
                                + embeddingSize
                                + ", got "
                                + headCount);
            }
            if (!Float.isFinite(eps) || eps < 0) {
                throw new IllegalArgumentException(
                        "eps: expected a finite value >= 0, got " + eps);
            }
            return new LinearAttentionBlock(this);
        }
    }
}
