/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import io.djlattention.jni.Operator;
import io.djlattention.jni.OperatorCall;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import java.util.Arrays;
import java.util.Objects;

/**
 * Fused attention operators on DJL NDArrays of the PyTorch engine.
 *
 * <p>Each method calls a {@code djl_attn} operator through PyTorch's dispatcher, so CPU arrays
 * run the CPU kernels and GPU arrays the CUDA kernels. The operator validates its arguments
 * (ranks, sizes, dtypes, devices, strides, value ranges) and its message comes back as an
 * {@link IllegalArgumentException}; any other native failure as an {@link EngineException}.
 * Results are attached to the manager of the first input, so closing that manager frees them.
 *
 * <p>Supported dtypes from Java are float32 and float16: DJL 0.36.0's PyTorch engine cannot hold
 * bfloat16 arrays, so bfloat16 is rejected before any native call (it remains supported for
 * Python and TorchScript callers of the same operators).
 */
public final class AttentionOps {

    private AttentionOps() {}

    /**
     * Computes {@code softmax(q·kᵀ·scale + mask)·v} per head without materialising the score
     * matrix (FlashAttention).
     *
     * @param q queries {@code [B, Sq, Hq, D]}, float32 or float16, last dim contiguous (views
     *     into a fused QKV projection are fine)
     * @param k keys {@code [B, Sk, Hkv, D]}, {@code Hq % Hkv == 0} (MHA, GQA, MQA)
     * @param v values {@code [B, Sk, Hkv, D]}
     * @param options causal mask, scale, valid key lengths, sliding window, soft-cap and ALiBi
     *     slopes
     * @return the output {@code [B, Sq, Hq, D]}, dtype of {@code q}
     */
    public static NDArray flashAttention(
            NDArray q, NDArray k, NDArray v, AttentionOptions options) {
        NDList outputs = flashAttentionWithLogSumExp(q, k, v, options);
        // The kernel always writes the logsumexp; free it now rather than with the manager.
        outputs.get(1).close();
        return outputs.get(0);
    }

    /**
     * Computes {@link #flashAttention} with the default options.
     *
     * @param q queries {@code [B, Sq, Hq, D]}
     * @param k keys {@code [B, Sk, Hkv, D]}
     * @param v values {@code [B, Sk, Hkv, D]}
     * @return the output {@code [B, Sq, Hq, D]}
     */
    public static NDArray flashAttention(NDArray q, NDArray k, NDArray v) {
        return flashAttention(q, k, v, AttentionOptions.defaults());
    }

    /**
     * Computes {@link #flashAttention} and also returns the logsumexp of each row's scaled,
     * masked scores (natural log), as needed to combine partial attentions or for a backward
     * pass. A row that sees no key has output 0 and logsumexp {@code -inf}.
     *
     * @param q queries {@code [B, Sq, Hq, D]}
     * @param k keys {@code [B, Sk, Hkv, D]}
     * @param v values {@code [B, Sk, Hkv, D]}
     * @param options causal mask, scale, valid key lengths, sliding window, soft-cap and ALiBi
     *     slopes
     * @return the output {@code [B, Sq, Hq, D]} and the logsumexp {@code [B, Hq, Sq]} float32
     */
    public static NDList flashAttentionWithLogSumExp(
            NDArray q, NDArray k, NDArray v, AttentionOptions options) {
        PtNDArray ptQ = pytorchArray(q, "q");
        PtNDArray ptK = pytorchArray(k, "k");
        PtNDArray ptV = pytorchArray(v, "v");
        Objects.requireNonNull(options, "options must not be null");
        PtNDArray kvLens =
                options.getKvLens() == null ? null : pytorchArray(options.getKvLens(), "kvLens");
        PtNDArray alibiSlopes = alibiSlopes(options);
        long headDim = q.getShape().dimension() > 0 ? q.getShape().tail() : 1;
        PtNDArray[] outputs =
                OperatorCall.of(Operator.FLASH_ATTENTION)
                        .tensor(ptQ)
                        .tensor(ptK)
                        .tensor(ptV)
                        .optionalTensor(kvLens)
                        .floatArg(options.getScale(headDim))
                        .boolArg(options.isCausal())
                        .intArg(options.getWindowLeft())
                        .intArg(options.getWindowRight())
                        .floatArg(options.getSoftcap())
                        .optionalTensor(alibiSlopes)
                        .invoke(ptQ.getManager());
        return new NDList(outputs);
    }

    /**
     * Computes {@link #flashAttention} over a packed batch of sequences of different lengths
     * (no padding): sequence {@code b} owns query rows {@code [cuSeqlensQ[b], cuSeqlensQ[b+1])}
     * and key/value rows {@code [cuSeqlensK[b], cuSeqlensK[b+1])}. The causal mask is aligned to
     * the bottom-right corner of each sequence, as in {@link AttentionOptions#isCausal()};
     * {@code kvLens} of the options is not used (the offsets carry the lengths); the sliding
     * window and ALiBi positions are per sequence, and {@code [B, Hq]} ALiBi slopes give
     * sequence {@code b} row {@code b}.
     *
     * @param q queries {@code [totalQ, Hq, D]}, float32 or float16, last dim contiguous
     * @param k keys {@code [totalK, Hkv, D]}, {@code Hq % Hkv == 0}
     * @param v values {@code [totalK, Hkv, D]}
     * @param cuSeqlensQ int32 {@code [B + 1]}, non-decreasing, from 0 to {@code totalQ}
     * @param cuSeqlensK int32 {@code [B + 1]}, non-decreasing, from 0 to {@code totalK}
     * @param maxSeqlenQ the longest query sequence (an upper bound is fine)
     * @param maxSeqlenK the longest key sequence (an upper bound is fine)
     * @param options causal mask, scale, sliding window, soft-cap and ALiBi slopes
     * @return the output {@code [totalQ, Hq, D]} and the logsumexp {@code [Hq, totalQ]} float32
     */
    public static NDList flashAttentionVarlen(
            NDArray q,
            NDArray k,
            NDArray v,
            NDArray cuSeqlensQ,
            NDArray cuSeqlensK,
            long maxSeqlenQ,
            long maxSeqlenK,
            AttentionOptions options) {
        PtNDArray ptQ = pytorchArray(q, "q");
        Objects.requireNonNull(options, "options must not be null");
        PtNDArray alibiSlopes = alibiSlopes(options);
        long headDim = q.getShape().dimension() > 0 ? q.getShape().tail() : 1;
        PtNDArray[] outputs =
                OperatorCall.of(Operator.FLASH_ATTENTION_VARLEN)
                        .tensor(ptQ)
                        .tensor(pytorchArray(k, "k"))
                        .tensor(pytorchArray(v, "v"))
                        .tensor(pytorchArray(cuSeqlensQ, "cuSeqlensQ"))
                        .tensor(pytorchArray(cuSeqlensK, "cuSeqlensK"))
                        .intArg(maxSeqlenQ)
                        .intArg(maxSeqlenK)
                        .floatArg(options.getScale(headDim))
                        .boolArg(options.isCausal())
                        .intArg(options.getWindowLeft())
                        .intArg(options.getWindowRight())
                        .floatArg(options.getSoftcap())
                        .optionalTensor(alibiSlopes)
                        .invoke(ptQ.getManager());
        return new NDList(outputs);
    }

