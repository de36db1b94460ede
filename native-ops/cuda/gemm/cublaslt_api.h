// The part of cuBLASLt's C API this library calls, declared here and resolved at load time from
// the cuBLASLt that the process's libtorch already loaded (docs/design/fused-decoder-layer.md,
// section 7).
//
// Why not #include <cublasLt.h> and link libcublasLt: the build machines' CUDA toolkit has nvcc
// but no cuBLAS, and a link would pin one cuBLAS major version (libcublasLt.so.13 from CUDA 13),
// while DJL's libtorch 2.7.1 brings libcublasLt.so.12 and a pip torch cu130 brings .so.13. The
// functions and enum values below have kept their meaning since cuBLAS 11; the values are the
// ones of cublasLt.h and are checked against the real header on the GPU machine
// (native-ops/tests/native/cublaslt_api_check.cpp, run by scripts/gpu-check.sh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace djl_attn::cuda::lt {

using Status = int;  // cublasStatus_t
constexpr Status kStatusSuccess = 0;

// Opaque pointers: only their size matters, so the tags are this header's own (cublasLt.h
// declares its structs under typedef names that would clash in the check's translation unit).
using Handle = struct LtContextTag*;                // cublasLtHandle_t
using MatmulDesc = struct LtMatmulDescTag*;         // cublasLtMatmulDesc_t
using MatrixLayout = struct LtMatrixLayoutTag*;     // cublasLtMatrixLayout_t
using MatmulPreference = struct LtPreferenceTag*;   // cublasLtMatmulPreference_t

// cublasLtMatmulAlgo_t and cublasLtMatmulHeuristicResult_t, layout as in cublasLt.h.
struct MatmulAlgo {
  uint64_t data[8];
};
struct HeuristicResult {
  MatmulAlgo algo;
  size_t workspace_size;
  Status state;
  float waves_count;
  int reserved[4];
};

// cudaDataType_t
constexpr int kR32F = 0;
constexpr int kR16F = 2;
constexpr int kR16BF = 14;
// cublasComputeType_t: float32 accumulation, no TF32 (the op-by-op path's torch.mm default).
constexpr int kCompute32F = 68;
// cublasOperation_t
constexpr int kOpN = 0;
constexpr int kOpT = 1;
// cublasLtMatmulDescAttributes_t
constexpr int kDescTransA = 3;
constexpr int kDescTransB = 4;
// cublasLtMatmulPreferenceAttributes_t
constexpr int kPrefMaxWorkspaceBytes = 1;

// The resolved entry points; null members never escape `api()`, which fails instead.
struct Api {
  Status (*create)(Handle*);
  Status (*matmul_desc_create)(MatmulDesc*, int compute_type, int scale_type);
  Status (*matmul_desc_destroy)(MatmulDesc);
  Status (*matmul_desc_set_attribute)(MatmulDesc, int attribute, const void* buf, size_t size);
  Status (*matrix_layout_create)(MatrixLayout*, int type, uint64_t rows, uint64_t cols,
                                 int64_t ld);
  Status (*matrix_layout_destroy)(MatrixLayout);
  Status (*preference_create)(MatmulPreference*);
  Status (*preference_destroy)(MatmulPreference);
  Status (*preference_set_attribute)(MatmulPreference, int attribute, const void* buf,
                                     size_t size);
  Status (*algo_get_heuristic)(Handle, MatmulDesc, MatrixLayout a, MatrixLayout b,
                               MatrixLayout c, MatrixLayout d, MatmulPreference, int requested,
                               HeuristicResult* results, int* returned);
  Status (*matmul)(Handle, MatmulDesc, const void* alpha, const void* a, MatrixLayout a_desc,
                   const void* b, MatrixLayout b_desc, const void* beta, const void* c,
                   MatrixLayout c_desc, void* d, MatrixLayout d_desc, const MatmulAlgo* algo,
                   void* workspace, size_t workspace_bytes, cudaStream_t stream);
  size_t (*get_version)();
};

// The entry points of the loaded cuBLASLt, resolved once. Fails (NativeError) when no cuBLASLt
// is loaded in the process, naming what was looked for.
const Api& api();

// A cuBLASLt status that is not success becomes a NativeError naming the call.
void check(Status status, const char* call);

}  // namespace djl_attn::cuda::lt
