// The float32 flash attention forward on tensor cores (cuda/flash/flash_fp32_kernel.cuh): what a
// plan needs to know of it (plain C++, no CUDA headers), and its launcher.
//
// Products run as mma.sync m16n8k8 on tf32 operands. In the default, float32-accurate mode each
// operand x is split as x = hi + lo with hi = tf32(x) and lo = x - hi, and a*b is accumulated as
// a_lo*b_hi + a_hi*b_lo + a_hi*b_hi (3xTF32): the dropped a_lo*b_lo and the truncation of lo to
// tf32 are below 2^-21 |a*b|, so scores and outputs carry float32-level error (the suite's
// 1e-5 against float64). The opt-in 1xTF32 mode multiplies hi by hi only: three times fewer
// tensor-core instructions, about 1e-3 relative error (tf32 has 10 mantissa bits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cuda/common/device_facts.h"
#include "flash/flash_params.h"

namespace djl_attn::flash::fp32 {

// The head dims the kernel is compiled for; others run padded up to the next (zero-filled). Its
// own list, though today equal to DJL_FLASH_FOR_EACH_HEAD_DIM: this kernel takes multiples of 32
// only (output columns in groups of 32), one flash_fp32_hdim*.cu file each.
#define DJL_FLASH_FP32_FOR_EACH_HEAD_DIM(X) X(32) X(64) X(96) X(128) X(256)

// The same list as the plan pads a head dim to it (the compiled head dim of its Fp32Kernel). The
// value is the head dim.
enum class Fp32HeadDim {
#define DJL_FLASH_FP32_ENUMERATOR_(D) k##D = D,
  DJL_FLASH_FP32_FOR_EACH_HEAD_DIM(DJL_FLASH_FP32_ENUMERATOR_)
#undef DJL_FLASH_FP32_ENUMERATOR_
};

// The tiles a build compiles, per head dim, as X(D, warps, 3xTF32, bias, features): the shipped
// build (DJL_ATTN_TUNING off) holds what the default plan can pick, the 3xTF32 kernels with
// 4-warp tiles and, at D > 64, 8-warp tiles, each with and without bias, and the one 4-warp
// 3xTF32 kernel without bias for the sliding window, soft-capping and ALiBi. The opt-in 1xTF32
// kernels and 8-warp tiles at D <= 64 (within 5% of 4 warps, docs/benchmarks.md) are a tuning
// build's: they doubled the float32 kernels' share of the library. Each warp owns 16 query rows,
// so a block owns 16 * warps rows. fp32_tile_compiled says the same (static_assert below).
// (Listed in the order the launcher instantiated them before the list existed: features, 8 warps,
// 4 warps, bias first, so that the shipped objects' machine code stayed byte for byte the same.)
#define DJL_FLASH_FP32_PAIR_(X, D, W, SPLIT) \
  X(D, W, SPLIT, true, false) X(D, W, SPLIT, false, false)
#define DJL_FLASH_FP32_FEATURES_(X, D) X(D, 4, true, false, true)
#if defined(DJL_ATTN_TUNING)
#define DJL_FLASH_FP32_NARROW_8W_(X, D) DJL_FLASH_FP32_PAIR_(X, D, 8, true)
#define DJL_FLASH_FP32_TF32_(X, D, W) DJL_FLASH_FP32_PAIR_(X, D, W, false)
#else
#define DJL_FLASH_FP32_NARROW_8W_(X, D)
#define DJL_FLASH_FP32_TF32_(X, D, W)
#endif
#define DJL_FLASH_FP32_NARROW_(X, D)                                                 \
  DJL_FLASH_FP32_FEATURES_(X, D) DJL_FLASH_FP32_NARROW_8W_(X, D)                    \
  DJL_FLASH_FP32_TF32_(X, D, 8) DJL_FLASH_FP32_PAIR_(X, D, 4, true) DJL_FLASH_FP32_TF32_(X, D, 4)
#define DJL_FLASH_FP32_WIDE_(X, D)                                                  \
  DJL_FLASH_FP32_FEATURES_(X, D) DJL_FLASH_FP32_PAIR_(X, D, 8, true)                \
  DJL_FLASH_FP32_TF32_(X, D, 8) DJL_FLASH_FP32_PAIR_(X, D, 4, true) DJL_FLASH_FP32_TF32_(X, D, 4)
#define DJL_FLASH_FP32_TILES_32(X) DJL_FLASH_FP32_NARROW_(X, 32)
#define DJL_FLASH_FP32_TILES_64(X) DJL_FLASH_FP32_NARROW_(X, 64)
#define DJL_FLASH_FP32_TILES_96(X) DJL_FLASH_FP32_WIDE_(X, 96)
#define DJL_FLASH_FP32_TILES_128(X) DJL_FLASH_FP32_WIDE_(X, 128)
#define DJL_FLASH_FP32_TILES_256(X) DJL_FLASH_FP32_WIDE_(X, 256)
#define DJL_FLASH_FP32_TILES(X)                                                       \
  DJL_FLASH_FP32_TILES_32(X) DJL_FLASH_FP32_TILES_64(X) DJL_FLASH_FP32_TILES_96(X) \
  DJL_FLASH_FP32_TILES_128(X) DJL_FLASH_FP32_TILES_256(X)

// One compiled kernel, as the plan names it to the launcher (flash_fp32.cu), whose switch names
// every enumerator: a build without DJL_ATTN_TUNING has none for a tuning tile, so neither its
// plan nor its launcher can meet one. libdjl_attn_plans.so is built with every enumerator; its
// tests choose the build through plan_flash_fp32's `tuning_build`.
#define DJL_FLASH_FP32_NAME_(D, W, SPLIT, BIAS, FEATURES) \
  kD##D##W##W##_split##SPLIT##_bias##BIAS##_features##FEATURES
enum class Fp32Kernel {
#define DJL_FLASH_FP32_ENUMERATOR_(D, W, SPLIT, BIAS, FEATURES) \
  DJL_FLASH_FP32_NAME_(D, W, SPLIT, BIAS, FEATURES),
  DJL_FLASH_FP32_TILES(DJL_FLASH_FP32_ENUMERATOR_)
#undef DJL_FLASH_FP32_ENUMERATOR_
};

// What an Fp32Kernel is.
struct Fp32KernelFacts {
  int head_dim;      // a compiled head dim (Fp32HeadDim)
  int warps;         // 4 or 8
  bool split_tf32;   // true: 3xTF32 (float32 accuracy); false: 1xTF32 (opt-in, ~1e-3)
  bool bias;         // q/k/v bias added in shared memory (the fused BERT path)
  bool features;     // sliding window, soft-capping or ALiBi: 4 warps, 3xTF32, no bias
};
constexpr Fp32KernelFacts facts_of(Fp32Kernel kernel) {
#define DJL_FLASH_FP32_FACTS_(D, W, SPLIT, BIAS, FEATURES)               \
  if (kernel == Fp32Kernel::DJL_FLASH_FP32_NAME_(D, W, SPLIT, BIAS, FEATURES)) { \
    return Fp32KernelFacts{D, W, SPLIT, BIAS, FEATURES};                    \
  }
  DJL_FLASH_FP32_TILES(DJL_FLASH_FP32_FACTS_)
#undef DJL_FLASH_FP32_FACTS_
  return Fp32KernelFacts{0, 0, false, false, false};
}

// The enumerator of a tile, and false where this build lists none.
constexpr bool find_fp32_kernel(const Fp32KernelFacts& want, Fp32Kernel* out) {
#define DJL_FLASH_FP32_FIND_(D, W, SPLIT, BIAS, FEATURES)                             \
  if (want.head_dim == D && want.warps == W && want.split_tf32 == SPLIT &&             \
      want.bias == BIAS && want.features == FEATURES) {                                \
    *out = Fp32Kernel::DJL_FLASH_FP32_NAME_(D, W, SPLIT, BIAS, FEATURES);              \
    return true;                                                                       \
  }
  DJL_FLASH_FP32_TILES(DJL_FLASH_FP32_FIND_)
#undef DJL_FLASH_FP32_FIND_
  return false;
}

struct Fp32Tile {
  // The instantiation that runs: its head dim (facts_of) is the compiled one the problem's D is
  // padded to.
  Fp32Kernel kernel{};
  bool vectorized;   // 16-byte copies and stores: D % 4 == 0, 16-byte aligned bases and strides
};

// Keys per key/value tile: 64, and 16 at D = 256, where two tiles of 16 keys fit beside an
// 8-warp query tile (and keep the output accumulator's 128 registers per thread from spilling).
constexpr int fp32_block_n(int head_dim) { return head_dim <= 128 ? 64 : 16; }

// Floats per shared-memory row. Q and K rows are read as float4 by lanes (g, t) at
// row g, column 4t: a pitch of 16 mod 32 floats puts the 8 lanes of each 128-bit phase on 32
// distinct banks. V rows are read at rows 2t and 2t + 1, column 4g: a pitch of 4 mod 32 does.
constexpr int fp32_qk_pitch(int head_dim) { return head_dim + 16; }
constexpr int fp32_v_pitch(int head_dim) { return head_dim + 4; }

// Key/value tiles in flight: the next tile loads while this one is multiplied.
constexpr int kFp32Stages = 2;

// Dynamic shared memory of one block: the query tile and kFp32Stages key and value tiles.
constexpr int64_t fp32_smem_bytes(int head_dim, int warps) {
  return 4 * (int64_t{16} * warps * fp32_qk_pitch(head_dim) +
              int64_t{kFp32Stages} * fp32_block_n(head_dim) *
                  (fp32_qk_pitch(head_dim) + fp32_v_pitch(head_dim)));
}

// Whether a build with (`tuning_build`) or without DJL_ATTN_TUNING compiles the (non-feature)
// tile: the plan asks this before it names one (DJL_FLASH_FP32_TILES lists the same).
constexpr bool fp32_tile_compiled(int head_dim, int warps, bool split_tf32, bool tuning_build) {
  return tuning_build || (split_tf32 && (warps == 4 || head_dim > 64));
}

#if defined(DJL_ATTN_TUNING)
inline constexpr bool kListsFp32TuningTiles = true;
#else
inline constexpr bool kListsFp32TuningTiles = false;
#endif
// The list names exactly the tiles fp32_tile_compiled accepts in this build.
constexpr bool fp32_tiles_listed_exactly() {
  for (int d : {32, 64, 96, 128, 256}) {
    for (int w : {4, 8}) {
      for (bool split : {false, true}) {
        for (bool bias : {false, true}) {
          Fp32Kernel k{};
          if (find_fp32_kernel(Fp32KernelFacts{d, w, split, bias, false}, &k) !=
              fp32_tile_compiled(d, w, split, kListsFp32TuningTiles)) {
            return false;
          }
          const bool feature_tile = w == 4 && split && !bias;
          if (find_fp32_kernel(Fp32KernelFacts{d, w, split, bias, true}, &k) != feature_tile) {
            return false;
          }
        }
      }
    }
  }
  return true;
}
static_assert(fp32_tiles_listed_exactly(), "DJL_FLASH_FP32_TILES lists the compiled tiles");

// DJL_ATTN_FLASH_FP32, the float32 path: "auto" (the default) is the 3xTF32 kernel with the
// plan's tiles; "tf32" opts into 1xTF32 (faster, ~1e-3 relative error) in a DJL_ATTN_TUNING
// build only: the shipped build does not list it (set in the environment it is reported once at
// load, on stderr and in djl_attn_option_errors, and auto runs; djl_attn_set_option refuses it),
// and a plan asked for it there runs 3xTF32 (a defensive fallback); "simple" keeps the
// one-warp-per-row kernel (comparisons); "4w" / "8w" force 3xTF32 with 4- or 8-warp tiles
// (tuning runs and tests; a tile the build lacks runs as the plan's).
enum class Fp32Mode { kAuto, kTf32, kSimple, kWarps4, kWarps8 };

// The switch's values, in Fp32Mode order (the first is the default).
inline const char* const kFp32ModeNames[] = {"auto", "tf32", "simple", "4w", "8w"};

// Fp32Mode of a switch value (null or "" = auto); throws InvalidArgument naming `what` otherwise.
Fp32Mode parse_fp32_mode(const char* value, const char* what);

// The tile of a float32 problem on a GPU, or nullopt where the simple kernel runs it: mode
// "simple", a GPU before sm_80 (no tf32 mma, no cp.async), D > 256, or too little shared memory.
// Warps: 8-warp (128-row) tiles at D > 64 where they fit and their grid fills the SMs once;
// 4-warp (64-row) tiles otherwise ("8w" forces 8 wherever they fit). Only tiles the build
// compiled (fp32_tile_compiled with `tuning_build`).
std::optional<Fp32Tile> plan_flash_fp32(const FlashParams& params, Fp32Mode mode,
                                        bool tuning_build, const cuda::DeviceFacts& device);

// e.g. "3xtf32/d128/8w", with "/bias" and "/scalar" (float-by-float copies) where they apply.
std::string describe(const Fp32Tile& tile);

}  // namespace djl_attn::flash::fp32
