#include "flash/flash_fp8_cpu.h"

#include <array>
#include <cstdint>
#include <vector>

#include "common/fp8.h"
#include "common/half.h"
#include "common/thread_pool.h"
#include "flash/flash_cpu.h"

namespace djl_attn::flash {
namespace {

// Rows of D elements per parallel chunk: converting a row is a few hundred operations.
constexpr int64_t kRowsPerChunk = 256;

// The value of every e4m3fn byte, converted once (common/fp8.h).
const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = fp8_e4m3_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

float descale_of(const Fp8Descale& d, int64_t b, int64_t h_kv) {
  return d.data != nullptr ? d.data[b * d.batch_stride + h_kv * d.head_stride] : 1.f;
}

// One operand [B, S, H, D] (element strides, last dim contiguous) as contiguous float32 values
// times its descale; head h reads the factor of key/value head h / group.
std::vector<float> dequantize(const void* data, int64_t batch_stride, int64_t seq_stride,
                              int64_t head_stride, int64_t batch, int64_t seqlen, int64_t heads,
                              int64_t dim, int64_t group, const Fp8Descale& descale) {
  const auto& values = e4m3_values();
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::vector<float> out(static_cast<size_t>(batch * seqlen * heads * dim));
  parallel_for(batch * seqlen * heads, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t h = row % heads, s = row / heads % seqlen, b = row / heads / seqlen;
      const float factor = descale_of(descale, b, h / group);
      const uint8_t* src = bytes + b * batch_stride + s * seq_stride + h * head_stride;
      float* dst = out.data() + row * dim;
      for (int64_t d = 0; d < dim; ++d) dst[d] = values[src[d]] * factor;
    }
  });
  return out;
}

// The float32 result [B, Sq, Hq, D] (contiguous) rounded into out (p's strides and dtype).
template <typename T>
void round_out(const FlashParams& p, const std::vector<float>& result) {
  auto* out = static_cast<T*>(p.out);
  const int64_t rows = p.batch * p.seqlen_q * p.heads_q, dim = p.head_dim;
  parallel_for(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t h = row % p.heads_q, i = row / p.heads_q % p.seqlen_q;
      const int64_t b = row / p.heads_q / p.seqlen_q;
      T* dst = out + b * p.out_batch_stride + i * p.out_seq_stride + h * p.out_head_stride;
      const float* src = result.data() + row * dim;
      for (int64_t d = 0; d < dim; ++d) dst[d] = from_float<T>(src[d]);
    }
  });
}

}  // namespace

void run_flash_attention_fp8_cpu(const FlashFp8Params& params) {
  const FlashParams& a = params.attn;
  const int64_t group = a.heads_q / a.heads_kv;
  const std::vector<float> q = dequantize(a.q, a.q_batch_stride, a.q_seq_stride, a.q_head_stride,
                                          a.batch, a.seqlen_q, a.heads_q, a.head_dim, group,
                                          params.q_descale);
  const std::vector<float> k = dequantize(a.k, a.k_batch_stride, a.k_seq_stride, a.k_head_stride,
                                          a.batch, a.seqlen_k, a.heads_kv, a.head_dim, 1,
                                          params.k_descale);
  const std::vector<float> v = dequantize(a.v, a.v_batch_stride, a.v_seq_stride, a.v_head_stride,
                                          a.batch, a.seqlen_k, a.heads_kv, a.head_dim, 1,
                                          params.v_descale);
  std::vector<float> result(static_cast<size_t>(a.batch * a.seqlen_q * a.heads_q * a.head_dim));

  // The same call in float32 over the contiguous scratch; the logsumexp goes straight to lse.
  FlashParams f = a;
  f.q = q.data();
  f.k = k.data();
  f.v = v.data();
  f.out = result.data();
  f.q_seq_stride = a.heads_q * a.head_dim;
  f.q_batch_stride = a.seqlen_q * f.q_seq_stride;
  f.q_head_stride = a.head_dim;
  f.k_seq_stride = f.v_seq_stride = a.heads_kv * a.head_dim;
  f.k_batch_stride = f.v_batch_stride = a.seqlen_k * f.k_seq_stride;
  f.k_head_stride = f.v_head_stride = a.head_dim;
  f.out_seq_stride = f.q_seq_stride;
  f.out_batch_stride = f.q_batch_stride;
  f.out_head_stride = f.q_head_stride;
  f.dtype = ElementType::kFloat32;
  run_flash_attention_cpu(f);

  switch (a.dtype) {
    case ElementType::kFloat16: return round_out<Half>(a, result);
    case ElementType::kBFloat16: return round_out<BFloat16>(a, result);
    case ElementType::kFloat32: return round_out<float>(a, result);
  }
}

}  // namespace djl_attn::flash
