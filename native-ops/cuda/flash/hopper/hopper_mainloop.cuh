// The Hopper kernel's mainloop (hopper_kernel.cuh), FlashAttention-3's collective: the
// producer's loads of each work item's query tile and key/value tiles through the 2-stage ring
// (load_items), and the consumers' S = Q K^T, softmax and O += P V over them (compute_items),
// which hand each finished item to the epilogue (hopper_epilogue.cuh).
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/flash/hopper/hopper_epilogue.cuh"
#include "cuda/flash/hopper/hopper_layout.cuh"
#include "cuda/flash/hopper/hopper_primitives.cuh"
#include "cuda/flash/hopper/hopper_tile_scheduler.cuh"
#include "flash/flash_params.h"

namespace djl_attn::flash::hopper {

#ifdef DJL_HOPPER_DEVICE_CODE

// The block's shared memory by shared-space address: Layout's offsets from the 1024-byte aligned
// base (a 128-byte swizzle atom's alignment), the mbarriers and the two work-item slots.
template <typename L>
struct Smem {
  uint32_t q_s, k_s, v_s, bars;
  volatile int* items;

  __device__ __forceinline__ explicit Smem(uint8_t* smem_raw) {
    const uint32_t raw = smem_u32(smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    q_s = base + L::kQOff;
    k_s = base + L::kKOff;
    v_s = base + L::kVOff;
    bars = base + L::kBarOff;
    items = reinterpret_cast<volatile int*>(smem_raw + (base - raw) + L::kItemOff);
  }

  __device__ __forceinline__ uint32_t q_full() const { return bars; }
  __device__ __forceinline__ uint32_t q_empty() const { return bars + 8u; }
  __device__ __forceinline__ uint32_t k_full(int s) const { return bars + 8u * (2 + s); }
  __device__ __forceinline__ uint32_t v_full(int s) const { return bars + 8u * (2 + kStages + s); }
  __device__ __forceinline__ uint32_t k_empty(int s) const {
    return bars + 8u * (2 + 2 * kStages + s);
  }
  __device__ __forceinline__ uint32_t v_empty(int s) const {
    return bars + 8u * (2 + 3 * kStages + s);
  }
  __device__ __forceinline__ uint32_t item_full(int s) const {
    return bars + 8u * (2 + 4 * kStages + s);
  }
  __device__ __forceinline__ uint32_t item_empty(int s) const {
    return bars + 8u * (4 + 4 * kStages + s);
  }
};

// The producer warp: hands out the work items (the first is blockIdx.x, the next ones claimed
// from args.item_counter) and streams each one's query tile and key/value tiles.
template <typename T, typename L>
__device__ __forceinline__ void load_items(const HopperArgs& args, const Smem<L>& sm) {
  constexpr int kHeadDim = L::kHeadDim;
  constexpr int kPanels = L::kPanels;
  constexpr int kConsumers = L::kConsumers;
  constexpr int kBlockM = L::kBlockM;
  constexpr int kBlockN = L::kBlockN;
  const FlashParams& p = args.params;
  const int total = args.total_items;
  const int seqlen_k = static_cast<int>(p.seqlen_k);
  const int lane = threadIdx.x;
  if (lane == 0) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.q_map)) : "memory");
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.k_map)) : "memory");
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.v_map)) : "memory");
  }
  uint32_t q_uses = 0, kv_iter = 0, handed = 0;
  int idx = blockIdx.x;
  for (;; ++handed) {
    {
      const int slot = handed % 2;
      if (handed >= 2) mbar_wait(sm.item_empty(slot), ((handed - 2) / 2) & 1);
      if (lane == 0) {
        sm.items[slot] = idx;
        mbar_arrive(sm.item_full(slot));
      }
    }
    if (idx >= total) break;
    const Work w = work_item<kBlockM, kBlockN>(args, idx);
    int next = 0;
    if (lane == 0) next = atomicAdd(args.item_counter, 1) + static_cast<int>(gridDim.x);
    idx = __shfl_sync(0xffffffffu, next, 0);
    if (w.n_tiles == 0) continue;  // the consumers write zeros and need no data
    if (q_uses > 0) mbar_wait(sm.q_empty(), (q_uses - 1) & 1);
    ++q_uses;
    if (lane == 0) {
      mbar_expect_tx(sm.q_full(), L::kQBytes);
      for (int pn = 0; pn < kPanels; ++pn) {
        tma_load_4d(sm.q_s + pn * kBlockM * kRowBytes, &args.q_map, sm.q_full(), pn * L::kPanelElems, w.m0,
                    w.h, w.b);
      }
    }
    const T* v_rows =
        static_cast<const T*>(p.v) + w.b * p.v_batch_stride + w.h_kv * p.v_head_stride;
    for (int i = 0; i < w.n_tiles; ++i, ++kv_iter) {
      const int s = kv_iter % kStages;
      const uint32_t use = kv_iter / kStages;
      const int n0 = i * kBlockN;
      if (use > 0) mbar_wait(sm.k_empty(s), (use - 1) & 1);
      if (lane == 0) {
        mbar_expect_tx(sm.k_full(s), L::kKvBytes);
        for (int pn = 0; pn < kPanels; ++pn) {
          tma_load_4d(sm.k_s + s * L::kKvBytes + pn * kBlockN * kRowBytes, &args.k_map, sm.k_full(s),
                      pn * L::kPanelElems, n0, w.h_kv, w.b);
        }
      }
      if (use > 0) mbar_wait(sm.v_empty(s), (use - 1) & 1);
      if constexpr (L::kFp8) {
        // The transposed copy of v: a [D][block_n keys] box, zero past each row's valid keys
        // already (flash_hopper_fp8.cu).
        if (lane == 0) {
          mbar_expect_tx(sm.v_full(s), L::kKvBytes);
          tma_load_4d(sm.v_s + s * L::kKvBytes, &args.v_map, sm.v_full(s), n0, 0, w.h_kv, w.b);
        }
      } else if (n0 + kBlockN > w.kv_len && w.kv_len < seqlen_k) {
        // The tile that holds this row's last valid key, with real rows of the tensor after
        // it: zero-filled past the valid keys with cp.async, which TMA cannot do there.
        const uint32_t dst = sm.v_s + s * L::kKvBytes;
        constexpr int kChunks = kBlockN * kHeadDim / 8;
        // Rolled up with 3 consumers: unrolled (4 times, nvcc's own choice, kept for 2) it
        // spilled 64 bytes in the producer's 32 registers.
#pragma unroll(kConsumers == 3 ? 1 : 4)
        for (int c_idx = lane; c_idx < kChunks; c_idx += 32) {
          const int r = c_idx / (kHeadDim / 8);
          const int c = c_idx % (kHeadDim / 8);
          const bool ok = n0 + r < w.kv_len;
          const T* src = ok ? v_rows + (n0 + r) * p.v_seq_stride + c * 8 : v_rows;
          const uint32_t to = dst + (c / 8) * kBlockN * kRowBytes + r * kRowBytes +
                              (((c % 8) ^ (r % 8)) * 16);
          cp_async_16(to, src, ok ? 16 : 0);
        }
        cp_async_wait_all();
        // The consumers read this tile through the async proxy (wgmma).
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncwarp();
        if (lane == 0) mbar_arrive(sm.v_full(s));
      } else if (lane == 0) {
        mbar_expect_tx(sm.v_full(s), L::kKvBytes);
        for (int pn = 0; pn < kPanels; ++pn) {
          tma_load_4d(sm.v_s + s * L::kKvBytes + pn * kBlockN * kRowBytes, &args.v_map, sm.v_full(s),
                      pn * kPanelCols, n0, w.h_kv, w.b);
        }
      }
    }
  }
}

