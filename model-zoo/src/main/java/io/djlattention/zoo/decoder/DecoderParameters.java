/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A {@link Decoder}'s parameters as facts of its configuration: their Hugging Face names and
 * shapes, their DJL types, and the groups LLaMA-style models store stacked.
 */
final class DecoderParameters {

    private DecoderParameters() {}

    /**
     * Returns the Hugging Face name and shape of every parameter of a configuration.
     *
     * @param c the configuration
     * @return name to shape, in model order
     */
    static Map<String, Shape> shapes(DecoderConfig c) {
        Map<String, Shape> shapes = new LinkedHashMap<>();
        int hidden = c.getHiddenSize();
        int inter = c.getIntermediateSize();
        int kvDim = c.getNumKvHeads() * c.getHeadDim();
        int qDim = c.getAttentionSize();
        if (c.getArchitecture() != DecoderConfig.Architecture.GPT2) {
            boolean gemma2 = c.getArchitecture() == DecoderConfig.Architecture.GEMMA2;
            shapes.put("model.embed_tokens.weight", new Shape(c.getVocabSize(), hidden));
            for (int l = 0; l < c.getNumLayers(); ++l) {
                String p = "model.layers." + l + ".";
                shapes.put(p + "input_layernorm.weight", new Shape(hidden));
                shapes.put(p + "self_attn.q_proj.weight", new Shape(qDim, hidden));
                shapes.put(p + "self_attn.k_proj.weight", new Shape(kvDim, hidden));
                shapes.put(p + "self_attn.v_proj.weight", new Shape(kvDim, hidden));
                shapes.put(p + "self_attn.o_proj.weight", new Shape(hidden, qDim));
                shapes.put(p + "post_attention_layernorm.weight", new Shape(hidden));
                shapes.put(p + "mlp.gate_proj.weight", new Shape(inter, hidden));
                shapes.put(p + "mlp.up_proj.weight", new Shape(inter, hidden));
                shapes.put(p + "mlp.down_proj.weight", new Shape(hidden, inter));
                if (gemma2) {
                    shapes.put(p + "pre_feedforward_layernorm.weight", new Shape(hidden));
                    shapes.put(p + "post_feedforward_layernorm.weight", new Shape(hidden));
                }
            }
            shapes.put("model.norm.weight", new Shape(hidden));
            if (!c.isTieEmbeddings()) {
                shapes.put("lm_head.weight", new Shape(c.getVocabSize(), hidden));
            }
        } else {
            shapes.put("wte.weight", new Shape(c.getVocabSize(), hidden));
            shapes.put("wpe.weight", new Shape(c.getMaxPositions(), hidden));
            for (int l = 0; l < c.getNumLayers(); ++l) {
                String p = "h." + l + ".";
                shapes.put(p + "ln_1.weight", new Shape(hidden));
                shapes.put(p + "ln_1.bias", new Shape(hidden));
                shapes.put(p + "attn.c_attn.weight", new Shape(hidden, 3L * hidden));
                shapes.put(p + "attn.c_attn.bias", new Shape(3L * hidden));
                shapes.put(p + "attn.c_proj.weight", new Shape(hidden, hidden));
                shapes.put(p + "attn.c_proj.bias", new Shape(hidden));
                shapes.put(p + "ln_2.weight", new Shape(hidden));
                shapes.put(p + "ln_2.bias", new Shape(hidden));
                shapes.put(p + "mlp.c_fc.weight", new Shape(hidden, inter));
                shapes.put(p + "mlp.c_fc.bias", new Shape(inter));
                shapes.put(p + "mlp.c_proj.weight", new Shape(inter, hidden));
                shapes.put(p + "mlp.c_proj.bias", new Shape(hidden));
            }
            shapes.put("ln_f.weight", new Shape(hidden));
            shapes.put("ln_f.bias", new Shape(hidden));
            if (!c.isTieEmbeddings()) {
                shapes.put("lm_head.weight", new Shape(c.getVocabSize(), hidden));
            }
        }
        return shapes;
    }

    /** A parameter's DJL type by its name: biases, norm gains, weights. */
    static Parameter.Type typeOf(String name) {
        if (name.endsWith(".bias")) {
            return Parameter.Type.BIAS;
        }
        if (name.contains("ln") || name.contains("norm")) {
            return Parameter.Type.GAMMA;
        }
        return Parameter.Type.WEIGHT;
    }

    /**
     * LLaMA's (and Gemma-2's) projections that read the same input, stored as one matrix each:
     * per layer {@code model.layers.i.qkv} (the q, k, v rows) and {@code model.layers.i.gate_up}
     * (gate, up); their Hugging Face parameters are views of it, so a step runs one GEMM per group
     * with no second copy of the weights. Empty for GPT-2.
     *
     * @param c the configuration
     * @return group name to its members' parameter names, in row order
     */
    static Map<String, List<String>> stackedGroups(DecoderConfig c) {
        Map<String, List<String>> groups = new LinkedHashMap<>();
        if (c.getArchitecture() != DecoderConfig.Architecture.GPT2) {
            for (int l = 0; l < c.getNumLayers(); ++l) {
                String p = "model.layers." + l + ".";
                groups.put(
                        p + "qkv",
                        List.of(
                                p + "self_attn.q_proj.weight",
                                p + "self_attn.k_proj.weight",
                                p + "self_attn.v_proj.weight"));
                groups.put(
                        p + "gate_up",
                        List.of(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"));
            }
        }
        return groups;
    }

    /**
     * Concatenates parameters along their rows into one array (owned by their manager) and
     * replaces each in {@code values} by a view of its rows.
     */
    static NDArray stackRows(Map<String, NDArray> values, List<String> names) {
        NDList parts = new NDList(names.size());
        for (String name : names) {
            parts.add(values.get(name));
        }
        NDArray stack = NDArrays.concat(parts, 0);
        NDScope.unregister(stack);
        long row = 0;
        for (String name : names) {
            long rows = values.get(name).getShape().get(0);
            NDArray view = stack.get(new NDIndex("{}:{}", row, row + rows));
            NDScope.unregister(view);
            values.get(name).close();
            values.put(name, view);
            row += rows;
        }
        return stack;
    }
}
