/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;

/**
 * The {@link Decoder}'s contiguous-cache path, DJL's {@code TextGenerator} protocol: inputs {@code
 * [inputIds (B, S), positionIds (B, S), attentionMask (B, past + S)?, k_0, v_0, ...]}, outputs
 * {@code [logits (B, S, V), present k_0, v_0, ...]}.
 *
 * <p>Whether the batch is padded is decided from what the caller passes, never by reading the
 * mask back: without an attention mask every key is visible and {@link
 * Decoder.ContiguousAttention#FLASH} runs {@code flash_attention}; a mask may hide keys (left
 * padding), so a call with one runs the masked stock attention. A {@code mask.eq(0).any()} read
 * here would be a device-to-host copy and wait per step; the caller already knows whether it
 * padded ({@link CausalLmTranslator} decides once per generation for DJL's {@code
 * TextGenerator}).
 */
final class ContiguousCachePath {

    private static final float MASKED = -1e30f;

    private final DecoderConfig config;
    private final DecoderLayers opByOp;
    /** Per layer: causal flash attention with the layer's window, the scale and the soft-cap. */
    private final AttentionOptions[] flashOptions;

    ContiguousCachePath(DecoderConfig config, DecoderLayers opByOp, AttentionOptions[] flash) {
        this.config = config;
        this.opByOp = opByOp;
        this.flashOptions = flash;
    }

    /**
     * One forward over a contiguous cache.
     *
     * @param weights the step's weights
     * @param inputs the protocol's inputs
     * @param flash whether unmasked calls attend with {@code flash_attention}
     * @return the logits and the present keys and values
     */
    NDList forward(StepWeights weights, NDList inputs, boolean flash) {
        int layers = config.getNumLayers();
        int n = inputs.size();
        boolean masked = n == 3 || n == 3 + 2 * layers;
        if (!masked && n != 2 && n != 2 + 2 * layers) {
            throw new IllegalArgumentException(
                    "expected [inputIds, positionIds] or [inputIds, positionIds, attentionMask]"
                            + " plus 0 or "
                            + 2 * layers
                            + " past key/value arrays, got "
                            + n
                            + " arrays");
        }
        int pastStart = masked ? 3 : 2;
        NDArray inputIds = inputs.get(0);
        NDArray positionIds = inputs.get(1);
        NDArray mask = masked ? inputs.get(2) : null;
        long batch = inputIds.getShape().get(0);
        long seq = inputIds.getShape().get(1);
        long past = n == pastStart ? 0 : inputs.get(pastStart).getShape().get(2);
        if (mask != null && mask.getShape().get(1) != past + seq) {
            throw new IllegalArgumentException(
                    "attentionMask: expected (B, past + S) = ("
                            + batch
                            + ", "
                            + (past + seq)
                            + "), got "
                            + mask.getShape());
        }
        boolean useFlash = flash && mask == null;
        NDList presents = new NDList(2 * layers);
        // The layers run on [B * S] rows, as the paged path does.
        NDArray positions = positionIds.reshape(-1);
        DecoderLayers.Step step = opByOp.step(weights, positions, true);
        NDArray x = opByOp.embed(step, inputIds.reshape(-1), positions); // [B * S, C]
        int heads = config.getNumHeads();
        int kvHeads = config.getNumKvHeads();
        int dim = config.getHeadDim();
        for (int l = 0; l < layers; ++l) {
            int layer = l;
            x =
                    opByOp.layer(
                            step,
                            l,
                            x,
                            qkv -> {
                                NDArray q = qkv[0].reshape(batch, seq, heads, dim);
                                // [B, Hkv, S, D]
                                NDArray kNew =
                                        qkv[1].reshape(batch, seq, kvHeads, dim)
                                                .transpose(0, 2, 1, 3);
                                NDArray vNew =
                                        qkv[2].reshape(batch, seq, kvHeads, dim)
                                                .transpose(0, 2, 1, 3);
                                NDArray kAll =
                                        past == 0
                                                ? kNew
                                                : inputs.get(pastStart + 2 * layer)
                                                        .concat(kNew, 2);
                                NDArray vAll =
                                        past == 0
                                                ? vNew
                                                : inputs.get(pastStart + 1 + 2 * layer)
                                                        .concat(vNew, 2);
                                presents.add(kAll);
                                presents.add(vAll);
                                NDArray attn;
                                if (useFlash) {
                                    attn =
                                            AttentionOps.flashAttention(
                                                    q,
                                                    kAll.transpose(0, 2, 1, 3),
                                                    vAll.transpose(0, 2, 1, 3),
                                                    flashOptions[layer]);
                                } else {
                                    attn = stockAttention(q, kAll, vAll, mask, past, layer);
                                }
                                return attn.reshape(batch * seq, config.getAttentionSize());
                            });
        }
        NDArray logits =
                opByOp.logits(step, x, null).reshape(batch, seq, config.getVocabSize());
        NDList out = new NDList(1 + 2 * layers);
        out.add(logits);
        out.addAll(presents);
        return out;
    }

