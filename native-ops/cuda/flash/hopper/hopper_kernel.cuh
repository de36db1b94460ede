// The Hopper flash attention forward (sm_90a only; see flash_hopper.h and cuda/CMakeLists.txt).
//
// A persistent grid (one block per SM: a producer warpgroup and 2 or 3 consumer warpgroups,
// flash_shapes.h) works through block_m(consumers)-row query tiles of (batch, head) pairs, handed
// out longest first through a global counter:
// - warpgroup 0 is the producer: it gives registers away (setmaxnreg) and its first warp streams
//   each item's query tile and its key/value tiles through a 2-stage ring with TMA
//   (cp.async.bulk.tensor, 128-byte swizzle, one box per 64-column panel), each load completing
//   on a "full" mbarrier; it refills a buffer when every consumer has released it on its
//   "empty" mbarrier, and loads the next item's tiles while the consumers finish the last one.
// - warpgroups 1.. are the consumers (2 or 3 at D = 64, the plan's choice per call; 2 at D = 128
//   and 256), 64 query rows each, with the whole 64 x D float32
//   output accumulator and a 64 x 128 score tile in registers. S = Q K^T is one wgmma chain with
//   both operands in shared memory; O += P V takes P from registers (the score accumulator
//   layout is the A-fragment layout once packed to 16 bits) and V from shared memory read
//   MN-major, one 64-column panel per wgmma.
// - Within a consumer, S_{j+1} = Q K_{j+1}^T is issued before O += P_j V_j and waited for
//   first, so the softmax of tile j + 1 runs while the tensor cores do P_j V_j; between the
//   consumers, named barriers make them take turns issuing, round-robin (ping-pong with 2), so
//   that the others' softmax runs while one's products occupy the tensor cores.
// Keys past the valid length of a batch row (kv_lens) are masked to -inf; the value rows there
// are zero-filled (a probability of 0 times stale or NaN data would be NaN), which TMA cannot do
// inside a tensor: that one tile per row is loaded with cp.async by the producer warp instead.
// Rows past Sq or Sk are outside the tensor maps and arrive as zeros.
//
// By concern, as FlashAttention-3 splits it: hopper_layout.cuh (shapes, shared memory, arguments),
// hopper_primitives.cuh (the sm_90a instructions), hopper_tile_scheduler.cuh (work items),
// hopper_mainloop.cuh (producer loads, consumer GEMMs and softmax), hopper_epilogue.cuh (the
// output); the host side in flash_hopper.cu.
#pragma once

#include <cstdint>

#include "cuda/flash/hopper/hopper_layout.cuh"
#include "cuda/flash/hopper/hopper_mainloop.cuh"
#include "cuda/flash/hopper/hopper_primitives.cuh"

namespace djl_attn::flash::hopper {

// kPingPong: the consumers take turns issuing their GEMMs, round-robin (named barriers), so that
// the others' softmax runs while one's products occupy the tensor cores, as FlashAttention-3
// does; without it they are coupled only through the load ring.
//
// Persistent: gridDim.x blocks (at most one per SM) each start on item blockIdx.x and then take
// the next unclaimed item from a global counter as their producer finishes issuing the loads of
// the current one. Items are ordered longest first within each (batch, head), so this greedy
// hand-out balances causal work, where a fixed stride of gridDim.x gave some blocks mostly long
// items and others mostly short ones. The producer passes each item index to the consumers
// through a 2-slot shared ring (item_full/item_empty); an index >= total_items ends the block.
// The load ring, the query buffer and the ping-pong turns carry over from one item to the next,
// so the producer loads the next item's query and first key tiles while the consumers finish
// and store the previous one.
//
// T is the input element type (__half, __nv_bfloat16, or __nv_fp8_e4m3 for the e4m3 kernel of
// flash_hopper_fp8.cu), TOut the output's (T but for e4m3: __half or __nv_bfloat16).
template <typename T, int kHeadDim, int kConsumerCount, bool kPingPong, typename TOut = T>
__global__ void __launch_bounds__(threads(kConsumerCount), 1) flash_hopper_kernel(const __grid_constant__ HopperArgs args) {
#ifdef DJL_HOPPER_DEVICE_CODE
  using L = Layout<kHeadDim, kConsumerCount, static_cast<int>(sizeof(T))>;
  // Every "empty" barrier (query tile, key and value stages, work-item slots) takes one arrival
  // per consumer warp.
  constexpr uint32_t kConsumerWarps = 4 * L::kConsumers;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const Smem<L> sm(smem_raw);

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    mbar_init(sm.q_full(), 1);
    mbar_init(sm.q_empty(), kConsumerWarps);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(sm.k_full(s), 1);
      mbar_init(sm.v_full(s), 1);
      mbar_init(sm.k_empty(s), kConsumerWarps);
      mbar_init(sm.v_empty(s), kConsumerWarps);
    }
    for (int s = 0; s < 2; ++s) {
      mbar_init(sm.item_full(s), 1);
      mbar_init(sm.item_empty(s), kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---- producer ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(producer_regs(L::kConsumers)));
    if (threadIdx.x >= 32) return;
    load_items<T, L>(args, sm);
    return;
  }

  // ---- consumers ----
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(consumer_regs(L::kConsumers)));
  compute_items<T, TOut, L, kPingPong>(args, sm, warpgroup - 1);
#endif  // DJL_HOPPER_DEVICE_CODE
}

}  // namespace djl_attn::flash::hopper
