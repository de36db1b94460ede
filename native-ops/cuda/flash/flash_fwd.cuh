// Internal interface between the flash forward launcher (flash_fwd.cu) and the per-head-dim
// instantiations of the tensor-core kernel (flash_fwd_hdim*.cu, body in flash_fwd_kernel.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

// Tile configurations selectable at run time through the environment variable
// DJL_ATTN_FLASH_CONFIG (a name below; unset or "default" = the built-in choice), for tuning on
// the GPU without a rebuild. A named configuration applies only where it is compiled: float16 and
// bfloat16, the head dims in its mask, no q/k/v bias, more than 64 query rows, and its shared
// memory within the device's per-block limit; every other call runs the default. Names read
// m<query rows>n<keys per step>w<warps>s<cp.async buffers>.
struct FwdConfig {
  const char* name;
  int block_m, block_n, warps, stages;  // 0s: the default (Tile picks per head dim)
  // __launch_bounds__ blocks per SM (0: none): caps registers at 64K / (min_blocks * threads).
  int min_blocks;
  int head_dims;   // bit mask of kCfgD64, kCfgD128
  // Softmax on unscaled scores with the scale folded into the exponent's FFMA (name suffix f);
  // needs scale > 0, and the launcher runs the default otherwise.
  bool fused_scale = false;
  // The output tile staged through shared memory and stored in 16-byte chunks (suffix o).
  bool stage_o = false;
  // Online softmax that rebases a warp's rows (and rescales their output accumulators) only
  // when some row's maximum outgrew the base by more than 2^8 (suffix r).
  bool lazy_rescale = false;
};
constexpr int kCfgD64 = 1, kCfgD128 = 2;
// Indices are part of the instantiation files (flash_fwd_hdim*_cfg_*.cu): append, never reorder.
inline constexpr FwdConfig kFwdConfigs[] = {
    {"default", 0, 0, 0, 0, 0, 0},
    {"m128n64w8s2", 128, 64, 8, 2, 0, kCfgD64 | kCfgD128},
    {"m64n64w4s3", 64, 64, 4, 3, 0, kCfgD64 | kCfgD128},
    {"m128n32w4s3", 128, 32, 4, 3, 0, kCfgD64 | kCfgD128},
    {"m64n32w4s3b3", 64, 32, 4, 3, 3, kCfgD128},
    {"m128n128w4s2", 128, 128, 4, 2, 0, kCfgD64},
    {"m128n128w8s2b2", 128, 128, 8, 2, 2, kCfgD64},
    {"m128n64w4s4", 128, 64, 4, 4, 0, kCfgD64},
    {"m128n64w8s2b2", 128, 64, 8, 2, 2, kCfgD64},
    {"m128n32w2s3", 128, 32, 2, 3, 0, kCfgD64},
    {"m128n64w4s2f", 128, 64, 4, 2, 0, kCfgD128, true},
    {"m128n64w4s3f", 128, 64, 4, 3, 0, kCfgD64, true},
    {"m128n128w4s2f", 128, 128, 4, 2, 0, kCfgD64, true},
    {"m128n64w4s2o", 128, 64, 4, 2, 0, kCfgD128, false, true},
    {"m128n64w4s3o", 128, 64, 4, 3, 0, kCfgD64, false, true},
    {"m128n64w4s2fo", 128, 64, 4, 2, 0, kCfgD128, true, true},
    {"m128n128w4s2fo", 128, 128, 4, 2, 0, kCfgD64, true, true},
    {"m128n64w4s2r", 128, 64, 4, 2, 0, kCfgD128, false, false, true},
    {"m128n64w4s2for", 128, 64, 4, 2, 0, kCfgD128, true, true, true},
    {"m128n64w4s3r", 128, 64, 4, 3, 0, kCfgD64, false, false, true},
    {"m128n128w4s2for", 128, 128, 4, 2, 0, kCfgD64, true, true, true},
};
constexpr int kNumFwdConfigs = static_cast<int>(sizeof(kFwdConfigs) / sizeof(kFwdConfigs[0]));

// The configurations that run by default (tuned_config in flash_fwd.cu): the measured best at
// D = 64 and D = 128. The shipped build (DJL_ATTN_TUNING off) compiles these and the default
// tiles only; the others are tuning variants for bench_flash.py --configs.
inline constexpr int kTunedD64 = 20;   // m128n128w4s2for
inline constexpr int kTunedD128 = 18;  // m128n64w4s2for

constexpr bool same_name(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || same_name(a + 1, b + 1));
}
static_assert(same_name(kFwdConfigs[kTunedD64].name, "m128n128w4s2for") &&
                  same_name(kFwdConfigs[kTunedD128].name, "m128n64w4s2for"),
              "the default configurations' indices follow kFwdConfigs");

#if defined(DJL_ATTN_TUNING)
inline constexpr bool kTuningBuild = true;
#else
inline constexpr bool kTuningBuild = false;
#endif

// Whether configuration `cfg` has an instantiation for `head_dim` (the default has all).
constexpr bool config_compiled(int cfg, int head_dim) {
  if (cfg == 0) return true;
  if (!kTuningBuild && !(cfg == kTunedD64 && head_dim == 64) &&
      !(cfg == kTunedD128 && head_dim == 128)) {
    return false;
  }
  return (head_dim == 64 && (kFwdConfigs[cfg].head_dims & kCfgD64) != 0) ||
         (head_dim == 128 && (kFwdConfigs[cfg].head_dims & kCfgD128) != 0);
}

// Static facts of one instantiation, for grid sizing and the split heuristic.
struct FwdShape {
  int block_m;
  int block_n;
  int smem_bytes;
  int blocks_per_sm;  // resident blocks per SM on the device
};

// kBias: the parameters carry q/k/v bias pointers. kSmallM: 64-row query tiles, for at most
// 64 query rows. kCfg: an index into kFwdConfigs (0 = default; others only where
// config_compiled and with kBias = kSmallM = false).
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg>
void launch_fwd(const FwdArgs& args, cudaStream_t stream);

// Also prepares the kernel for `device` (shared-memory opt-in); call before launch_fwd.
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg>
FwdShape fwd_shape(int device);

}  // namespace djl_attn::flash::fwd
