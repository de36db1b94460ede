/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.internal.NDArrayEx;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.ndarray.types.SparseFormat;
import ai.djl.nn.Activation;

import io.djlattention.AttentionOps;

/**
 * The layers of {@link Decoder}'s op-by-op paths (the contiguous cache, and the paged path's
 * reference {@link Decoder.LayerPath#OP_BY_OP}): embedding, pre-norm attention and MLP sub-layers,
 * norms, rotary embedding, head — DJL operators and djl-attention's fused elementwise ones over
 * a step's {@link StepWeights}.
 *
 * <p>A step issues few operator calls, because each costs the host a JNI round trip (8-12 us on
 * a GPU, more than the GPU work of a small model): one GEMM per projection group, with the
 * residual add folded into the GEMMs that end a sub-layer (the stream is linear's bias, which
 * libtorch adds as addmm's input), one call per norm for GPT-2 (the fused
 * add_bias_residual_layernorm) and the fused add_bias_gelu, the rotary embedding as one
 * matmul with rotations made once per step, views (split, reshape) rather than copies, and
 * nothing read back to the host. Every temporary attaches to the step's inputs' manager: a
 * step's operator never takes a weight as its first operand.
 *
 * <p>GPT-2's stream x' is the residual stream less the biases of the projections that ended a
 * sub-layer so far ("pending"; c_proj of attention and of the MLP): each norm adds them back
 * (LayerNorm(x' + pending)) in the same fused call, and the GEMMs that end a sub-layer add
 * their output to x' without a bias. The pending sums are made once, in float32, at load.
 */
final class DecoderLayers {

    private final DecoderConfig config;

    DecoderLayers(DecoderConfig config) {
        this.config = config;
    }

    /** The arrays of one step over {@code w}; {@code rotate}: LLaMA's rotation matrices too. */
    Step step(StepWeights w, NDArray positions, boolean rotate) {
        return new Step(w, config, positions, rotate);
    }

    /** A layer's attention: q, k, v {@code [N, H, D]} to the merged heads {@code [N, Hq D]}. */
    interface LayerAttention {
        NDArray attend(NDArray[] qkv);
    }

    /** The step's arrays: the weights and what is made once per step for every layer. */
    static final class Step {
        final StepWeights w;
        /**
         * LLaMA: float32 {@code [N, D, D]}, the rotary embedding of each position as a matrix
         * ({@link #rope}); made once per step, so each layer's rotation is one matmul.
         */
        final NDArray rotation;
        /** GPT-2: zeros {@code [N, C]}, the residual argument of the fused norm; set by embed. */
        NDArray zeros;

        /** {@code rotate}: make the rotation matrices (the fused layer rotates by itself). */
        Step(StepWeights w, DecoderConfig config, NDArray positions, boolean rotate) {
            this.w = w;
            if (rotate && w.rotaryTable != null) {
                NDArray rows =
                        positions
                                .getNDArrayInternal()
                                .embedding(positions, w.rotaryTable, SparseFormat.DENSE)
                                .get(0);
                Shape lead = positions.getShape();
                NDList cosSin =
                        rows.reshape(lead.addAll(new Shape(2, config.getHeadDim())))
                                .split(2, lead.dimension());
                // R[i][j] = cos_j if i == j, sinSigned_j if i == partner(j), else 0.
                rotation =
                        cosSin.get(0)
                                .mul(w.rotaryIdentity)
                                .add(cosSin.get(1).mul(w.rotaryPartner));
            } else {
                rotation = null;
            }
        }
    }

    /** The token (and GPT-2 position) embeddings of {@code [N]} ids: the stream {@code [N, C]}. */
    NDArray embed(Step step, NDArray tokenIds, NDArray positions) {
        NDArrayEx ex = tokenIds.getNDArrayInternal();
        NDArray x = ex.embedding(tokenIds, step.w.tokenTable, SparseFormat.DENSE).get(0);
        if (step.w.positionTable != null) {
            NDArray pos =
                    positions
                            .getNDArrayInternal()
                            .embedding(positions, step.w.positionTable, SparseFormat.DENSE)
                            .get(0);
            x = x.add(pos);
            step.zeros = x.getManager().zeros(x.getShape(), x.getDataType());
        }
        if (step.w.embedScale != null) {
            x = x.mul(step.w.embedScale);
        }
        return x;
    }

    /**
     * One decoder layer on the stream {@code x [N, C]}: pre-norm attention, then pre-norm MLP,
     * each added to the stream by the GEMM that ends it; Gemma-2 norms each sub-layer's output
     * before the add, so there the add is its own call.
     */
    NDArray layer(Step step, int l, NDArray x, LayerAttention attention) {
        LayerWeights w = step.w.layers[l];
        NDArray merged = attention.attend(qkv(step, w, norm(step, x, w.norm1)));
        if (w.attentionOutNorm == null) {
            x = linear(merged, w.outWeight, x);
            return linear(mlpHidden(w, norm(step, x, w.norm2)), w.downWeight, x);
        }
        x = x.add(norm(step, linear(merged, w.outWeight, null), w.attentionOutNorm));
        NDArray mlp = linear(mlpHidden(w, norm(step, x, w.norm2)), w.downWeight, null);
        return x.add(norm(step, mlp, w.mlpOutNorm));
    }

