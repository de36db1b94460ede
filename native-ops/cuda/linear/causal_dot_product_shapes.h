// The tile shapes of the causal_dot_product CUDA kernels, as constants and constexpr functions
// of E and M: shared by the kernels (included from causal_dot_product_kernels.cuh) and by the
// host-only plan (causal_dot_product_plan.cpp), which the plan tests compile without nvcc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace djl_attn::linear {

// per_thread: 128 threads; G threads share one output column, each owning 32 of its state rows,
// so E up to 32 * G. Both choices keep the state at 32 registers per thread for every E.
constexpr int kPerThreadThreads = 128;
constexpr int kPerThreadRows = 32;
constexpr int per_thread_groups(int64_t dim_qk) {
  return dim_qk <= 32 ? 1 : dim_qk <= 64 ? 2 : dim_qk <= 128 ? 4 : 8;
}
constexpr int64_t per_thread_columns(int64_t dim_qk) {
  return kPerThreadThreads / per_thread_groups(dim_qk);
}

// low_occupancy: each lane owns E_MAX / 32 state rows of the block's one column; each warp takes
// kLowOccSteps consecutive time steps per iteration.
constexpr int kLowOccSteps = 4;
constexpr int low_occupancy_rows(int64_t dim_qk) {
  return dim_qk <= 32 ? 1 : dim_qk <= 64 ? 2 : dim_qk <= 128 ? 4 : 8;
}
// With 8 rows a thread holds about 170 live registers (current and prefetched q/k, the partial
// states): 256 threads is the most a block can then have.
constexpr int low_occupancy_max_warps(int64_t dim_qk) {
  return low_occupancy_rows(dim_qk) >= 8 ? 8 : 16;
}

// chunked: 4 warps of 16 rows per chunk of kChunk steps.
constexpr int kChunk = 64;
constexpr int kChunkWarps = kChunk / 16;
constexpr int64_t kChunkMaxDim = 128;
// E is zero-padded up to 32, 64 or 128 on load.
constexpr int chunked_dim(int64_t dim_qk) { return dim_qk <= 32 ? 32 : dim_qk <= 64 ? 64 : 128; }
constexpr int chunked_cols(int64_t dim_v) { return dim_v <= 32 ? 32 : 64; }
// Blocks per SM that shared memory allows (98 KiB at E = 128, 57 KiB at 64, 37 KiB at 32) and
// that the registers must then allow too.
constexpr int chunked_min_blocks(int e_max) { return e_max >= 128 ? 2 : e_max >= 64 ? 3 : 4; }

template <int EMax, int Mt>
struct ChunkedShape {
  // The state [EMax, Mt] is split across the 4 warps for the K^T V update: by rows in slices of
  // at least 16 (one m16 tile), and by columns when E = 32 leaves only two such slices.
  static constexpr int kRowWarps = EMax / 16 < kChunkWarps ? EMax / 16 : kChunkWarps;
  static constexpr int kColWarps = kChunkWarps / kRowWarps;
  static constexpr int kStateRows = EMax / kRowWarps;
  static constexpr int kStateCols = Mt / kColWarps;
  // The state in shared memory holds rows in pairs: element (e, n) at float
  // ((e / 2) * kPairPitch + n) * 2 + e % 2, so that a tf32 B fragment (rows 2c and 2c + 1 of one
  // column) is one 8-byte load; a pitch of 4 mod 16 pairs keeps those loads conflict-free.
  static constexpr int kPairPitch = Mt + 4;
  static constexpr int kQkSegs = EMax / 8;  // 16-byte segments per q or k row
  static constexpr int kVSegs = Mt / 8;
  static constexpr int kQkPitch = EMax + 8;  // elements per row of q or k in shared memory
  static constexpr int kVPitch = Mt + 8;
  static constexpr size_t kQkStage = size_t{kChunk} * kQkPitch * 2;  // bytes
  static constexpr size_t kVStage = size_t{kChunk} * kVPitch * 2;
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + kQkStage;
  static constexpr size_t kV = kK + 2 * kQkStage;
  static constexpr size_t kState = kV + 2 * kVStage;
  static constexpr size_t kBytes = kState + size_t{EMax / 2} * kPairPitch * 2 * sizeof(float);
};

// Dynamic shared memory of the chunked kernel that runs E = dim_qk, M = dim_v (for the plan:
// 103 KiB at E = 128, M > 32 is more than GPUs of compute capability 8.6/8.9 give a block).
inline size_t chunked_smem_bytes(int64_t dim_qk, int64_t dim_v) {
  const bool narrow = chunked_cols(dim_v) == 32;
  switch (chunked_dim(dim_qk)) {
    case 32: return narrow ? ChunkedShape<32, 32>::kBytes : ChunkedShape<32, 64>::kBytes;
    case 64: return narrow ? ChunkedShape<64, 32>::kBytes : ChunkedShape<64, 64>::kBytes;
    default: return narrow ? ChunkedShape<128, 32>::kBytes : ChunkedShape<128, 64>::kBytes;
  }
}

}  // namespace djl_attn::linear
