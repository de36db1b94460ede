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

// The same list as a tile names it: only a compiled head dim, so the launcher (flash_fp32.cu) has
// none to refuse. The value is the head dim.
enum class Fp32HeadDim {
#define DJL_FLASH_FP32_ENUMERATOR_(D) k##D = D,
  DJL_FLASH_FP32_FOR_EACH_HEAD_DIM(DJL_FLASH_FP32_ENUMERATOR_)
#undef DJL_FLASH_FP32_ENUMERATOR_
};

// The warps per block the kernel is compiled for: each warp owns 16 query rows, so a block owns
// 16 * warps rows. The value is the warp count.
enum class Fp32Warps { k4 = 4, k8 = 8 };

struct Fp32Tile {
  Fp32HeadDim head_dim = Fp32HeadDim::k32;  // compiled head dim the problem's D is padded to
  Fp32Warps warps = Fp32Warps::k4;
  bool split_tf32;   // true: 3xTF32 (float32 accuracy); false: 1xTF32 (opt-in, ~1e-3)
  bool bias;         // q/k/v bias added in shared memory (the fused BERT path)
  bool features;     // sliding window, soft-capping or ALiBi: 4 warps, 3xTF32, no bias
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

// Whether a build compiles the tile: the shipped build (DJL_ATTN_TUNING off) holds what the
// default plan can pick, the 3xTF32 kernels with 4-warp tiles and, at D > 64, 8-warp tiles. The
// opt-in 1xTF32 kernels and 8-warp tiles at D <= 64 (within 5% of 4 warps, docs/benchmarks.md)
// are a tuning build's: they doubled the float32 kernels' share of the library.
constexpr bool fp32_tile_compiled(int head_dim, int warps, bool split_tf32, bool tuning_build) {
  return tuning_build || (split_tf32 && (warps == 4 || head_dim > 64));
}

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
