/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.ndarray.NDArray;
import ai.djl.pytorch.engine.PtNDArray;


/**
 * The operators that open and close a decoder step around {@link DecoderLayerOps}: the token
 * embedding into the stream, the final norm with the output projection into float32 logits, and
 * the copy of a step's host-built inputs into the arrays the step reads. Each writes into arrays
 * the caller owns and allocates nothing, so a whole step — these, the fused layers and {@code
 * SamplingOps} — can be captured into a CUDA graph ({@link CudaGraph}) and replayed
 * (docs/design/captured-decode-step.md). CPU and CUDA; every argument is validated natively and
 * a refused one is named.
 */
public final class StepOps {

    private StepOps() {}

    /**
     * Writes {@code hidden[t] = embedding[tokenIds[t]] * scale (+ positionEmbedding[positions[t]])},
     * rounded to the stream's dtype.
     *
     * @param hidden {@code [T, C]}, contiguous, the model's dtype; overwritten
     * @param tokenIds int64 {@code [T]}
     * @param embedding {@code [V, C]}, the dtype of {@code hidden}
     * @param positions int64 {@code [T]} with {@code positionEmbedding} (GPT-2), else null
     * @param positionEmbedding {@code [P, C]} or null
     * @param scale the embeddings' factor: 1, or Gemma's {@code sqrt(C)} as its dtype rounds it
     * @param checkIndices whether ids and positions are read back and checked against the tables
     *     (a device-to-host copy on a GPU); false where the caller vouches for them (a captured
     *     step, whose ids the sampler chose). The CPU always checks.
     * @throws IllegalArgumentException naming the argument the operator refuses
     */
    public static void embedTokens(
            NDArray hidden,
            NDArray tokenIds,
            NDArray embedding,
            NDArray positions,
            NDArray positionEmbedding,
            float scale,
            boolean checkIndices) {
        OperatorCall.of(Operator.EMBED_TOKENS)
                .tensor(AttentionOps.pytorchArray(hidden, "hidden"))
                .tensor(AttentionOps.pytorchArray(tokenIds, "tokenIds"))
                .tensor(AttentionOps.pytorchArray(embedding, "embedding"))
                .optionalTensor(optional(positions, "positions"))
                .optionalTensor(optional(positionEmbedding, "positionEmbedding"))
                .floatArg(scale)
                .boolArg(checkIndices)
                .invoke(AttentionOps.pytorchArray(hidden, "hidden").getManager());
    }

    /**
     * Writes {@code logits[r] = softcap(norm(hidden[rows[r]]) · headWeightᵀ)} in float32; the
     * normalised rows and the product are rounded to the stream's dtype as a model running in it
     * rounds them.
     *
     * @param logits float32 {@code [R, V]}, contiguous; overwritten
     * @param hidden {@code [T, C]}, contiguous
     * @param rows int64 {@code [R]} rows of {@code hidden}, or null for every row ({@code R = T})
     * @param normWeight float32 {@code [C]}: the norm's gain as applied (Gemma-2's {@code 1 + w})
     * @param normBias float32 {@code [C]} for LayerNorm, null for RMSNorm
     * @param headWeight {@code [V, C]}, the dtype of {@code hidden}
     * @param norm the final norm
     * @param normEps the norm's epsilon
     * @param softcap Gemma-2's final logit soft-cap, 0 for none
     * @param checkIndices whether {@code rows} is read back and checked (see {@link
     *     #embedTokens})
     * @throws IllegalArgumentException naming the argument the operator refuses
     */
    public static void decoderHead(
            NDArray logits,
            NDArray hidden,
            NDArray rows,
            NDArray normWeight,
            NDArray normBias,
            NDArray headWeight,
            DecoderLayerOptions.Norm norm,
            float normEps,
            float softcap,
            boolean checkIndices) {
        PtNDArray out = AttentionOps.pytorchArray(logits, "logits");
        OperatorCall.of(Operator.DECODER_HEAD)
                .tensor(out)
                .tensor(AttentionOps.pytorchArray(hidden, "hidden"))
                .optionalTensor(optional(rows, "rows"))
                .tensor(AttentionOps.pytorchArray(normWeight, "normWeight"))
                .optionalTensor(optional(normBias, "normBias"))
                .tensor(AttentionOps.pytorchArray(headWeight, "headWeight"))
                .intArg(norm.ordinal())
                .floatArg(normEps)
                .floatArg(softcap)
                .boolArg(checkIndices)
                .invoke(out.getManager());
    }

    /**
     * Copies a contiguous CPU array into {@code dst} (on the CPU or a GPU, in stream order),
     * which keeps its address: how a step's inputs reach the arrays a captured graph reads.
     *
     * @param dst the destination, contiguous
     * @param src a contiguous CPU array of the same dtype and element count
     * @throws IllegalArgumentException naming the argument the operator refuses
     */
    public static void copyFromHost(NDArray dst, NDArray src) {
        PtNDArray out = AttentionOps.pytorchArray(dst, "dst");
        OperatorCall.of(Operator.COPY_FROM_HOST)
                .tensor(out)
                .tensor(AttentionOps.pytorchArray(src, "src"))
                .invoke(out.getManager());
    }

    private static PtNDArray optional(NDArray array, String name) {
        return array == null ? null : AttentionOps.pytorchArray(array, name);
    }
}
