#include "cuda/linear/causal_dot_product_plan.h"

#include <cstring>

#include "common/error.h"
#include "cuda/linear/causal_dot_product_shapes.h"
#include "linear/linear_params.h"

namespace djl_attn::linear {
namespace {

// About this many resident warps per SM hide the latency of the low-occupancy kernel's loads and
// barriers; more warps per block only lengthen each iteration.
constexpr int64_t kTargetWarpsPerSm = 32;

// Shortest L at which auto runs the chunked kernel: from two chunks on, the next chunk's loads
// overlap this chunk's tensor-core work; below that both kernels take a few microseconds.
constexpr int64_t kChunkedMinLength = 2 * kChunk;
// With fewer per-thread blocks than SMs, the chunked kernel only above this E (see below).
constexpr int64_t kChunkedSmallGridMinDim = 64;

// The per_thread kernel's groups and the low_occupancy kernel's rows are one function of E.
constexpr bool rows_agree(int64_t dim_qk) {
  return per_thread_groups(dim_qk) == low_occupancy_rows(dim_qk);
}
static_assert(rows_agree(1) && rows_agree(32) && rows_agree(33) && rows_agree(64) &&
              rows_agree(65) && rows_agree(128) && rows_agree(129) && rows_agree(kMaxDim));

LinearRows linear_rows(int64_t dim_qk) {
  switch (low_occupancy_rows(dim_qk)) {
    case 1: return LinearRows::k1;
    case 2: return LinearRows::k2;
    case 4: return LinearRows::k4;
    default: return LinearRows::k8;
  }
}

ChunkedDim chunked_dim_of(int64_t dim_qk) {
  switch (chunked_dim(dim_qk)) {
    case 32: return ChunkedDim::k32;
    case 64: return ChunkedDim::k64;
    default: return ChunkedDim::k128;
  }
}

ChunkedCols chunked_cols_of(int64_t dim_v) {
  return chunked_cols(dim_v) == 32 ? ChunkedCols::k32 : ChunkedCols::k64;
}

}  // namespace

LinearPlan plan_causal_dot_product(int64_t batch_heads, int64_t seqlen, int64_t dim_qk,
                                   int64_t dim_v, int64_t element_size, LinearVariant requested,
                                   const cuda::DeviceFacts& device) {
  LinearPlan plan{requested, 0, linear_rows(dim_qk), chunked_dim_of(dim_qk),
                  chunked_cols_of(dim_v)};
  // The tensor-core kernel takes float16/bfloat16 with E <= 128 where its shared memory fits the
  // device; other requests for it run the per-thread kernel.
  const bool chunked_runs =
      element_size == 2 && dim_qk <= kChunkMaxDim &&
      static_cast<int64_t>(chunked_smem_bytes(dim_qk, dim_v)) <= device.smem_optin;
  if (plan.variant == LinearVariant::kChunked && !chunked_runs) {
    plan.variant = LinearVariant::kPerThread;
  }
  const int64_t per_thread_blocks =
      batch_heads * ((dim_v + per_thread_columns(dim_qk) - 1) / per_thread_columns(dim_qk));
  if (plan.variant == LinearVariant::kAuto) {
    // The per-thread kernel does no redundant work but walks L serially in each block; once its
    // blocks reach every SM, splitting time across warps only adds the low-occupancy kernel's
    // re-reads of q and k (once per column) and its barriers. In that regime the chunked kernel
    // does the same work on tensor cores (and has as many or more blocks per head: one per 64
    // columns against one per 32 at E > 64), so it takes over wherever it applies.
    //
    // Below that the low-occupancy kernel's B·H·M blocks fill the GPU where the chunked
    // kernel's B·H·ceil(M / 64) cannot, and it wins up to E = 64 (H200, B·H = 4, L = 1k-64k:
    // within 3% of chunked at E = 64, 7-11% ahead at E = 32); at E > 64 its per-column blocks
    // each walk the whole state column and the chunked kernel is 1.3x faster at every L >= 1k
    // (docs/benchmarks.md, causal_dot_product table). The chunked kernel is chosen only where
    // its shared memory fits the device.
    const bool chunked_fits = chunked_runs && seqlen >= kChunkedMinLength;
    if (per_thread_blocks < device.sm_count) {
      plan.variant = chunked_fits && dim_qk > kChunkedSmallGridMinDim
                         ? LinearVariant::kChunked
                         : LinearVariant::kLowOccupancy;
    } else if (chunked_fits) {
      plan.variant = LinearVariant::kChunked;
    } else {
      plan.variant = LinearVariant::kPerThread;
    }
  }
  if (plan.variant == LinearVariant::kLowOccupancy) {
    const int64_t blocks = batch_heads * dim_v;
    const int64_t budget = kTargetWarpsPerSm * device.sm_count / (blocks > 0 ? blocks : 1);
    int warps = 4;
    while (warps * 2 <= budget && warps * 2 <= low_occupancy_max_warps(dim_qk)) warps *= 2;
    plan.warps = warps;
  }
  return plan;
}

std::string describe(const LinearPlan& plan) {
  if (plan.variant == LinearVariant::kPerThread) return "per_thread";
  if (plan.variant == LinearVariant::kChunked) return "chunked";
  return "low_occupancy/" + std::to_string(plan.warps) + "w";
}

LinearVariant parse_linear_variant(const char* value, const char* what) {
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) {
    return LinearVariant::kAuto;
  }
  if (std::strcmp(value, "per_thread") == 0) return LinearVariant::kPerThread;
  if (std::strcmp(value, "low_occupancy") == 0) return LinearVariant::kLowOccupancy;
  if (std::strcmp(value, "chunked") == 0) return LinearVariant::kChunked;
  fail_invalid(what, ": expected one of auto, per_thread, low_occupancy, chunked, got '", value,
               "'");
}

}  // namespace djl_attn::linear
