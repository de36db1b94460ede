/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.DecoderLayerOptions;
import io.djlattention.DecoderLayerWeights;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * A {@link Decoder}'s layers in the layout of the fused {@code decoder_layer} operator, made once
 * from its parameters (docs/design/fused-decoder-layer.md, "Weights"): LLaMA's and Gemma-2's
 * stacked q|k|v and gate|up matrices are reused as they are; GPT-2's Conv1D matrices become
 * contiguous {@code [out, in]} copies; norm gains and biases become float32 (Gemma-2's {@code 1 +
 * w}); the rotary table is built in float32 as transformers builds it. Owns what it made.
 */
final class FusedDecoderWeights implements AutoCloseable {

    private final List<NDArray> owned = new ArrayList<>();
    private final DecoderLayerWeights[] layers;
    private final DecoderLayerOptions[] options;

    /**
     * @param c the configuration
     * @param weight a parameter's array by Hugging Face name
     * @param stackedQkv LLaMA / Gemma-2: per layer the stacked {@code [(Hq + 2 Hkv) D, C]}
     *     matrix; null for GPT-2
     * @param stackedGateUp LLaMA / Gemma-2: per layer the stacked {@code [2 I, C]}; null for GPT-2
     */
    FusedDecoderWeights(
            DecoderConfig c,
            Function<String, NDArray> weight,
            NDArray[] stackedQkv,
            NDArray[] stackedGateUp) {
        int n = c.getNumLayers();
        layers = new DecoderLayerWeights[n];
        options = new DecoderLayerOptions[n];
        boolean gpt2 = c.getArchitecture() == DecoderConfig.Architecture.GPT2;
        boolean gemma2 = c.getArchitecture() == DecoderConfig.Architecture.GEMMA2;
        NDArray rope = gpt2 ? null : own(ropeTable(c, weight.apply(firstName(c)).getManager()));
        for (int l = 0; l < n; ++l) {
            DecoderLayerWeights.Builder w = DecoderLayerWeights.builder();
            if (gpt2) {
                String p = "h." + l + ".";
                Function<String, NDArray> vec = name -> float32(weight.apply(p + name));
                Function<String, NDArray> mat = name -> outIn(weight.apply(p + name));
                w.setAttentionNorm(vec.apply("ln_1.weight"), vec.apply("ln_1.bias"))
                        .setQkv(mat.apply("attn.c_attn.weight"), vec.apply("attn.c_attn.bias"))
                        .setOut(mat.apply("attn.c_proj.weight"), vec.apply("attn.c_proj.bias"))
                        .setMlpNorm(vec.apply("ln_2.weight"), vec.apply("ln_2.bias"))
                        .setUp(mat.apply("mlp.c_fc.weight"), vec.apply("mlp.c_fc.bias"))
                        .setDown(mat.apply("mlp.c_proj.weight"), vec.apply("mlp.c_proj.bias"));
            } else {
                String p = "model.layers." + l + ".";
                Function<String, NDArray> rms = name -> gain(weight.apply(p + name), gemma2);
                w.setAttentionNorm(rms.apply("input_layernorm.weight"), null)
                        .setQkv(stackedQkv[l], null)
                        .optRope(rope)
                        .setOut(weight.apply(p + "self_attn.o_proj.weight"), null)
                        .setUp(stackedGateUp[l], null)
                        .setDown(weight.apply(p + "mlp.down_proj.weight"), null);
                if (gemma2) {
                    // Gemma-2's post_attention_layernorm norms the attention output; the MLP's
                    // input norm is pre_feedforward_layernorm.
                    w.optAttentionOutNorm(rms.apply("post_attention_layernorm.weight"))
                            .setMlpNorm(rms.apply("pre_feedforward_layernorm.weight"), null)
                            .optMlpOutNorm(rms.apply("post_feedforward_layernorm.weight"));
                } else {
                    w.setMlpNorm(rms.apply("post_attention_layernorm.weight"), null);
                }
            }
            layers[l] = w.build();
            options[l] = options(c, l);
        }
    }

    private static String firstName(DecoderConfig c) {
        return c.getArchitecture() == DecoderConfig.Architecture.GPT2
                ? "wte.weight"
                : "model.embed_tokens.weight";
    }

    /** The operator's options for layer {@code l}: the settings every other path applies too. */
    private static DecoderLayerOptions options(DecoderConfig c, int l) {
        DecoderLayerOptions.Builder o =
                DecoderLayerOptions.builder()
                        .setNumHeads(c.getNumHeads())
                        .setScale((float) c.getAttentionScale())
                        .optNormEps(c.getNormEps())
                        .optWindowLeft(c.getWindowLeft(l))
                        .optSoftcap(c.getAttentionSoftcap())
                        .optRopeInterleaved(
                                c.getRopeStyle() == DecoderConfig.RopeStyle.INTERLEAVED);
        switch (c.getArchitecture()) {
            case GPT2:
                return o.optNorm(DecoderLayerOptions.Norm.LAYER)
                        .optActivation(DecoderLayerOptions.Activation.GELU_TANH)
                        .build();
            case GEMMA2:
                return o.optActivation(DecoderLayerOptions.Activation.GEGLU_TANH).build();
            default:
                return o.optActivation(DecoderLayerOptions.Activation.SWIGLU).build();
        }
    }

    DecoderLayerWeights layer(int l) {
        return layers[l];
    }

    DecoderLayerOptions options(int l) {
        return options[l];
    }

    /**
     * The rotary table {@code [P, D]} float32: per position the cos of the {@code D/2}
     * frequencies, then their sin; frequencies and angles in float32 as transformers computes
     * them (and as the op-by-op path's table does).
     */
    private static NDArray ropeTable(DecoderConfig c, NDManager manager) {
        int d = c.getHeadDim();
        int half = d / 2;
        int positions = c.getMaxPositions();
        float[] inv = c.getRopeInverseFrequencies();
        float[] table = new float[positions * d];
        for (int p = 0; p < positions; ++p) {
            for (int i = 0; i < half; ++i) {
                float angle = (float) p * inv[i];
                table[p * d + i] = (float) Math.cos(angle);
                table[p * d + half + i] = (float) Math.sin(angle);
            }
        }
        return manager.create(table, new Shape(positions, d));
    }

    /** A Conv1D matrix {@code [in, out]} as a contiguous {@code [out, in]} copy. */
    private NDArray outIn(NDArray inOut) {
        Shape s = inOut.getShape();
        // flatten() of the transposed view copies it into a contiguous array.
        return own(inOut.transpose().flatten().reshape(s.get(1), s.get(0)));
    }

    /** An RMSNorm gain as the operator applies it: float32, Gemma-2's {@code 1 + w}. */
    private NDArray gain(NDArray w, boolean plusOne) {
        NDArray f = float32(w);
        return plusOne ? own(f.add(1f)) : f;
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

    @Override
    public void close() {
        for (NDArray a : owned) {
            a.close();
        }
        owned.clear();
    }
}
