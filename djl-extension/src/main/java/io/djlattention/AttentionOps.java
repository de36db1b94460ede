/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.pytorch.engine.PtNDArray;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
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
 *
 * <p>A facade: each operator family lives in a class of its own in this package ({@code
 * FlashOps}, {@code LinearAttentionOps}, {@code EncoderOps}, {@code PagedOps}); this class holds
 * the public entry points and their documentation only.
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
        // The kernel always writes the logsumexp; it is freed natively, not wrapped.
        return FlashOps.flashAttention(q, k, v, options);
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
        return FlashOps.flashAttentionWithLogSumExp(q, k, v, options);
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
        return FlashOps.flashAttentionVarlen(
                q, k, v, cuSeqlensQ, cuSeqlensK, maxSeqlenQ, maxSeqlenK, options);
    }

    /**
     * Computes {@link #flashAttention} over FP8 inputs (FlashAttention-3's FP8 forward): {@code
     * q}, {@code k} and {@code v} hold OCP e4m3fn bytes ({@code torch.float8_e4m3fn}'s format,
     * in a UINT8 array: DJL has no FP8 data type), and the value of an element is its e4m3fn
     * value times the descale of its batch row and key/value head ({@code null}: 1). Query head
     * {@code h} takes the factor of key/value head {@code h / (Hq / Hkv)}. The scale multiplies
     * the dequantized {@code q·k}.
     *
     * <p>On the CPU the result is exact attention of the dequantized inputs (float32
     * accumulation, the output rounded once). On CUDA it runs a Hopper kernel: compute
     * capability 9.0 and {@code D = 128} only (any other call is refused, naming {@code q}); it
     * rounds the softmax probabilities to e4m3 before multiplying them with {@code v}, as
     * FlashAttention-3 does (on random inputs the float64 attention with that rounding differs
     * from the exact one by about 1% of the output's largest value).
     *
     * @param q queries {@code [B, Sq, Hq, D]}, UINT8 (e4m3fn bytes), last dim contiguous
     * @param k keys {@code [B, Sk, Hkv, D]}, UINT8, {@code Hq % Hkv == 0}
     * @param v values {@code [B, Sk, Hkv, D]}, UINT8
     * @param qDescale float32 {@code [1]} (per tensor) or {@code [B, Hkv]}, or {@code null} for 1
     * @param kDescale the same for {@code k}
     * @param vDescale the same for {@code v}
     * @param options scale (default {@code 1/sqrt(D)}, must be {@code > 0}), causal mask and
     *     valid key lengths; no sliding window, soft-cap or ALiBi
     * @return the output {@code [B, Sq, Hq, D]}, float16
     */
    public static NDArray flashAttentionFp8(
            NDArray q,
            NDArray k,
            NDArray v,
            NDArray qDescale,
            NDArray kDescale,
            NDArray vDescale,
            AttentionOptions options) {
        return FlashOps.flashAttentionFp8(q, k, v, qDescale, kDescale, vDescale, options);
    }

    /**
     * Computes {@link #flashAttentionFp8} and also returns the logsumexp of each row's scaled,
     * masked scores (natural log, from the dequantized inputs); a row that sees no key has
     * output 0 and logsumexp {@code -inf}.
     *
     * @param q queries {@code [B, Sq, Hq, D]}, UINT8 (e4m3fn bytes)
     * @param k keys {@code [B, Sk, Hkv, D]}, UINT8
     * @param v values {@code [B, Sk, Hkv, D]}, UINT8
     * @param qDescale float32 {@code [1]} or {@code [B, Hkv]}, or {@code null} for 1
     * @param kDescale the same for {@code k}
     * @param vDescale the same for {@code v}
     * @param options scale, causal mask and valid key lengths
     * @return the output {@code [B, Sq, Hq, D]} float16 and the logsumexp {@code [B, Hq, Sq]}
     *     float32
     */
    public static NDList flashAttentionFp8WithLogSumExp(
            NDArray q,
            NDArray k,
            NDArray v,
            NDArray qDescale,
            NDArray kDescale,
            NDArray vDescale,
            AttentionOptions options) {
        return FlashOps.flashAttentionFp8WithLogSumExp(
                q, k, v, qDescale, kDescale, vDescale, options);
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
        return LinearAttentionOps.causalLinearAttention(q, k, v, eps);
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
        return LinearAttentionOps.linearAttention(q, k, v, eps);
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
        return EncoderOps.bertAttention(qkv, qkvBias, kvLens, numHeads, scale);
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
        return EncoderOps.addBiasResidualLayerNorm(x, bias, residual, gamma, beta, eps);
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
        return EncoderOps.addBiasResidualAffine(x, bias, residual, scale, shift);
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
        return EncoderOps.addBiasGelu(x, bias, tanhApproximation);
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
        return EncoderOps.removePadding(x, lens);
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
        return EncoderOps.restorePadding(packed, cuSeqlens, seqLen);
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
        PagedOps.reshapeAndCache(key, value, keyCache, valueCache, slotMapping, null, null);
    }

    /**
     * {@link #reshapeAndCache(NDArray, NDArray, NDArray, NDArray, NDArray)} into an FP8 cache:
     * uint8 caches of OCP e4m3fn bytes, each value stored as {@code sat(round(x / scale))}
     * (saturated at ±448, round to nearest even). The array forms take e4m3 caches; an e5m2 cache
     * is a {@link PagedKvCache} of {@link io.djlattention.paged.KvCacheDtype#FP8_E5M2}, whose
     * per-layer forms pass its format to the operators.
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
        PagedOps.reshapeAndCache(key, value, keyCache, valueCache, slotMapping, kScale, vScale);
    }

    /**
     * Writes one layer's new keys and values to the slots a {@link PagedBatch} of this cache
     * holds ({@link #reshapeAndCache} on {@code cache}'s arrays and scales of {@code layer}). The
     * batch's slots were checked when the batch was built, so they are not copied back and
     * checked again (on a GPU that copy is a synchronisation per call).
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
        PagedOps.reshapeAndCache(key, value, cache, layer, batch);
    }

    /**
     * Decode attention over a paged KV cache whose arrays the caller keeps: one query token per
     * sequence attends to the first {@code contextLens[s]} cached tokens of its sequence, read
     * through its block table, with the window, soft-cap and ALiBi of {@link
     * PagedAttentionOptions}; a sequence of context 0 gets zeros. The operator checks the block
     * tables and lengths against the cache (one device-to-host copy per call); a {@link
     * PagedKvCache} batch is checked once instead ({@link #pagedAttention(NDArray, PagedKvCache,
     * int, PagedBatch, PagedAttentionOptions)}).
     *
     * @param query {@code [numSeqs, Hq, D]}, float32 or float16, last dim contiguous; {@code D}
     *     one of {@link PagedKvCache#supportedHeadDims()}
     * @param keyCache {@code [numBlocks, blockSize, Hkv, D]} in the query's dtype, or uint8 (FP8
     *     e4m3fn, scales in the options), contiguous, {@code Hq % Hkv == 0}, block size one of
     *     {@link PagedKvCache#supportedBlockSizes()}
     * @param valueCache likewise
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}; entries past a sequence's blocks are
     *     never read
     * @param contextLens int32 {@code [numSeqs]}, each in {@code [0, maxBlocks·blockSize]} and
     *     at most {@code maxContextLen}
     * @param maxContextLen an upper bound of {@code contextLens}
     * @param options scale, window, soft-cap, ALiBi slopes ({@code [Hq]} or {@code [numSeqs,
     *     Hq]}), FP8 scales
     * @return the output {@code [numSeqs, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if an argument breaks a rule of {@code paged_attention}
     */
    public static NDArray pagedAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray contextLens,
            int maxContextLen,
            PagedAttentionOptions options) {
        return PagedOps.pagedAttention(
                query, keyCache, valueCache, blockTables, contextLens, maxContextLen, options);
    }

    /**
     * {@link #pagedAttention(NDArray, NDArray, NDArray, NDArray, NDArray, int,
     * PagedAttentionOptions)} over one layer of a paged KV cache for a decode batch of that cache:
     * the block tables, context lengths and FP8 scales are the cache's and the batch's, checked
     * once when the batch was built (not copied back and checked again in every layer: on a GPU
     * that copy is a synchronisation per call).
     *
     * @param query {@code [numSeqs, Hq, D]}, the cache's dtype and head dim, last dim contiguous
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @param options scale, window, soft-cap, ALiBi slopes; no FP8 scales (the cache's are used)
     * @return the output {@code [numSeqs, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if the batch is not one of this cache's, the options set
     *     FP8 scales, or an argument breaks a rule of {@code paged_attention}
     */
    public static NDArray pagedAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            PagedAttentionOptions options) {
        return PagedOps.pagedAttention(query, cache, layer, batch, options);
    }

    /**
     * Prefill attention over a paged KV cache whose arrays the caller keeps: the new tokens of
     * each sequence (a chunk, cached first with {@link #reshapeAndCache}) attend causally to the
     * sequence's cached prefix and to themselves. Sequence {@code s} owns the packed query rows
     * {@code [cuSeqlensQ[s], cuSeqlensQ[s+1])}: the last {@code n} of its {@code contextLens[s]}
     * tokens; row {@code t} sits at position {@code p = contextLen - n + t} and sees keys {@code
     * j <= p} (and {@code j >= p - windowLeft} with a window). With one chunk per prompt this is
     * causal prefill; with several it is chunked prefill, and a prefix shared through the block
     * table is read, not recomputed. FlashAttention's {@code flash_attn_with_kvcache} semantics
     * are the same call: {@code optCausal(false)} (with {@code optWindowRight}) gives every row its
     * sequence's keys, and a chunk may be longer than its context ({@code n > contextLens[s]}:
     * causal rows before the first key give zeros).
     *
     * @param query packed new tokens {@code [T, Hq, D]}, float32 or float16, last dim contiguous
     * @param keyCache {@code [numBlocks, blockSize, Hkv, D]} in the query's dtype, or uint8 (FP8
     *     e4m3fn, scales in the options), contiguous
     * @param valueCache likewise
     * @param blockTables int32 {@code [numSeqs, maxBlocks]}
     * @param cuSeqlensQ int32 {@code [numSeqs + 1]}, non-decreasing from 0 to {@code T}
     * @param contextLens int32 {@code [numSeqs]}: cached tokens, new ones included
     * @param maxSeqlenQ an upper bound of the chunk lengths
     * @param options scale, causal mask, window, soft-cap, ALiBi slopes ({@code [Hq]} or {@code
     *     [numSeqs, Hq]}), FP8 scales
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if an argument breaks a rule of {@code
     *     paged_prefill_attention}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray keyCache,
            NDArray valueCache,
            NDArray blockTables,
            NDArray cuSeqlensQ,
            NDArray contextLens,
            int maxSeqlenQ,
            PagedAttentionOptions options) {
        return PagedOps.pagedPrefillAttention(
                query,
                keyCache,
                valueCache,
                blockTables,
                cuSeqlensQ,
                contextLens,
                maxSeqlenQ,
                options);
    }

    /**
     * {@link #pagedPrefillAttention(NDArray, NDArray, NDArray, NDArray, NDArray, NDArray, int,
     * PagedAttentionOptions)} over one layer of a paged KV cache for a batch of that cache: block
     * tables, query offsets, context lengths and FP8 scales are the cache's and the batch's,
     * checked once when the batch was built.
     *
     * @param query packed new tokens {@code [T, Hq, D]}, the cache's dtype and head dim
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @param options scale, window, soft-cap, ALiBi slopes; no FP8 scales (the cache's are used)
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if the batch is not one of this cache's, the options set
     *     FP8 scales, or an argument breaks a rule of {@code paged_prefill_attention}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            PagedAttentionOptions options) {
        return PagedOps.pagedPrefillAttention(query, cache, layer, batch, options);
    }

    /**
     * {@link #pagedPrefillAttention(NDArray, PagedKvCache, int, PagedBatch,
     * PagedAttentionOptions)} that attends each chunk's own tokens as computed: {@code key} and
     * {@code value} are the rows just written with {@link #reshapeAndCache(NDArray, NDArray,
     * PagedKvCache, int, PagedBatch)}, and only the cached prefix before each chunk of two or more
     * tokens is read from the cache (a chunk of one, a decode row, reads its token back, as
     * {@code pagedAttention} does). vLLM's prefix prefill: on an FP8 cache the new tokens are
     * attended unquantised, the prefix dequantised; on any other cache the result is the same as
     * without them.
     *
     * @param query packed new tokens {@code [T, Hq, D]}, the cache's dtype and head dim
     * @param key the chunks' keys {@code [T, Hkv, D]}, dtype of {@code query}, last dim
     *     contiguous
     * @param value the chunks' values {@code [T, Hkv, D]}, likewise
     * @param cache the cache
     * @param layer the layer, in {@code [0, cache.getNumLayers())}
     * @param batch the step's batch, prepared by {@code cache} and not closed
     * @param options scale, window, soft-cap, ALiBi slopes; no FP8 scales (the cache's are used)
     * @return the output {@code [T, Hq, D]}, dtype of {@code query}
     * @throws IllegalArgumentException if the batch is not one of this cache's, the options set
     *     FP8 scales, or an argument breaks a rule of {@code paged_prefill_attention}
     */
    public static NDArray pagedPrefillAttention(
            NDArray query,
            NDArray key,
            NDArray value,
            PagedKvCache cache,
            int layer,
            PagedBatch batch,
            PagedAttentionOptions options) {
        return PagedOps.pagedPrefillAttention(query, key, value, cache, layer, batch, options);
    }

    /**
     * The checks Java owns on an argument (nulls, bfloat16, arrays of another engine), as the
     * operator classes written before the split call them ({@link DecoderLayerOps}, {@link
     * SamplingOps}, {@link StepOps}); the families use {@link NativeArrays} directly.
     */
    static PtNDArray pytorchArray(NDArray array, String name) {
        return NativeArrays.pytorchArray(array, name);
    }
}
