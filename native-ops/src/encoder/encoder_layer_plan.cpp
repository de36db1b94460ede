#include "encoder/encoder_layer_plan.h"

#include <algorithm>

namespace djl_attn::encoder {
namespace {

// Cache-line alignment: each region starts a fresh line, so the threads writing two regions never
// share one.
constexpr int64_t kAlign = 64;

int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

EncoderLayerPlan plan_encoder_layer(const EncoderLayerParams& p) {
  const int64_t e = element_size(p.dtype), t = p.tokens, c = p.hidden_size;
  EncoderLayerPlan plan{};
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t offset = at;
    at += aligned(bytes);
    return offset;
  };
  plan.qkv = take(t * 3 * c * e);
  plan.attention = take(t * c * e);
  plan.projected = take(t * c * e);
  plan.normed = take(t * c * e);
  plan.up = take(t * p.intermediate * e);
  plan.lse = take(p.heads * t * 4);
  plan.scratch = take(std::max({gemm::scratch_bytes(p.qkv, t), gemm::scratch_bytes(p.out, t),
                                gemm::scratch_bytes(p.up, t), gemm::scratch_bytes(p.down, t)}));
  plan.bytes = at;
  return plan;
}

}  // namespace djl_attn::encoder
