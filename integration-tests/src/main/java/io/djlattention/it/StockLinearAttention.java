/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

/**
 * The reference linear attention: the quadratic form that the linear-time operators avoid,
 * computed with stock DJL ops in float64. With {@code φ(x) = elu(x) + 1} and the attention matrix
 * {@code A[j, i] = φ(q_j)·φ(k_i)} (lower-triangular when causal),
 *
 * <pre>
 * out[b, h, j, :] = Σ_i A[j, i] v_i / (Σ_i A[j, i] + eps)
 * </pre>
 *
 * <p>which is fast-transformers' {@code LinearAttention} / {@code CausalLinearAttention}
 * (the normaliser {@code φ(q_j)·Σ_i φ(k_i)} equals the row sum of {@code A}). It shares no code
 * with {@code AttentionOps}: the feature map is written as {@code max(x, 0) + exp(min(x, 0))},
 * the mask is an explicit triangle and no prefix sum is taken.
 */
public final class StockLinearAttention {

    private StockLinearAttention() {}

    /**
     * Computes linear attention with stock DJL ops in float64.
     *
     * @param q queries {@code [B, H, L, E]}
     * @param k keys {@code [B, H, S, E]} ({@code S == L} when causal)
     * @param v values {@code [B, H, S, M]}
     * @param causal whether query {@code j} sees only keys {@code i <= j}
     * @param eps added to the normaliser
     * @return the output {@code [B, H, L, M]}, float64, attached to {@code q}'s manager
     */
    public static NDArray attention(
            NDArray q, NDArray k, NDArray v, boolean causal, double eps) {
        NDManager manager = q.getManager();
        NDArray phiQ = featureMap(q.toType(DataType.FLOAT64, false));
        NDArray phiK = featureMap(k.toType(DataType.FLOAT64, false));
        NDArray v64 = v.toType(DataType.FLOAT64, false);
        NDArray scores = phiQ.matMul(phiK.transpose(0, 1, 3, 2)); // [B, H, L, S]
        if (causal) {
            int seqQ = (int) q.getShape().get(2);
            int seqK = (int) k.getShape().get(2);
            double[] keep = new double[seqQ * seqK];
            for (int j = 0; j < seqQ; ++j) {
                for (int i = 0; i <= j && i < seqK; ++i) {
                    keep[j * seqK + i] = 1;
                }
            }
            scores = scores.mul(manager.create(keep, new Shape(seqQ, seqK)));
        }
        NDArray normaliser = scores.sum(new int[] {3}, true).add(eps);
        return scores.matMul(v64).div(normaliser);
    }

    /** {@code elu(x) + 1} as {@code max(x, 0) + exp(min(x, 0))}. */
    private static NDArray featureMap(NDArray x) {
        return x.maximum(0).add(x.minimum(0).exp());
    }
}