    /**
     * Stock DJL attention over a contiguous cache, as transformers' eager attention: scaled scores,
     * the soft-cap's {@code tanh}, then the mask (causal, the layer's window counted in cache
     * slots, and the attention mask if any).
     *
     * @param q {@code [B, S, Hq, D]}
     * @param kAll {@code [B, Hkv, L, D]}
     * @param vAll {@code [B, Hkv, L, D]}
     * @param mask {@code [B, L]}, 1 = visible, or null (every key visible)
     * @param past {@code L - S}
     * @param layer the layer (its window)
     * @return {@code [B, S, Hq, D]}
     */
    private NDArray stockAttention(
            NDArray q, NDArray kAll, NDArray vAll, NDArray mask, long past, int layer) {
        long batch = q.getShape().get(0);
        long seq = q.getShape().get(1);
        long len = kAll.getShape().get(2);
        NDArray k = repeatKv(kAll);
        NDArray v = repeatKv(vAll);
        NDArray qh = q.transpose(0, 2, 1, 3);
        NDArray scores = qh.matMul(k.transpose(0, 1, 3, 2)).toType(DataType.FLOAT32, false);
        scores = scores.mul((float) config.getAttentionScale());
        float softcap = config.getAttentionSoftcap();
        if (softcap > 0) {
            scores = scores.div(softcap).tanh().mul(softcap);
        }
        NDManager m = q.getManager();
        NDArray keyPos = m.arange(0, (int) len, 1, DataType.INT64).reshape(1, len);
        NDArray queryPos = m.arange(past, past + seq, 1, DataType.INT64).reshape(seq, 1);
        NDArray visible = keyPos.lte(queryPos);
        int windowLeft = config.getWindowLeft(layer);
        if (windowLeft >= 0) {
            // Slots, not positions, as transformers counts: left padding shifts a row's keys
            // and its query alike.
            visible = visible.logicalAnd(keyPos.gte(queryPos.sub(windowLeft)));
        }
        visible = visible.reshape(1, 1, seq, len);
        if (mask != null) {
            visible = visible.logicalAnd(mask.eq(1).reshape(batch, 1, 1, len));
        }
        NDArray bias = visible.toType(DataType.FLOAT32, false).sub(1f).mul(-MASKED);
        NDArray probs = scores.add(bias).softmax(-1).toType(q.getDataType(), false);
        return probs.matMul(v).transpose(0, 2, 1, 3);
    }

    /** {@code [B, Hkv, L, D]} to {@code [B, Hq, L, D]}: query head h reads KV head h / groups. */
    private NDArray repeatKv(NDArray kv) {
        int groups = config.getNumHeads() / config.getNumKvHeads();
        if (groups == 1) {
            return kv;
        }
        Shape s = kv.getShape();
        return kv.expandDims(2)
                .repeat(2, groups)
                .reshape(s.get(0), s.get(1) * groups, s.get(2), s.get(3));
    }
}
