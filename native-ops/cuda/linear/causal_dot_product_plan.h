// The plan of the causal_dot_product CUDA launcher: which kernel variant (and how many warps per
// block) runs a problem on a GPU. A pure function of the problem and of the device's facts, so it
// compiles without nvcc and its tests (tests/test_plans_<family>.py, through libdjl_attn_plans.so) run
// without a GPU.
//
// Variants:
//   per_thread     one block per (batch, head, tile of M columns); each thread carries a 32-row
//                  slice of one column of the [E, M] state through time. No redundant work, but
//                  each block walks all of L serially: right when B*H fills the SMs.
//   low_occupancy  one block per (batch, head, column of M); the block's warps split each run of
//                  time steps between them and join their partial states with a prefix sum in
//                  shared memory. Re-reads q and k once per column, but puts many warps on a
//                  short problem: right when B*H is small.
//   chunked        one block per (batch, head, tile of 64 columns, 32 when M <= 32); per chunk of
//                  64 steps the masked intra-chunk product, q times the carried float32 state
//                  (tf32) and the state update run on tensor cores (mma.sync). float16/bfloat16
//                  with E <= 128 whose shared memory fits the device only: other requests for it
//                  run per_thread.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/common/device_facts.h"

namespace djl_attn::linear {

enum class LinearVariant { kAuto, kPerThread, kLowOccupancy, kChunked };

// The compiled instantiations a plan names (causal_dot_product_shapes.h), so that a launcher's
// switch covers every value and refuses none.
// State rows per thread: the per_thread kernel's thread groups per column, the low_occupancy
// kernel's rows per lane; E <= 32 * rows (the binding holds E to [1, 256]).
enum class LinearRows { k1 = 1, k2 = 2, k4 = 4, k8 = 8 };
// The chunked kernel's zero-padded E and its tile of value columns.
enum class ChunkedDim { k32 = 32, k64 = 64, k128 = 128 };
enum class ChunkedCols { k32 = 32, k64 = 64 };

struct LinearPlan {
  LinearVariant variant;  // never kAuto
  int warps;              // low_occupancy only: warps per block, 4 to low_occupancy_max_warps(E)
  LinearRows rows;        // per_thread and low_occupancy
  ChunkedDim chunked_dim;    // chunked only
  ChunkedCols chunked_cols;  // chunked only: fits the device's opt-in shared memory
};


// The problem: B*H independent heads, length L, feature dims E (q, k) and M (v), element size
// (4 for float32, 2 for float16/bfloat16). `requested` is kAuto, or a variant to force (tests and
// benchmarks).
LinearPlan plan_causal_dot_product(int64_t batch_heads, int64_t seqlen, int64_t dim_qk,
                                   int64_t dim_v, int64_t element_size, LinearVariant requested,
                                   const cuda::DeviceFacts& device);

// "per_thread", "low_occupancy/8w" or "chunked".
std::string describe(const LinearPlan& plan);

// auto, per_thread, low_occupancy, chunked (null or "" = auto); throws InvalidArgument naming
// `what` for anything else.
LinearVariant parse_linear_variant(const char* value, const char* what);

}  // namespace djl_attn::linear
