// Compile-time check of cuda/gemm/cublaslt_api.h against the real cublasLt.h, where one exists
// (the GPU machine's pip nvidia-cublas package; the build machines have no cuBLAS headers):
//   bash native-ops/scripts/check-cublaslt-api.sh
// Compiling is the test: every static_assert below must hold.
#include <cublasLt.h>

#include <cstddef>

#include "cuda/gemm/cublaslt_api.h"

namespace lt = djl_attn::cuda::lt;

static_assert(lt::kStatusSuccess == CUBLAS_STATUS_SUCCESS, "cublasStatus_t");
static_assert(lt::kR32F == CUDA_R_32F && lt::kR16F == CUDA_R_16F && lt::kR16BF == CUDA_R_16BF,
              "cudaDataType_t");
static_assert(lt::kCompute32F == CUBLAS_COMPUTE_32F, "cublasComputeType_t");
static_assert(lt::kOpN == CUBLAS_OP_N && lt::kOpT == CUBLAS_OP_T, "cublasOperation_t");
static_assert(lt::kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA &&
                  lt::kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB,
              "cublasLtMatmulDescAttributes_t");
static_assert(lt::kPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
              "cublasLtMatmulPreferenceAttributes_t");
static_assert(sizeof(lt::MatmulAlgo) == sizeof(cublasLtMatmulAlgo_t), "cublasLtMatmulAlgo_t");
static_assert(sizeof(lt::HeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t),
              "cublasLtMatmulHeuristicResult_t size");
static_assert(offsetof(lt::HeuristicResult, workspace_size) ==
                  offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize),
              "workspaceSize");
static_assert(offsetof(lt::HeuristicResult, state) ==
                  offsetof(cublasLtMatmulHeuristicResult_t, state),
              "state");

int main() { return 0; }
