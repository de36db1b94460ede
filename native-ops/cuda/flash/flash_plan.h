// The plan of the CUDA flash attention forward: which kernel runs a call (the Hopper kernel, the
// sm_80 tile kernel with its tile configuration, the split-KV decode kernel, or the simple
// kernel), on the caller's tensors or on staged copies, with the GQA fold or not, how many key
// ranges it is split into and how much scratch the split needs. A pure function of the
// parameters (shapes, flags, alignment: flash_params.h), the DJL_ATTN_FLASH_* switches, what the
// build compiled and the device's facts, so it compiles without nvcc and its tests
// (tests/test_plans_flash.py, through libdjl_attn_plans.so) run without a GPU. The launcher
// (flash_launch.cu) only runs what it says.
//
// Paths:
//   hopper   sm_90a: TMA loads, wgmma, warp specialisation, a persistent grid (hopper/); D = 64,
//            128 or 256, more than 64 query rows, batched, no bias, no sliding window, soft-cap
//            or ALiBi, compute capability 9.0.
//   tiled    the FlashAttention-2 tile kernel (flash_fwd_kernel.cuh), float16/bfloat16 on
//            sm_80+, split over the keys (then merged by the combine pass) when its grid would
//            not fill the GPU.
//   decode   the split-KV decode kernel (flash_decode_kernel.cuh): at most 16 query rows per
//            (batch, head) after the fold, D = 64, 128 or 256, batched, no bias; the sliding
//            window and soft-cap in an instantiation of their own, with the key range and its
//            split counted from the window's first tile, and ALiBi in a third one.
//   fp32     float32 on tensor cores (flash_fp32_kernel.cuh): tf32 mma.sync with operands
//            split into hi + lo parts (3xTF32, float32 accuracy; 1xTF32 only where
//            DJL_ATTN_FLASH_FP32=tf32 opts in, in DJL_ATTN_TUNING builds), sm_80+, every head dim up to 256 (padded), bias,
//            varlen, any strides; its own tile choice (flash_fp32.h, plan_flash_fp32).
//   simple   one warp per query row (flash_simple.cu): float32 where the fp32 kernel does not
//            run (DJL_ATTN_FLASH_FP32=simple, GPUs before sm_80 or with too little shared
//            memory), and float16/bfloat16 on such GPUs.
// features (sliding window, soft-capping, ALiBi; flash_params.h): the decode path, the tiled
// path's base tiles and the fp32 path's 4-warp 3xTF32 tiles in instantiations of their own, and
// the simple kernel.
// staged: float16/bfloat16 inputs the tensor-core kernels cannot read in place (a head dim that
// is not a multiple of 8, rows not 16-byte aligned) run one of the paths above on padded,
// aligned copies (flash_staged.h); the plan of those copies is this plan.
// fold: decoding with grouped heads (Sq = 1, Hq = g * Hkv) runs as Sq = g rows of Hkv heads
// (fold_query_groups), so that one block reads each key/value tile once for all g query heads;
// with a sliding window or ALiBi only onto the decode kernel, which gives the folded rows one
// position and each its own head's slope.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cuda/common/device_facts.h"
#include "cuda/flash/flash_fp32.h"
#include "cuda/flash/flash_shapes.h"
#include "flash/flash_params.h"