    private static PtNDArray alibiSlopes(AttentionOptions options) {
        NDArray slopes = options.getAlibiSlopes();
        return slopes == null ? null : pytorchArray(slopes, "alibiSlopes");
    }

    /**
     * The default {@code eps} of {@link #causalLinearAttention} and {@link #linearAttention}, as
     * in fast-transformers' {@code LinearAttention} and {@code CausalLinearAttention}.
     */
    public static final float DEFAULT_LINEAR_EPS = 1e-6f;

    /**
     * Computes causal linear attention (Katharopoulos et al., "Transformers are RNNs") with the
     * feature map {@code φ(x) = elu(x) + 1}, as fast-transformers' {@code CausalLinearAttention}:
     *
     * <pre>
     * out[b, h, j, :] = Σ_{i ≤ j} (φ(q_j)·φ(k_i)) v_i  /  (φ(q_j)·Σ_{i ≤ j} φ(k_i) + eps)
     * </pre>
     *
     * <p>The numerator runs in the {@code causal_dot_product} operator (linear in L: a running
     * {@code [E, M]} state per head); the feature map and the normaliser are DJL ops. No scale is
     * applied to {@code q·k} (the feature map replaces the softmax).
     *
     * <p>Layout: the operator's, head-major {@code [B, H, L, E]}, not the {@code [B, S, H, D]} of
     * {@link #flashAttention}. A caller holding {@code [B, L, H, E]} passes {@code
     * x.transpose(0, 2, 1, 3)}: any strides with a contiguous last dim are accepted, so this is a
     * view, not a copy. (fast-transformers' modules take {@code [N, L, H, E]} and permute to this
     * layout before calling the kernel.)
     *
     * <p>Precision: float16 inputs are widened to float32 for the whole computation and the
     * result is rounded to float16 once. The un-normalised numerator grows like L·E·|v| (every
     * {@code φ(q)·φ(k)} is positive, about E), so in float16 (max 65504) it would overflow from
     * L ≈ 1k at E = 64; the normaliser is a prefix sum of L terms and would lose its low bits.
     *
     * <p>The operator validates shapes, dtypes, devices and strides ({@code
     * causal_dot_product: q: expected 4 dims [B, H, L, E], ...}); its message comes back as an
     * {@link IllegalArgumentException}. Not differentiable (inference only).
     *
     * @param q queries {@code [B, H, L, E]}, float32 or float16, {@code 1 <= E <= 256}
     * @param k keys {@code [B, H, L, E]}, dtype and device of {@code q}
     * @param v values {@code [B, H, L, M]}, {@code 1 <= M <= 256}, dtype and device of {@code q}
     * @param eps added to the normaliser, finite and {@code >= 0} (fast-transformers: 1e-6)
     * @return the output {@code [B, H, L, M]}, dtype of {@code q}, attached to {@code q}'s manager
     */
    public static NDArray causalLinearAttention(NDArray q, NDArray k, NDArray v, float eps) {
        PtNDArray ptQ = pytorchArray(q, "q");
        pytorchArray(k, "k");
        pytorchArray(v, "v");
        checkEps(eps);
        NDManager target = ptQ.getManager();
        try (PtNDManager scope = (PtNDManager) target.newSubManager()) {
            boolean widen = allFloat16(q, k, v);
            NDArray phiQ = featureMap(widen(inScope(scope, q), widen));
            NDArray phiK = featureMap(widen(inScope(scope, k), widen));
            NDArray values = widen(inScope(scope, v), widen);
            // The operator first: it validates q, k and v before any DJL op sees their shapes.
            NDArray numerator =
                    OperatorCall.of(Operator.CAUSAL_DOT_PRODUCT)
                            .tensor((PtNDArray) phiQ)
                            .tensor((PtNDArray) phiK)
                            .tensor((PtNDArray) values)
                            .invoke(scope)[0];
            // φ(q_j)·Σ_{i≤j} φ(k_i) + eps, [B, H, L, 1], as a float32 prefix sum.
            NDArray keySums = phiK.toType(DataType.FLOAT32, false).cumSum(2);
            NDArray normaliser =
                    phiQ.toType(DataType.FLOAT32, false)
                            .mul(keySums)
                            .sum(new int[] {3}, true)
                            .add(eps);
            NDArray out =
                    numerator
                            .toType(DataType.FLOAT32, false)
                            .div(normaliser)
                            .toType(q.getDataType(), false);
            out.attach(target);
            return out;
        }
    }

    /**
     * Computes {@link #causalLinearAttention} with {@link #DEFAULT_LINEAR_EPS}.
     *
     * @param q queries {@code [B, H, L, E]}
     * @param k keys {@code [B, H, L, E]}
     * @param v values {@code [B, H, L, M]}
     * @return the output {@code [B, H, L, M]}
     */
    public static NDArray causalLinearAttention(NDArray q, NDArray k, NDArray v) {
        return causalLinearAttention(q, k, v, DEFAULT_LINEAR_EPS);
    }

