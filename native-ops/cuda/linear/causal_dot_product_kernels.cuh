// The causal_dot_product kernels and their typed launchers. Included by one .cu file per dtype
// (causal_dot_product_{f32,f16,bf16}.cu), which instantiates the launchers, so nvcc compiles
// the dtypes in parallel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/linear/causal_dot_product_plan.h"
#include "cuda/linear/causal_dot_product_shapes.h"
#include "linear/linear_params.h"

namespace djl_attn::linear {

constexpr int kWarpSize = 32;

// --- element conversion and packed loads -----------------------------------------------------

using cuda::from_float;
using cuda::to_float;

template <int Bytes>
struct Word;
template <>
struct Word<2> { using type = unsigned short; };
template <>
struct Word<4> { using type = unsigned int; };
template <>
struct Word<8> { using type = uint2; };
template <>
struct Word<16> { using type = uint4; };

// N consecutive elements kept as they are in memory until they are stored to shared memory, so
// a prefetch does not wait for its loads.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T e[N];
};

// Loads `count` (0..N) elements from src and zero-fills the rest: one N * sizeof(T)-byte load
// when the pack is whole and `vectorised` (the host checked the alignment of every pointer and
// stride), element by element otherwise.
template <typename T, int N>
__device__ __forceinline__ void load_pack(Pack<T, N>& pack, const T* src, int count,
                                          bool vectorised) {
  using W = typename Word<sizeof(T) * N>::type;
  if (vectorised && count == N) {
    *reinterpret_cast<W*>(pack.e) = __ldg(reinterpret_cast<const W*>(src));
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) pack.e[i] = i < count ? src[i] : from_float<T>(0.f);
  }
}

__device__ __forceinline__ int clamp_count(int64_t available, int n) {
  return available <= 0 ? 0 : (available >= n ? n : static_cast<int>(available));
}