namespace djl_attn::flash {

// DJL_ATTN_FLASH_DECODE: auto (the decode kernel where it applies), on (the same, but a call of
// at most 16 rows it cannot take is refused, so that tests see no silent fallback), off (the tile
// kernel, for comparisons).
enum class DecodeMode { kAuto, kOn, kOff };
// DJL_ATTN_FLASH_HOPPER: auto (the Hopper kernel where it applies and its grid fills the GPU), on
// (wherever it applies, small grids too: tests), off (the sm_80 kernel, for comparisons).
enum class HopperMode { kAuto, kOn, kOff };

// DJL_ATTN_FLASH_CONFIG unset ("auto"): the measured default configuration per head dim.
constexpr int kAutoConfig = -1;

// The switches' values and what this build of libdjl_attn_cuda.so compiled.
struct FlashSwitches {
  DecodeMode decode = DecodeMode::kAuto;
  HopperMode hopper = HopperMode::kAuto;
  int config = kAutoConfig;     // a kFwdConfigs index (flash_shapes.h), or kAutoConfig
  bool hopper_ping_pong = true;  // DJL_ATTN_FLASH_HOPPER_SCHED: pingpong (true) or free
  // The library has the sm_90a kernel (built for sm_90): DJL_ATTN_HOPPER in libdjl_attn_cuda.so,
  // where a build without it has no FlashPath::kHopper; the plan tests' choice otherwise.
  bool hopper_built = false;
  // DJL_ATTN_TUNING: every kFwdConfigs instantiation (and fwd::TiledConfig enumerator) in
  // libdjl_attn_cuda.so; the plan tests' choice otherwise.
  bool tuning_build = false;
  fp32::Fp32Mode fp32 = fp32::Fp32Mode::kAuto;  // DJL_ATTN_FLASH_FP32
};

// A build without the sm_90a kernel (DJL_ATTN_HOPPER undefined: no sm_90 in its architectures)
// has no kHopper, so neither its plan nor its launcher can name the kernel it lacks.
// libdjl_attn_plans.so is built with it; its tests choose the build through
// FlashSwitches::hopper_built.
enum class FlashPath {
  kSimple,
  kTiled,
  kDecode,
#if defined(DJL_ATTN_HOPPER)
  kHopper,
#endif
  kFp32,
};

// One instantiation of the tile kernel (flash_fwd_hdim*.cu).
// The element types and head dims the tile kernel is compiled for (flash_fwd_hdim*.cu, the list
// DJL_FLASH_FOR_EACH_HEAD_DIM): a TiledKernel can name only an instantiation that exists, so its
// launcher (flash_launch.cu) has no value to refuse.
enum class TileType { kFloat16, kBFloat16 };
#define DJL_FLASH_TILE_HEAD_DIM_(D) k##D = D,
enum class TileHeadDim { DJL_FLASH_FOR_EACH_HEAD_DIM(DJL_FLASH_TILE_HEAD_DIM_) };
#undef DJL_FLASH_TILE_HEAD_DIM_

// The 16-bit type of a call the tensor-core kernels run: float16, or else bfloat16 (the plans
// give them, and the combine and staging passes around them, no float32 call).
constexpr TileType tile_type(ElementType dtype) {
  return dtype == ElementType::kFloat16 ? TileType::kFloat16 : TileType::kBFloat16;
}

struct TiledKernel {
  TileType dtype;
  TileHeadDim head_dim;  // the compiled head dim the problem's D is padded to
  bool bias;
  bool small_m;  // 64-row query tiles for at most 64 query rows
  // The base tiles, or a compiled (head dim, configuration) pair: only such a pair, never a
  // configuration this build lacks, can be named (fwd::TiledConfig).
  fwd::TiledConfig config;
  bool features;  // sliding window, soft-capping or ALiBi (base tiles, no bias)
};

// The element types and head dims the decode kernel is compiled for (flash_decode_{fp16,bf16}*.cu,
// decode::head_dim_compiled): a DecodeKernel can name only an instantiation that exists, so its
// launcher (flash_decode.cu) has no value to refuse.
enum class DecodeType { kFloat16, kBFloat16 };
enum class DecodeHeadDim { k64 = 64, k128 = 128, k256 = 256 };

// One instantiation of the decode kernel (flash_decode_*.cu).
struct DecodeKernel {
  DecodeType dtype = DecodeType::kFloat16;
  DecodeHeadDim head_dim = DecodeHeadDim::k64;
  bool paged;
  bool features;  // the sliding window, soft-cap or ALiBi (kFeatures; has_flash_features)
  bool alibi;     // ALiBi (kAlibi, with features): the instantiation that reads the slopes
};

// The Hopper kernel's compiled (head dim, consumer warpgroups) pairs (hopper::consumers_compiled)
// as the plan names them to its launcher (hopper/flash_hopper.cu), which then has none to refuse.
enum class HopperTile { kD64C2, kD64C3, kD128C2, kD256C2 };
constexpr int head_dim_of(HopperTile t) {
  return t == HopperTile::kD256C2 ? 256 : (t == HopperTile::kD128C2 ? 128 : 64);
}
// Consumer warpgroups of 64 query rows: the work item's rows are 64 x this.
constexpr int consumers_of(HopperTile t) { return t == HopperTile::kD64C3 ? 3 : 2; }

// One instantiation of the Hopper kernel (hopper/flash_hopper.cu).
struct HopperKernel {
  ElementType dtype = ElementType::kFloat16;  // float16 or bfloat16
  HopperTile tile = HopperTile::kD128C2;
  bool ping_pong = true;  // the consumers take turns issuing their GEMMs
};

// Resident blocks per SM of a kernel on the device: the CUDA occupancy API's answer, which
// depends on the compiled kernel's registers. The launcher asks the device; tests describe it.
struct Residency {
  std::function<int(const TiledKernel&)> tiled;
  std::function<int(const DecodeKernel&)> decode;
};

// How the key range of a tiled or decode call is split (flash-decoding): num_splits ranges of
// n_blocks_per_split key tiles, merged by the combine pass through float32 scratch.
struct KeySplit {
  int num_splits = 1;
  int n_blocks_per_split = 0;
  int64_t accum_rows = 0;     // B * Sq: scratch rows per head (num_splits > 1)
  int64_t scratch_bytes = 0;  // o_accum [splits, Hq, rows, D] + lse_accum [splits, Hq, rows]
};

struct FlashPlan {
  FlashPath path = FlashPath::kSimple;
  // Non-empty: no kernel runs this call, and why (DJL_ATTN_FLASH_DECODE=on and the decode
  // kernel cannot take it; or a combination the bindings refuse first: bias with the features,
  // more query tiles than a grid holds). The plan decides and never throws; nothing runs, the
  // launcher reports this.
  std::string refusal;
  // Run on padded, aligned copies (staged_layout); every field below describes those copies.
  bool staged = false;
  // The kernel sees fold_query_groups(params).
  bool fold = false;
  // kTiled
  TiledKernel tiled{};
  fwd::TileShape tile{};
  int m_blocks = 0;  // query tiles per (batch, head); also kHopper
  // kDecode
  DecodeKernel decode{};
  // kTiled and kDecode
  KeySplit split{};
  // kHopper: work items (hopper::block_m(consumers_of(hopper.tile))-row query tiles of every
  // (batch, head)) over a persistent grid.
  HopperKernel hopper{};
  int hopper_items = 0;
  int hopper_grid = 0;
  // kFp32
  fp32::Fp32Tile fp32{};
  // kSimple: blocks of 4 query rows per (batch, head).
  int64_t simple_row_blocks = 0;
};

// Whether the tensor-core kernels can copy q, k, v and out in place in 16-byte chunks: D and
// every stride a whole number of 16 bytes, the four bases 16-byte aligned (batch strides are 0
// in varlen mode). The float16/bfloat16 kernels need it (other calls are staged); the float32
// kernel copies element by element without it.
bool loads_16_bytes(const FlashParams& p);

// The plan for `p` (as the binding filled it) on a device with `device` facts.
FlashPlan plan_flash(const FlashParams& p, const FlashSwitches& switches,
                     const cuda::DeviceFacts& device, const Residency& residency);

// The split of a decode-kernel call: one block per (batch row, head) with `rows` query rows
// (<= decode::kMaxRows), walking at most `walked_keys` keys (decode_walked_keys),
// `blocks_per_sm` resident blocks per SM. Shared with paged_attention, which runs the same
// kernel through block tables. Precondition, which no caller can break: batch * heads <=
// 2^31 - 1, the blocks of one grid. flash_attention's bindings refuse B * Hq * ceil(Sq / 64)
// past it (check_query_tiles) and the decode kernel needs Sq >= 1; paged_attention plans
// launches of at most (2^31 - 1) / Hkv sequences (plan_paged_attention).
KeySplit plan_decode_split(int64_t batch, int64_t heads, int64_t rows, int64_t walked_keys,
                           int64_t head_dim, int blocks_per_sm, int sm_count);

// The most keys one decode block walks, counted from the first tile it reads: Sk, or with a
// sliding window at most window_left + (distinct positions of its rows: 1 when `folded`, else
// Sq) keys starting anywhere in a tile, i.e. window_left + positions + kBlockN - 1, capped at
// Sk. The kernel's tiles of one (batch row, head) start at its first visible key's tile, so its
// ranges cover them all.
int64_t decode_walked_keys(const FlashParams& p, bool folded);

// The decode instantiation for `p` (float16/bfloat16, D 64/128/256): with the features when it
// has a sliding window, soft-cap or ALiBi, and the ALiBi one when it has ALiBi. None for another
// dtype or head dim.
std::optional<DecodeKernel> decode_kernel(const FlashParams& p, bool paged);

// Whether the decode kernel for `head_dim` is compiled and fits the device (sm_80+, its shared
// memory).
bool decode_runs_on(int64_t head_dim, const cuda::DeviceFacts& device);

// Whether the GQA fold applies: one query row, grouped heads, batched, no q bias, the default
// logsumexp layout, and no sliding window or ALiBi unless `decode_kernel`: the decode kernel
// reads its folded rows as one query row's position and gives each row its own head's slope,
// where the others would read row i as position i + o and give every row the key/value head's
// slope. Computed once, here, for the plan and the paths it leads to.
bool folds_query_groups(const FlashParams& p, bool decode_kernel = false);

// Decoding with grouped heads (Sq = 1, Hq = g * Hkv): the g query heads that share one
// key/value head become g query rows of one head. The query, output and logsumexp strides
// describe the same memory; a single query row sees every valid key, so the causal flag has no
// effect and is dropped (it would otherwise shift the diagonal of the new rows).
FlashParams fold_query_groups(const FlashParams& p);

// The layout of the staged copies of `p` (flash_staged.h): head dim rounded up to a multiple of
// 8, contiguous [B, S, H, D8] rows (one [total, H, D8] "batch" in varlen mode). The data
// pointers are left null: the launcher allocates the copies.
FlashParams staged_layout(const FlashParams& p);

// "hopper/D128/grid132/pingpong", "tiled/D128/m128n64w4s2for/128x64/splits1",
// "fold+decode/D128/splits8", "staged+tiled/D96/base/128x64/splits1", "fp32/3xtf32/d128/8w",
// "simple", or "refused: <why>".
std::string describe(const FlashPlan& plan);

}  // namespace djl_attn::flash
