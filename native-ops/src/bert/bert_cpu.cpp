#include "bert/bert_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"

namespace djl_attn::bert {
namespace {

// Elements per task: below this a row range stays on one thread (waking the pool costs more
// than a pass over 16k elements).
constexpr int64_t kGrainElements = 1 << 14;

int64_t grain_rows(int64_t channels) { return std::max<int64_t>(1, kGrainElements / channels); }

// Float buffers of this thread that keep their capacity across calls, one per slot: the
// converted parameter vectors (slots 0-2, on the calling thread) and the row scratch (slots 3-4,
// on each worker) cost no allocation once the widest call has been seen. A one-sentence encoder
// layer made four small mallocs per epilogue call before.
enum Slot { kBiasSlot, kGammaSlot, kBetaSlot, kRowSlot, kRowOutSlot, kSlots };

float* thread_floats(Slot slot, int64_t n) {
  thread_local std::vector<float> buffers[kSlots];
  std::vector<float>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// A per-channel vector as float32: the caller's own memory when it is float32 already, else
// converted once per call (C values against rows * C activations) into this thread's `slot`; a
// null vector becomes `fill`, so the row loops need no branch on it.
const float* param_floats(const void* data, ElementType type, int64_t channels, float fill,
                          Slot slot) {
  if (data != nullptr && type == ElementType::kFloat32) return static_cast<const float*>(data);
  float* out = thread_floats(slot, channels);
  if (data == nullptr) {
    std::fill(out, out + channels, fill);
    return out;
  }
  for (int64_t c = 0; c < channels; ++c) {
    out[c] = type == ElementType::kFloat16 ? to_float(static_cast<const Half*>(data)[c])
                                           : to_float(static_cast<const BFloat16*>(data)[c]);
  }
  return out;
}

// v = x + bias (+ residual), in float32.
template <typename T>
void load_sum(const T* x, const T* residual, const float* bias, int64_t channels, float* v) {
  if (residual != nullptr) {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) v[c] = to_float(x[c]) + to_float(residual[c]) + bias[c];
  } else {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) v[c] = to_float(x[c]) + bias[c];
  }
}

template <typename T>
void store_row(const float* y, int64_t channels, T* out) {
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) out[c] = from_float<T>(y[c]);
}

// y = (v - mean) / sqrt(var + eps) * gamma + beta with two-pass statistics (the mean first,
// then the squared deviations from it), exact enough for rows far from zero mean. The sums are
// double: a float32 sum of 60000 channels around a mean of 3 is off by ~1e-5 relative in the
// output (tests/test_bert_ops.py, long rows), and the row is memory-bound either way. Cloned for
// AVX2 so the reductions vectorise where the CPU has it.
__attribute__((target_clones("arch=x86-64-v3", "default")))
void normalize_row(const float* v, int64_t channels, const float* gamma, const float* beta,
                   float eps, float* y) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < channels; ++c) sum += v[c];
  const float mean = static_cast<float>(sum / static_cast<double>(channels));
  double squares = 0.0;
#pragma omp simd reduction(+ : squares)
  for (int64_t c = 0; c < channels; ++c) {
    const double d = static_cast<double>(v[c]) - mean;
    squares += d * d;
  }
  const float rstd =
      static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(channels) + eps));
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) y[c] = (v[c] - mean) * rstd * gamma[c] + beta[c];
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
void affine_row(float* v, int64_t channels, const float* scale, const float* shift) {
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) v[c] = v[c] * scale[c] + shift[c];
}

// gelu(v) = 0.5 v (1 + erf(v / sqrt 2)) with a branch-free erf that vectorises (std::erf is a
// scalar libm call, about 8x slower than this loop with AVX2): Abramowitz & Stegun 7.1.28,
// erf(a) = 1 - (1 + a1 a + ... + a6 a^6)^-16 for a >= 0, absolute error <= 3e-7, odd symmetry
// for a < 0. Above a ~ 5 the power overflows to inf and erf becomes exactly 1.
__attribute__((target_clones("arch=x86-64-v3", "default")))
void gelu_erf_row(float* v, int64_t channels) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  constexpr float a1 = 0.0705230784f, a2 = 0.0422820123f, a3 = 0.0092705272f;
  constexpr float a4 = 0.0001520143f, a5 = 0.0002765672f, a6 = 0.0000430638f;
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) {
    const float x = v[c];
    const float a = std::fabs(x) * kInvSqrt2;
    float poly = 1.f + a * (a1 + a * (a2 + a * (a3 + a * (a4 + a * (a5 + a * a6)))));
    poly *= poly;  // ^2
    poly *= poly;  // ^4
    poly *= poly;  // ^8
    poly *= poly;  // ^16
    const float erf_abs = 1.f - 1.f / poly;
    const float erf = x < 0.f ? -erf_abs : erf_abs;
    v[c] = 0.5f * x * (1.f + erf);
  }
}