    /** LLaMA's (and Gemma-2's) RMSNorm or GPT-2's LayerNorm of the stream. */
    NDArray norm(Step step, NDArray x, NormWeights n) {
        if (n.bias == null) {
            return rmsNorm(x, n.gain);
        }
        // One call: LayerNorm(x' + pending) with float32 statistics, also for a float16 x.
        return AttentionOps.addBiasResidualLayerNorm(
                x, n.pending, step.zeros, n.gain, n.bias, config.getNormEps());
    }

    // RMSNorm computes in float32; mixing in a float16 gain promotes to float32. There is no
    // fused rms_norm operator in djl_attn or in DJL's PyTorch engine.
    NDArray rmsNorm(NDArray x, NDArray gain) {
        NDArray xf = x.toType(DataType.FLOAT32, false);
        NDArray rms = xf.square().mean(new int[] {-1}, true).add(config.getNormEps()).sqrt();
        NDArray y = xf.div(rms).mul(gain);
        return y.toType(x.getDataType(), false);
    }

    /**
     * {@code x W^T + b} in one call, {@code weightOutIn [out, in]}. {@code bias} is {@code
     * [out]}, null, or, for a 2-D {@code x}, the stream {@code [N, out]} the product is added to:
     * libtorch's linear is then {@code addmm(bias, x, W^T)}, one GEMM that also does the
     * residual add.
     */
    static NDArray linear(NDArray x, NDArray weightOutIn, NDArray bias) {
        return x.getNDArrayInternal().linear(x, weightOutIn, bias).get(0);
    }

    /**
     * The attention projections of a layer, rotary embeddings applied (LLaMA): one GEMM over the
     * stacked q|k|v weights; q, k and v are views of its output (or of the rotated q|k).
     *
     * @param h normed input {@code [N, C]}
     * @return q {@code [N, Hq, D]}, k and v {@code [N, Hkv, D]}
     */
    NDArray[] qkv(Step step, LayerWeights w, NDArray h) {
        int heads = config.getNumHeads();
        int kvHeads = config.getNumKvHeads();
        NDArray fused =
                linear(h, w.qkvWeight, w.qkvBias)
                        .reshape(h.getShape().get(0), heads + 2 * kvHeads, config.getHeadDim());
        if (step.rotation == null) {
            NDList parts = fused.split(new long[] {heads, heads + kvHeads}, 1);
            return new NDArray[] {parts.get(0), parts.get(1), parts.get(2)};
        }
        NDList qkAndV = fused.split(new long[] {heads + kvHeads}, 1);
        NDList qk = rope(qkAndV.get(0), step).split(new long[] {heads}, 1);
        return new NDArray[] {qk.get(0), qk.get(1), qkAndV.get(1)};
    }

    /**
     * Rotary embedding of {@code x [N, H, D]} in float32 as one matmul with the step's rotation
     * matrices: output {@code j} is {@code x_j·cos + x_partner(j)·sinSigned}, that is {@code
     * x0·cos - x1·sin} or {@code x1·cos + x0·sin} for each rotated pair {@code (x0, x1)} (the
     * other products of the row are exact zeros).
     */
    NDArray rope(NDArray x, Step step) {
        return x.toType(DataType.FLOAT32, false)
                .matMul(step.rotation)
                .toType(x.getDataType(), false);
    }

    /** The MLP's hidden activations, the input of its down projection. */
    NDArray mlpHidden(LayerWeights w, NDArray h) {
        if (w.upBias == null) {
            NDList gateUp = linear(h, w.upWeight, null).split(2, 1);
            NDArray gate = gateUp.get(0);
            if (config.getArchitecture() == DecoderConfig.Architecture.GEMMA2) {
                // gelu_pytorch_tanh (GeGLU). add_bias_gelu reads a contiguous input; the gate is
                // a column view of gate|up, so it is copied (duplicate: a dense copy).
                return AttentionOps.addBiasGelu(gate.duplicate(), null, true).mul(gateUp.get(1));
            }
            return gate.mul(Activation.sigmoid(gate)).mul(gateUp.get(1));
        }
        // GPT-2's gelu_new is the tanh approximation.
        return AttentionOps.addBiasGelu(linear(h, w.upWeight, null), w.upBias, true);
    }

    /**
     * Final norm and output projection of the stream's rows (or of the given rows): float32
     * {@code [rows, V]}.
     */
    NDArray logits(Step step, NDArray x, NDArray rows) {
        return logits(step, x, rows, step.w.finalNorm);
    }

    NDArray logits(Step step, NDArray x, NDArray rows, NormWeights finalNorm) {
        NDArray h = norm(step, x, finalNorm);
        if (rows != null) {
            h = h.get(rows);
        }
        NDArray logits = linear(h, step.w.head, null).toType(DataType.FLOAT32, false);
        float cap = config.getFinalSoftcap();
        return cap > 0 ? logits.div(cap).tanh().mul(cap) : logits;
    }
}
