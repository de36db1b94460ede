// Parameters of sample_tokens: choose one token id per row of logits, greedy or sampled
// (temperature, top-k, top-p) with a counter-based random number per row. Shared by the CPU and
// CUDA kernels; the binding fills it from validated tensors. The rules: sampling_rules.h.
#pragma once

#include <cstdint>

#include "common/element_type.h"

namespace djl_attn::sampling {

using ::djl_attn::ElementType;

struct SampleTokensParams {
  int64_t* ids;              // [B] int64, written: each row's chosen id
  const void* logits;        // [B, V], contiguous, of `dtype`
  const float* temperature;  // [B]: 0 greedy (the first maximum), > 0 softmax(logits / T)
  const int32_t* top_k;      // [B]: 0 all, else the tokens >= the k-th largest logit
  const float* top_p;        // [B] in (0, 1]: the nucleus's share of the top-k mass
  const int64_t* seeds;      // [B]: the key of the row's random number
  const int64_t* offsets;    // [B]: its counter (the sequence's step)
  int64_t batch;             // B >= 1
  int64_t vocab;             // V in [1, kMaxVocab]
  ElementType dtype;
};

}  // namespace djl_attn::sampling
