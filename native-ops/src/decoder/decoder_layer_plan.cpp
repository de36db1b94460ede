#include "decoder/decoder_layer_plan.h"

namespace djl_attn::decoder {
namespace {

// Cache-line alignment: each region starts a fresh line, so the threads writing two regions
// never share one, and vector loads of a row's start are aligned when the row is.
constexpr int64_t kAlign = 64;

int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

DecoderLayerPlan plan_decoder_layer(const DecoderLayerParams& p) {
  const int64_t e = element_size(p.dtype), t = p.num_tokens;
  DecoderLayerPlan plan{};
  int64_t at = 0;
  auto take = [&](int64_t elements) {
    const int64_t offset = at;
    at += aligned(elements * e);
    return offset;
  };
  plan.normed = take(t * p.hidden_size);
  plan.qkv = take(t * p.qkv.out);
  plan.attention = take(t * p.heads_q * p.head_dim);
  plan.projected = take(t * p.hidden_size);
  plan.up = take(t * p.up.out);
  plan.activated = is_gated(p.activation) ? take(t * p.intermediate) : plan.up;
  plan.bytes = at;
  return plan;
}

}  // namespace djl_attn::decoder
