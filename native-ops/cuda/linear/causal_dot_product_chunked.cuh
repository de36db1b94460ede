// The chunked causal_dot_product kernel: tensor cores through mma.sync, for float16/bfloat16 with
// E <= 128. Included by causal_dot_product_kernels.cuh (which defines the shared helpers).
//
// One block of 4 warps per (batch * head, tile of Mt = 64 value columns; 32 when M <= 32) walks
// the sequence in chunks of C = 64 steps:
//   O_c = mask(Q_c K_c^T) V_c + Q_c State,    State += K_c^T V_c.
// Warp w owns the chunk's rows [16 w, 16 w + 16). Its scores stay in registers as mma
// accumulators, are masked (causal within the chunk; key tiles above the diagonal are skipped),
// repacked in registers as the A operand and multiplied by V (FlashAttention-2 style, no round
// trip through shared memory).
//
// The state never leaves float32 range: each warp carries a slice of it in float32 mma
// accumulators (the K^T V update), and once per chunk the slices go to shared memory rounded to
// tf32 (10 mantissa bits, float32 exponent) for Q_c State, which runs as tf32 mma m16n8k8. Q in
// float16/bfloat16 is exact in tf32, so that product's error is one rounding of each state
// element, like float16's, without float16's overflow at 65504.
//
// The next chunk's q, k and v load with cp.async (16 bytes; element-wise with zero fill for
// unaligned views, ragged E or M and the tail of L) while this one computes: k and v in two
// stages; q in one, since each warp reads only its own 16 rows of q and refills them itself once
// they are in registers. Shared memory rows are padded by 16 bytes so that ldmatrix reads 8 rows
// without bank conflicts; unlike an XOR swizzle, padding keeps every fragment address a per-thread
// base plus a compile-time offset, which spares the registers a swizzle's addresses would take.
#pragma once

#include "cuda/common/cp_async.cuh"
#include "cuda/common/mma.cuh"


namespace djl_attn::linear {

using cuda::ptx::cp_async_16;
using cuda::ptx::cp_async_commit;
using cuda::ptx::cp_async_wait;
using cuda::ptx::ldmatrix_x4;
using cuda::ptx::ldmatrix_x4_trans;
using cuda::ptx::mma_16816;
using cuda::ptx::pack2;
using cuda::ptx::smem_addr;

constexpr int kChunkThreads = kChunkWarps * kWarpSize;


// Element offset of 16-byte segment `seg` of row `row` in a [rows][Segs * 8 + 8] tile of 2-byte
// elements: the odd row pitch in 16-byte units puts the 8 rows an ldmatrix reads in 8 different
// bank groups.
template <int Segs>
__device__ __forceinline__ int padded(int row, int seg) {
  return (row * (Segs + 1) + seg) * 8;
}


// d += a b, m16n8k8 on tf32 operands (float32 bit patterns), float32 accumulation.
__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float round_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// The two 16-bit elements of a register as floats (exact: both formats fit in tf32).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&x));
  } else {
    return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));
  }
}

