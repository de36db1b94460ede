// Parameters of the operators that open and close a decoder step around the fused layers
// (docs/design/captured-decode-step.md): embed_tokens writes the stream, decoder_head turns it
// into float32 logits. Together with decoder_layer and sample_tokens they are a whole step with
// no operator that allocates its output, which is what a CUDA graph capture needs.
#pragma once

#include <cstdint>

#include "common/element_type.h"
#include "decoder/decoder_layer_params.h"

namespace djl_attn::step {

using ::djl_attn::ElementType;

// hidden[t] = embedding[ids[t]] * scale (+ position_embedding[positions[t]]), rounded to dtype.
struct EmbedParams {
  void* hidden;                    // [T, C], contiguous
  const int64_t* token_ids;        // [T], each in [0, vocab)
  const void* embedding;           // [vocab, C], contiguous
  const int64_t* positions;        // [T], or null without position_embedding
  const void* position_embedding;  // [P, C] (GPT-2's wpe), or null
  int64_t tokens, hidden_size, vocab, num_positions;
  float scale;                     // 1, or Gemma's sqrt(C) as the model's dtype rounds it
  ElementType dtype;               // of hidden and both tables
};

// logits[r] = softcap(norm(hidden[rows[r]]) · head_weightᵀ) in float32; the normalised row is
// rounded to dtype before the GEMM and the GEMM's output to dtype after it, as a model that
// runs in dtype does.
struct HeadParams {
  float* logits;                  // [R, V], contiguous
  const void* hidden;             // [T, C], contiguous
  const int64_t* rows;            // [R] rows of hidden, or null: every row (R = T)
  decoder::NormWeights norm;      // float32 [C] gain (and LayerNorm bias)
  decoder::NormType norm_type;
  float norm_eps;
  const void* head_weight;        // [V, C], contiguous, dtype
  float softcap;                  // 0: none; else logits = softcap * tanh(logits / softcap)
  int64_t num_rows, tokens, hidden_size, vocab;
  ElementType dtype;
};

}  // namespace djl_attn::step
