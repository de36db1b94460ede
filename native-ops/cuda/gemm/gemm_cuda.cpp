#include "cuda/gemm/gemm_cuda.h"

#include <map>
#include <mutex>
#include <tuple>

#include "common/error.h"
#include "cuda/common/cuda_check.h"
#include "cuda/gemm/cublaslt_api.h"
#include "cuda/gemm/skinny_gemm.h"

namespace djl_attn::cuda {
namespace {

int cuda_type(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return lt::kR32F;
    case ElementType::kFloat16: return lt::kR16F;
    case ElementType::kBFloat16: return lt::kR16BF;
  }
  fail_native("gemm: unknown element type ", static_cast<int>(type));
}

// One GEMM shape's descriptors and algorithm, made once and kept for the process's lifetime
// (a model has a handful of shapes per batch size).
struct GemmPlan {
  lt::MatmulDesc desc = nullptr;
  lt::MatrixLayout a = nullptr, b = nullptr, c = nullptr;
  lt::MatmulAlgo algo{};
  size_t workspace_bytes = 0;
};

// (dtype, m, n, k, lda, ldd), per device.
using GemmKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t>;

// Row-major D[m, n] = A[m, k] · W[n, k]ᵀ is column-major Dᵀ[n, m] = W · Aᵀ: cuBLASLt's "A" is
// W read as the column-major k × n matrix it is in memory, transposed; its "B" is A read as
// k × m, not transposed; C and D are n × m with leading dimension ldd.
// The heuristic's first choice is often not the fastest for the skinny GEMMs of a decode step
// (M = 1 to 64 rows): on an H200, Llama-1B's qkv and out projections ran at 1.8 TB/s of weight
// reads on it. So the first call of a shape times the heuristic's top candidates on the call's own
// buffers and keeps the fastest, as vLLM's and TensorRT-LLM's GEMM plugins do. (Up to
// kSkinnyMaxRows rows of 16-bit the skinny kernel runs instead: skinny_gemm.h.)
constexpr int kCandidates = 8;
constexpr int kTimedRuns = 3;

// Decode steps have at most one row per sequence: their row counts are few and repeat every step,
// so timing them once pays. Prefill chunks come in any length; they keep the heuristic's choice
// (no host wait for a shape that may never come back).
constexpr int64_t kMaxTunedRows = 64;

// Timing needs a host wait: not while the stream is being captured into a CUDA graph (the
// heuristic's choice is kept then).
bool tuning_allowed(const GemmCall& call, cudaStream_t stream) {
  if (call.m > kMaxTunedRows) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DJL_ATTN_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture == cudaStreamCaptureStatusNone;
}

int fastest(const GemmCall& call, lt::Handle handle, const GemmPlan& plan,
            const lt::HeuristicResult* results, int count, void* workspace, cudaStream_t stream) {
  const lt::Api& api = lt::api();
  const float alpha = 1.0f, beta = 0.0f;
  cudaEvent_t start = nullptr, stop = nullptr;
  DJL_ATTN_CUDA_CHECK(cudaEventCreate(&start));
  DJL_ATTN_CUDA_CHECK(cudaEventCreate(&stop));
  int best = 0;
  float best_ms = -1.f;
  for (int i = 0; i < count; ++i) {
    if (results[i].state != lt::kStatusSuccess || results[i].workspace_size > kGemmWorkspaceBytes) {
      continue;
    }
    auto launch = [&] {
      return api.matmul(handle, plan.desc, &alpha, call.w, plan.a, call.a, plan.b, &beta, call.d,
                        plan.c, call.d, plan.c, &results[i].algo, workspace, kGemmWorkspaceBytes,
                        stream);
    };
    if (launch() != lt::kStatusSuccess) continue;  // a candidate that cannot run is skipped
    DJL_ATTN_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < kTimedRuns; ++r) lt::check(launch(), "cublasLtMatmul (tuning)");
    DJL_ATTN_CUDA_CHECK(cudaEventRecord(stop, stream));
    DJL_ATTN_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    DJL_ATTN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (best_ms < 0.f || ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

GemmPlan make_plan(const GemmCall& call, lt::Handle handle, void* workspace,
                   cudaStream_t stream) {
  const lt::Api& api = lt::api();
  const int type = cuda_type(call.dtype);
  GemmPlan plan;
  lt::check(api.matmul_desc_create(&plan.desc, lt::kCompute32F, lt::kR32F),
            "cublasLtMatmulDescCreate");
  const int32_t trans_a = lt::kOpT, trans_b = lt::kOpN;
  lt::check(api.matmul_desc_set_attribute(plan.desc, lt::kDescTransA, &trans_a, sizeof trans_a),
            "cublasLtMatmulDescSetAttribute(TRANSA)");
  lt::check(api.matmul_desc_set_attribute(plan.desc, lt::kDescTransB, &trans_b, sizeof trans_b),
            "cublasLtMatmulDescSetAttribute(TRANSB)");
  lt::check(api.matrix_layout_create(&plan.a, type, call.k, call.n, call.k),
            "cublasLtMatrixLayoutCreate(W)");
  lt::check(api.matrix_layout_create(&plan.b, type, call.k, call.m, call.lda),
            "cublasLtMatrixLayoutCreate(A)");
  lt::check(api.matrix_layout_create(&plan.c, type, call.n, call.m, call.ldd),
            "cublasLtMatrixLayoutCreate(D)");
  lt::MatmulPreference preference = nullptr;
  lt::check(api.preference_create(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t max_workspace = kGemmWorkspaceBytes;
  lt::check(api.preference_set_attribute(preference, lt::kPrefMaxWorkspaceBytes, &max_workspace,
                                         sizeof max_workspace),
            "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  lt::HeuristicResult results[kCandidates] = {};
  int returned = 0;
  const lt::Status status = api.algo_get_heuristic(handle, plan.desc, plan.a, plan.b, plan.c,
                                                   plan.c, preference, kCandidates, results,
                                                   &returned);
  api.preference_destroy(preference);
  lt::check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (returned == 0) {
    fail_native("gemm: cuBLASLt has no algorithm for m=", call.m, " n=", call.n, " k=", call.k,
                " (element type ", static_cast<int>(call.dtype), ")");
  }
  int best = 0;
  if (returned > 1 && tuning_allowed(call, stream)) {
    best = fastest(call, handle, plan, results, returned, workspace, stream);
  }
  plan.algo = results[best].algo;
  plan.workspace_bytes = results[best].workspace_size;
  return plan;
}

struct DeviceState {
  lt::Handle handle = nullptr;
  std::map<GemmKey, GemmPlan> plans;
};

// The cuBLASLt path: the plan of the call's shape, made on first use.
void run_cublaslt(const GemmCall& call, void* workspace, size_t workspace_bytes,
                  cudaStream_t stream, int device) {
  static std::mutex mutex;
  static std::map<int, DeviceState> devices;
  const GemmPlan* plan = nullptr;
  lt::Handle handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    DeviceState& state = devices[device];
    if (state.handle == nullptr) lt::check(lt::api().create(&state.handle), "cublasLtCreate");
    handle = state.handle;
    const GemmKey key{static_cast<int>(call.dtype), call.m, call.n, call.k, call.lda, call.ldd};
    auto found = state.plans.find(key);
    if (found == state.plans.end()) {
      found = state.plans.emplace(key, make_plan(call, handle, workspace, stream)).first;
    }
    plan = &found->second;  // std::map nodes never move
  }
  if (workspace_bytes < kGemmWorkspaceBytes || plan->workspace_bytes > workspace_bytes) {
    fail_native("gemm: the algorithm wants ", plan->workspace_bytes, " bytes of workspace, ",
                workspace_bytes, " given");
  }
  const float alpha = 1.0f, beta = 0.0f;
  lt::check(lt::api().matmul(handle, plan->desc, &alpha, call.w, plan->a, call.a, plan->b, &beta,
                             call.d, plan->c, call.d, plan->c, &plan->algo, workspace,
                             workspace_bytes, stream),
            "cublasLtMatmul");
}

}  // namespace

GemmKernel choose_gemm_kernel(const GemmCall& call, GemmRequest request) {
  if (request == GemmRequest::kCublasLt) return GemmKernel::kCublasLt;
  return skinny_gemm_fits(call) ? GemmKernel::kSkinny : GemmKernel::kCublasLt;
}

void run_gemm_cuda(const GemmCall& call, GemmRequest request, void* workspace,
                   size_t workspace_bytes, cudaStream_t stream, int device) {
  if (call.m == 0) return;
  if (choose_gemm_kernel(call, request) == GemmKernel::kSkinny) {
    return launch_skinny_gemm(call, stream, device);
  }
  if (call.epilogue != GemmEpilogue::kStore || call.norm != nullptr) {
    fail_native("gemm: epilogue ", static_cast<int>(call.epilogue),
                call.norm != nullptr ? " with a norm" : "",
                " needs the skinny kernel, which does not take this call");
  }
  run_cublaslt(call, workspace, workspace_bytes, stream, device);
}

}  // namespace djl_attn::cuda