// grid: B * H * col_tiles blocks of 4 warps; dynamic shared memory ChunkedShape::kBytes.
// Fragment layouts (PTX ISA, mma.m16n8k16): lane = 4 r + c holds accumulator rows r and r + 8,
// columns 2c and 2c + 1 of each n8 tile.
template <typename T, int EMax, int Mt>
__global__ void __launch_bounds__(kChunkThreads, chunked_min_blocks(EMax))
    causal_dot_product_chunked_kernel(CausalDotProductParams p, int64_t col_tiles,
                                      bool vectorised) {
  using Shape = ChunkedShape<EMax, Mt>;
  constexpr int kQkSegs = Shape::kQkSegs;
  constexpr int kVSegs = Shape::kVSegs;
  constexpr int kKSteps = EMax / 16;               // k16 steps over E
  constexpr int kOutTiles = Mt / 8;                // n8 tiles of the warp's output rows
  constexpr int kSm = Shape::kStateRows / 16;      // m16 tiles of the warp's state slice
  constexpr int kSn = Shape::kStateCols / 8;       // n8 tiles of the warp's state slice
  constexpr int kPairPitch = Shape::kPairPitch;
  static_assert(kSn % 2 == 0 && kOutTiles % 2 == 0, "ldmatrix.x4 loads V in pairs of n8 tiles");

  extern __shared__ __align__(128) unsigned char chunked_smem[];
  T* q_s = reinterpret_cast<T*>(chunked_smem + Shape::kQ);
  T* k_s = reinterpret_cast<T*>(chunked_smem + Shape::kK);
  T* v_s = reinterpret_cast<T*>(chunked_smem + Shape::kV);
  float* state_s = reinterpret_cast<float*>(chunked_smem + Shape::kState);
  const uint32_t q_addr = smem_addr(q_s);
  const uint32_t k_addr = smem_addr(k_s);
  const uint32_t v_addr = smem_addr(v_s);

  const int tid = threadIdx.x;
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const int r = lane >> 2, c = lane & 3;
  const int64_t tile = blockIdx.x % col_tiles;
  const int64_t bh = blockIdx.x / col_tiles;
  const int64_t b = bh / p.heads, h = bh % p.heads;
  const int64_t m0 = tile * Mt;
  const int64_t seqlen = p.seqlen;
  const int64_t dim_qk = p.dim_qk;
  const int cols = static_cast<int>(p.dim_v - m0 < Mt ? p.dim_v - m0 : Mt);
  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + h * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride + m0;
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + h * p.out_head_stride + m0;
  // Pairs of outputs go out as one 4-byte store when every row starts 4-byte aligned.
  const bool out_pairs =
      (p.out_seq_stride % 2) == 0 && (reinterpret_cast<uintptr_t>(out) % 4) == 0;

  // One 16-byte segment (8 elements) of a row: cp.async when whole and aligned, otherwise
  // element-wise loads (zeros past `count`) and a plain shared-memory store.
  auto load_segment = [&](T* dst, const T* src, int count) {
    if (vectorised && count == 8) {
      cp_async_16(smem_addr(dst), src);
    } else {
      Pack<T, 8> pack;
#pragma unroll
      for (int i = 0; i < 8; ++i) pack.e[i] = i < count ? src[i] : from_float<T>(0.f);
      *reinterpret_cast<Pack<T, 8>*>(dst) = pack;
    }
  };
  // Thread tid always loads segment tid % Segs of rows tid / Segs + i * (threads / Segs): the
  // count along E (or M) is fixed per thread and only the row advances.
  constexpr int kQkRowStep = kChunkThreads / kQkSegs;
  constexpr int kVRowStep = kChunkThreads / kVSegs;
  const int qk_seg = tid % kQkSegs, qk_row = tid / kQkSegs;
  const int v_seg = tid % kVSegs, v_row = tid / kVSegs;
  const int qk_count = clamp_count(dim_qk - qk_seg * 8, 8);
  const int v_count = clamp_count(cols - v_seg * 8, 8);
  const int qk_dst = padded<kQkSegs>(qk_row, qk_seg);
  const int v_dst = padded<kVSegs>(v_row, v_seg);
  auto issue_kv = [&](int64_t t0, int stage) {
    T* ks = k_s + stage * (kChunk * Shape::kQkPitch) + qk_dst;
    T* vs = v_s + stage * (kChunk * Shape::kVPitch) + v_dst;
    const T* k_src = k + (t0 + qk_row) * p.k_seq_stride + qk_seg * 8;
    const T* v_src = v + (t0 + v_row) * p.v_seq_stride + v_seg * 8;
#pragma unroll
    for (int i = 0; i < kChunk / kQkRowStep; ++i) {
      const bool valid = t0 + qk_row + i * kQkRowStep < seqlen;
      load_segment(ks + i * kQkRowStep * Shape::kQkPitch, k_src + i * kQkRowStep * p.k_seq_stride,
                   valid ? qk_count : 0);
    }
#pragma unroll
    for (int i = 0; i < kChunk / kVRowStep; ++i) {
      const bool valid = t0 + v_row + i * kVRowStep < seqlen;
      load_segment(vs + i * kVRowStep * Shape::kVPitch, v_src + i * kVRowStep * p.v_seq_stride,
                   valid ? v_count : 0);
    }
  };
  // Each warp loads its own 16 rows of q, with the same fixed segment per lane.
  constexpr int kQRowStep = kWarpSize / kQkSegs < 16 ? kWarpSize / kQkSegs : 16;
  const int q_seg = lane % kQkSegs, q_row = warp * 16 + lane / kQkSegs;
  const int q_count = clamp_count(dim_qk - q_seg * 8, 8);
  auto issue_q = [&](int64_t t0) {
    const T* q_src = q + (t0 + q_row) * p.q_seq_stride + q_seg * 8;
#pragma unroll
    for (int i = 0; i < 16 / kQRowStep; ++i) {
      const bool valid = t0 + q_row + i * kQRowStep < seqlen;
      load_segment(q_s + padded<kQkSegs>(q_row + i * kQRowStep, q_seg),
                   q_src + i * kQRowStep * p.q_seq_stride, valid ? q_count : 0);
    }
  };

  // This warp's slice of the state: rows [e0, e0 + kStateRows), columns [n0, n0 + kStateCols).
  const int e0 = (warp % Shape::kRowWarps) * Shape::kStateRows;
  const int n0 = (warp / Shape::kRowWarps) * Shape::kStateCols;
  float state[kSm][kSn][4];
#pragma unroll
  for (int i = 0; i < kSm; ++i)
#pragma unroll
    for (int j = 0; j < kSn; ++j)
#pragma unroll
      for (int x = 0; x < 4; ++x) state[i][j][x] = 0.f;

  // Lane-dependent parts of the ldmatrix addresses. Non-transposed x4 over rows (A of Q, B of K):
  // lanes 0-15 address rows 0-15 at the first 8 columns, lanes 16-31 the next 8 (Q), or lanes
  // 0-7 / 16-23 rows 0-7 / 8-15 and lanes 8-15 / 24-31 the next 8 columns (K). Transposed x4
  // (B of V, A of K^T): the same with the roles of rows (time) and columns swapped.
  const int ld_row16 = lane & 15;
  const int ld_hi = lane >> 4;
  const int ld_row8 = (lane & 7) + ((lane >> 4) << 3);
  const int ld_mid = (lane >> 3) & 1;
  const int ld_trow = (lane & 7) + (ld_mid << 3);

  const int64_t chunks = (seqlen + kChunk - 1) / kChunk;
  issue_kv(0, 0);
  issue_q(0);
  cp_async_commit();
  for (int64_t ci = 0; ci < chunks; ++ci) {
    const int stage = static_cast<int>(ci & 1);
    const int64_t t0 = ci * kChunk;
    const bool more = ci + 1 < chunks;
    cp_async_wait<0>();
    // This chunk's q, k, v (and the state written at the end of the last one) are visible, and
    // every warp is done with the other stage.
    __syncthreads();
    if (more) issue_kv(t0 + kChunk, stage ^ 1);

    const uint32_t ks_addr = k_addr + stage * static_cast<uint32_t>(Shape::kQkStage);
    const uint32_t vs_addr = v_addr + stage * static_cast<uint32_t>(Shape::kVStage);
    float o[kOutTiles][4];
#pragma unroll
    for (int i = 0; i < kOutTiles; ++i)
#pragma unroll
      for (int x = 0; x < 4; ++x) o[i][x] = 0.f;

    // Q times the state before this chunk, in tf32. Within each k8 step the mma's k index c
    // stands for column 2c and c + 4 for column 2c + 1 (the same for A and B, so the sum is
    // unchanged): the A fragment is then the float16 fragment's halves, with no shuffles.
    if (ci > 0) {
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t qf[4];
        ldmatrix_x4(qf, q_addr + 2 * padded<kQkSegs>(warp * 16 + ld_row16, ks * 2 + ld_hi));
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float2 top = unpack2<T>(qf[2 * half]);         // row r
          const float2 bottom = unpack2<T>(qf[2 * half + 1]);  // row r + 8
          const uint32_t a0 = __float_as_uint(top.x), a1 = __float_as_uint(bottom.x);
          const uint32_t a2 = __float_as_uint(top.y), a3 = __float_as_uint(bottom.y);
          const int pair_row = ks * 8 + half * 4 + c;  // state rows 2 pair_row, 2 pair_row + 1
          const float2* row_ptr =
              reinterpret_cast<const float2*>(state_s) + pair_row * kPairPitch + r;
#pragma unroll
          for (int nt = 0; nt < kOutTiles; ++nt) {
            const float2 bs = row_ptr[nt * 8];
            mma_tf32(o[nt], a0, a1, a2, a3, __float_as_uint(bs.x), __float_as_uint(bs.y));
          }
        }
      }
    }

    uint32_t qa[kKSteps][4];
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      ldmatrix_x4(qa[ks], q_addr + 2 * padded<kQkSegs>(warp * 16 + ld_row16, ks * 2 + ld_hi));
    }
    __syncwarp();
    if (more) issue_q(t0 + kChunk);
    cp_async_commit();

    // Intra-chunk: key tiles j <= warp of 16 keys each.
