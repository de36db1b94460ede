// The CUDA GEMM layer: D = A · Wᵀ (+ D) for row-major activations and [out, in] weights, on
// cuBLASLt (docs/design/fused-decoder-layer.md, section 7). Used by the fused decoder layer; knows nothing
// of PyTorch or Java.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/element_type.h"

namespace djl_attn::cuda {

struct GemmCall {
  ElementType dtype;   // of a, w and d: float32, float16 or bfloat16
  const void* a;       // [m, k] row-major, row stride lda elements
  const void* w;       // [n, k] row-major ([out, in], as nn.Linear stores it), contiguous
  void* d;             // [m, n] row-major, row stride ldd elements
  int64_t m, n, k;
  int64_t lda, ldd;
  bool accumulate;     // d += a · wᵀ (beta = 1) instead of d = a · wᵀ
};

// Bytes of device workspace a cuBLASLt matmul may use; the caller passes a buffer this large.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

// Launches the GEMM on `stream`. The matmul descriptor, layouts and the heuristic's algorithm
// are chosen once per (device, dtype, m, n, k, lda, ldd, accumulate) and cached: a decode step's
// GEMMs repeat the same shapes every step, and a heuristic query costs tens of microseconds of
// host time (issue 22: host time is what the step loses).
void run_gemm_cuda(const GemmCall& call, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream, int device);

}  // namespace djl_attn::cuda
