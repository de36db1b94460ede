// The fused decoder layer's elementwise kernels on CUDA (docs/design/fused-decoder-layer.md,
// section 7): everything between the four GEMMs, the cache write and the attention. Row kernels
// take one thread block per token; statistics and arithmetic in float32, stores rounded to the
// stream's dtype with round-to-nearest-even. Knows nothing of PyTorch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/activations.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/dependent_launch.cuh"

namespace djl_attn::cuda::decoder_kernels {

constexpr int kRowThreads = 256;

// Sum of `value` over the block; every thread gets the result. `scratch` holds kRowThreads / 32
// floats.
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kRowThreads / 32; ++w) total += scratch[w];
  return total;
}

// The normalisation of one row held in float32 in `row` (shared memory), written to `out`:
// RMSNorm (layer = false): x * rsqrt(mean(x^2) + eps) * weight; LayerNorm: (x - mean) *
// rsqrt(var + eps) * weight + bias.
template <typename T>
__device__ void normalise_row(const float* row, int64_t cols, const float* weight,
                              const float* bias, bool layer, float eps, T* out, float* scratch) {
  float mean = 0.f;
  if (layer) {
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) s += row[c];
    mean = block_sum(s, scratch) / static_cast<float>(cols);
  }
  float sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) {
    const float d = row[c] - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(block_sum(sq, scratch) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) {
    float y = (row[c] - mean) * inv * weight[c];
    if (bias != nullptr) y += bias[c];
    out[c] = from_float<T>(y);
  }
}

// out[r] = norm(x[rows[r]]), or norm(x[r]) when rows is null. Dynamic shared memory: cols floats.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    norm_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t cols,
                     const float* __restrict__ weight, const float* __restrict__ bias, bool layer,
                     float eps, const int64_t* __restrict__ rows = nullptr) {
  extern __shared__ float row[];
  __shared__ float scratch[kRowThreads / 32];
  // A decode step's norm is a few blocks: the GEMM after it (a programmatic dependent, skinny_gemm.cu)
  // may start streaming its weights now; it waits for this kernel before reading the rows.
  allow_dependent_launch();
  const int64_t r = blockIdx.x;
  const int64_t t = rows == nullptr ? r : rows[r];
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) row[c] = to_float(x[t * cols + c]);
  __syncthreads();
  normalise_row(row, cols, weight, bias, layer, eps, out + r * cols, scratch);
}

// The residual add of a sub-layer, and optionally the next norm:
//   v = delta[t] (+ bias);  Gemma-2: v = rms(v) * post_gain, rounded to T;
//   x[t] = round(x[t] + v);  normed[t] = norm(x[t]) when normed is not null.
// Dynamic shared memory: cols floats.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    residual_kernel(T* __restrict__ x, const T* __restrict__ delta, int64_t cols,
                    const float* __restrict__ bias, const float* __restrict__ post_gain,
                    float eps, T* __restrict__ normed, const float* __restrict__ norm_weight,
                    const float* __restrict__ norm_bias, bool layer) {
  extern __shared__ float row[];
  __shared__ float scratch[kRowThreads / 32];
  allow_dependent_launch();  // as in norm_rows_kernel
  const int64_t t = blockIdx.x;
  float sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) {
    float v = to_float(delta[t * cols + c]);
    if (bias != nullptr) v += bias[c];
    row[c] = v;
    sq += v * v;
  }
  float post = 1.f;
  if (post_gain != nullptr) post = rsqrtf(block_sum(sq, scratch) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) {
    float v = row[c];
    if (post_gain != nullptr) v = to_float(from_float<T>(v * post * post_gain[c]));
    const T sum = from_float<T>(to_float(x[t * cols + c]) + v);
    x[t * cols + c] = sum;
    row[c] = to_float(sum);
  }
  if (normed == nullptr) return;
  __syncthreads();
  normalise_row(row, cols, norm_weight, norm_bias, layer, eps, normed + t * cols, scratch);
}

// In place on the qkv GEMM's output [T, (Hq + 2 Hkv) D]: adds the bias, then rotates the first
// rope_dim dims of every q and k head by the rotary table row of the token's position. Pairs are
// (i, i + R/2) (Hugging Face's rotate_half) or (2i, 2i + 1) when interleaved; pair i turns by
// the angle whose cos is table[p, i] and sin table[p, R/2 + i]. Grid: (T, ceil(width / 256)),
// one element per thread: a decode step has few tokens, and one block per token left a batch-1
// step's launch 5 us long (H200 profile).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    bias_rope_kernel(T* __restrict__ qkv, const float* __restrict__ bias,
                     const float* __restrict__ table, const int64_t* __restrict__ positions,
                     int64_t heads_rotated, int64_t heads_total, int64_t head_dim,
                     int64_t rope_dim, bool interleaved) {
  const int64_t t = blockIdx.x;
  const int64_t width = heads_total * head_dim;
  const int64_t j = static_cast<int64_t>(blockIdx.y) * kRowThreads + threadIdx.x;
  if (j >= width) return;
  T* row = qkv + t * width;
  const int64_t half = rope_dim / 2;
  const int64_t head = j / head_dim, d = j % head_dim;
  const bool rotated = table != nullptr && head < heads_rotated && d < rope_dim;
  if (!rotated) {
    if (bias != nullptr) row[j] = from_float<T>(to_float(row[j]) + bias[j]);
    return;
  }
  // The pair's first element does the pair's work; the second is written by it.
  const bool first = interleaved ? (d % 2 == 0) : (d < half);
  if (!first) return;
  const float* angles = table + positions[t] * rope_dim;
  const int64_t i = interleaved ? d / 2 : d;
  const int64_t j2 = interleaved ? j + 1 : j + half;
  float x0 = to_float(row[j]), x1 = to_float(row[j2]);
  if (bias != nullptr) {
    x0 += bias[j];
    x1 += bias[j2];
  }
  const float c = angles[i], s = angles[half + i];
  row[j] = from_float<T>(x0 * c - x1 * s);
  row[j2] = from_float<T>(x1 * c + x0 * s);
}

// The MLP's activation on the up GEMM's output (+ bias). Gated (activation 0 SwiGLU, 1 GeGLU):
// out[t, i] = act(up[t, i]) * up[t, I + i]; activation 2 (GELU): out[t, i] = gelu(up[t, i]),
// where out may equal up.
template <typename T>
__global__ void activation_kernel(const T* up, const float* __restrict__ bias, T* out,
                                  int64_t tokens, int64_t intermediate, int activation) {
  const int64_t total = tokens * intermediate;
  const bool gated = activation != 2;
  const int64_t up_width = gated ? 2 * intermediate : intermediate;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / intermediate, i = idx % intermediate;
    float g = to_float(up[t * up_width + i]);
    if (bias != nullptr) g += bias[i];
    float y;
    if (gated) {
      float u = to_float(up[t * up_width + intermediate + i]);
      if (bias != nullptr) u += bias[intermediate + i];
      y = (activation == 0 ? silu(g) : gelu_tanh(g)) * u;
    } else {
      y = gelu_tanh(g);
    }
    out[t * intermediate + i] = from_float<T>(y);
  }
}

}  // namespace djl_attn::cuda::decoder_kernels