#pragma unroll
    for (int j = 0; j < kChunkWarps; ++j) {
      if (j > warp) continue;
      float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t kb[4];
        ldmatrix_x4(kb, ks_addr + 2 * padded<kQkSegs>(j * 16 + ld_row8, ks * 2 + ld_mid));
        mma_16816<T>(sc[0], qa[ks], kb[0], kb[1]);
        mma_16816<T>(sc[1], qa[ks], kb[2], kb[3]);
      }
      if (j == warp) {
        // Key 8 nt + 2c + (x & 1) against row r + 8 (x >> 1) of the same 16-step tile.
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int x = 0; x < 4; ++x)
            if (nt * 8 + 2 * c + (x & 1) > r + 8 * (x >> 1)) sc[nt][x] = 0.f;
      }
      const uint32_t pa[4] = {pack2<T>(sc[0][0], sc[0][1]), pack2<T>(sc[0][2], sc[0][3]),
                              pack2<T>(sc[1][0], sc[1][1]), pack2<T>(sc[1][2], sc[1][3])};
#pragma unroll
      for (int np = 0; np < kOutTiles / 2; ++np) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, vs_addr + 2 * padded<kVSegs>(j * 16 + ld_trow, np * 2 + ld_hi));
        mma_16816<T>(o[2 * np], pa, vb[0], vb[1]);
        mma_16816<T>(o[2 * np + 1], pa, vb[2], vb[3]);
      }
    }

    // Outputs of rows r and r + 8 of this warp's tile.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t t = t0 + warp * 16 + r + 8 * half;
      if (t < seqlen) {
        T* row_out = out + t * p.out_seq_stride;
#pragma unroll
        for (int nt = 0; nt < kOutTiles; ++nt) {
          const int col = nt * 8 + 2 * c;
          const float lo = o[nt][2 * half], hi = o[nt][2 * half + 1];
          if (out_pairs && col + 1 < cols) {
            *reinterpret_cast<uint32_t*>(row_out + col) = pack2<T>(lo, hi);
          } else {
            if (col < cols) row_out[col] = from_float<T>(lo);
            if (col + 1 < cols) row_out[col + 1] = from_float<T>(hi);
          }
        }
      }
    }

    if (more) {
      // State += K^T V over this chunk, this warp's slice, in float32 accumulators.
#pragma unroll
      for (int kt = 0; kt < kChunk / 16; ++kt) {
        uint32_t ka[kSm][4];
#pragma unroll
        for (int sm = 0; sm < kSm; ++sm) {
          ldmatrix_x4_trans(ka[sm], ks_addr + 2 * padded<kQkSegs>(kt * 16 + ld_row8,
                                                                   (e0 + sm * 16) / 8 + ld_mid));
        }
#pragma unroll
        for (int sp = 0; sp < kSn / 2; ++sp) {
          uint32_t vb[4];
          ldmatrix_x4_trans(vb, vs_addr + 2 * padded<kVSegs>(kt * 16 + ld_trow,
                                                              (n0 + sp * 16) / 8 + ld_hi));
#pragma unroll
          for (int sm = 0; sm < kSm; ++sm) {
            mma_16816<T>(state[sm][2 * sp], ka[sm], vb[0], vb[1]);
            mma_16816<T>(state[sm][2 * sp + 1], ka[sm], vb[2], vb[3]);
          }
        }
      }
      // Every warp has read the old state (Q_c State above) before any overwrites it.
      __syncthreads();
#pragma unroll
      for (int sm = 0; sm < kSm; ++sm) {
#pragma unroll
        for (int nt = 0; nt < kSn; ++nt) {
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const int e = e0 + sm * 16 + r + 8 * (x >> 1);
            const int n = n0 + nt * 8 + 2 * c + (x & 1);
            state_s[((e >> 1) * kPairPitch + n) * 2 + (e & 1)] = round_tf32(state[sm][nt][x]);
          }
        }
      }
    }
  }
}

