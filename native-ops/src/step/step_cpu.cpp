#include "step/step_cpu.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"
#include "decoder/norm_row_cpu.h"
#include "gemm/gemm.h"

namespace djl_attn::step {
namespace {

// Rows of a few thousand elements: the pool pays from about this many in total.
constexpr int64_t kInlineElements = 1 << 16;

template <typename Fn>
void for_each_row(int64_t n, int64_t row_elements, const Fn& fn) {
  const int64_t grain = n * row_elements < kInlineElements ? n : 1;
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

template <typename T>
void embed_typed(const EmbedParams& p) {
  const int64_t c = p.hidden_size;
  const T* table = static_cast<const T*>(p.embedding);
  const T* pos_table = static_cast<const T*>(p.position_embedding);
  T* out = static_cast<T*>(p.hidden);
  for_each_row(p.tokens, c, [&](int64_t t) {
    const T* row = table + p.token_ids[t] * c;
    const T* pos = pos_table == nullptr ? nullptr : pos_table + p.positions[t] * c;
    for (int64_t j = 0; j < c; ++j) {
      float v = to_float(row[j]) * p.scale;
      if (pos != nullptr) v += to_float(pos[j]);
      out[t * c + j] = from_float<T>(v);
    }
  });
}

template <typename T>
void head_typed(const HeadParams& p) {
  const int64_t c = p.hidden_size, v = p.vocab, r = p.num_rows;
  thread_local std::vector<char> buffer;
  const size_t normed_bytes = static_cast<size_t>(r * c) * sizeof(T);
  const size_t product_bytes = sizeof(T) == sizeof(float) ? 0 : static_cast<size_t>(r * v) * sizeof(T);
  if (buffer.size() < normed_bytes + product_bytes) buffer.resize(normed_bytes + product_bytes);
  T* normed = reinterpret_cast<T*>(buffer.data());
  const T* hidden = static_cast<const T*>(p.hidden);
  for_each_row(r, c, [&](int64_t i) {
    const int64_t row = p.rows == nullptr ? i : p.rows[i];
    decoder::norm_row(hidden + row * c, normed + i * c, p.norm, c, p.norm_type, p.norm_eps);
  });
  // float32 writes the logits directly; 16-bit rounds the product to its dtype first.
  T* product = sizeof(T) == sizeof(float) ? reinterpret_cast<T*>(p.logits)
                                          : reinterpret_cast<T*>(buffer.data() + normed_bytes);
  gemm::gemm_nt({normed, c, p.head_weight, product, r, v, c, p.dtype});
  const float cap = p.softcap;
  if (sizeof(T) == sizeof(float) && cap == 0.f) return;
  for_each_row(r, v, [&](int64_t i) {
    for (int64_t j = 0; j < v; ++j) {
      float x = to_float(product[i * v + j]);
      if (cap != 0.f) x = cap * std::tanh(x / cap);
      p.logits[i * v + j] = x;
    }
  });
}

}  // namespace

void run_embed_tokens_cpu(const EmbedParams& p) {
  switch (p.dtype) {
    case ElementType::kFloat32: return embed_typed<float>(p);
    case ElementType::kFloat16: return embed_typed<Half>(p);
    case ElementType::kBFloat16: return embed_typed<BFloat16>(p);
  }
}

void run_decoder_head_cpu(const HeadParams& p) {
  switch (p.dtype) {
    case ElementType::kFloat32: return head_typed<float>(p);
    case ElementType::kFloat16: return head_typed<Half>(p);
    case ElementType::kBFloat16: return head_typed<BFloat16>(p);
  }
}

void copy_from_host_cpu(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

}  // namespace djl_attn::step
