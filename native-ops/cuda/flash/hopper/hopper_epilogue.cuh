// The Hopper kernel's epilogue (hopper_kernel.cuh): a consumer's 64 rows of one work item,
// divided by their row sums once, written to the output with the logsumexp.
#pragma once

#include <cstdint>

#include "cuda/flash/hopper/hopper_layout.cuh"
#include "cuda/flash/hopper/hopper_primitives.cuh"
#include "cuda/flash/hopper/hopper_tile_scheduler.cuh"
#include "flash/flash_params.h"

namespace djl_attn::flash::hopper {

#ifdef DJL_HOPPER_DEVICE_CODE

// `o`: the consumer's output accumulator (the wgmma accumulator layout: thread (g, t) of warp
// `warp` holds rows row_base and row_base + 8), row_max in log2 units, row_sum unreduced over
// the quad.
// T is the output's element type. The e4m3 kernel (L::kFp8) passes its value factor
// `v_descale`, and its probabilities were scaled by 2^kFp8ProbLog2 (hopper_layout.cuh), which
// the division by the row sum cancels and the logsumexp takes back out.
template <typename T, typename L>
__device__ __forceinline__ void store_item(const FlashParams& p, const Work& w,
                                           const float (&o)[L::kOutPanels][32],
                                           const float (&row_max)[2], const float (&row_sum)[2],
                                           int row_base, int seqlen_q, int t,
                                           float v_descale = 1.f) {
  constexpr int kPanels = L::kOutPanels;
  T* const out = static_cast<T*>(p.out) + w.b * p.out_batch_stride + w.h * p.out_head_stride;
  float* const lse = p.lse + lse_offset(p, w.b, w.h);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float sum = row_sum[hf];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = row_base + hf * 8;
    if (row >= seqlen_q) continue;
    float inv = sum > 0.f ? 1.f / sum : 0.f;
    if constexpr (L::kFp8) inv *= v_descale;
    T* const o_row = out + static_cast<int64_t>(row) * p.out_seq_stride;
#pragma unroll
    for (int pn = 0; pn < kPanels; ++pn)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = pn * kPanelCols + j * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(o_row + col) =
            pack2<T>(o[pn][4 * j + 2 * hf] * inv, o[pn][4 * j + 2 * hf + 1] * inv);
      }
    if (t == 0) {
      if constexpr (L::kFp8) {
        lse[row] = sum > 0.f ? (row_max[hf] + __log2f(sum) - kFp8ProbLog2) * 0.6931471805599453f
                             : -INFINITY;
      } else {
        lse[row] = sum > 0.f ? (row_max[hf] + __log2f(sum)) * 0.6931471805599453f : -INFINITY;
      }
    }
  }
}

#endif  // DJL_HOPPER_DEVICE_CODE

}  // namespace djl_attn::flash::hopper