    /**
     * Computes non-causal linear attention with {@code φ(x) = elu(x) + 1}, as fast-transformers'
     * {@code LinearAttention}, in two GEMMs: the key-value state {@code φ(K)ᵀV} ({@code [E, M]}
     * per head) and the output {@code φ(Q)·(φ(K)ᵀV)}, normalised by {@code φ(q_j)·Σ_i φ(k_i) +
     * eps}:
     *
     * <pre>
     * out[b, h, j, :] = Σ_i (φ(q_j)·φ(k_i)) v_i  /  (φ(q_j)·Σ_i φ(k_i) + eps)
     * </pre>
     *
     * <p>Stock DJL ops only (batched GEMMs), so it runs wherever DJL runs and is differentiable.
     * Computed in float32 (float16 inputs are widened and the result rounded once, for the
     * reasons given at {@link #causalLinearAttention}). The query and key lengths may differ.
     * There is no native operator behind it, so Java checks its arguments, with messages in the
     * operators' style.
     *
     * @param q queries {@code [B, H, L, E]}, float32 or float16
     * @param k keys {@code [B, H, S, E]}, dtype of {@code q}
     * @param v values {@code [B, H, S, M]}, dtype of {@code q}
     * @param eps added to the normaliser, finite and {@code >= 0} (fast-transformers: 1e-6)
     * @return the output {@code [B, H, L, M]}, dtype of {@code q}, attached to {@code q}'s manager
     */
    public static NDArray linearAttention(NDArray q, NDArray k, NDArray v, float eps) {
        PtNDArray ptQ = pytorchArray(q, "q");
        pytorchArray(k, "k");
        pytorchArray(v, "v");
        checkEps(eps);
        checkLinearAttentionArgs(q, k, v);
        NDManager target = ptQ.getManager();
        try (NDManager scope = target.newSubManager()) {
            NDArray phiQ = featureMap(widen(inScope(scope, q), true));
            NDArray phiK = featureMap(widen(inScope(scope, k), true));
            NDArray values = widen(inScope(scope, v), true);
            NDArray state = phiK.transpose(0, 1, 3, 2).matMul(values); // [B, H, E, M]
            NDArray keySum = phiK.sum(new int[] {2}, true).transpose(0, 1, 3, 2); // [B, H, E, 1]
            NDArray normaliser = phiQ.matMul(keySum).add(eps); // [B, H, L, 1]
            NDArray out = phiQ.matMul(state).div(normaliser).toType(q.getDataType(), false);
            out.attach(target);
            return out;
        }
    }

    /**
     * Computes {@link #linearAttention} with {@link #DEFAULT_LINEAR_EPS}.
     *
     * @param q queries {@code [B, H, L, E]}
     * @param k keys {@code [B, H, S, E]}
     * @param v values {@code [B, H, S, M]}
     * @return the output {@code [B, H, L, M]}
     */
    public static NDArray linearAttention(NDArray q, NDArray k, NDArray v) {
        return linearAttention(q, k, v, DEFAULT_LINEAR_EPS);
    }

    /** The feature map of linear attention, {@code elu(x) + 1} (positive everywhere). */
    private static NDArray featureMap(NDArray x) {
        return Activation.elu(x, 1f).add(1f);
    }

    private static void checkEps(float eps) {
        if (!Float.isFinite(eps) || eps < 0) {
            throw new IllegalArgumentException("eps: expected a finite value >= 0, got " + eps);
        }
    }

    private static boolean allFloat16(NDArray... arrays) {
        for (NDArray array : arrays) {
            if (array.getDataType() != DataType.FLOAT16) {
                return false;
            }
        }
        return true;
    }

    private static NDArray widen(NDArray array, boolean toFloat32) {
        return toFloat32 ? array.toType(DataType.FLOAT32, false) : array;
    }

    /**
     * A view of an input (same data, shape and strides) attached to the call's scope, so that
     * everything computed from it lands there and is freed with it. The input itself is left
     * alone: other threads may be reading it, so it is never moved between managers.
     */
    private static NDArray inScope(NDManager scope, NDArray input) {
        NDArray view = input.reshape(input.getShape());
        view.attach(scope);
        return view;
    }

    /** The rules of {@link #linearAttention}, which has no native operator to check them. */
    private static void checkLinearAttentionArgs(NDArray q, NDArray k, NDArray v) {
        String op = "linear_attention: ";
        Shape qs = checkRank(op, q, "q", "[B, H, L, E]");
        Shape ks = checkRank(op, k, "k", "[B, H, S, E]");
        Shape vs = checkRank(op, v, "v", "[B, H, S, M]");
        checkSize(op, "k", ks, 0, "B", qs.get(0), "the batch of q");
        checkSize(op, "k", ks, 1, "H", qs.get(1), "the heads of q");
        checkSize(op, "k", ks, 3, "E", qs.get(3), "the feature dim of q");
        checkSize(op, "v", vs, 0, "B", qs.get(0), "the batch of q");
        checkSize(op, "v", vs, 1, "H", qs.get(1), "the heads of q");
        checkSize(op, "v", vs, 2, "S", ks.get(2), "the length of k");
        DataType dtype = q.getDataType();
        if (dtype != DataType.FLOAT32 && dtype != DataType.FLOAT16) {
            throw new IllegalArgumentException(
                    op + "q: expected dtype in {float32, float16}, got " + dtype);
        }
        for (NDArray other : new NDArray[] {k, v}) {
            if (other.getDataType() != dtype) {
                throw new IllegalArgumentException(
                        op
                                + (other == k ? "k" : "v")
                                + ": expected the dtype of q ("
                                + dtype
                                + "), got "
                                + other.getDataType());
            }
            if (!other.getDevice().equals(q.getDevice())) {
                throw new IllegalArgumentException(
                        op
                                + (other == k ? "k" : "v")
                                + ": expected the device of q ("
                                + q.getDevice()
                                + "), got "
                                + other.getDevice());
            }
        }
    }

    private static Shape checkRank(String op, NDArray array, String name, String layout) {
        Shape shape = array.getShape();
        if (shape.dimension() != 4) {
            throw new IllegalArgumentException(
                    op
                            + name
                            + ": expected 4 dims "
                            + layout
                            + ", got "
                            + shape.dimension()
                            + " dims with shape "
                            + Arrays.toString(shape.getShape()));
        }
        return shape;
    }

    private static void checkSize(
            String op, String name, Shape shape, int axis, String dim, long want, String what) {
        if (shape.get(axis) != want) {
            throw new IllegalArgumentException(
                    op
                            + name
                            + ": expected size "
                            + want
                            + " for "
                            + dim
                            + " ("
                            + what
                            + "), got "
                            + shape.get(axis));
        }
    }