void gelu_tanh_row(float* v, int64_t channels) {
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  for (int64_t c = 0; c < channels; ++c) {
    const float x = v[c];
    v[c] = 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
}

template <typename T>
void layernorm_typed(const LayerNormParams& p) {
  const int64_t channels = p.channels;
  const float* bias = param_floats(p.bias, p.param_dtype, channels, 0.f, kBiasSlot);
  const float* gamma = param_floats(p.gamma, p.param_dtype, channels, 1.f, kGammaSlot);
  const float* beta = param_floats(p.beta, p.param_dtype, channels, 0.f, kBetaSlot);
  parallel_for(p.rows, grain_rows(channels), [&](int64_t begin, int64_t end) {
    float* v = thread_floats(kRowSlot, channels);
    float* y = thread_floats(kRowOutSlot, channels);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t offset = r * channels;
      load_sum(static_cast<const T*>(p.x) + offset, static_cast<const T*>(p.residual) + offset,
               bias, channels, v);
      T* out = static_cast<T*>(p.out) + offset;
      if constexpr (std::is_same_v<T, float>) {
        normalize_row(v, channels, gamma, beta, p.eps, out);
      } else {
        normalize_row(v, channels, gamma, beta, p.eps, y);
        store_row(y, channels, out);
      }
    }
  });
}

template <typename T>
void elementwise_typed(const ElementwiseParams& p) {
  const int64_t channels = p.channels;
  const float* bias = param_floats(p.bias, p.param_dtype, channels, 0.f, kBiasSlot);
  const float* scale = nullptr;
  const float* shift = nullptr;
  if (p.epilogue == Epilogue::kAffine) {
    scale = param_floats(p.scale, p.param_dtype, channels, 1.f, kGammaSlot);
    shift = param_floats(p.shift, p.param_dtype, channels, 0.f, kBetaSlot);
  }
  parallel_for(p.rows, grain_rows(channels), [&](int64_t begin, int64_t end) {
    float* v = thread_floats(kRowSlot, channels);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t offset = r * channels;
      const T* residual =
          p.residual != nullptr ? static_cast<const T*>(p.residual) + offset : nullptr;
      load_sum(static_cast<const T*>(p.x) + offset, residual, bias, channels, v);
      switch (p.epilogue) {
        case Epilogue::kGeluErf: gelu_erf_row(v, channels); break;
        case Epilogue::kGeluTanh: gelu_tanh_row(v, channels); break;
        case Epilogue::kAffine: affine_row(v, channels, scale, shift); break;
      }
      store_row(v, channels, static_cast<T*>(p.out) + offset);
    }
  });
}

}  // namespace

void run_layernorm_cpu(const LayerNormParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return layernorm_typed<float>(params);
    case ElementType::kFloat16: return layernorm_typed<Half>(params);
    case ElementType::kBFloat16: return layernorm_typed<BFloat16>(params);
  }
}

void run_elementwise_cpu(const ElementwiseParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return elementwise_typed<float>(params);
    case ElementType::kFloat16: return elementwise_typed<Half>(params);
    case ElementType::kBFloat16: return elementwise_typed<BFloat16>(params);
  }
}

// Both directions copy whole rows of C elements; one task per batch row's positions.
void run_remove_padding_cpu(const PaddingParams& p) {
  const int64_t row_bytes = p.channels * p.element_size;
  const auto* padded = static_cast<const char*>(p.padded);
  auto* packed = static_cast<char*>(p.packed);
  parallel_for(p.batch, std::max<int64_t>(1, grain_rows(p.channels) / std::max<int64_t>(1, p.seqlen)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t b = begin; b < end; ++b) {
                   const int64_t len = p.cu_seqlens[b + 1] - p.cu_seqlens[b];
                   for (int64_t s = 0; s < len; ++s) {
                     std::memcpy(packed + (p.cu_seqlens[b] + s) * row_bytes,
                                 padded + (b * p.padded_batch_stride + s * p.padded_seq_stride) *
                                              p.element_size,
                                 row_bytes);
                   }
                 }
               });
}

void run_restore_padding_cpu(const PaddingParams& p) {
  const int64_t row_bytes = p.channels * p.element_size;
  auto* padded = static_cast<char*>(p.padded);
  const auto* packed = static_cast<const char*>(p.packed);
  parallel_for(p.batch, std::max<int64_t>(1, grain_rows(p.channels) / std::max<int64_t>(1, p.seqlen)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t b = begin; b < end; ++b) {
                   const int64_t len = p.cu_seqlens[b + 1] - p.cu_seqlens[b];
                   for (int64_t s = 0; s < p.seqlen; ++s) {
                     char* dst =
                         padded + (b * p.padded_batch_stride + s * p.padded_seq_stride) * p.element_size;
                     if (s < len) {
                       std::memcpy(dst, packed + (p.cu_seqlens[b] + s) * row_bytes, row_bytes);
                     } else {
                       // All-zero bits are +0.0 in float32, float16 and bfloat16 alike.
                       std::memset(dst, 0, row_bytes);
                     }
                   }
                 }
               });
}

}  // namespace djl_attn::bert