// The dequantization factor of work item w's (batch, key/value head) (flash_fp8_params.h).
__device__ __forceinline__ float descale(const Fp8Descale& d, const Work& w) {
  return d.data == nullptr ? 1.f : d.data[w.b * d.batch_stride + w.h_kv * d.head_stride];
}

// Consumer warpgroup `cw` (which 64 rows of each item's query tile): its items' attention, each
// finished one stored by store_item.
// T is the input element type, TOut the output's (T but for the e4m3 kernel).
template <typename T, typename TOut, typename L, bool kPingPong>
__device__ __forceinline__ void compute_items(const HopperArgs& args, const Smem<L>& sm, int cw) {
  constexpr int kHeadDim = L::kHeadDim;
  constexpr int kPanels = L::kOutPanels;
  constexpr int kConsumers = L::kConsumers;
  constexpr int kBlockM = L::kBlockM;
  constexpr int kBlockN = L::kBlockN;
  const FlashParams& p = args.params;
  const int total = args.total_items;
  const int seqlen_q = static_cast<int>(p.seqlen_q);
  const int wtid = threadIdx.x % 128;
  const int warp = wtid / 32, lane = wtid % 32;
  const int g = lane / 4, t = lane % 4;
  const float base_scale_log2 = p.scale * 1.4426950408889634f;
  float scale_log2 = base_scale_log2;
  const uint32_t q_rows = sm.q_s + cw * 64 * kRowBytes;
  auto release = [&](uint32_t bar) {
    if (lane == 0) mbar_arrive(bar);
  };
  // Turns: every batch of GEMMs a consumer issues (S_0; S_i with P_{i-1} V_{i-1}; the last P V)
  // sits between a wait for its turn and a hand-over to the next consumer, cw + 1 mod
  // kConsumers, over all of the block's items (every consumer takes the same number of turns:
  // they all work on the same items). Consumer 0 goes first on the last consumer's initial
  // hand-over, and takes the last consumer's final hand-over after its loop, so that every
  // arrival meets a wait. A consumer cannot arrive twice at a barrier before its waiter has
  // passed: its next hand-over needs its own next turn, which comes round only through that
  // waiter.
  auto my_turn = [&]() {
    if constexpr (kPingPong) named_bar_sync(1 + cw);
  };
  // The next consumer's barrier is 1 + (cw + 1) % kConsumers, spelled 2 - cw for two consumers:
  // the select costs D = 128 and 256 eight instructions over the 2-consumer kernel's code.
  auto hand_over = [&]() {
    if constexpr (kPingPong) {
      named_bar_arrive(kConsumers == 2 ? 2 - cw : (cw == kConsumers - 1 ? 1 : 2 + cw));
    }
  };
  if constexpr (kPingPong) {
    if (cw == kConsumers - 1) named_bar_arrive(1);
  }

  uint32_t q_uses = 0, kv_iter = 0;
  for (uint32_t taken = 0;; ++taken) {
    const int slot = taken % 2;
    mbar_wait(sm.item_full(slot), (taken / 2) & 1);
    const int idx = sm.items[slot];
    __syncwarp();
    release(sm.item_empty(slot));
    if (idx >= total) break;
    const Work w = work_item<kBlockM, kBlockN>(args, idx);
    const int row_base = w.m0 + cw * 64 + warp * 16 + g;  // rows row_base and row_base + 8
    float v_descale = 1.f;
    if constexpr (L::kFp8) {
      scale_log2 = base_scale_log2 * descale(args.q_descale, w) * descale(args.k_descale, w);
      v_descale = descale(args.v_descale, w);
    }
    float o[kPanels][32];
#pragma unroll
    for (int pn = 0; pn < kPanels; ++pn)
#pragma unroll
      for (int e = 0; e < 32; ++e) o[pn][e] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY};
    float row_sum[2] = {0.f, 0.f};

    if (w.n_tiles > 0) {
      float s_acc[kBlockN / 2];
      uint32_t p_frag[kBlockN / L::kPvStep][4];
      float corr[2];
      auto stage = [&](int i) { return static_cast<int>((kv_iter + i) % kStages); };
      auto parity = [&](int i) { return ((kv_iter + i) / kStages) & 1u; };

      auto issue_qk = [&](int st) {
        const uint32_t k_tile = sm.k_s + st * L::kKvBytes;
        wgmma_fence();
        // 32 bytes of the head dim per wgmma: 16 two-byte or 32 one-byte elements.
#pragma unroll
        for (int kk = 0; kk < kHeadDim * L::kElementBytes / 32; ++kk) {
          const uint32_t panel = kk / 4, within = (kk % 4) * 32;
          const uint64_t da = smem_desc(q_rows + panel * kBlockM * kRowBytes + within, 16, 1024);
          const uint64_t db = smem_desc(k_tile + panel * kBlockN * kRowBytes + within, 16, 1024);
          mma_qk<T, kBlockN>(s_acc, da, db, kk > 0 ? 1 : 0);
        }
        wgmma_commit();
      };
      auto issue_pv = [&](int st) {
        const uint32_t v_tile = sm.v_s + st * L::kKvBytes;
        wgmma_fence();
        if constexpr (L::kFp8) {
          // V^T [D][block_n keys], K-major: 64 of its rows (output columns) per wgmma, 32 keys
          // (bytes) of them per step.
#pragma unroll
          for (int kk = 0; kk < kBlockN / 32; ++kk)
#pragma unroll
            for (int pn = 0; pn < kPanels; ++pn) {
              const uint64_t db = smem_desc(v_tile + pn * 64 * kRowBytes + kk * 32, 16, 1024);
              wgmma_rs_m64n64k32_e4m3(o[pn], p_frag[kk], db, 1);
            }
        } else {
#pragma unroll
          for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
            for (int pn = 0; pn < kPanels; ++pn) {
              const uint64_t db =
                  smem_desc(v_tile + pn * kBlockN * kRowBytes + kk * 16 * kRowBytes, 1024, 1024);
              mma_pv<T>(o[pn], p_frag[kk], db);
            }
        }
        wgmma_commit();
      };
      // Masks tile i's scores, updates the running max and sum, and turns the scores into
      // probabilities in place; corr[] is what the output accumulated so far must be scaled by.
      auto softmax = [&](int i) {
        const int n0 = i * kBlockN;
        const bool need_mask = n0 + kBlockN > w.kv_len ||
                               (p.causal && n0 + kBlockN - 1 > w.m0 + cw * 64 + w.diagonal);
        if (need_mask) {
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int row = row_base + (e >= 2 ? 8 : 0);
              const int col = n0 + j * 8 + 2 * t + (e & 1);
              if (col >= w.kv_len || (p.causal && col > row + w.diagonal)) {
                s_acc[4 * j + e] = -INFINITY;
              }
            }
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          float mx = -INFINITY;
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j) {
            mx = fmaxf(mx, fmaxf(s_acc[4 * j + 2 * hf], s_acc[4 * j + 2 * hf + 1]));
          }
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // scale > 0 (the launcher checks), so the maximum of the raw scores scales to the
          // maximum of the scaled ones, and -inf stays -inf.
          mx = fmaxf(row_max[hf], mx * scale_log2);
          const float base_v = mx == -INFINITY ? 0.f : mx;
          corr[hf] = fast_exp2(row_max[hf] - base_v);
          row_max[hf] = mx;
          float sum = row_sum[hf] * corr[hf];
          float p_base = base_v;
          if constexpr (L::kFp8) p_base -= kFp8ProbLog2;
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j) {
            const float p0 = fast_exp2(fmaf(s_acc[4 * j + 2 * hf], scale_log2, -p_base));
            const float p1 = fast_exp2(fmaf(s_acc[4 * j + 2 * hf + 1], scale_log2, -p_base));
            s_acc[4 * j + 2 * hf] = p0;
            s_acc[4 * j + 2 * hf + 1] = p1;
            sum += p0 + p1;
          }
          row_sum[hf] = sum;
        }
      };
      auto pack_p = [&]() {
        if constexpr (L::kFp8) {
          // Each register of the e4m3 A fragment holds four keys of one row, bytes in key
          // order 4t .. 4t + 3 (16 + 4t .. for the second pair) as the wgmma reads them; the
          // accumulator gave this thread keys 2t, 2t + 1, 8 + 2t, 9 + 2t (and 16 + ..) of
          // each 32. They are packed as they lie: the transposed copy of v holds its keys in
          // the same order (fp8_key_of_column, flash_hopper_fp8.cu), so P V sums the
          // right pairs with no shuffle.
#pragma unroll
          for (int kk = 0; kk < kBlockN / 32; ++kk) {
            const float* const a = s_acc + 16 * kk;
            p_frag[kk][0] = pack4_e4m3(a[0], a[1], a[4], a[5]);
            p_frag[kk][1] = pack4_e4m3(a[2], a[3], a[6], a[7]);
            p_frag[kk][2] = pack4_e4m3(a[8], a[9], a[12], a[13]);
            p_frag[kk][3] = pack4_e4m3(a[10], a[11], a[14], a[15]);
          }
        } else {
#pragma unroll
          for (int kk = 0; kk < kBlockN / 16; ++kk) {
            p_frag[kk][0] = pack2<T>(s_acc[8 * kk + 0], s_acc[8 * kk + 1]);
            p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);
            p_frag[kk][2] = pack2<T>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);
            p_frag[kk][3] = pack2<T>(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);
          }
        }
      };

      mbar_wait(sm.q_full(), q_uses & 1);
      mbar_wait(sm.k_full(stage(0)), parity(0));
      my_turn();
      issue_qk(stage(0));
      hand_over();
      wgmma_wait<0>();
      fence_regs(s_acc);
      release(sm.k_empty(stage(0)));
      if (w.n_tiles == 1) release(sm.q_empty());  // the item's last read of its query tile
      softmax(0);
      pack_p();
      for (int i = 1; i < w.n_tiles; ++i) {
        mbar_wait(sm.k_full(stage(i)), parity(i));
        mbar_wait(sm.v_full(stage(i - 1)), parity(i - 1));
        my_turn();
        issue_qk(stage(i));
        issue_pv(stage(i - 1));
        hand_over();
        wgmma_wait<1>();  // S_i is done; P_{i-1} V_{i-1} may still run
        fence_regs(s_acc);
        release(sm.k_empty(stage(i)));
        if (i == w.n_tiles - 1) release(sm.q_empty());
        softmax(i);
        wgmma_wait<0>();
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn) fence_regs(o[pn]);
        fence_regs(p_frag);
        release(sm.v_empty(stage(i - 1)));
        // Once the row maxima settle most tiles leave them unchanged (corr == 1): the warp
        // skips the rescale then. The vote keeps the branch warp-uniform.
        if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn)
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              o[pn][4 * j + 0] *= corr[0];
              o[pn][4 * j + 1] *= corr[0];
              o[pn][4 * j + 2] *= corr[1];
              o[pn][4 * j + 3] *= corr[1];
            }
        }
        pack_p();
      }
      {
        const int last = w.n_tiles - 1;
        mbar_wait(sm.v_full(stage(last)), parity(last));
        my_turn();
        issue_pv(stage(last));
        hand_over();
        wgmma_wait<0>();
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn) fence_regs(o[pn]);
        fence_regs(p_frag);
        release(sm.v_empty(stage(last)));
      }
      ++q_uses;
      kv_iter += w.n_tiles;
    }
    store_item<TOut, L>(p, w, o, row_max, row_sum, row_base, seqlen_q, t, v_descale);
  }
  if constexpr (kPingPong) {
    if (cw == 0) named_bar_sync(1);  // the last consumer's final hand-over
  }
}

#endif  // DJL_HOPPER_DEVICE_CODE

}  // namespace djl_attn::flash::hopper
