/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

/**
 * The reference attention: what stock DJL computes with its own ops, {@code softmax(q·kᵀ·scale
 * + mask)·v}, materialising the full score matrix, in float64.
 *
 * <p>The mask follows djl-attention's conventions: keys at or past {@code kvLens[b]} are hidden,
 * and the causal diagonal is aligned to the bottom-right corner of each row's valid keys
 * ({@code j <= i + kvLen - Sq}). A query that sees no key gets output 0 and logsumexp
 * {@code -inf}.
 */
public final class StockAttention {

    private StockAttention() {}

    /**
     * Computes attention with stock DJL ops in float64.
     *
     * @param q queries {@code [B, Sq, Hq, D]}
     * @param k keys {@code [B, Sk, Hkv, D]}
     * @param v values {@code [B, Sk, Hkv, D]}
     * @param causal whether the causal mask applies
     * @param scale the scale of {@code q·kᵀ}
     * @param kvLens valid keys per batch row, or {@code null} for all
     * @return the output {@code [B, Sq, Hq, D]} and the logsumexp {@code [B, Hq, Sq]}, float64,
     *     attached to {@code q}'s manager
     */
    public static NDList attention(
            NDArray q, NDArray k, NDArray v, boolean causal, double scale, int[] kvLens) {
        NDManager manager = q.getManager();
        Shape qShape = q.getShape();
        int batch = (int) qShape.get(0);
        int seqQ = (int) qShape.get(1);
        int headsQ = (int) qShape.get(2);
        int seqK = (int) k.getShape().get(1);
        int headsKv = (int) k.getShape().get(2);

        NDArray q64 = q.toType(DataType.FLOAT64, false).transpose(0, 2, 1, 3);
        NDArray k64 =
                k.toType(DataType.FLOAT64, false).transpose(0, 2, 1, 3).repeat(1, headsQ / headsKv);
        NDArray v64 =
                v.toType(DataType.FLOAT64, false).transpose(0, 2, 1, 3).repeat(1, headsQ / headsKv);

        // Additive mask (0 or -inf); rows that see nothing get a zero mask row so the softmax
        // stays finite, and are zeroed afterwards.
        double[] mask = new double[batch * seqQ * seqK];
        double[] rowKeep = new double[batch * seqQ];
        double[] rowLseOffset = new double[batch * seqQ];
        for (int b = 0; b < batch; ++b) {
            int len = kvLens == null ? seqK : kvLens[b];
            for (int i = 0; i < seqQ; ++i) {
                int visible = 0;
                for (int j = 0; j < seqK; ++j) {
                    boolean sees = j < len && (!causal || j <= i + len - seqQ);
                    mask[(b * seqQ + i) * seqK + j] = sees ? 0 : Double.NEGATIVE_INFINITY;
                    visible += sees ? 1 : 0;
                }
                if (visible == 0) {
                    for (int j = 0; j < seqK; ++j) {
                        mask[(b * seqQ + i) * seqK + j] = 0;
                    }
                }
                rowKeep[b * seqQ + i] = visible == 0 ? 0 : 1;
                rowLseOffset[b * seqQ + i] = visible == 0 ? Double.NEGATIVE_INFINITY : 0;
            }
        }
        NDArray maskArray = manager.create(mask, new Shape(batch, 1, seqQ, seqK));
        NDArray keep = manager.create(rowKeep, new Shape(batch, 1, seqQ, 1));
        NDArray lseOffset = manager.create(rowLseOffset, new Shape(batch, 1, seqQ));

        NDArray scores = q64.matMul(k64.transpose(0, 1, 3, 2)).mul(scale).add(maskArray);
        NDArray probs = scores.softmax(-1).mul(keep);
        NDArray out = probs.matMul(v64).transpose(0, 2, 1, 3);
        NDArray max = scores.max(new int[] {-1}, true);
        NDArray lse = scores.sub(max).exp().sum(new int[] {-1}).log().add(max.squeeze(-1));
        return new NDList(out, lse.add(lseOffset));
    }
}