// Sums N values (N a power of two, at most 32) each across the 32 lanes of a warp in
// 31 + log2(32 / N) shuffles rather than 5 N: every halving step sends away the half of the
// values the partner lane keeps. Returns the total of value `index`, which every lane whose
// bits 4, 3, ... (one per halving) spell `index` holds.
template <int N>
__device__ __forceinline__ float warp_reduce_scatter(float (&values)[N], int lane, int& index) {
  index = 0;
  int offset = kWarpSize / 2;
#pragma unroll
  for (int half = N / 2; half >= 1; half /= 2, offset /= 2) {
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = upper ? values[i] : values[i + half];
      const float keep = upper ? values[i + half] : values[i];
      values[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
    if (upper) index += half;
  }
  float total = values[0];
#pragma unroll
  for (; offset >= 1; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
  return total;
}

// --- per_thread kernel -----------------------------------------------------------------------

template <int G>
struct PerThreadShape {
  static constexpr int kEMax = kPerThreadRows * G;
  static constexpr int kCols = kPerThreadThreads / G;  // output columns per block
  // Time steps staged per chunk: keeps the two buffers of q, k and v under 42 KiB.
  static constexpr int kSteps = G <= 4 ? 16 : 8;
  // Floats per staged q or k step: each group's 32 rows are padded by 4 so that the G groups'
  // float4 reads fall in different banks (group g starts at bank 4 g).
  static constexpr int kGroupPitch = kPerThreadRows + 4;
  static constexpr int kPitch = G * kGroupPitch;
};

// grid: B * H * col_tiles blocks of kPerThreadThreads. Thread (g, col) = (tid % G, tid / G)
// carries state rows [32 g, 32 g + 32) of column m0 + col; q, k and v arrive in chunks of kSteps
// steps through shared memory, the next chunk loaded into registers while this one is computed.
template <typename T, int G>
__global__ void __launch_bounds__(kPerThreadThreads)
    causal_dot_product_per_thread_kernel(CausalDotProductParams p, int64_t col_tiles,
                                         bool vectorised) {
  using Shape = PerThreadShape<G>;
  constexpr int kSteps = Shape::kSteps;
  constexpr int P = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte pack
  constexpr int kQkPacksPerStep = Shape::kEMax / P;
  constexpr int kVPacksPerStep = Shape::kCols / P;
  constexpr int kQkPacks = kSteps * kQkPacksPerStep;
  constexpr int kVPacks = kSteps * kVPacksPerStep;
  constexpr int kQkPerThread = (kQkPacks + kPerThreadThreads - 1) / kPerThreadThreads;
  constexpr int kVPerThread = (kVPacks + kPerThreadThreads - 1) / kPerThreadThreads;

  __shared__ __align__(16) float q_smem[2][kSteps][Shape::kPitch];
  __shared__ __align__(16) float k_smem[2][kSteps][Shape::kPitch];
  __shared__ __align__(16) float v_smem[2][kSteps][Shape::kCols];

  const int tid = threadIdx.x;
  const int64_t tile = blockIdx.x % col_tiles;
  const int64_t bh = blockIdx.x / col_tiles;
  const int64_t b = bh / p.heads, h = bh % p.heads;
  const int64_t m0 = tile * Shape::kCols;
  const int64_t seqlen = p.seqlen;
  const int64_t dim_qk = p.dim_qk;
  const int64_t cols = p.dim_v - m0 < Shape::kCols ? p.dim_v - m0 : Shape::kCols;
  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + h * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride + m0;
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + h * p.out_head_stride + m0;

  Pack<T, P> q_next[kQkPerThread], k_next[kQkPerThread], v_next[kVPerThread];

  auto prefetch = [&](int64_t t0) {
#pragma unroll
    for (int j = 0; j < kQkPerThread; ++j) {
      const int id = tid + j * kPerThreadThreads;
      if (kQkPacks % kPerThreadThreads == 0 || id < kQkPacks) {
        const int64_t t = t0 + id / kQkPacksPerStep;
        const int e0 = (id % kQkPacksPerStep) * P;
        const int count = t < seqlen ? clamp_count(dim_qk - e0, P) : 0;
        load_pack(q_next[j], q + t * p.q_seq_stride + e0, count, vectorised);
        load_pack(k_next[j], k + t * p.k_seq_stride + e0, count, vectorised);
      }
    }
#pragma unroll
    for (int j = 0; j < kVPerThread; ++j) {
      const int id = tid + j * kPerThreadThreads;
      if (kVPacks % kPerThreadThreads == 0 || id < kVPacks) {
        const int64_t t = t0 + id / kVPacksPerStep;
        const int c0 = (id % kVPacksPerStep) * P;
        const int count = t < seqlen ? clamp_count(cols - c0, P) : 0;
        load_pack(v_next[j], v + t * p.v_seq_stride + c0, count, vectorised);
      }
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int j = 0; j < kQkPerThread; ++j) {
      const int id = tid + j * kPerThreadThreads;
      if (kQkPacks % kPerThreadThreads == 0 || id < kQkPacks) {
        const int step = id / kQkPacksPerStep;
        const int e0 = (id % kQkPacksPerStep) * P;
        // P divides 32, so a pack never straddles two groups' rows.
        const int slot = (e0 / kPerThreadRows) * Shape::kGroupPitch + e0 % kPerThreadRows;
#pragma unroll
        for (int i = 0; i < P; ++i) {
          q_smem[buf][step][slot + i] = to_float(q_next[j].e[i]);
          k_smem[buf][step][slot + i] = to_float(k_next[j].e[i]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kVPerThread; ++j) {
      const int id = tid + j * kPerThreadThreads;
      if (kVPacks % kPerThreadThreads == 0 || id < kVPacks) {
        const int step = id / kVPacksPerStep;
        const int c0 = (id % kVPacksPerStep) * P;
#pragma unroll
        for (int i = 0; i < P; ++i) v_smem[buf][step][c0 + i] = to_float(v_next[j].e[i]);
      }
    }
  };

  const int g = tid % G;
  const int col = tid / G;
  float state[kPerThreadRows];
#pragma unroll
  for (int r = 0; r < kPerThreadRows; ++r) state[r] = 0.f;

  const int64_t chunks = (seqlen + kSteps - 1) / kSteps;
  prefetch(0);
  store(0);
  __syncthreads();
  for (int64_t c = 0; c < chunks; ++c) {
    const int buf = static_cast<int>(c & 1);
    const int64_t t0 = c * kSteps;
    if (c + 1 < chunks) prefetch(t0 + kSteps);
    const int steps = seqlen - t0 < kSteps ? static_cast<int>(seqlen - t0) : kSteps;
    for (int s = 0; s < steps; ++s) {
      const float vt = v_smem[buf][s][col];
      const float4* k4 = reinterpret_cast<const float4*>(&k_smem[buf][s][g * Shape::kGroupPitch]);
      const float4* q4 = reinterpret_cast<const float4*>(&q_smem[buf][s][g * Shape::kGroupPitch]);
      // Four partial sums break the dependency chain of the 32-term dot product.
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int r4 = 0; r4 < kPerThreadRows / 4; ++r4) {
        const float4 kk = k4[r4];
        const float4 qq = q4[r4];
        // The state includes step t itself before it meets q_t: the sum runs over i <= t.
        state[4 * r4 + 0] = fmaf(kk.x, vt, state[4 * r4 + 0]);
        state[4 * r4 + 1] = fmaf(kk.y, vt, state[4 * r4 + 1]);
        state[4 * r4 + 2] = fmaf(kk.z, vt, state[4 * r4 + 2]);
        state[4 * r4 + 3] = fmaf(kk.w, vt, state[4 * r4 + 3]);
        acc[0] = fmaf(qq.x, state[4 * r4 + 0], acc[0]);
        acc[1] = fmaf(qq.y, state[4 * r4 + 1], acc[1]);
        acc[2] = fmaf(qq.z, state[4 * r4 + 2], acc[2]);
        acc[3] = fmaf(qq.w, state[4 * r4 + 3], acc[3]);
      }
      float o = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      // The G threads of a column are adjacent lanes of one warp.
#pragma unroll
      for (int offset = G / 2; offset >= 1; offset /= 2) {
        o += __shfl_xor_sync(0xffffffffu, o, offset);
      }
      if (g == 0 && col < cols) out[(t0 + s) * p.out_seq_stride + col] = from_float<T>(o);
    }
    // This buffer was last read in the previous chunk, which every thread finished before the
    // barrier that ended it.
    if (c + 1 < chunks) store(buf ^ 1);
    __syncthreads();
  }
}

// --- low_occupancy kernel ----------------------------------------------------------------------

// grid: B * H * M blocks of `warps` warps (blockDim.x = 32 * warps), one output column m each.
// Lane l owns state rows e = (32 j + l) P + i (P-element packs, j < ROWS / P). Per iteration
// warp w takes steps t0 + 4 w .. t0 + 4 w + 3: it forms k_t v_t[m] for them with a running sum
// in registers, the warps' totals are prefix-summed across the block in shared memory
// (double-buffered by iteration parity, so two barriers per iteration suffice), and each step's
// output q_t . state_t is reduced across the warp. The next iteration's q, k, v are loaded into
// registers while this one computes.
template <typename T, int ROWS>
__global__ void __launch_bounds__(ROWS >= 8 ? 256 : 512)
    causal_dot_product_low_occupancy_kernel(CausalDotProductParams p, bool vectorised) {
  constexpr int S = kLowOccSteps;
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr int P = ROWS < kVec ? ROWS : kVec;
  constexpr int kPacks = ROWS / P;
  constexpr int kEMax = ROWS * kWarpSize;
  extern __shared__ float reductions[];  // [2][warps][kEMax]

  const int warps = blockDim.x / kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t m = blockIdx.x % p.dim_v;
  const int64_t bh = blockIdx.x / p.dim_v;
  const int64_t b = bh / p.heads, h = bh % p.heads;
  const int64_t seqlen = p.seqlen;
  const int64_t dim_qk = p.dim_qk;
  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + h * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride + m;
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + h * p.out_head_stride + m;
  const int64_t steps_per_iter = static_cast<int64_t>(warps) * S;

  Pack<T, P> q_next[S][kPacks], k_next[S][kPacks];
  T v_next[S];
  auto prefetch = [&](int64_t t0) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int64_t t = t0 + warp * S + s;
      const bool valid = t < seqlen;
#pragma unroll
      for (int j = 0; j < kPacks; ++j) {
        const int e0 = (j * kWarpSize + lane) * P;
        const int count = valid ? clamp_count(dim_qk - e0, P) : 0;
        load_pack(q_next[s][j], q + t * p.q_seq_stride + e0, count, vectorised);
        load_pack(k_next[s][j], k + t * p.k_seq_stride + e0, count, vectorised);
      }
      v_next[s] = valid ? v[t * p.v_seq_stride] : from_float<T>(0.f);
    }
  };

  float running[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) running[r] = 0.f;

  const int64_t iters = (seqlen + steps_per_iter - 1) / steps_per_iter;
  prefetch(0);
  for (int64_t it = 0; it < iters; ++it) {
    float qf[S][ROWS], kf[S][ROWS], vf[S];
#pragma unroll
    for (int s = 0; s < S; ++s) {
#pragma unroll
      for (int j = 0; j < kPacks; ++j) {
#pragma unroll
        for (int i = 0; i < P; ++i) {
          qf[s][j * P + i] = to_float(q_next[s][j].e[i]);
          kf[s][j * P + i] = to_float(k_next[s][j].e[i]);
        }
      }
      vf[s] = to_float(v_next[s]);
    }
    if (it + 1 < iters) prefetch((it + 1) * steps_per_iter);

    // This warp's states relative to the start of its steps: kv[r][s] = sum_{s' <= s} k v.
    float kv[ROWS][S];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      float sum = 0.f;
#pragma unroll
      for (int s = 0; s < S; ++s) {
        sum = fmaf(kf[s][r], vf[s], sum);
        kv[r][s] = sum;
      }
    }

    float* red = reductions + (it & 1) * warps * kEMax;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const int e = ((r / P) * kWarpSize + lane) * P + r % P;
      red[warp * kEMax + e] = kv[r][S - 1];
    }
    __syncthreads();
    // Inclusive prefix over warps, one state row per thread.
    for (int e = threadIdx.x; e < kEMax; e += blockDim.x) {
      float sum = red[e];
      for (int w = 1; w < warps; ++w) {
        sum += red[w * kEMax + e];
        red[w * kEMax + e] = sum;
      }
    }
    __syncthreads();

    float o[S];
#pragma unroll
    for (int s = 0; s < S; ++s) o[s] = 0.f;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const int e = ((r / P) * kWarpSize + lane) * P + r % P;
      const float before = running[r] + (warp > 0 ? red[(warp - 1) * kEMax + e] : 0.f);
      running[r] += red[(warps - 1) * kEMax + e];
#pragma unroll
      for (int s = 0; s < S; ++s) o[s] = fmaf(qf[s][r], kv[r][s] + before, o[s]);
    }
    int index;
    const float total = warp_reduce_scatter<S>(o, lane, index);
    if ((lane & (kWarpSize / S - 1)) == 0) {
      const int64_t t = it * steps_per_iter + warp * S + index;
      if (t < seqlen) out[t * p.out_seq_stride] = from_float<T>(total);
    }
  }
}