    /**
     * Computes BERT self-attention straight out of a fused Q/K/V projection: adds the bias,
     * splits the heads, attends with the padding mask and merges the heads in one pass, with no
     * transposed copies. Every query row is computed, padding rows included; a row attends to
     * keys {@code [0, kvLens[b])}.
     *
     * @param qkv the fused projection {@code [B, S, 3 * H * D]}: q, then k, then v, each
     *     head-major ({@code H * D}); float32 or float16; last dim contiguous
     * @param qkvBias the projection bias {@code [3 * H * D]}, dtype of {@code qkv}, or {@code
     *     null} when the projection already added it
     * @param kvLens valid keys per batch row, int32 {@code [B]}, values in {@code [0, S]}, or
     *     {@code null} for all keys; a row with no valid key gets a zero output
     * @param numHeads the number of heads {@code H}
     * @param scale the factor applied to {@code q·kᵀ} before the softmax, finite
     * @return the attention output with merged heads {@code [B, S, H * D]}, dtype of {@code qkv}
     */
    public static NDArray bertAttention(
            NDArray qkv, NDArray qkvBias, NDArray kvLens, int numHeads, double scale) {
        PtNDArray ptQkv = pytorchArray(qkv, "qkv");
        PtNDArray ptBias = qkvBias == null ? null : pytorchArray(qkvBias, "qkvBias");
        PtNDArray ptLens = kvLens == null ? null : pytorchArray(kvLens, "kvLens");
        return OperatorCall.of(Operator.BERT_ATTENTION)
                .tensor(ptQkv)
                .optionalTensor(ptBias)
                .optionalTensor(ptLens)
                .intArg(numHeads)
                .floatArg(scale)
                .invoke(ptQkv.getManager())[0];
    }

    /**
     * Computes {@link #bertAttention} with the scale {@code 1/sqrt(D)}, {@code D = last dim / (3
     * * numHeads)}.
     *
     * @param qkv the fused projection {@code [B, S, 3 * H * D]}
     * @param qkvBias the projection bias {@code [3 * H * D]}, or {@code null}
     * @param kvLens valid keys per batch row, int32 {@code [B]}, or {@code null}
     * @param numHeads the number of heads {@code H}
     * @return the attention output {@code [B, S, H * D]}
     */
    public static NDArray bertAttention(
            NDArray qkv, NDArray qkvBias, NDArray kvLens, int numHeads) {
        Objects.requireNonNull(qkv, "qkv must not be null");
        long width = qkv.getShape().dimension() > 0 ? qkv.getShape().tail() : 0;
        long headDim = numHeads > 0 ? Math.max(1, width / (3L * numHeads)) : 1;
        return bertAttention(qkv, qkvBias, kvLens, numHeads, 1.0 / Math.sqrt(headDim));
    }

    /**
     * Computes {@code LayerNorm(x + bias + residual) * gamma + beta} over the last dim in one
     * read and one write of the activations, with float32 statistics (the norm of standard
     * post-norm BERT).
     *
     * @param x the input {@code [..., C]}, float32 or float16, contiguous
     * @param bias a bias {@code [C]}, or {@code null}
     * @param residual the residual {@code [..., C]}, shape and dtype of {@code x}, contiguous
     * @param gamma the scale {@code [C]}, dtype of {@code x} or float32
     * @param beta the shift {@code [C]}, dtype of {@code gamma}; {@code bias} too
     * @param eps added to the variance, finite and {@code >= 0}
     * @return the normalised output, shape and dtype of {@code x}
     */
    public static NDArray addBiasResidualLayerNorm(
            NDArray x, NDArray bias, NDArray residual, NDArray gamma, NDArray beta, double eps) {
        PtNDArray ptX = pytorchArray(x, "x");
        PtNDArray ptBias = bias == null ? null : pytorchArray(bias, "bias");
        return OperatorCall.of(Operator.ADD_BIAS_RESIDUAL_LAYERNORM)
                .tensor(ptX)
                .optionalTensor(ptBias)
                .tensor(pytorchArray(residual, "residual"))
                .tensor(pytorchArray(gamma, "gamma"))
                .tensor(pytorchArray(beta, "beta"))
                .floatArg(eps)
                .invoke(ptX.getManager())[0];
    }

    /**
     * Computes {@code (x + bias + residual) * scale + shift} per channel (the last dim) in one
     * read and one write of the activations: what DJL's {@code BatchNorm} over the hidden axis
     * becomes at inference, with {@code scale = gamma / sqrt(runningVar + eps)} and {@code shift
     * = beta - runningMean * scale}, fused with the bias and residual before it.
     *
     * @param x the input {@code [..., C]}, float32 or float16, contiguous
     * @param bias a bias {@code [C]}, or {@code null}
     * @param residual the residual {@code [..., C]}, shape and dtype of {@code x}, contiguous
     * @param scale the per-channel scale {@code [C]}, dtype of {@code x} or float32
     * @param shift the per-channel shift {@code [C]}, dtype of {@code scale}; {@code bias} too
     * @return the output, shape and dtype of {@code x}
     */
    public static NDArray addBiasResidualAffine(
            NDArray x, NDArray bias, NDArray residual, NDArray scale, NDArray shift) {
        PtNDArray ptX = pytorchArray(x, "x");
        PtNDArray ptBias = bias == null ? null : pytorchArray(bias, "bias");
        return OperatorCall.of(Operator.ADD_BIAS_RESIDUAL_AFFINE)
                .tensor(ptX)
                .optionalTensor(ptBias)
                .tensor(pytorchArray(residual, "residual"))
                .tensor(pytorchArray(scale, "scale"))
                .tensor(pytorchArray(shift, "shift"))
                .invoke(ptX.getManager())[0];
    }

    /**
     * Computes {@code gelu(x + bias)} in one read and one write of the activations.
     *
     * @param x the input {@code [..., C]}, float32 or float16, contiguous
     * @param bias a bias {@code [C]}, dtype of {@code x} or float32, or {@code null}
     * @param tanhApproximation {@code false} for the exact erf form {@code 0.5 v (1 + erf(v /
     *     sqrt 2))} (DJL's and PyTorch's default {@code gelu}), {@code true} for the tanh
     *     approximation
     * @return the output, shape and dtype of {@code x}
     */
    public static NDArray addBiasGelu(NDArray x, NDArray bias, boolean tanhApproximation) {
        PtNDArray ptX = pytorchArray(x, "x");
        PtNDArray ptBias = bias == null ? null : pytorchArray(bias, "bias");
        return OperatorCall.of(Operator.ADD_BIAS_GELU)
                .tensor(ptX)
                .optionalTensor(ptBias)
                .boolArg(tanhApproximation)
                .invoke(ptX.getManager())[0];
    }

