/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.OperatorLibrary.ARG_BOOL;
import static io.djlattention.OperatorLibrary.ARG_FLOAT;
import static io.djlattention.OperatorLibrary.ARG_INT;
import static io.djlattention.OperatorLibrary.ARG_OPTIONAL_TENSOR;
import static io.djlattention.OperatorLibrary.ARG_TENSOR;

import java.util.Arrays;

/**
 * The {@code djl_attn} operators the Java API calls, each with the kinds of its schema's
 * arguments in order and the number of tensors it returns: the one place on the Java side that
 * states them. {@link #verifyAgainstNative()} holds this list against the schemas the native
 * library registered (the one list of {@code native-ops/src/registration/register_ops.cpp}), once
 * at first use, so a schema change that Java does not follow fails loudly at load, not as a crash
 * or a misread argument in some later call. Package-private: users call {@link AttentionOps} and
 * the other operator classes.
 */
enum Operator {
    /**
     * {@code flash_attention(q, k, v, kv_lens?, scale, causal, window_left, window_right,
     * softcap, alibi_slopes?) -> (out, lse)}.
     */
    FLASH_ATTENTION(
            "flash_attention", 2, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_FLOAT, ARG_BOOL, ARG_INT, ARG_INT, ARG_FLOAT, ARG_OPTIONAL_TENSOR),
    /**
     * {@code flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
     * max_seqlen_k, scale, causal, window_left, window_right, softcap, alibi_slopes?) -> (out,
     * lse)}.
     */
    FLASH_ATTENTION_VARLEN(
            "flash_attention_varlen", 2, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR,
            ARG_TENSOR, ARG_INT, ARG_INT, ARG_FLOAT, ARG_BOOL, ARG_INT, ARG_INT, ARG_FLOAT,
            ARG_OPTIONAL_TENSOR),
    /**
     * {@code flash_attention_fp8(q, k, v, kv_lens?, scale, causal, q_descale?, k_descale?,
     * v_descale?, out_float16) -> (out, lse)}.
     */
    FLASH_ATTENTION_FP8(
            "flash_attention_fp8", 2, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_FLOAT, ARG_BOOL, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_BOOL),
    /** {@code bert_attention(qkv, qkv_bias?, kv_lens?, num_heads, scale) -> out}. */
    BERT_ATTENTION(
            "bert_attention", 1, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR, ARG_INT,
            ARG_FLOAT),
    /** {@code add_bias_residual_layernorm(x, bias?, residual, gamma, beta, eps) -> out}. */
    ADD_BIAS_RESIDUAL_LAYERNORM(
            "add_bias_residual_layernorm", 1, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_TENSOR,
            ARG_TENSOR, ARG_TENSOR, ARG_FLOAT),
    /** {@code add_bias_gelu(x, bias?, tanh_approximation) -> out}. */
    ADD_BIAS_GELU("add_bias_gelu", 1, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_BOOL),
    /**
     * {@code reshape_and_cache(key, value, key_cache!, value_cache!, slot_mapping, check_slots,
     * k_scale?, v_scale?, fp8_e5m2) -> ()}.
     */
    RESHAPE_AND_CACHE(
            "reshape_and_cache", 0, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR,
            ARG_BOOL, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR, ARG_BOOL),
    /**
     * {@code paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale,
     * max_context_len, alibi_slopes?, check_indices, k_scale?, v_scale?, window_left, softcap,
     * fp8_e5m2) -> out}.
     */
    PAGED_ATTENTION(
            "paged_attention", 1, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR,
            ARG_FLOAT, ARG_INT, ARG_OPTIONAL_TENSOR, ARG_BOOL, ARG_OPTIONAL_TENSOR,
            ARG_OPTIONAL_TENSOR, ARG_INT, ARG_FLOAT, ARG_BOOL),
    /** {@code causal_dot_product(q, k, v) -> out}. */
    CAUSAL_DOT_PRODUCT("causal_dot_product", 1, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR),
    /**
     * {@code paged_prefill_attention(query, key_cache, value_cache, block_tables, cu_seqlens_q,
     * context_lens, scale, max_seqlen_q, alibi_slopes?, check_indices, k_scale?, v_scale?,
     * window_left, softcap, causal, window_right, key?, value?, fp8_e5m2) -> out}.
     */
    PAGED_PREFILL_ATTENTION(
            "paged_prefill_attention", 1, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR,
            ARG_TENSOR, ARG_TENSOR, ARG_FLOAT, ARG_INT, ARG_OPTIONAL_TENSOR, ARG_BOOL,
            ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR, ARG_INT, ARG_FLOAT, ARG_BOOL, ARG_INT,
            ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR, ARG_BOOL),
    /** {@code add_bias_residual_affine(x, bias?, residual, scale, shift) -> out}. */
    ADD_BIAS_RESIDUAL_AFFINE(
            "add_bias_residual_affine", 1, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_TENSOR,
            ARG_TENSOR, ARG_TENSOR),
    /** {@code remove_padding(x, lens) -> (packed, cu_seqlens)}. */
    REMOVE_PADDING("remove_padding", 2, ARG_TENSOR, ARG_TENSOR),
    /** {@code restore_padding(packed, cu_seqlens, seqlen) -> out}. */
    RESTORE_PADDING("restore_padding", 1, ARG_TENSOR, ARG_TENSOR, ARG_INT),
    /**
     * {@code decoder_layer(hidden!, positions, key_cache!, value_cache!, block_tables,
     * cu_seqlens_q, context_lens, slot_mapping, k_scale?, v_scale?, attn_norm_weight,
     * attn_norm_bias?, qkv_weight, qkv_bias?, rope_cos_sin?, out_weight, out_bias?,
     * attn_out_norm_weight?, mlp_norm_weight, mlp_norm_bias?, up_weight, up_bias?, down_weight,
     * down_bias?, mlp_out_norm_weight?, num_heads, norm_type, activation, norm_eps, scale,
     * window_left, softcap, rope_interleaved, check_indices, max_seqlen_q, fresh_chunks,
     * fp8_e5m2) -> ()}.
     */
    DECODER_LAYER(
            "decoder_layer", 0, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR,
            ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_INT, ARG_INT, ARG_INT, ARG_FLOAT, ARG_FLOAT, ARG_INT, ARG_FLOAT, ARG_BOOL,
            ARG_BOOL, ARG_INT, ARG_BOOL, ARG_BOOL),
    /**
     * {@code embed_tokens(hidden!, token_ids, embedding, positions?, position_embedding?, scale,
     * check_indices) -> ()}.
     */
    EMBED_TOKENS(
            "embed_tokens", 0, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR,
            ARG_OPTIONAL_TENSOR, ARG_FLOAT, ARG_BOOL),
    /**
     * {@code decoder_head(logits!, hidden, rows?, norm_weight, norm_bias?, head_weight, norm_type,
     * norm_eps, softcap, check_indices) -> ()}.
     */
    DECODER_HEAD(
            "decoder_head", 0, ARG_TENSOR, ARG_TENSOR, ARG_OPTIONAL_TENSOR, ARG_TENSOR,
            ARG_OPTIONAL_TENSOR, ARG_TENSOR, ARG_INT, ARG_FLOAT, ARG_FLOAT, ARG_BOOL),
    /** {@code copy_from_host(dst!, src) -> ()}. */
    COPY_FROM_HOST("copy_from_host", 0, ARG_TENSOR, ARG_TENSOR),
    /** {@code cuda_graph_measure_begin(anchor) -> ()}. */
    CUDA_GRAPH_MEASURE_BEGIN("cuda_graph_measure_begin", 0, ARG_TENSOR),
    /** {@code cuda_graph_measure_end(anchor) -> bytes}. */
    CUDA_GRAPH_MEASURE_END("cuda_graph_measure_end", 1, ARG_TENSOR),
    /** {@code cuda_graph_capture_begin(arena!) -> ()}. */
    CUDA_GRAPH_CAPTURE_BEGIN("cuda_graph_capture_begin", 0, ARG_TENSOR),
    /** {@code cuda_graph_capture_end(arena) -> [graph id, nodes]}. */
    CUDA_GRAPH_CAPTURE_END("cuda_graph_capture_end", 1, ARG_TENSOR),
    /** {@code cuda_graph_replay(arena!, graph) -> ()}. */
    CUDA_GRAPH_REPLAY("cuda_graph_replay", 0, ARG_TENSOR, ARG_INT),
    /** {@code cuda_graph_release(arena, graph) -> ()}. */
    CUDA_GRAPH_RELEASE("cuda_graph_release", 0, ARG_TENSOR, ARG_INT),
    /**
     * {@code sample_tokens(ids!, logits, temperature, top_k, top_p, seeds, offsets) -> ()}: one
     * token id per row of logits, greedy or sampled on the logits' device.
     */
    SAMPLE_TOKENS(
            "sample_tokens",
            0,
            ARG_TENSOR,
            ARG_TENSOR,
            ARG_TENSOR,
            ARG_TENSOR,
            ARG_TENSOR,
            ARG_TENSOR,
            ARG_TENSOR),
    /**
     * {@code encoder_layer(hidden!, cu_seqlens, max_seqlen, qkv_weight, qkv_bias, out_weight,
     * out_bias, attn_norm_weight, attn_norm_bias, up_weight, up_bias, down_weight, down_bias,
     * ffn_norm_weight, ffn_norm_bias, num_heads, norm_eps, scale, gelu_tanh) -> ()}.
     */
    ENCODER_LAYER(
            "encoder_layer", 0, ARG_TENSOR, ARG_TENSOR, ARG_INT, ARG_TENSOR, ARG_TENSOR,
            ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_TENSOR,
            ARG_TENSOR, ARG_TENSOR, ARG_TENSOR, ARG_INT, ARG_FLOAT, ARG_FLOAT, ARG_BOOL),
    /** {@code gemm_pack_weight(weight, mode) -> packed}. */
    GEMM_PACK_WEIGHT("gemm_pack_weight", 1, ARG_TENSOR, ARG_INT);

