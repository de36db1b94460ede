// Internal interface between the flash forward launcher (flash_launch.cu) and the per-head-dim
// instantiations of the tensor-core kernel (flash_fwd_hdim*.cu, body in flash_fwd_kernel.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/build_flags.h"
#include "cuda/flash/flash_shapes.h"
#include "flash/flash_params.h"

namespace djl_attn::flash::fwd {

// What one launch of the tensor-core kernel needs beyond the operator's parameters.
struct FwdArgs {
  FlashParams params;
  int m_blocks;            // query tiles per (batch, head): ceil(Sq / kBlockM)
  int num_splits;          // key ranges per query tile (flash-decoding); 1 = no split
  int n_blocks_per_split;  // key tiles per range
  // With num_splits > 1: float32 partial outputs, each already divided by its own row sum, and
  // their logsumexps, for the combine kernel; rows are b * Sq + i. Null without a split.
  float* o_accum;    // [num_splits, Hq, accum_rows, D]
  float* lse_accum;  // [num_splits, Hq, accum_rows]
  int64_t accum_rows;  // B * Sq
};

using ::djl_attn::cuda::kTuningBuild;

// Whether configuration `cfg` (kFwdConfigs in flash_shapes.h) has an instantiation for
// `head_dim` in this build.
constexpr bool config_compiled(int cfg, int head_dim) {
  return config_compiled(cfg, head_dim, kTuningBuild);
}

// Static facts of one instantiation, for grid sizing and the split heuristic.
struct FwdShape {
  int block_m;
  int block_n;
  int smem_bytes;
  int blocks_per_sm;  // resident blocks per SM on the device
};

// kBias: the parameters carry q/k/v bias pointers. kSmallM: 64-row query tiles, for at most
// 64 query rows. kCfg: an index into kFwdConfigs (0 = the base tiles; others only where
// config_compiled and with kBias = kSmallM = false). kFeatures: the sliding window,
// soft-capping and ALiBi of FlashParams (base tiles, no bias; flash_fwd_hdim*_features.cu).
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg, bool kFeatures = false>
void launch_fwd(const FwdArgs& args, cudaStream_t stream);

// Also prepares the kernel for `device` (shared-memory opt-in); call before launch_fwd.
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg, bool kFeatures = false>
FwdShape fwd_shape(int device);

}  // namespace djl_attn::flash::fwd
