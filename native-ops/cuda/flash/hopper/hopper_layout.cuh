// The Hopper kernel's shapes (hopper_kernel.cuh): its stages, warpgroups and register split, the
// shared-memory layout of one block and the kernel's arguments. The tile sizes are the plan's
// (flash_shapes.h), which the layout static_asserts.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/flash/flash_shapes.h"
#include "flash/flash_fp8_params.h"
#include "flash/flash_params.h"

namespace djl_attn::flash::hopper {

// The consumer count (a template parameter: 2 or 3 at D = 64, 2 at D = 128 and 256, the plan's
// choice per call), block_m(consumers) (64 query rows per consumer warpgroup) and block_n(D)
// (keys per tile: 128, or 64 at D = 256) are the plan's (flash_shapes.h).
constexpr int kStages = 2;
// A producer warpgroup and the consumers.
constexpr int threads(int consumers) { return 128 * (1 + consumers); }
// 128-byte swizzle atoms: a tile is stored as D / 64 column panels of [rows][64 elements].
constexpr int kPanelCols = 64;
constexpr int kRowBytes = kPanelCols * 2;
// Registers per thread after the split (setmaxnreg), within the SM's 64K. 2 consumers:
// 128 * 56 + 256 * 224 <= 64K (the producer spilled at 48, the consumers fit in 224 without
// spills). 3 consumers (D = 64): 128 * 32 + 384 * 160 = 64K, FlashAttention-3's split there; a
// D = 64 consumer holds a 32-register output accumulator, a 64-register score tile and 32 of P.
constexpr int producer_regs(int consumers) { return consumers == 3 ? 32 : 56; }
constexpr int consumer_regs(int consumers) { return consumers == 3 ? 160 : 224; }
static_assert(128 * producer_regs(2) + 128 * 2 * consumer_regs(2) <= 64 * 1024 &&
                  128 * producer_regs(3) + 128 * 3 * consumer_regs(3) <= 64 * 1024,
              "the register split must fit the SM's 64K registers");

// The e4m3 kernel scales its probabilities (at most 1) by 2^8 before rounding them to e4m3,
// whose range reaches 448, so that small ones keep their precision instead of falling into its
// subnormals (FlashAttention-3 does the same); the row sums carry the same factor.
constexpr float kFp8ProbLog2 = 8.f;

// kElementBytes: 2 for the float16 and bfloat16 kernels, 1 for the e4m3 kernel, whose 128-byte
// rows hold 128 elements: a D = 128 tile is one panel, and its V tile is stored transposed,
// [D rows][block_n keys] (flash_hopper_fp8.cu).
template <int kHeadDimT, int kConsumerCount, int kElementBytesT = 2>
struct Layout {
  static constexpr int kHeadDim = kHeadDimT;
  static_assert(consumers_compiled(kHeadDim, kConsumerCount), "the plan's consumer counts");
  static constexpr int kConsumers = kConsumerCount;
  static constexpr int kElementBytes = kElementBytesT;
  static constexpr bool kFp8 = kElementBytes == 1;
  static constexpr int kBlockM = block_m(kConsumers);
  static constexpr int kBlockN = block_n(kHeadDim);
  // Elements in one 128-byte swizzled row, and such column panels in a query or key tile.
  static constexpr int kPanelElems = kRowBytes / kElementBytes;
  static constexpr int kPanels = kHeadDim / kPanelElems;
  // 64-column panels of the output accumulator: one m64n64 wgmma of O += P V each.
  static constexpr int kOutPanels = kHeadDim / kPanelCols;
  // Keys per wgmma of O += P V (its K): 16 two-byte or 32 one-byte elements, 32 bytes.
  static constexpr int kPvStep = 32 / kElementBytes;
  static constexpr int kQBytes = kBlockM * kHeadDim * kElementBytes;
  static constexpr int kKvBytes = kBlockN * kHeadDim * kElementBytes;  // one K or V tile
  static constexpr int kQOff = 0;
  static constexpr int kKOff = kQBytes;
  static constexpr int kVOff = kKOff + kStages * kKvBytes;
  static constexpr int kBarOff = kVOff + kStages * kKvBytes;
  // q_full, q_empty, k_full[2], v_full[2], k_empty[2], v_empty[2], item_full[2], item_empty[2]
  static constexpr int kNumBars = 2 + 4 * kStages + 4;
  static constexpr int kItemOff = kBarOff + kNumBars * 8;  // int[2]: the next work items
  // Slack for aligning the dynamic buffer to the 1024 bytes a 128-byte swizzle atom needs.
  static constexpr int kSmemBytes = kItemOff + 2 * 4 + 1024;
  static_assert(kSmemBytes == smem_bytes(kHeadDim, kConsumers, kElementBytes),
                "the plan's size (flash_shapes.h)");
  static_assert(!kFp8 || (kHeadDim == 128 && kBlockN == kRowBytes),
                "the e4m3 kernel: one 128-byte panel per query, key and transposed value row");
};

struct HopperArgs {
  // 4-d maps over (D, S, H, B); the e4m3 kernel's v_map is over its transposed copy of v,
  // (keys, D, Hkv, B).
  CUtensorMap q_map, k_map, v_map;
  FlashParams params;
  int m_blocks;     // query tiles per (batch, head)
  int total_items;  // m_blocks * B * Hq
  // Work items handed out so far beyond the first gridDim.x; zero at launch.
  int* item_counter;
  // The e4m3 kernel's dequantization factors (flash_fp8_params.h); unread by the others.
  Fp8Descale q_descale, k_descale, v_descale;
};

}  // namespace djl_attn::flash::hopper