    private final String schemaName;
    private final int numOutputs;
    private final int[] argKinds;
    /** The operator's index in the native library's list; set by {@link #verifyAgainstNative}. */
    private int nativeIndex = -1;

    Operator(String schemaName, int numOutputs, int... argKinds) {
        this.schemaName = schemaName;
        this.numOutputs = numOutputs;
        this.argKinds = argKinds;
    }

    /**
     * Returns the operator's name in the {@code djl_attn} namespace.
     *
     * @return the name, for example {@code flash_attention}
     */
    String schemaName() {
        return schemaName;
    }

    /**
     * Returns the number of tensors the operator returns.
     *
     * @return 0, 1 or 2
     */
    int numOutputs() {
        return numOutputs;
    }

    /**
     * Returns the kind of each schema argument, in order ({@code OperatorLibrary.ARG_*}).
     *
     * @return a copy of the kinds
     */
    int[] argKinds() {
        return argKinds.clone();
    }

    int argKind(int index) {
        return argKinds[index];
    }

    /** The index {@code djl_attn_call_operator} takes; valid once verified. */
    int nativeIndex() {
        return nativeIndex;
    }

    int numArgs() {
        return argKinds.length;
    }

    /**
     * Checks every operator of this list against the schema the loaded native library registered
     * under its name: same argument kinds in the same order, same number of outputs; and records
     * each operator's native index, by which calls name it. Runs once, before any call
     * (OperatorCall publishes the indices through a volatile flag).
     *
     * @throws IllegalStateException naming the first operator that differs, with its schema
     */
    static void verifyAgainstNative() {
        int count = OperatorLibrary.operatorCount();
        for (Operator op : values()) {
            int index = -1;
            for (int i = 0; i < count; ++i) {
                if (op.schemaName.equals(OperatorLibrary.operatorName(i))) {
                    index = i;
                    break;
                }
            }
            if (index < 0) {
                throw new IllegalStateException(
                        "djl_attn: the native library defines no operator " + op.schemaName);
            }
            int[] kinds = new int[OperatorLibrary.operatorArgKinds(index, null, 0)];
            OperatorLibrary.operatorArgKinds(index, kinds, kinds.length);
            if (!Arrays.equals(kinds, op.argKinds)
                    || OperatorLibrary.operatorNumOutputs(index) != op.numOutputs) {
                throw new IllegalStateException(
                        "djl_attn: Operator."
                                + op.name()
                                + " does not match the native schema "
                                + OperatorLibrary.operatorSchema(index)
                                + ": Java has argument kinds "
                                + Arrays.toString(op.argKinds)
                                + " and "
                                + op.numOutputs
                                + " outputs");
            }
            op.nativeIndex = index;
        }
    }
}