// --- typed launchers -----------------------------------------------------------------------------

// The binding holds B * H * M to the CUDA grid limit of 2^31 - 1 (causal_dot_product_op.cpp),
// and no kernel has more blocks per (batch, head) than M columns: the grids below fit.

template <typename T>
void launch_per_thread(const CausalDotProductParams& p, LinearRows groups, bool vectorised,
                       cudaStream_t stream) {
  const int64_t col_tiles = (p.dim_v + per_thread_columns(p.dim_qk) - 1) / per_thread_columns(p.dim_qk);
  const unsigned grid = static_cast<unsigned>(p.batch * p.heads * col_tiles);
  switch (groups) {
    case LinearRows::k1:
      causal_dot_product_per_thread_kernel<T, 1>
          <<<grid, kPerThreadThreads, 0, stream>>>(p, col_tiles, vectorised);
      break;
    case LinearRows::k2:
      causal_dot_product_per_thread_kernel<T, 2>
          <<<grid, kPerThreadThreads, 0, stream>>>(p, col_tiles, vectorised);
      break;
    case LinearRows::k4:
      causal_dot_product_per_thread_kernel<T, 4>
          <<<grid, kPerThreadThreads, 0, stream>>>(p, col_tiles, vectorised);
      break;
    case LinearRows::k8:
      causal_dot_product_per_thread_kernel<T, 8>
          <<<grid, kPerThreadThreads, 0, stream>>>(p, col_tiles, vectorised);
      break;
  }
  DJL_ATTN_CUDA_CHECK_LAUNCH("causal_dot_product_per_thread_kernel");
}