    /**
     * Packs the valid tokens of a right-padded batch: batch row {@code b} keeps its first {@code
     * lens[b]} positions, in order, one row after another.
     *
     * @param x the padded batch {@code [B, S, C]}, float32 or float16, contiguous
     * @param lens valid tokens per batch row, int32 {@code [B]}, values in {@code [0, S]}
     * @return the packed tokens {@code [total, C]} (dtype of {@code x}) and the prefix sums
     *     {@code cu_seqlens} int32 {@code [B + 1]} ({@code cu_seqlens[0] = 0}, {@code
     *     cu_seqlens[B] = total}), as {@code flash_attention_varlen} takes them
     */
    public static NDList removePadding(NDArray x, NDArray lens) {
        PtNDArray ptX = pytorchArray(x, "x");
        return new NDList(
                OperatorCall.of(Operator.REMOVE_PADDING)
                        .tensor(ptX)
                        .tensor(pytorchArray(lens, "lens"))
                        .invoke(ptX.getManager()));
    }

    /**
     * Scatters packed tokens back into a right-padded batch, the inverse of {@link
     * #removePadding}; positions past a row's length are zero.
     *
     * @param packed the packed tokens {@code [total, C]}, float32 or float16, contiguous
     * @param cuSeqlens the prefix sums int32 {@code [B + 1]} with {@code cuSeqlens[0] = 0},
     *     {@code cuSeqlens[B] = total} and every length in {@code [0, seqLen]}
     * @param seqLen the padded length {@code S}
     * @return the padded batch {@code [B, S, C]}, dtype of {@code packed}
     */
    public static NDArray restorePadding(NDArray packed, NDArray cuSeqlens, long seqLen) {
        PtNDArray ptPacked = pytorchArray(packed, "packed");
        return OperatorCall.of(Operator.RESTORE_PADDING)
                .tensor(ptPacked)
                .tensor(pytorchArray(cuSeqlens, "cuSeqlens"))
                .intArg(seqLen)
                .invoke(ptPacked.getManager())[0];
    }

    /**
     * Writes new tokens' keys and values into a paged KV cache, in place: {@code
     * keyCache[slot / blockSize, slot % blockSize] = key[t]} for every token {@code t} whose
     * {@code slot = slotMapping[t]} is non-negative (negative slots are skipped). Every slot is
     * checked before anything is written, so a rejected call leaves both caches untouched.
     *
     * @param key new keys {@code [T, Hkv, D]}, float32 or float16, last dim contiguous
     * @param value new values {@code [T, Hkv, D]}, dtype of {@code key}
     * @param keyCache the key cache {@code [numBlocks, blockSize, Hkv, D]}, contiguous, dtype of
     *     {@code key}; modified in place
     * @param valueCache the value cache, same shape; modified in place
     * @param slotMapping int64 {@code [T]}: {@code block * blockSize + offset}, or negative
     */
    public static void reshapeAndCache(
            NDArray key, NDArray value, NDArray keyCache, NDArray valueCache, NDArray slotMapping) {
        reshapeAndCache(key, value, keyCache, valueCache, slotMapping, true, null, null);
    }

    /**
     * {@link #reshapeAndCache(NDArray, NDArray, NDArray, NDArray, NDArray)} into an FP8 cache:
     * uint8 caches of OCP e4m3fn bytes, each value stored as {@code sat(round(x / scale))}
     * (saturated at ±448, round to nearest even).
     *
     * @param key new keys {@code [T, Hkv, D]}, float32 or float16, last dim contiguous
     * @param value new values {@code [T, Hkv, D]}, dtype of {@code key}
     * @param keyCache uint8 {@code [numBlocks, blockSize, Hkv, D]}, contiguous; modified in place
     * @param valueCache uint8, same shape; modified in place
     * @param slotMapping int64 {@code [T]}: {@code block * blockSize + offset}, or negative
     * @param kScale float32 {@code [1]} (per tensor) or {@code [Hkv]} (per head) on the cache's
     *     device, or {@code null} for 1; only with a uint8 cache
     * @param vScale the value scales, likewise
     */
    public static void reshapeAndCache(
            NDArray key,
            NDArray value,
            NDArray keyCache,
            NDArray valueCache,
            NDArray slotMapping,
            NDArray kScale,
            NDArray vScale) {
        reshapeAndCache(key, value, keyCache, valueCache, slotMapping, true, kScale, vScale);
    }

    /**
     * Writes one layer's new keys and values to the slots a {@link PagedBatch} of this cache
     * holds ({@link #reshapeAndCache} on {@code cache}'s arrays of {@code layer}). The batch's
     * slots were checked when the batch was built, so they are not copied back and checked again
     * (on a GPU that copy is a synchronisation per call).
     *
     * @param key new keys {@code [T, Hkv, D]}, the cache's dtype, last dim contiguous
     * @param value new values {@code [T, Hkv, D]}
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @throws IllegalArgumentException if the batch is not one of this cache's, or an argument
     *     breaks a rule of {@code reshape_and_cache}
     */
    public static void reshapeAndCache(
            NDArray key, NDArray value, PagedKvCache cache, int layer, PagedBatch batch) {
        cache.checkBatch(batch);
        reshapeAndCache(
                key,
                value,
                cache.getKeyCache(layer),
                cache.getValueCache(layer),
                batch.getSlotMapping(),
                false,
                cache.getKeyScale(layer),
                cache.getValueScale(layer));
    }

    private static void reshapeAndCache(
            NDArray key,
            NDArray value,
            NDArray keyCache,
            NDArray valueCache,
            NDArray slotMapping,
            boolean checkSlots,
            NDArray kScale,
            NDArray vScale) {
        PtNDArray ptKey = pytorchArray(key, "key");
        OperatorCall.of(Operator.RESHAPE_AND_CACHE)
                .tensor(ptKey)
                .tensor(pytorchArray(value, "value"))
                .tensor(pytorchArray(keyCache, "keyCache"))
                .tensor(pytorchArray(valueCache, "valueCache"))
                .tensor(pytorchArray(slotMapping, "slotMapping"))
                .boolArg(checkSlots)
                .optionalTensor(optionalArray(kScale, "kScale"))
                .optionalTensor(optionalArray(vScale, "vScale"))
                .invoke(ptKey.getManager());
    }

