// The static facts of the CUDA flash kernels that the plan (flash_plan.h) decides with: tile
// shapes, shared memory per block, the tile configurations of the sm_80 kernel and which of them
// a build compiles. Plain C++ (no CUDA headers), so that the plan compiles into
// libdjl_attn_plans.so without nvcc; the kernels read the same definitions (flash_fwd.cuh,
// flash_fwd_kernel.cuh) or static_assert against them (flash_decode_kernel.cuh,
// hopper/flash_hopper.cu).
#pragma once

#include <cstdint>

#include "flash/flash_params.h"

namespace djl_attn::flash {

// The smallest head dim the tensor-core kernel is compiled for that is >= dim
// (DJL_FLASH_FOR_EACH_HEAD_DIM), or 0 when dim exceeds them all.
constexpr int padded_head_dim(int64_t dim) {
#define DJL_FLASH_PAD_CASE_(D) \
  if (dim <= D) return D;
  DJL_FLASH_FOR_EACH_HEAD_DIM(DJL_FLASH_PAD_CASE_)
#undef DJL_FLASH_PAD_CASE_
  return 0;
}

// The most key ranges a tiled or decode call is split into: the combine pass keeps their
// logsumexps in registers, a multiple of 32 (flash_combine.cu).
constexpr int kMaxKeySplits = 128;

// ---- the sm_80 tile kernel (flash_fwd_kernel.cuh) ----------------------------------------------

namespace fwd {

// Tile configurations of the sm_80 kernel, selectable at run time through DJL_ATTN_FLASH_CONFIG
// (a name below; unset or "auto" = the measured default per head dim, tuned_config in
// flash_plan.cpp; "base" = the original tiles, which run where no tuned configuration applies),
// for tuning on the GPU without a rebuild. A named configuration applies only
// where it is compiled: float16 and bfloat16, the head dims in its mask, no q/k/v bias, more
// than 64 query rows, and its shared memory within the device's per-block limit; every other call
// runs the default tiles. Names read m<query rows>n<keys per step>w<warps>s<cp.async buffers>.
struct FwdConfig {
  const char* name;
  int block_m, block_n, warps, stages;  // 0s: the base tiles (tile_shape picks per head dim)
  // __launch_bounds__ blocks per SM (0: none): caps registers at 64K / (min_blocks * threads).
  int min_blocks;
  int head_dims;   // bit mask of kCfgD64, kCfgD128
  // Softmax on unscaled scores with the scale folded into the exponent's FFMA (name suffix f);
  // needs scale > 0, and the plan runs the default tiles otherwise.
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
    {"base", 0, 0, 0, 0, 0, 0},
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

// The configurations that run by default (tuned_config in flash_plan.cpp): the measured best at
// D = 64 and D = 128. The shipped build (DJL_ATTN_TUNING off) compiles these and the base
// tiles only; the others are tuning variants for bench_flash.py --configs.
inline constexpr int kTunedD64 = 20;   // m128n128w4s2for
inline constexpr int kTunedD128 = 18;  // m128n64w4s2for

constexpr bool same_name(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || same_name(a + 1, b + 1));
}
static_assert(same_name(kFwdConfigs[kTunedD64].name, "m128n128w4s2for") &&
                  same_name(kFwdConfigs[kTunedD128].name, "m128n64w4s2for"),
              "the default configurations' indices follow kFwdConfigs");

// Whether configuration `cfg` has an instantiation for `head_dim` (the base tiles have all) in
// a build with (`tuning_build`) or without DJL_ATTN_TUNING.
constexpr bool config_compiled(int cfg, int head_dim, bool tuning_build) {
  if (cfg == 0) return true;
  if (!tuning_build && !(cfg == kTunedD64 && head_dim == 64) &&
      !(cfg == kTunedD128 && head_dim == 128)) {
    return false;
  }
  return (head_dim == 64 && (kFwdConfigs[cfg].head_dims & kCfgD64) != 0) ||
         (head_dim == 128 && (kFwdConfigs[cfg].head_dims & kCfgD128) != 0);
}

// The (head dim, configuration) pairs this build instantiates (flash_fwd_hdim{64,128}_cfg_*.cu),
// as X(head dim, kFwdConfigs index): the measured defaults in every build, the tuning variants
// where DJL_ATTN_TUNING is defined. The static_assert below holds them to config_compiled.
#define DJL_FLASH_DEFAULT_CONFIGS(X) X(64, 20) X(128, 18)
#if defined(DJL_ATTN_TUNING)
#define DJL_FLASH_TUNING_CONFIGS(X)                                                          \
  X(64, 1) X(64, 2) X(64, 3) X(64, 5) X(64, 6) X(64, 7) X(64, 8) X(64, 9) X(64, 11) X(64, 12) \
  X(64, 14) X(64, 16) X(64, 19)                                                              \
  X(128, 1) X(128, 2) X(128, 3) X(128, 4) X(128, 10) X(128, 13) X(128, 15) X(128, 17)
inline constexpr bool kListsTuningConfigs = true;
#else
#define DJL_FLASH_TUNING_CONFIGS(X)
inline constexpr bool kListsTuningConfigs = false;
#endif
#define DJL_FLASH_COMPILED_CONFIGS(X) DJL_FLASH_DEFAULT_CONFIGS(X) DJL_FLASH_TUNING_CONFIGS(X)

// The tile kernel's tiles as a plan names them (TiledKernel::config): the base tiles (any head
// dim of DJL_FLASH_FOR_EACH_HEAD_DIM) or one compiled (head dim, configuration) pair. A build
// without DJL_ATTN_TUNING has no enumerator for a tuning variant, so neither its plan nor its
// launcher (flash_launch.cu, whose switch names every enumerator) can meet one.
// libdjl_attn_plans.so is built with every enumerator; its tests choose the build through
// FlashSwitches::tuning_build.
enum class TiledConfig {
  kBase,
#define DJL_FLASH_CONFIG_ENUMERATOR_(D, C) kD##D##Cfg##C,
  DJL_FLASH_COMPILED_CONFIGS(DJL_FLASH_CONFIG_ENUMERATOR_)
#undef DJL_FLASH_CONFIG_ENUMERATOR_
};

// The kFwdConfigs index of `config` (0 for the base tiles).
constexpr int config_index(TiledConfig config) {
#define DJL_FLASH_CONFIG_INDEX_(D, C) \
  if (config == TiledConfig::kD##D##Cfg##C) return C;
  DJL_FLASH_COMPILED_CONFIGS(DJL_FLASH_CONFIG_INDEX_)
#undef DJL_FLASH_CONFIG_INDEX_
  return 0;
}

// The enumerator of configuration `cfg` at `head_dim`: kBase for cfg 0, and false where this
// build lists no such pair.
constexpr bool find_tiled_config(int cfg, int head_dim, TiledConfig* out) {
  if (cfg == 0) {
    *out = TiledConfig::kBase;
    return true;
  }
#define DJL_FLASH_CONFIG_FIND_(D, C)        \
  if (cfg == C && head_dim == D) {          \
    *out = TiledConfig::kD##D##Cfg##C;      \
    return true;                            \
  }
  DJL_FLASH_COMPILED_CONFIGS(DJL_FLASH_CONFIG_FIND_)
#undef DJL_FLASH_CONFIG_FIND_
  return false;
}

// The lists above name exactly the pairs config_compiled accepts in this build.
constexpr bool configs_listed_exactly() {
  for (int cfg = 0; cfg < kNumFwdConfigs; ++cfg) {
    for (int head_dim : {32, 64, 96, 128, 256}) {
      TiledConfig found = TiledConfig::kBase;
      if (find_tiled_config(cfg, head_dim, &found) !=
          config_compiled(cfg, head_dim, kListsTuningConfigs)) {
        return false;
      }
    }
  }
  return true;
}
static_assert(configs_listed_exactly(), "DJL_FLASH_*_CONFIGS list the compiled configurations");

// kBlockM query rows x kBlockN keys per step, kStages cp.async buffers, kWarps warps.
struct TileShape {
  int block_m, block_n, stages, warps;
};

// The tiles of one instantiation (flash_fwd_kernel.cuh's Tile reads them). The base tiles
// keep dynamic shared memory at or below 96 KiB, so that all sm_80+ parts (sm_86/89 have 99 KiB
// per block) run every head dim: 128-row query tiles up to D = 128, 64-row ones at D = 256 and
// for problems of at most 64 query rows (small_m); three buffers where they fit in 96 KiB.
// cfg != 0: the shape of kFwdConfigs[cfg].
constexpr TileShape tile_shape(int head_dim, bool small_m, int cfg) {
  if (cfg != 0) {
    const FwdConfig& c = kFwdConfigs[cfg];
    return TileShape{c.block_m, c.block_n, c.stages, c.warps};
  }
  return TileShape{head_dim <= 128 && !small_m ? 128 : 64, head_dim <= 128 ? 64 : 32,
                   head_dim <= 64 ? 3 : 2, 4};
}

// Dynamic shared memory of one instantiation: the query tile and kStages key and value tiles of
// 16-bit elements.
constexpr int tile_smem_bytes(int head_dim, bool small_m, int cfg) {
  const TileShape t = tile_shape(head_dim, small_m, cfg);
  return (t.block_m + 2 * t.stages * t.block_n) * head_dim * 2;
}

// Every base tile shape fits here: the tile kernel needs a GPU with this much opt-in shared
// memory per block (and sm_80 for bfloat16 mma.sync and cp.async).
constexpr int64_t kTileKernelMinSmem = 96 * 1024;

}  // namespace fwd

// ---- the split-KV decode kernel (flash_decode_kernel.cuh) --------------------------------------

namespace decode {

// Query rows of one thread block: one m16 mma tile.
constexpr int64_t kMaxRows = 16;

// Keys per tile: 4 warps x 16 rows.
constexpr int kBlockN = 64;

// Whether the kernel is compiled for this exact head dim (64, 128, 256).
constexpr bool head_dim_compiled(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// cp.async buffers per warp ring: as many as keep 3 (D = 64), 2 (D = 128) or 1 (D = 256) blocks
// on an SM with 228 KiB.
constexpr int stages(int64_t head_dim) { return head_dim <= 64 ? 4 : (head_dim <= 128 ? 3 : 2); }

// Dynamic shared memory: a K and a V ring per warp (4 warps x stages x 16 rows) and the 16-row
// query tile, 16-bit elements.
constexpr int smem_bytes(int64_t head_dim) {
  return static_cast<int>(2 * 4 * stages(head_dim) * 16 * head_dim * 2 + 16 * head_dim * 2);
}

}  // namespace decode

// ---- the Hopper kernel (hopper/flash_hopper.cu) ------------------------------------------------

namespace hopper {

// Consumer warpgroups of 64 query rows each that the kernel is compiled with at a head dim: 2 and
// 3 at D = 64 (the plan picks one per call, hopper_consumers in flash_plan.cpp), 2 at D = 128 and
// 256, whose output accumulators (64 and 128 registers a thread) leave no room for a third within
// 64K registers.
constexpr bool consumers_compiled(int64_t head_dim, int consumers) {
  return consumers == 2 || (consumers == 3 && head_dim == 64);
}

// Query rows per work item: 64 per consumer warpgroup.
constexpr int block_m(int consumers) { return 64 * consumers; }

// Query tiles of one (batch, head): the work items per (batch, head) of the persistent grid.
constexpr int64_t m_blocks(int64_t seqlen_q, int consumers) {
  return (seqlen_q + block_m(consumers) - 1) / block_m(consumers);
}

// Keys per tile: 128, and 64 at D = 256, where two stages of 128-key K and V tiles beside the
// query tile would need 320 KiB of shared memory, and a 64 x 128 score tile would not fit the
// consumers' registers beside their 64 x 256 float32 output accumulator (128 registers).
constexpr int block_n(int64_t head_dim) { return head_dim > 128 ? 64 : 128; }

// Whether the kernel is compiled for this exact head dim.
constexpr bool head_dim_compiled(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// Dynamic shared memory (Layout<D, consumers, bytes>::kSmemBytes in hopper_layout.cuh, which
// static_asserts this): the block_m(consumers)-row query tile, 2 stages of K and V tiles, 14
// mbarriers, 2 work-item slots and 1 KiB of slack for the 1024-byte alignment of the 128-byte
// swizzle. element_bytes: 2 (float16, bfloat16) or 1 (the e4m3 kernel).
constexpr int smem_bytes(int64_t head_dim, int consumers, int element_bytes = 2) {
  const int tile = static_cast<int>(head_dim) * element_bytes;
  return block_m(consumers) * tile + 2 * 2 * block_n(head_dim) * tile + 14 * 8 + 2 * 4 + 1024;
}

}  // namespace hopper

}  // namespace djl_attn::flash