// `warps` is the plan's: 4 to low_occupancy_max_warps(E).
template <typename T>
void launch_low_occupancy(const CausalDotProductParams& p, LinearRows rows, int warps,
                          bool vectorised, cudaStream_t stream) {
  const unsigned threads = static_cast<unsigned>(warps * kWarpSize);
  const size_t smem =
      2 * static_cast<size_t>(warps) * static_cast<int>(rows) * kWarpSize * sizeof(float);
  const unsigned grid = static_cast<unsigned>(p.batch * p.heads * p.dim_v);
  switch (rows) {
    case LinearRows::k1:
      causal_dot_product_low_occupancy_kernel<T, 1><<<grid, threads, smem, stream>>>(p, vectorised);
      break;
    case LinearRows::k2:
      causal_dot_product_low_occupancy_kernel<T, 2><<<grid, threads, smem, stream>>>(p, vectorised);
      break;
    case LinearRows::k4:
      causal_dot_product_low_occupancy_kernel<T, 4><<<grid, threads, smem, stream>>>(p, vectorised);
      break;
    case LinearRows::k8:
      causal_dot_product_low_occupancy_kernel<T, 8><<<grid, threads, smem, stream>>>(p, vectorised);
      break;
  }
  DJL_ATTN_CUDA_CHECK_LAUNCH("causal_dot_product_low_occupancy_kernel");
}

}  // namespace djl_attn::linear

#include "cuda/linear/causal_dot_product_chunked.cuh"