    /**
     * Decode attention over a paged KV cache: one query token per sequence attends to the first
     * {@code contextLens[s]} cached tokens of its sequence, read through its block table. The
     * score of key {@code j} is {@code scale·q·k_j + slope[h]·(j - (contextLen - 1))} (the ALiBi
     * term only when slopes are given); a sequence of context 0 gets zeros.
     *
     * @param query {@code [numSeqs, Hq, D]}, float32 or float16, last dim contiguous; {@code D}
     *     one of {@link PagedKvCache#supportedHeadDims()}
     * @param keyCache {@code [numBlocks, blockSize, Hkv, D]}, contiguous, {@code Hq % Hkv == 0},
     *     block size in {8, 16, 32}
     * @param valueCache {@code [numBlocks, blockSize, Hkv, D]}, contiguous
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}; entries past a sequence's blocks are
     *     never read
     * @param contextLens int32 {@code [numSeqs]}, each in {@code [0, maxBlocks·blockSize]} and
     *     at most {@code maxContextLen}
     * @param scale the factor on {@code q·k}, usually {@code 1/sqrt(D)}
     * @param maxContextLen an upper bound of {@code contextLens}
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @return the output {@code [numSeqs, Hq, D]}, dtype of {@code query}
     */
    public static NDArray pagedAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray contextLens,
            float scale,
            int maxContextLen,
            NDArray alibiSlopes) {
        return pagedAttention(
                query, keyCache, valueCache, blockTables, contextLens, scale, maxContextLen,
                alibiSlopes, null, null);
    }

    /**
     * {@link #pagedAttention(NDArray, NDArray, NDArray, NDArray, NDArray, float, int, NDArray)}
     * over an FP8 cache: uint8 caches of OCP e4m3fn bytes, read as {@code byte · scale}.
     *
     * @param query {@code [numSeqs, Hq, D]}, float32 or float16, last dim contiguous
     * @param keyCache uint8 {@code [numBlocks, blockSize, Hkv, D]}, contiguous
     * @param valueCache uint8 {@code [numBlocks, blockSize, Hkv, D]}, contiguous
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}
     * @param contextLens int32 {@code [numSeqs]}
     * @param scale the factor on {@code q·k}
     * @param maxContextLen an upper bound of {@code contextLens}
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @param kScale float32 {@code [1]} or {@code [Hkv]} on the cache's device, or {@code null}
     *     for 1; only with a uint8 cache
     * @param vScale the value scales, likewise
     * @return the output {@code [numSeqs, Hq, D]}, dtype of {@code query}
     */
    public static NDArray pagedAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray contextLens,
            float scale,
            int maxContextLen,
            NDArray alibiSlopes,
            NDArray kScale,
            NDArray vScale) {
        return pagedAttention(
                query, keyCache, valueCache, blockTables, contextLens, scale, maxContextLen,
                alibiSlopes, kScale, vScale, -1, 0f);
    }

    /**
     * {@link #pagedAttention(NDArray, NDArray, NDArray, NDArray, NDArray, float, int, NDArray,
     * NDArray, NDArray)} with a sliding window and a logit soft-cap, as the cache-level {@link
     * #pagedAttention(NDArray, PagedKvCache, int, PagedBatch, float, NDArray, int, float)} has
     * them, for callers that keep their own block tables: the query at position {@code p =
     * contextLen - 1} sees key {@code j} iff {@code j <= p} and, when {@code windowLeft >= 0},
     * {@code j >= p - windowLeft}; the score {@code s = scale·q·k_j} becomes {@code
     * softcap·tanh(s / softcap)} when {@code softcap > 0}, then gets the ALiBi term.
     *
     * @param query {@code [numSeqs, Hq, D]}, float32 or float16, last dim contiguous
     * @param keyCache {@code [numBlocks, blockSize, Hkv, D]} in the query's dtype, or uint8 (FP8
     *     e4m3fn), contiguous
     * @param valueCache likewise
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}
     * @param contextLens int32 {@code [numSeqs]}
     * @param scale the factor on {@code q·k}
     * @param maxContextLen an upper bound of {@code contextLens}
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @param kScale float32 {@code [1]} or {@code [Hkv]}, or {@code null} for 1; only with a uint8
     *     cache
     * @param vScale the value scales, likewise
     * @param windowLeft the keys before the query's position it sees, {@code >= 0}, or {@code
     *     -1} for all
     * @param softcap the cap, finite and {@code >= 0} ({@code 0}: none)
     * @return the output {@code [numSeqs, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if {@code windowLeft < -1}, {@code softcap} is negative or
     *     not finite, or an argument breaks a rule of {@code paged_attention}
     */
    public static NDArray pagedAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray contextLens,
            float scale,
            int maxContextLen,
            NDArray alibiSlopes,
            NDArray kScale,
            NDArray vScale,
            int windowLeft,
            float softcap) {
        checkFeatures(windowLeft, softcap);
        return pagedAttention(
                query,
                keyCache,
                valueCache,
                blockTables,
                contextLens,
                scale,
                maxContextLen,
                alibiSlopes,
                true,
                kScale,
                vScale,
                windowLeft,
                softcap);
    }

    /**
     * {@link #pagedAttention} over one layer of a paged KV cache for a decode batch of that cache:
     * the block tables and context lengths are the batch's, checked once when the batch was built
     * (not copied back and checked again in every layer: on a GPU that copy is a synchronisation
     * per call).
     *
     * @param query {@code [numSeqs, Hq, D]}, the cache's dtype and head dim, last dim contiguous
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @param scale the factor on {@code q·k}, usually {@code 1/sqrt(D)}
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @return the output {@code [numSeqs, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if the batch is not one of this cache's, or an argument
     *     breaks a rule of {@code paged_attention}
     */
    public static NDArray pagedAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            float scale,
            NDArray alibiSlopes) {
        return pagedAttention(query, cache, layer, batch, scale, alibiSlopes, -1, 0f);
    }

    /**
     * {@link #pagedAttention(NDArray, PagedKvCache, int, PagedBatch, float, NDArray)} with a
     * sliding window (Mistral's {@code sliding_window}) and a logit soft-cap (Gemma-2's {@code
     * attn_logit_softcapping}), as {@link AttentionOptions} defines them for flash attention: the
     * query at position {@code p = contextLen - 1} sees key {@code j} iff {@code j <= p} and,
     * when {@code windowLeft >= 0}, {@code j >= p - windowLeft} ({@code 0}: only itself); the
     * score {@code s = scale·q·k_j} becomes {@code softcap·tanh(s / softcap)} when {@code
     * softcap > 0}, then gets the ALiBi term.
     *
     * @param query {@code [numSeqs, Hq, D]}, the cache's dtype and head dim, last dim contiguous
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @param scale the factor on {@code q·k}, usually {@code 1/sqrt(D)}
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @param windowLeft the keys before the query's position it sees, {@code >= 0}, or {@code
     *     -1} for all
     * @param softcap the cap, finite and {@code >= 0} ({@code 0}: none)
     * @return the output {@code [numSeqs, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if the batch is not one of this cache's, {@code
     *     windowLeft < -1}, {@code softcap} is negative or not finite, or an argument breaks a
     *     rule of {@code paged_attention}
     */
    public static NDArray pagedAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            float scale,
            NDArray alibiSlopes,
            int windowLeft,
            float softcap) {
        checkFeatures(windowLeft, softcap);
        cache.checkBatch(batch);
        return pagedAttention(
                query,
                cache.getKeyCache(layer),
                cache.getValueCache(layer),
                batch.getBlockTables(),
                batch.getContextLens(),
                scale,
                batch.getMaxContextLen(),
                alibiSlopes,
                false,
                cache.getKeyScale(layer),
                cache.getValueScale(layer),
                windowLeft,
                softcap);
    }

    private static NDArray pagedAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray contextLens,
            float scale,
            int maxContextLen,
            NDArray alibiSlopes,
            boolean checkIndices,
            NDArray kScale,
            NDArray vScale,
            int windowLeft,
            float softcap) {
        PtNDArray ptQuery = pytorchArray(query, "query");
        return OperatorCall.of(Operator.PAGED_ATTENTION)
                .tensor(ptQuery)
                .tensor(pytorchArray(keyCache, "keyCache"))
                .tensor(pytorchArray(valueCache, "valueCache"))
                .tensor(pytorchArray(blockTables, "blockTables"))
                .tensor(pytorchArray(contextLens, "contextLens"))
                .floatArg(scale)
                .intArg(maxContextLen)
                .optionalTensor(optionalArray(alibiSlopes, "alibiSlopes"))
                .boolArg(checkIndices)
                .optionalTensor(optionalArray(kScale, "kScale"))
                .optionalTensor(optionalArray(vScale, "vScale"))
                .intArg(windowLeft)
                .floatArg(softcap)
                .invoke(ptQuery.getManager())[0];
    }

    /**
     * Prefill attention over a paged KV cache: the new tokens of each sequence (a chunk, cached
     * first with {@link #reshapeAndCache}) attend causally to the sequence's cached prefix and to
     * themselves. Sequence {@code s} owns the packed query rows {@code [cuSeqlensQ[s],
     * cuSeqlensQ[s+1])}: the last {@code n} of its {@code contextLens[s]} tokens; row {@code t}
     * sits at position {@code p = contextLen - n + t} and sees keys {@code j <= p}. With one
     * chunk per prompt this is causal prefill; with several it is chunked prefill, and a prefix
     * shared through the block table is read, not recomputed.
     *
     * @param query packed new tokens {@code [T, Hq, D]}, float32 or float16, last dim contiguous
     * @param keyCache {@code [numBlocks, blockSize, Hkv, D]}, contiguous
     * @param valueCache {@code [numBlocks, blockSize, Hkv, D]}, contiguous
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}
     * @param cuSeqlensQ int32 {@code [numSeqs + 1]}, non-decreasing from 0 to {@code T}
     * @param contextLens int32 {@code [numSeqs]}: cached tokens, new ones included
     * @param scale the factor on {@code q·k}
     * @param maxSeqlenQ an upper bound of the chunk lengths
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            float scale,
            int maxSeqlenQ,
            NDArray alibiSlopes) {
        return pagedPrefillAttention(
                query, keyCache, valueCache, blockTables, cuSeqlensQ, contextLens, scale,
                maxSeqlenQ, alibiSlopes, null, null);
    }

    /**
     * {@link #pagedPrefillAttention(NDArray, NDArray, NDArray, NDArray, NDArray, NDArray, float,
     * int, NDArray)} over an FP8 cache: uint8 caches of OCP e4m3fn bytes, read as {@code byte ·
     * scale}.
     *
     * @param query packed new tokens {@code [T, Hq, D]}, float32 or float16, last dim contiguous
     * @param keyCache uint8 {@code [numBlocks, blockSize, Hkv, D]}, contiguous
     * @param valueCache uint8 {@code [numBlocks, blockSize, Hkv, D]}, contiguous
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}
     * @param cuSeqlensQ int32 {@code [numSeqs + 1]}, non-decreasing from 0 to {@code T}
     * @param contextLens int32 {@code [numSeqs]}: cached tokens, new ones included
     * @param scale the factor on {@code q·k}
     * @param maxSeqlenQ an upper bound of the chunk lengths
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @param kScale float32 {@code [1]} or {@code [Hkv]} on the cache's device, or {@code null}
     *     for 1; only with a uint8 cache
     * @param vScale the value scales, likewise
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            float scale,
            int maxSeqlenQ,
            NDArray alibiSlopes,
            NDArray kScale,
            NDArray vScale) {
        return pagedPrefillAttention(
                query, keyCache, valueCache, blockTables, cuSeqlensQ, contextLens, scale,
                maxSeqlenQ, alibiSlopes, kScale, vScale, -1, 0f);
    }

    /**
     * {@link #pagedPrefillAttention(NDArray, NDArray, NDArray, NDArray, NDArray, NDArray, float,
     * int, NDArray, NDArray, NDArray)} with a sliding window and a logit soft-cap, for callers
     * that keep their own block tables: row {@code t} of a chunk of {@code n} sits at {@code p =
     * contextLen - n + t} and sees keys {@code p - windowLeft <= j <= p} (no left edge when
     * {@code windowLeft = -1}); scores are soft-capped as in {@link #pagedAttention(NDArray,
     * NDArray, NDArray, NDArray, NDArray, float, int, NDArray, NDArray, NDArray, int, float)}.
     *
     * @param query packed new tokens {@code [T, Hq, D]}, float32 or float16, last dim contiguous
     * @param keyCache {@code [numBlocks, blockSize, Hkv, D]} in the query's dtype, or uint8 (FP8
     *     e4m3fn), contiguous
     * @param valueCache likewise
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}
     * @param cuSeqlensQ int32 {@code [numSeqs + 1]}, non-decreasing from 0 to {@code T}
     * @param contextLens int32 {@code [numSeqs]}: cached tokens, new ones included
     * @param scale the factor on {@code q·k}
     * @param maxSeqlenQ an upper bound of the chunk lengths
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @param kScale float32 {@code [1]} or {@code [Hkv]}, or {@code null} for 1; only with a uint8
     *     cache
     * @param vScale the value scales, likewise
     * @param windowLeft the keys before each row's position it sees, {@code >= 0}, or {@code -1}
     *     for all
     * @param softcap the cap, finite and {@code >= 0} ({@code 0}: none)
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if {@code windowLeft < -1}, {@code softcap} is negative or
     *     not finite, or an argument breaks a rule of {@code paged_prefill_attention}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            float scale,
            int maxSeqlenQ,
            NDArray alibiSlopes,
            NDArray kScale,
            NDArray vScale,
            int windowLeft,
            float softcap) {
        checkFeatures(windowLeft, softcap);
        return pagedPrefillAttention(
                query,
                keyCache,
                valueCache,
                blockTables,
                cuSeqlensQ,
                contextLens,
                scale,
                maxSeqlenQ,
                alibiSlopes,
                true,
                kScale,
                vScale,
                windowLeft,
                softcap);
    }

    /**
     * {@link #pagedPrefillAttention} over one layer of a paged KV cache for a batch of that cache:
     * block tables, query offsets and context lengths are the batch's, checked once when the
     * batch was built.
     *
     * @param query packed new tokens {@code [T, Hq, D]}, the cache's dtype and head dim
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @param scale the factor on {@code q·k}
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if the batch is not one of this cache's, or an argument
     *     breaks a rule of {@code paged_prefill_attention}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            float scale,
            NDArray alibiSlopes) {
        return pagedPrefillAttention(query, cache, layer, batch, scale, alibiSlopes, -1, 0f);
    }

    /**
     * {@link #pagedPrefillAttention(NDArray, PagedKvCache, int, PagedBatch, float, NDArray)}
     * with a sliding window and a logit soft-cap, as {@link #pagedAttention(NDArray,
     * PagedKvCache, int, PagedBatch, float, NDArray, int, float)} has them: row {@code t} of a
     * chunk of {@code n} sits at {@code p = contextLen - n + t} and sees keys {@code p -
     * windowLeft <= j <= p} (no left edge when {@code windowLeft = -1}).
     *
     * @param query packed new tokens {@code [T, Hq, D]}, the cache's dtype and head dim
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @param scale the factor on {@code q·k}
     * @param alibiSlopes float32 {@code [Hq]}, or {@code null} for none
     * @param windowLeft the keys before each row's position it sees, {@code >= 0}, or {@code -1}
     *     for all
     * @param softcap the cap, finite and {@code >= 0} ({@code 0}: none)
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if the batch is not one of this cache's, {@code
     *     windowLeft < -1}, {@code softcap} is negative or not finite, or an argument breaks a
     *     rule of {@code paged_prefill_attention}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            float scale,
            NDArray alibiSlopes,
            int windowLeft,
            float softcap) {
        checkFeatures(windowLeft, softcap);
        cache.checkBatch(batch);
        return pagedPrefillAttention(
                query,
                cache.getKeyCache(layer),
                cache.getValueCache(layer),
                batch.getBlockTables(),
                batch.getCuSeqlensQ(),
                batch.getContextLens(),
                scale,
                batch.getMaxQueryLen(),
                alibiSlopes,
                false,
                cache.getKeyScale(layer),
                cache.getValueScale(layer),
                windowLeft,
                softcap);
    }

    private static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            float scale,
            int maxSeqlenQ,
            NDArray alibiSlopes,
            boolean checkIndices,
            NDArray kScale,
            NDArray vScale,
            int windowLeft,
            float softcap) {
        PtNDArray ptQuery = pytorchArray(query, "query");
        return OperatorCall.of(Operator.PAGED_PREFILL_ATTENTION)
                .tensor(ptQuery)
                .tensor(pytorchArray(keyCache, "keyCache"))
                .tensor(pytorchArray(valueCache, "valueCache"))
                .tensor(pytorchArray(blockTables, "blockTables"))
                .tensor(pytorchArray(cuSeqlensQ, "cuSeqlensQ"))
                .tensor(pytorchArray(contextLens, "contextLens"))
                .floatArg(scale)
                .intArg(maxSeqlenQ)
                .optionalTensor(optionalArray(alibiSlopes, "alibiSlopes"))
                .boolArg(checkIndices)
                .optionalTensor(optionalArray(kScale, "kScale"))
                .optionalTensor(optionalArray(vScale, "vScale"))
                .intArg(windowLeft)
                .floatArg(softcap)
                .invoke(ptQuery.getManager())[0];
    }

    /**
     * The paged operators' window and soft-cap rules, checked in Java with the messages of
     * {@link AttentionOptions.Builder}'s (the native binding checks them again for other callers).
     */
    private static void checkFeatures(int windowLeft, float softcap) {
        AttentionOptions.checkWindowSize("windowLeft", windowLeft);
        AttentionOptions.checkSoftcap(softcap);
    }

    /** {@link #pytorchArray} of a {@code Tensor?} argument: null stays null (None). */
    private static PtNDArray optionalArray(NDArray array, String name) {
        return array == null ? null : pytorchArray(array, name);
    }

    /** The checks Java owns: nulls, bfloat16, arrays of another engine. */
    static PtNDArray pytorchArray(NDArray array, String name) {
        Objects.requireNonNull(array, name + " must not be null");
        if (array.getDataType() == DataType.BFLOAT16) {
            throw new IllegalArgumentException(
                    name
                            + ": bfloat16 is not supported from Java (DJL 0.36.0's PyTorch engine"
                            + " cannot hold bfloat16 arrays); use float16 or float32");
        }
        if (!(array instanceof PtNDArray)) {
            throw new IllegalArgumentException(
                    name
                            + ": expected an NDArray of the PyTorch engine, got one of "
                            + array.getManager().getEngine().getEngineName());
        }
        return (PtNDArray) array;
    }
}
