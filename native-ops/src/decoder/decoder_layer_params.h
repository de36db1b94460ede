// Parameters of decoder_layer: one pre-norm transformer decoder layer over a paged KV cache
// (docs/design/fused-decoder-layer.md). Shared by the CPU kernel and the CUDA one to come; knows
// nothing of PyTorch or Java: the binding fills it from validated tensors.
//
//   x [T, C] -> norm1 -> GEMM qkv (+bias) -> RoPE(q, k) -> cache write (k, v)
//            -> paged attention of q (decode and chunked-prefill rows alike) -> GEMM out (+bias)
//            -> [attn_out_norm] -> x += ; x -> norm2 -> GEMM up (+bias) -> activation
//            -> GEMM down (+bias) -> [mlp_out_norm] -> x +=
#pragma once

#include <cstdint>

#include "common/element_type.h"
#include "paged/paged_params.h"

namespace djl_attn::decoder {

using ::djl_attn::ElementType;

enum class NormType : int { kRms = 0, kLayer = 1 };

// The MLP's activation. Gated ones read up_weight as [2 I, C], gate rows then up rows.
enum class Activation : int {
  kSwiGlu = 0,     // silu(gate) * up (LLaMA, Mistral)
  kGeGluTanh = 1,  // gelu_tanh(gate) * up (Gemma-2's gelu_pytorch_tanh)
  kGeluTanh = 2,   // gelu_tanh(up) (GPT-2's gelu_new)
};

constexpr int kNumNormTypes = 2;
constexpr int kNumActivations = 3;

inline bool is_gated(Activation a) { return a != Activation::kGeluTanh; }

// A norm's float32 parameters: y = normalise(x) * weight (+ bias for LayerNorm).
struct NormWeights {
  const float* weight;  // [C]; RMSNorm: the multiplier as applied (Gemma-2: 1 + w)
  const float* bias;    // [C] (LayerNorm), or null
};

// A projection: y[t, :] = x[t, :] · weightᵀ (+ bias).
struct Projection {
  const void* weight;  // [out, in], contiguous, dtype of the stream
  const float* bias;   // [out] float32, or null
  int64_t out, in;
};

// The paged KV cache as the layer reads and writes it, with the step's batch: the paged
// operators' one value (paged::PagedKv, carried as it is to the cache write and the attention)
// and what the layer's rows add to it. Decode rows are chunks of one.
struct PagedCacheView {
  paged::PagedKv kv;            // context_lens count the new tokens too
  const int32_t* cu_seqlens_q;  // [num_seqs + 1]: sequence s owns rows [cu[s], cu[s+1])
  const int64_t* slot_mapping;  // [T]: where each new token's k/v go (negative: skip)
  int64_t num_seqs;
  int64_t max_seqlen_q;         // >= every chunk
  bool fresh_chunks;            // every chunk is its sequence's whole context (nothing cached
                                // before it): attention needs only the chunk's own k and v
};

struct DecoderLayerParams {
  void* hidden;               // [T, C], contiguous: the residual stream, updated in place
  const int64_t* positions;   // [T]: rows of rope_cos_sin
  PagedCacheView cache;

  NormWeights attn_norm;
  Projection qkv;             // out = (Hq + 2 Hkv) D: q rows, then k, then v
  const float* rope_cos_sin;  // [rope_positions, rope_dim]: cos of rope_dim/2 frequencies, then
                              // their sin; null: no rotary embedding
  Projection out_proj;        // [C, Hq D]
  const float* attn_out_norm; // [C] RMS gain applied to the attention output before the add, or
                              // null (Gemma-2's post_attention_layernorm)
  NormWeights mlp_norm;
  Projection up;              // gated: [2 I, C]; else [I, C]
  Projection down;            // [C, I]
  const float* mlp_out_norm;  // [C] RMS gain of the MLP output, or null (Gemma-2)

  int64_t num_tokens;     // T
  int64_t hidden_size;    // C
  int64_t heads_q;        // Hq
  int64_t heads_kv;       // Hkv, divides Hq
  int64_t head_dim;       // D
  int64_t intermediate;   // I
  int64_t rope_dim;       // rotated dims per head, even, <= D (0 without RoPE)
  int64_t rope_positions; // rows of rope_cos_sin
  bool rope_interleaved;  // pairs (2i, 2i+1) instead of (i, i + rope_dim/2)
  NormType norm_type;
  Activation activation;
  float norm_eps;
  float scale;              // on q . k
  int64_t window_left = -1; // -1: unbounded
  float softcap = 0.f;      // 0: none
  ElementType dtype;        // of hidden, the weights and (unless FP8) the caches
};

}  // namespace djl_attn::decoder
