// The skinny GEMM: D = A · Wᵀ for a decode step's few rows (at most kSkinnyMaxRows), where the
// work is reading W once at memory speed (docs/design/skinny-gemm.md).
// Launched by gemm_cuda.cpp, which decides when it applies; knows nothing of PyTorch.
#pragma once

#include <cuda_runtime.h>

#include "cuda/gemm/gemm_cuda.h"

namespace djl_attn::cuda {

// The most rows the kernel takes: every weight load serves this many activation rows, after
// which a tensor-core GEMM (cuBLASLt) reads the weights as fast and computes more.
constexpr int64_t kSkinnyMaxRows = 8;

// Whether the kernel takes `call`'s shape and operands: float16/bfloat16, 1 <= m <=
// kSkinnyMaxRows, k and lda multiples of 8, a and w 16-byte aligned.
bool skinny_gemm_fits(const GemmCall& call);

// Launches it (a programmatic dependent of the stream's previous kernel on sm_90: it starts
// reading W while that kernel finishes). The caller has checked skinny_gemm_fits.
void launch_skinny_gemm(const GemmCall& call, cudaStream_t stream, int device);

}  // namespace djl_attn::cuda
