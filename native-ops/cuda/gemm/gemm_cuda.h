// The CUDA GEMM layer: D = A · Wᵀ for row-major activations and [out, in] weights, with the
// decoder's epilogues (docs/design/fused-decoder-layer.md, section 7; docs/design/skinny-gemm.md).
// Two kernels behind one call: cuBLASLt, and for a decode step's few rows the skinny kernel
// (skinny_gemm.h), which also fuses the MLP's activation and the residual add. Used by the fused
// decoder layer and the decoder head; knows nothing of PyTorch or Java.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/element_type.h"

namespace djl_attn::cuda {

// What happens to the product before it is stored. Everything but kStore is the skinny kernel's
// (choose_gemm_kernel says whether a call gets it); each computes, rounding for rounding, what
// the decoder's unfused kernels compute from a stored product p = round(A · Wᵀ):
enum class GemmEpilogue {
  kStore,     // d = round(A · Wᵀ)
  kResidual,  // d = round(d + (p + bias)): the residual add (d is the hidden state)
  kSwiGlu,    // w is [2n, k], gate rows then up rows: d = round(silu(pg + bias) * (pu + bias))
  kGeGlu,     // the same with gelu_tanh (Gemma-2)
  kGelu,      // d = round(gelu_tanh(p + bias)) (GPT-2)
  kRope,      // the qkv projection: d = round(p + bias), then the rotary embedding on the
              // rotated heads' pairs: round(x0 c - x1 s), round(x1 c + x0 s) (GemmRope)
};

// kRope's rotary embedding, as the decoder's bias + RoPE kernel applies it: the first
// heads_rotated heads of head_dim columns each (q, then k) turn their pairs (i, i + head_dim / 2)
// (or (2i, 2i + 1) when interleaved) by the angle of row positions[r] of table: cos at
// table[p * head_dim + i], sin at table[p * head_dim + head_dim / 2 + i]. Every dim rotates
// (rope_dim == head_dim) and head_dim is a multiple of 16; table null: the bias only.
struct GemmRope {
  const float* table;
  const int64_t* positions;  // [m]
  int64_t head_dim;
  int64_t heads_rotated;
  bool interleaved;
};

// A norm of each row of A, applied as the rows are read (the skinny kernel only): the GEMM reads
// norm(A) rounded to the dtype, as the decoder's norm kernel would have written it.
// RMSNorm (layer false): a * rsqrt(mean(a^2) + eps) * weight; LayerNorm: (a - mean) *
// rsqrt(var + eps) * weight + bias. weight and bias float32 [k], 16-byte aligned.
struct GemmNorm {
  const float* weight;
  const float* bias;  // LayerNorm's, or null
  bool layer;
  float eps;
};

struct GemmCall {
  ElementType dtype;   // of a, w and d: float32, float16 or bfloat16
  const void* a;       // [m, k] row-major, row stride lda elements
  const void* w;       // [n, k] row-major ([out, in], as nn.Linear stores it), contiguous
  void* d;             // [m, n] row-major, row stride ldd elements
  int64_t m, n, k;
  int64_t lda, ldd;
  GemmEpilogue epilogue = GemmEpilogue::kStore;
  const float* bias = nullptr;  // float32 [n] ([2n] gated), with an epilogue other than kStore
  const GemmNorm* norm = nullptr;  // A's rows normalised first (skinny kernel only)
  const GemmRope* rope = nullptr;  // with kRope
};

// The kernels a call can run on.
enum class GemmKernel { kCublasLt, kSkinny };

// The switch DJL_ATTN_GEMM_KERNEL (cuda/common/switches.cpp): auto, choose_gemm_kernel's choice;
// cublaslt, cuBLASLt for every call that it can run (before/after comparisons in one build).
enum class GemmRequest { kAuto, kCublasLt };

// Which kernel runs `call`: the skinny kernel where it applies (at most kSkinnyMaxRows rows of
// float16/bfloat16, k a multiple of 8, 16-byte aligned operands) unless the switch says
// cuBLASLt; cuBLASLt otherwise. A call with an epilogue other than kStore or a norm needs
// kSkinny: the caller asks first and runs the unfused kernels otherwise. `request` is
// cuda_switches().gemm, which a caller reads once per operator call (not once per GEMM).
GemmKernel choose_gemm_kernel(const GemmCall& call, GemmRequest request);

// Bytes of device workspace a cuBLASLt matmul may use; the caller passes a buffer this large.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

// Launches the GEMM on `stream`, on choose_gemm_kernel(call, request)'s kernel. cuBLASLt's matmul descriptor,
// layouts and algorithm are chosen once per (device, dtype, m, n, k, lda, ldd) and cached: a
// decode step's GEMMs repeat the same shapes every step, and a heuristic query costs tens of
// microseconds of host time (issue 22: host time is what the step loses).
void run_gemm_cuda(const GemmCall& call, GemmRequest request, void* workspace,
                   size_t workspace_bytes, cudaStream_t stream, int device);

}  // namespace djl_attn::cuda
