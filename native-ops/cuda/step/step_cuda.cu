// embed_tokens and decoder_head on CUDA: the launches that open and close a decode step around
// the fused layers (docs/design/captured-decode-step.md). No host synchronisation, no
// allocation outside a Scratch: the whole step can be captured into a CUDA graph.
#include "cuda/step/step_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/scratch.h"
#include "cuda/common/switches.h"
#include "cuda/decoder/decoder_layer_kernels.cuh"
#include "cuda/gemm/gemm_cuda.h"

namespace djl_attn::cuda {
namespace {

constexpr int kThreads = 256;

// hidden[t, j] = round(table[ids[t], j] * scale (+ pos_table[positions[t], j])).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    embed_kernel(T* __restrict__ out, const int64_t* __restrict__ ids,
                 const T* __restrict__ table, const int64_t* __restrict__ positions,
                 const T* __restrict__ pos_table, int64_t cols, float scale) {
  const int64_t t = blockIdx.x;
  const T* row = table + ids[t] * cols;
  const T* pos = pos_table == nullptr ? nullptr : pos_table + positions[t] * cols;
  for (int64_t j = blockIdx.y * kThreads + threadIdx.x; j < cols; j += gridDim.y * kThreads) {
    float v = to_float(row[j]) * scale;
    if (pos != nullptr) v += to_float(pos[j]);
    out[t * cols + j] = from_float<T>(v);
  }
}

// logits[i] = softcap(float(product[i])), over `count` elements.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    logits_kernel(float* __restrict__ logits, const T* __restrict__ product, int64_t count,
                  float cap) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    float x = to_float(product[i]);
    if (cap != 0.f) x = cap * tanhf(x / cap);
    logits[i] = x;
  }
}

unsigned grid_for(int64_t count, int device) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t{multiprocessor_count(device)} * 8)));
}

template <typename T>
void embed_typed(const step::EmbedParams& p, cudaStream_t stream) {
  const unsigned col_blocks = static_cast<unsigned>(
      std::min<int64_t>((p.hidden_size + kThreads - 1) / kThreads, 16));
  embed_kernel<T><<<dim3(static_cast<unsigned>(p.tokens), col_blocks), kThreads, 0, stream>>>(
      static_cast<T*>(p.hidden), p.token_ids, static_cast<const T*>(p.embedding), p.positions,
      static_cast<const T*>(p.position_embedding), p.hidden_size, p.scale);
  DJL_ATTN_CUDA_CHECK_LAUNCH("embed_tokens embed_kernel");
}

template <typename T>
void head_typed(const step::HeadParams& p, cudaStream_t stream, int device) {
  namespace k = decoder_kernels;
  const int64_t r = p.num_rows, c = p.hidden_size, v = p.vocab;
  const size_t normed_bytes = (static_cast<size_t>(r * c) * sizeof(T) + 255) / 256 * 256;
  const size_t product_bytes =
      sizeof(T) == sizeof(float) ? 0 : (static_cast<size_t>(r * v) * sizeof(T) + 255) / 256 * 256;
  const Scratch scratch(normed_bytes + product_bytes + kGemmWorkspaceBytes, device);
  char* base = scratch.data_as<char>();
  T* normed = reinterpret_cast<T*>(base);
  T* product = sizeof(T) == sizeof(float) ? reinterpret_cast<T*>(p.logits)
                                          : reinterpret_cast<T*>(base + normed_bytes);
  void* gemm_ws = base + normed_bytes + product_bytes;

  const size_t row_bytes = static_cast<size_t>(c) * sizeof(float);
  if (row_bytes > 48 * 1024) {
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(k::norm_rows_kernel<T>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(row_bytes)));
  }
  k::norm_rows_kernel<T><<<static_cast<unsigned>(r), k::kRowThreads, row_bytes, stream>>>(
      static_cast<const T*>(p.hidden), normed, c, p.norm.weight, p.norm.bias,
      p.norm_type == decoder::NormType::kLayer, p.norm_eps, p.rows);
  DJL_ATTN_CUDA_CHECK_LAUNCH("decoder_head norm_rows_kernel");
  run_gemm_cuda(GemmCall{p.dtype, normed, p.head_weight, product, r, v, c, c, v},
                cuda_switches().gemm, gemm_ws, kGemmWorkspaceBytes, stream, device);
  if (sizeof(T) == sizeof(float) && p.softcap == 0.f) return;
  logits_kernel<T><<<grid_for(r * v, device), kThreads, 0, stream>>>(p.logits, product, r * v,
                                                                   p.softcap);
  DJL_ATTN_CUDA_CHECK_LAUNCH("decoder_head logits_kernel");
}

}  // namespace

void run_embed_tokens_cuda(const step::EmbedParams& p) {
  const int device = device_of(p.hidden);
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return embed_typed<float>(p, stream);
    case ElementType::kFloat16: return embed_typed<__half>(p, stream);
    case ElementType::kBFloat16: return embed_typed<__nv_bfloat16>(p, stream);
  }
}

void run_decoder_head_cuda(const step::HeadParams& p) {
  const int device = device_of(p.logits);
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return head_typed<float>(p, stream, device);
    case ElementType::kFloat16: return head_typed<__half>(p, stream, device);
    case ElementType::kBFloat16: return head_typed<__nv_bfloat16>(p, stream, device);
  }
}

void copy_from_host_cuda(void* dst, const void* src, size_t bytes) {
  const int device = device_of(dst);
  DeviceGuard guard(device);
  DJL_ATTN_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_stream(device)));
}

}  // namespace djl_attn::cuda