// `dim` and `cols` are the plan's, which names this kernel only where its shared memory fits
// the device's opt-in limit; the binding holds the grid to the CUDA limit.
template <typename T>
void launch_chunked(const CausalDotProductParams& p, ChunkedDim dim, ChunkedCols cols,
                    bool vectorised, cudaStream_t stream) {
  const int mt = static_cast<int>(cols);
  const int64_t col_tiles = (p.dim_v + mt - 1) / mt;
  const unsigned grid = static_cast<unsigned>(p.batch * p.heads * col_tiles);
  // One instantiation per padded E and column tile.
  auto launch_shape = [&](auto e_max, auto mt_tag) {
    constexpr int kE = decltype(e_max)::value, kMt = decltype(mt_tag)::value;
    auto kernel = causal_dot_product_chunked_kernel<T, kE, kMt>;
    constexpr size_t smem = ChunkedShape<kE, kMt>::kBytes;
    // Over 48 KiB of dynamic shared memory needs an explicit opt-in per kernel; the carveout
    // asks for all of L1 as shared memory so that two or more blocks fit per SM.
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    kernel<<<grid, kChunkThreads, smem, stream>>>(p, col_tiles, vectorised);
  };
  auto launch_e = [&](auto mt_tag) {
    switch (dim) {
      case ChunkedDim::k32: return launch_shape(std::integral_constant<int, 32>{}, mt_tag);
      case ChunkedDim::k64: return launch_shape(std::integral_constant<int, 64>{}, mt_tag);
      case ChunkedDim::k128: return launch_shape(std::integral_constant<int, 128>{}, mt_tag);
    }
  };
  switch (cols) {
    case ChunkedCols::k32: launch_e(std::integral_constant<int, 32>{}); break;
    case ChunkedCols::k64: launch_e(std::integral_constant<int, 64>{}); break;
  }
  DJL_ATTN_CUDA_CHECK_LAUNCH("causal_dot_product_chunked_kernel");
}

}  // namespace djl_attn::linear
