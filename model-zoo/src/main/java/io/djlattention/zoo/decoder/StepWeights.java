/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The arrays a step reads, made once from the parameters: every matrix as {@code [out, in]}
 * for DJL's {@code linear} (GPT-2's Conv1D {@code [in, out]} matrices as transposed views, no
 * copy), LLaMA's stacked q|k|v and gate|up matrices, GPT-2's float32 norm parameters and
 * pending bias sums, and LLaMA's rotary tables. Made again when a parameter's array was
 * replaced (for example by DJL's {@code loadParameters}).
 */
final class StepWeights implements AutoCloseable {
    private final Decoder decoder;
    private final DecoderConfig config;
    private final NDArray[] sources;
    private final List<NDArray> owned = new ArrayList<>();
    final LayerWeights[] layers;
    final NDArray tokenTable;
    /** GPT-2's position embeddings; null for LLaMA. */
    final NDArray positionTable;
    /** Gemma-2: {@code sqrt(C)} in the model's dtype, the embeddings' factor; else null. */
    final NDArray embedScale;
    final NormWeights finalNorm = new NormWeights();
    /** {@code [V, C]}. */
    final NDArray head;
    /**
     * LLaMA: float32 {@code [maxPositions, 2 D]}, each position's cos then sin row; null for
     * GPT-2.
     */
    final NDArray rotaryTable;
    /** The fused layer's arrays, made on first use ({@link #fused}). */
    private FusedDecoderWeights fused;
    /** {@link #headNorm}'s arrays, made on first use. */
    private NDArray[] headNorm;

    /** LLaMA: float32 identity {@code [D, D]}; null for GPT-2. */
    final NDArray rotaryIdentity;
    /**
     * LLaMA: float32 {@code [D, D]}, 1 at {@code [partner(j), j]} where {@code partner} pairs
     * the rotated elements (j and j ± D/2, or j and j ^ 1 interleaved); null for GPT-2.
     */
    final NDArray rotaryPartner;

    /**
     * @param stacked LLaMA's stacked matrices by {@code model.layers.i.qkv} and {@code
     *     model.layers.i.gate_up} when {@link #setWeights} made them (the parameters are views
     *     of them); empty to stack copies here
     */
    StepWeights(Decoder decoder, Map<String, NDArray> stacked) {
        this.decoder = decoder;
        config = decoder.getConfig();
        sources = decoder.currentSources();
        for (NDArray a : sources) {
            if (a == null) {
                throw new IllegalStateException(
                        "Decoder has no weights: call setWeights or initializeRandom");
            }
        }
        owned.addAll(stacked.values());
        int numLayers = config.getNumLayers();
        layers = new LayerWeights[numLayers];
        if (config.getArchitecture() != DecoderConfig.Architecture.GPT2) {
            boolean gemma2 = config.getArchitecture() == DecoderConfig.Architecture.GEMMA2;
            for (int l = 0; l < numLayers; ++l) {
                String p = "model.layers." + l + ".";
                LayerWeights w = new LayerWeights();
                w.norm1.gain = rmsGain(p + "input_layernorm.weight");
                w.qkvWeight =
                        stacked.containsKey(p + "qkv")
                                ? stacked.get(p + "qkv")
                                : own(
                                        NDArrays.concat(
                                                new NDList(
                                                        decoder.weight(p + "self_attn.q_proj.weight"),
                                                        decoder.weight(p + "self_attn.k_proj.weight"),
                                                        decoder.weight(p + "self_attn.v_proj.weight")),
                                                0));
                w.outWeight = decoder.weight(p + "self_attn.o_proj.weight");
                if (gemma2) {
                    // Gemma-2's post_attention_layernorm norms the attention output; the MLP's
                    // input norm is pre_feedforward_layernorm.
                    w.attentionOutNorm = new NormWeights();
                    w.attentionOutNorm.gain = rmsGain(p + "post_attention_layernorm.weight");
                    w.norm2.gain = rmsGain(p + "pre_feedforward_layernorm.weight");
                    w.mlpOutNorm = new NormWeights();
                    w.mlpOutNorm.gain = rmsGain(p + "post_feedforward_layernorm.weight");
                } else {
                    w.norm2.gain = decoder.weight(p + "post_attention_layernorm.weight");
                }
                w.upWeight =
                        stacked.containsKey(p + "gate_up")
                                ? stacked.get(p + "gate_up")
                                : own(
                                        NDArrays.concat(
                                                new NDList(
                                                        decoder.weight(p + "mlp.gate_proj.weight"),
                                                        decoder.weight(p + "mlp.up_proj.weight")),
                                                0));
                w.downWeight = decoder.weight(p + "mlp.down_proj.weight");
                layers[l] = w;
            }
            tokenTable = decoder.weight("model.embed_tokens.weight");
            positionTable = null;
            // Gemma-2 multiplies by sqrt(C) rounded to the weights' dtype, as transformers
            // does.
            embedScale =
                    gemma2
                            ? inDataType(
                                    tokenTable
                                            .getManager()
                                            .create((float) Math.sqrt(config.getHiddenSize())))
                            : null;
            finalNorm.gain = rmsGain("model.norm.weight");
            head = config.isTieEmbeddings() ? tokenTable : decoder.weight("lm_head.weight");
            rotaryTable = own(rotaryTable(tokenTable.getManager()));
            int d = config.getHeadDim();
            float[] identity = new float[d * d];
            float[] partner = new float[d * d];
            boolean interleaved =
                    config.getRopeStyle() == DecoderConfig.RopeStyle.INTERLEAVED;
            for (int j = 0; j < d; ++j) {
                identity[j * d + j] = 1;
                int i = interleaved ? j ^ 1 : (j + d / 2) % d;
                partner[i * d + j] = 1;
            }
            NDManager m = tokenTable.getManager();
            rotaryIdentity = own(m.create(identity, new Shape(d, d)));
            rotaryPartner = own(m.create(partner, new Shape(d, d)));
        } else {
            NDArray pending = null; // float32 sum of the c_proj biases so far
            for (int l = 0; l < numLayers; ++l) {
                String p = "h." + l + ".";
                LayerWeights w = new LayerWeights();
                layerNorm(w.norm1, p + "ln_1.", pending);
                w.qkvWeight = own(decoder.weight(p + "attn.c_attn.weight").transpose());
                w.qkvBias = decoder.weight(p + "attn.c_attn.bias");
                w.outWeight = own(decoder.weight(p + "attn.c_proj.weight").transpose());
                pending = addPending(pending, decoder.weight(p + "attn.c_proj.bias"));
                layerNorm(w.norm2, p + "ln_2.", pending);
                w.upWeight = own(decoder.weight(p + "mlp.c_fc.weight").transpose());
                w.upBias = decoder.weight(p + "mlp.c_fc.bias");
                w.downWeight = own(decoder.weight(p + "mlp.c_proj.weight").transpose());
                pending = addPending(pending, decoder.weight(p + "mlp.c_proj.bias"));
                layers[l] = w;
            }
            tokenTable = decoder.weight("wte.weight");
            positionTable = decoder.weight("wpe.weight");
            embedScale = null;
            layerNorm(finalNorm, "ln_f.", pending);
            head = config.isTieEmbeddings() ? tokenTable : decoder.weight("lm_head.weight");
            rotaryTable = null;
            rotaryIdentity = null;
            rotaryPartner = null;
        }
    }

    /**
     * An RMSNorm gain as the step multiplies by it: the parameter (LLaMA), or Gemma-2's
     * {@code 1 + w} in float32 (transformers adds the 1 in float32 too).
     */
    private NDArray rmsGain(String name) {
        NDArray w = decoder.weight(name);
        if (config.getArchitecture() != DecoderConfig.Architecture.GEMMA2) {
            return w;
        }
        NDArray w32 = w.toType(DataType.FLOAT32, false);
        NDArray gain = w32.add(1f);
        if (w32 != w) {
            w32.close();
        }
        return own(gain);
    }

    /** A float32 array made here, converted to the model's dtype and owned. */
    private NDArray inDataType(NDArray f32) {
        NDArray converted = f32.toType(config.getDataType(), false);
        if (converted != f32) {
            f32.close();
        }
        return own(converted);
    }

    private void layerNorm(NormWeights n, String prefix, NDArray pending) {
        n.gain = float32(decoder.weight(prefix + "weight"));
        n.bias = float32(decoder.weight(prefix + "bias"));
        n.pending = pending;
    }

    private NDArray addPending(NDArray pending, NDArray bias) {
        NDArray b = float32(bias);
        return pending == null ? b : own(pending.add(b));
    }

    /** The array in float32: itself if it is, else an owned copy. */
    private NDArray float32(NDArray array) {
        NDArray f = array.toType(DataType.FLOAT32, false);
        return f == array ? array : own(f);
    }

    private NDArray own(NDArray array) {
        NDScope.unregister(array);
        owned.add(array);
        return array;
    }

    /** The fused layer's arrays, made once from these. */
    synchronized FusedDecoderWeights fused() {
        if (fused == null) {
            boolean gpt2 = config.getArchitecture() == DecoderConfig.Architecture.GPT2;
            NDArray[] qkv = new NDArray[layers.length];
            NDArray[] gateUp = new NDArray[layers.length];
            for (int l = 0; l < layers.length; ++l) {
                qkv[l] = layers[l].qkvWeight;
                gateUp[l] = layers[l].upWeight;
            }
            fused =
                    new FusedDecoderWeights(
                            config,
                            decoder::weight,
                            gpt2 ? null : qkv,
                            gpt2 ? null : gateUp);
        }
        return fused;
    }

    /**
     * The final norm as {@code decoder_head} takes it: float32 gain (Gemma-2's {@code 1 +
     * w}) and, for LayerNorm, bias; GPT-2's pending biases are already in the fused stream.
     */
    synchronized NDArray[] headNorm() {
        if (headNorm == null) {
            headNorm =
                    new NDArray[] {
                        float32(finalNorm.gain),
                        finalNorm.bias == null ? null : float32(finalNorm.bias)
                    };
        }
        return headNorm;
    }

    /** Whether every parameter still holds the array these were made from. */
    boolean isCurrent() {
        int i = 0;
        for (Parameter p : decoder.parameterList()) {
            if (!p.isInitialized() || p.getArray() != sources[i++]) {
                return false;
            }
        }
        return true;
    }

    @Override
    public synchronized void close() {
        if (fused != null) {
            fused.close();
            fused = null;
        }
        headNorm = null; // owned: closed below
        for (NDArray a : owned) {
            a.close();
        }
        owned.clear();
    }

/**
 * cos and sin of every position's rotary angles, float32 {@code [maxPositions, 2 D]}, laid
 * out for the step's rotation matrices: the cos row holds each pair's cos twice, the sin row
 * {@code -sin} where the pair's first element goes and {@code sin} where its second goes.
 */
private NDArray rotaryTable(NDManager manager) {
    int d = config.getHeadDim();
    int positions = config.getMaxPositions();
    float[] inv = config.getRopeInverseFrequencies();
    try (NDManager temp = manager.newSubManager()) {
        NDArray angles =
                temp.arange(0, positions, 1, DataType.INT64)
                        .toType(DataType.FLOAT32, false)
                        .expandDims(-1)
                        .mul(temp.create(inv)); // [P, D/2]
        NDArray cos = angles.cos();
        NDArray sin = angles.sin();
        NDArray cosRow;
        NDArray sinRow;
        if (config.getRopeStyle() == DecoderConfig.RopeStyle.INTERLEAVED) {
            cosRow = cos.stack(cos, -1).reshape(positions, d);
            sinRow = sin.neg().stack(sin, -1).reshape(positions, d);
        } else {
            cosRow = cos.concat(cos, -1);
            sinRow = sin.neg().concat(sin, -1);
        }
        NDArray table = cosRow.concat(sinRow, -1);
        table.attach(manager);
        return table;
    }
}
}
