#include "decoder/decoder_layer_cpu.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"
#include "decoder/decoder_layer_attention.h"
#include "decoder/decoder_layer_plan.h"
#include "decoder/norm_row_cpu.h"
#include "gemm/gemm.h"
#include "paged/paged_cpu.h"

namespace djl_attn::decoder {
namespace {

// Below this many elements a row-wise stage runs on the calling thread: waking the pool costs
// more than the stage (a decode step of a small model is a few thousand elements per stage).
constexpr int64_t kInlineElements = 1 << 16;

// One buffer per calling thread, grown to the largest plan seen and then reused: no allocation
// per call once the step's largest batch has run.
class Workspace {
 public:
  ~Workspace() { std::free(data_); }
  char* reserve(int64_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      data_ = nullptr;
      capacity_ = 0;
      // 64-byte alignment (the plan's regions are multiples of 64 bytes from here).
      const size_t size = static_cast<size_t>((bytes + 63) / 64 * 64);
      data_ = static_cast<char*>(std::aligned_alloc(64, size));
      if (data_ == nullptr) throw std::bad_alloc();
      capacity_ = static_cast<int64_t>(size);
    }
    return data_;
  }

 private:
  char* data_ = nullptr;
  int64_t capacity_ = 0;
};

Workspace& thread_workspace() {
  thread_local Workspace workspace;
  return workspace;
}

// fn(row) for rows [0, n), on the pool when the stage is large.
template <typename Fn>
void for_each_row(int64_t n, int64_t row_elements, const Fn& fn) {
  const int64_t grain = n * row_elements < kInlineElements ? n : 1;
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

template <typename T>
void norm_rows(const T* x, T* y, const NormWeights& w, const DecoderLayerParams& p) {
  const int64_t c = p.hidden_size;
  for_each_row(p.num_tokens, c, [&](int64_t t) {
    norm_row(x + t * c, y + t * c, w, c, p.norm_type, p.norm_eps);
  });
}

// y[t] = x[t] · weightᵀ + bias, y [T, out].
template <typename T>
void project(const T* x, T* y, const Projection& w, const DecoderLayerParams& p) {
  gemm::gemm_nt({x, w.in, w.weight, y, p.num_tokens, w.out, w.in, p.dtype});
  if (w.bias == nullptr) return;
  for_each_row(p.num_tokens, w.out, [&](int64_t t) {
    T* row = y + t * w.out;
    for (int64_t j = 0; j < w.out; ++j) row[j] = from_float<T>(to_float(row[j]) + w.bias[j]);
  });
}

// Rotates q's and k's heads of each row of qkv by its position's angles.
template <typename T>
void rotate(T* qkv, const DecoderLayerParams& p) {
  const int64_t half = p.rope_dim / 2, heads = p.heads_q + p.heads_kv, d = p.head_dim;
  for_each_row(p.num_tokens, heads * d, [&](int64_t t) {
    const float* cos = p.rope_cos_sin + p.positions[t] * p.rope_dim;
    const float* sin = cos + half;
    T* row = qkv + t * p.qkv.out;
    for (int64_t h = 0; h < heads; ++h) {
      T* x = row + h * d;
      for (int64_t i = 0; i < half; ++i) {
        // The pair (i, i + half), or (2i, 2i + 1) interleaved, turns by frequency i.
        const int64_t a = p.rope_interleaved ? 2 * i : i;
        const int64_t b = p.rope_interleaved ? 2 * i + 1 : i + half;
        const float x0 = to_float(x[a]), x1 = to_float(x[b]);
        x[a] = from_float<T>(x0 * cos[i] - x1 * sin[i]);
        x[b] = from_float<T>(x1 * cos[i] + x0 * sin[i]);
      }
    }
  });
}

// The k and v rows of qkv into their slots, then q's attention over the cache.
template <typename T>
void attend(T* qkv, T* out, const DecoderLayerParams& p) {
  paged::run_reshape_and_cache_cpu(cache_write_params(p, qkv));
  paged::run_paged_prefill_cpu(prefill_params(p, qkv, out));
}

// x += sub-layer output y (Gemma-2: RMS-normed first with `gain`), rounding where transformers
// rounds: the normed output to the stream's dtype, then the sum.
template <typename T>
void add_residual(T* x, const T* y, const float* gain, const DecoderLayerParams& p) {
  const int64_t c = p.hidden_size;
  const NormWeights norm{gain, nullptr};
  for_each_row(p.num_tokens, c, [&](int64_t t) {
    T* xr = x + t * c;
    const T* yr = y + t * c;
    if (gain == nullptr) {
      for (int64_t j = 0; j < c; ++j) xr[j] = from_float<T>(to_float(xr[j]) + to_float(yr[j]));
      return;
    }
    thread_local std::vector<T> normed;
    normed.resize(c);
    norm_row(yr, normed.data(), norm, c, NormType::kRms, p.norm_eps);
    for (int64_t j = 0; j < c; ++j) xr[j] = from_float<T>(to_float(xr[j]) + to_float(normed[j]));
  });
}

inline float gelu_tanh(float x) {
  constexpr float kAlpha = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.f + std::tanh(kAlpha * (x + 0.044715f * x * x * x)));
}

// The MLP's hidden activations from the up GEMM's output.
template <typename T>
void activate(const T* up, T* out, const DecoderLayerParams& p) {
  const int64_t n = p.intermediate;
  for_each_row(p.num_tokens, p.up.out, [&](int64_t t) {
    const T* u = up + t * p.up.out;
    T* o = out + t * n;
    switch (p.activation) {
      case Activation::kSwiGlu:
        for (int64_t j = 0; j < n; ++j) {
          const float g = to_float(u[j]);
          o[j] = from_float<T>(g / (1.f + std::exp(-g)) * to_float(u[n + j]));
        }
        break;
      case Activation::kGeGluTanh:
        for (int64_t j = 0; j < n; ++j) {
          o[j] = from_float<T>(gelu_tanh(to_float(u[j])) * to_float(u[n + j]));
        }
        break;
      case Activation::kGeluTanh:
        for (int64_t j = 0; j < n; ++j) o[j] = from_float<T>(gelu_tanh(to_float(u[j])));
        break;
    }
  });
}

template <typename T>
void run_typed(const DecoderLayerParams& p) {
  const DecoderLayerPlan plan = plan_decoder_layer(p);
  char* ws = thread_workspace().reserve(plan.bytes);
  T* x = static_cast<T*>(p.hidden);
  T* normed = reinterpret_cast<T*>(ws + plan.normed);
  T* qkv = reinterpret_cast<T*>(ws + plan.qkv);
  T* attention = reinterpret_cast<T*>(ws + plan.attention);
  T* projected = reinterpret_cast<T*>(ws + plan.projected);
  T* up = reinterpret_cast<T*>(ws + plan.up);
  T* activated = reinterpret_cast<T*>(ws + plan.activated);

  norm_rows(x, normed, p.attn_norm, p);
  project(normed, qkv, p.qkv, p);
  if (p.rope_cos_sin != nullptr) rotate(qkv, p);
  attend(qkv, attention, p);
  project(attention, projected, p.out_proj, p);
  add_residual(x, projected, p.attn_out_norm, p);

  norm_rows(x, normed, p.mlp_norm, p);
  project(normed, up, p.up, p);
  activate(up, activated, p);
  project(activated, projected, p.down, p);
  add_residual(x, projected, p.mlp_out_norm, p);
}

}  // namespace

void run_decoder_layer_cpu(const DecoderLayerParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return run_typed<float>(params);
    case ElementType::kFloat16: return run_typed<Half>(params);
    case ElementType::kBFloat16: return run_typed<BFloat16>(params);
  }
}

}  // namespace djl_attn::decoder
