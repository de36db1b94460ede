// The skinny GEMM kernel (skinny_gemm.h). A decode step's GEMM has 1 to 8 rows of activations
// against a weight matrix read once: memory-bound, and cuBLASLt's tiles, sized for many rows,
// read Llama-3.2-1B's qkv and out projections at ~1.8 TB/s of an H200's ~4.3 (issue 22).
//
// Tensor cores with the roles swapped: mma.sync m16n8k16's 16-row operand is 16 weight rows
// (output columns) and its 8-column operand the activation rows (m <= 8; rows past m are zeros),
// so one instruction consumes 512 bytes of weights and the arithmetic never limits the stream
// (a first CUDA-core version, one warp per column, fell to ~1.1 TB/s at 8 rows on an H100: eight
// activation loads and conversions per weight load). Every thread loads 16 contiguous bytes of
// each of its two weight rows per 32-element span of k and the same 16 bytes of its activation
// row; the mma's k slots are filled in a permuted order, the same for both operands, so that the
// dot products are exact sums over the right elements (order does not change a product's terms).
// A block is 16 output columns; its kSplitWarps warps take interleaved spans of k (enough loads
// in flight for a 2k-column matrix, 128 blocks, to cover every SM) and are summed in a fixed
// order in shared memory, then warp 0 runs the epilogue.
//
// Every output's sum runs in the same order whatever m is: a sequence's result does not depend on
// the other rows of its batch.

#include "cuda/gemm/skinny_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/error.h"
#include "cuda/common/activations.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/dependent_launch.cuh"
#include "cuda/common/mma.cuh"

namespace djl_attn::cuda {
namespace {

constexpr int kColumns = 16;     // output columns per block: the mma's 16 rows
constexpr int kSplitWarps = 8;   // warps per block, each on its own spans of k
constexpr int kSpan = 32;        // k per warp step: one 16-byte load per thread and row, two mmas
// Spans per warp step; two steps are in flight (the next step's weights are requested before
// this step's mmas), within the registers of 2-3 blocks per SM (a gated call reads two tiles).
constexpr int unroll(bool gated_call) { return gated_call ? 2 : 4; }

struct SkinnyArgs {
  const void* a;
  const void* w;
  void* d;
  const float* bias;
  int64_t m, n, k, lda, ldd;
  GemmNorm norm;  // weight null: no norm
  GemmRope rope;  // kRope only
};
static_assert(kSplitWarps >= kSkinnyMaxRows, "the norm's statistics take one warp per row");

// Eight elements of a row normalised as the decoder's norm kernel writes them:
// round((x - mean) * inv * weight (+ bias)). k0: the first element's index.
template <typename T>
__device__ __forceinline__ uint4 normalise8(const uint4& x, int64_t k0, float mean, float inv,
                                            const GemmNorm& norm) {
  const T* xe = reinterpret_cast<const T*>(&x);
  const float4* w = reinterpret_cast<const float4*>(norm.weight + k0);
  const float4 w0 = __ldg(w), w1 = __ldg(w + 1);
  const float weight[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  float bias[8] = {};
  if (norm.bias != nullptr) {
    const float4* b = reinterpret_cast<const float4*>(norm.bias + k0);
    const float4 b0 = __ldg(b), b1 = __ldg(b + 1);
    const float values[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) bias[e] = values[e];
  }
  uint4 out;
  T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float y = (to_float(xe[e]) - mean) * inv * weight[e];
    if (norm.bias != nullptr) y += bias[e];
    oe[e] = from_float<T>(y);
  }
  return out;
}

// Mean (LayerNorm; 0 for RMSNorm) and inverse deviation of activation row `row`, by one warp.
// load(chunk): the row's 16-byte chunk (from global memory, or from the staged copy).
template <typename T, typename Load>
__device__ __forceinline__ float2 row_statistics(Load load, int64_t chunks, int64_t k,
                                                 const GemmNorm& norm, int lane) {
  auto total = [&](auto term) {
    float s = 0.f;
    for (int64_t chunk = lane; chunk < chunks; chunk += 32) {
      const uint4 x = load(chunk);
      const T* xe = reinterpret_cast<const T*>(&x);
#pragma unroll
      for (int e = 0; e < 8; ++e) s += term(to_float(xe[e]));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    return s;
  };
  const float n = static_cast<float>(k);
  const float mean = norm.layer ? total([](float x) { return x; }) / n : 0.f;
  const float sq = total([mean](float x) { return (x - mean) * (x - mean); });
  return make_float2(mean, rsqrtf(sq / n + norm.eps));
}

struct int2_64 {
  int64_t lo, hi;
};

constexpr bool gated(GemmEpilogue e) {
  return e == GemmEpilogue::kSwiGlu || e == GemmEpilogue::kGeGlu;
}

// The stored value of one output element from its sums (`up` only when gated): what the
// decoder's unfused kernels compute from the product rounded to T (gemm_cuda.h).
template <typename T, GemmEpilogue kEpilogue>
__device__ __forceinline__ void store(const SkinnyArgs& p, int64_t row, int64_t col, float sum,
                                      float up) {
  static_assert(kEpilogue != GemmEpilogue::kRope, "kRope stores pairs: store_rotated");
  T* d = static_cast<T*>(p.d) + row * p.ldd + col;
  if constexpr (kEpilogue == GemmEpilogue::kStore) {
    *d = from_float<T>(sum);
    return;
  }
  float v = to_float(from_float<T>(sum));
  if (p.bias != nullptr) v += p.bias[col];
  if constexpr (kEpilogue == GemmEpilogue::kResidual) {
    *d = from_float<T>(to_float(*d) + v);
  } else if constexpr (kEpilogue == GemmEpilogue::kGelu) {
    *d = from_float<T>(gelu_tanh(v));
  } else {
    float u = to_float(from_float<T>(up));
    if (p.bias != nullptr) u += p.bias[p.n + col];
    const float g = kEpilogue == GemmEpilogue::kSwiGlu ? silu(v) : gelu_tanh(v);
    *d = from_float<T>(g * u);
  }
}

// The output columns of a tile's weight rows g and g + 8. kRope pairs them as the rotary
// embedding pairs its dims, so that a thread's accumulators hold both halves of its pairs: tile t
// of a rotated head covers pairs 8t..8t+7 (head_dim is a multiple of 16: tiles never straddle a
// head). Every other tile is 16 consecutive columns.
template <GemmEpilogue kEpilogue>
__device__ __forceinline__ int2_64 tile_columns(const SkinnyArgs& p, int64_t tile, int g) {
  const int64_t col0 = tile * kColumns;
  if constexpr (kEpilogue == GemmEpilogue::kRope) {
    const int64_t d = p.rope.head_dim, head = col0 / d;
    if (p.rope.table != nullptr && head < p.rope.heads_rotated) {
      const int64_t pair = (col0 % d) / 2 + g;
      const int64_t lo = p.rope.interleaved ? head * d + 2 * pair : head * d + pair;
      return {lo, p.rope.interleaved ? lo + 1 : lo + d / 2};
    }
  }
  return {col0 + g, col0 + g + 8};
}

// kRope's store of one activation row's pair (x0 at column lo, x1 at hi): the bias, then the
// rotation of a rotated head's pair, each rounded as the decoder's bias + RoPE kernel rounds.
template <typename T>
__device__ __forceinline__ void store_rotated(const SkinnyArgs& p, int64_t row, int2_64 cols,
                                              float x0, float x1) {
  T* d = static_cast<T*>(p.d) + row * p.ldd;
  float v0 = to_float(from_float<T>(x0)), v1 = to_float(from_float<T>(x1));
  if (p.bias != nullptr) {
    v0 += p.bias[cols.lo];
    v1 += p.bias[cols.hi];
  }
  const int64_t head_dim = p.rope.head_dim;
  if (p.rope.table != nullptr && cols.lo / head_dim < p.rope.heads_rotated) {
    const int64_t i = p.rope.interleaved ? (cols.lo % head_dim) / 2 : cols.lo % head_dim;
    const float* angles = p.rope.table + p.rope.positions[row] * head_dim;
    const float c = angles[i], s = angles[head_dim / 2 + i];
    d[cols.lo] = from_float<T>(v0 * c - v1 * s);
    d[cols.hi] = from_float<T>(v1 * c + v0 * s);
  } else {
    d[cols.lo] = from_float<T>(v0);
    d[cols.hi] = from_float<T>(v1);
  }
}

// Grid: ceil(n / kColumns) blocks of kSplitWarps warps. Thread (g = lane / 4, c = lane % 4)
// reads the weight rows of its tile's columns lo and hi (tile_columns; and their up rows n + ...
// when gated) and activation row g, elements 8c..8c+7 of each span; its accumulators hold, as
// mma's C fragment, column lo (values 0, 1) and hi (2, 3) of activation rows 2c and 2c + 1.
// kStaged (with kNorm only): the activation rows are copied into shared memory once and
// normalised there, launch_epilogue's choice (staged_bytes: one row). A warp does only 2-4 steps
// of k in a 2k-column GEMM, so the norm's statistics pass over global memory and its per-step
// loads and arithmetic sat on the critical path of each step.
template <typename T, GemmEpilogue kEpilogue, bool kNorm, bool kStaged>
__global__ void __launch_bounds__(kSplitWarps * 32, 2) skinny_gemm_kernel(SkinnyArgs p) {
  constexpr int kTiles = gated(kEpilogue) ? 2 : 1;  // gate rows, then up rows
  constexpr int kUnroll = unroll(gated(kEpilogue));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int2_64 cols = tile_columns<kEpilogue>(p, blockIdx.x, g);
  const int64_t chunks = p.k / 8;  // 16-byte chunks per row
  const int64_t spans = (p.k + kSpan - 1) / kSpan;

  const uint4* w_row[kTiles][2];
  bool w_ok[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t col = h == 0 ? cols.lo : cols.hi;
    w_ok[h] = col < p.n;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      w_row[t][h] = static_cast<const uint4*>(p.w) + ((w_ok[h] ? col : 0) + t * p.n) * chunks;
    }
  }
  const bool a_ok = g < p.m;
  const uint4* a_row = static_cast<const uint4*>(p.a) + (a_ok ? g : 0) * (p.lda / 8);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  __shared__ float2 stats[kSkinnyMaxRows];  // per activation row: the norm's mean and inverse
  // The staged rows, [m][chunks + 1] chunks: the pad chunk spreads the 8 rows a warp reads in
  // one step over the banks.
  extern __shared__ uint4 staged[];
  const int64_t staged_stride = chunks + 1;

  using Step = uint4[kTiles][2][kUnroll];
  auto load_weights = [&](Step& wv, int64_t first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t chunk = (first + u * kSplitWarps) * 4 + c;
      const bool in_k = chunk < chunks;  // k % 8 == 0: a chunk is all in or all out
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          wv[t][h][u] = in_k && w_ok[h] ? __ldcs(w_row[t][h] + chunk) : zero;
        }
      }
    }
  };
  float acc[kTiles][4] = {};
  auto multiply = [&](const Step& wv, int64_t first) {
    uint4 av[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t chunk = (first + u * kSplitWarps) * 4 + c;
      if constexpr (kStaged) {
        av[u] = a_ok && chunk < chunks ? staged[g * staged_stride + chunk] : zero;
      } else {
        av[u] = a_ok && chunk < chunks ? __ldg(a_row + chunk) : zero;
        if (kNorm && a_ok && chunk < chunks) {
          av[u] = normalise8<T>(av[u], chunk * 8, stats[g].x, stats[g].y, p.norm);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t* b = reinterpret_cast<const uint32_t*>(&av[u]);
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const uint32_t* lo = reinterpret_cast<const uint32_t*>(&wv[t][0][u]);  // row g
        const uint32_t* hi = reinterpret_cast<const uint32_t*>(&wv[t][1][u]);  // row g + 8
        // Elements 8c..8c+3 in the first mma's slots of thread c, 8c+4..8c+7 in the second's.
        const uint32_t first_k[4] = {lo[0], hi[0], lo[1], hi[1]};
        const uint32_t second_k[4] = {lo[2], hi[2], lo[3], hi[3]};
        ptx::mma_16816<T>(acc[t], first_k, b[0], b[1]);
        ptx::mma_16816<T>(acc[t], second_k, b[2], b[3]);
      }
    }
  };
  // Two register buffers in turn: a step's mmas run while the next step's weights are on their
  // way. The weights are no kernel's output: the first loads go out before the wait, while the
  // previous kernel (which writes the activations, and d for the residual) finishes; a staged
  // kernel sends both buffers' (with a 2k row and 4 spans a step, the whole tile) to cover its
  // staging. (The others keep one: with both live, the RoPE epilogue's kernels spilled.)
  constexpr int64_t kStride = kSplitWarps * kUnroll;
  constexpr bool kEarlyOdd = kStaged;
  Step even, odd;
  load_weights(even, warp);
  if (kEarlyOdd && warp + kStride < spans) load_weights(odd, warp + kStride);
  wait_for_prerequisite_grid();
  // The activation rows into shared memory (every load of a thread out at once), then the
  // norm's statistics, warp r for row r, and the rows normalised in place — all while the
  // weights arrive. Unstaged, the statistics read the rows from global memory.
  const uint4* a_rows = static_cast<const uint4*>(p.a);
  if constexpr (kStaged) {
    const int64_t total = p.m * chunks;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < total; i += kSplitWarps * 32) {
      const int64_t row = i / chunks, chunk = i % chunks;
      staged[row * staged_stride + chunk] = __ldg(a_rows + row * (p.lda / 8) + chunk);
    }
    __syncthreads();
  }
  if constexpr (kNorm) {
    if (warp < p.m) {
      const uint4* row = kStaged ? staged + warp * staged_stride : a_rows + warp * (p.lda / 8);
      auto load = [row](int64_t chunk) { return kStaged ? row[chunk] : __ldg(row + chunk); };
      const float2 s = row_statistics<T>(load, chunks, p.k, p.norm, lane);
      if (lane == 0) stats[warp] = s;
    }
    __syncthreads();
    if constexpr (kStaged) {
      const int64_t total = p.m * chunks;
      for (int64_t i = threadIdx.x; i < total; i += kSplitWarps * 32) {
        const int64_t row = i / chunks, chunk = i % chunks;
        uint4& x = staged[row * staged_stride + chunk];
        x = normalise8<T>(x, chunk * 8, stats[row].x, stats[row].y, p.norm);
      }
      __syncthreads();
    }
  }
  for (int64_t first = warp; first < spans; first += 2 * kStride) {
    if ((!kEarlyOdd || first != warp) && first + kStride < spans) {
      load_weights(odd, first + kStride);
    }
    multiply(even, first);
    if (first + kStride >= spans) break;
    if (first + 2 * kStride < spans) load_weights(even, first + 2 * kStride);
    multiply(odd, first + kStride);
  }

  // The warps' partial sums, added in warp order. [warp][value][lane]: no bank conflicts.
  __shared__ float partial[kSplitWarps][kTiles * 4][32];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp][t * 4 + i][lane] = acc[t][i];
  }
  __syncthreads();
  allow_dependent_launch();
  if (warp != 0) return;
  if constexpr (kEpilogue == GemmEpilogue::kRope) {
    float sum[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sum[i] = 0.f;
      for (int w = 0; w < kSplitWarps; ++w) sum[i] += partial[w][i][lane];
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // activation rows 2c and 2c + 1: lo in sum[j], hi in sum[2 + j]
      const int64_t row = 2 * c + j;
      if (cols.hi < p.n && row < p.m) store_rotated<T>(p, row, cols, sum[j], sum[2 + j]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float sum[kTiles];
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        sum[t] = 0.f;
        for (int w = 0; w < kSplitWarps; ++w) sum[t] += partial[w][t * 4 + i][lane];
      }
      const int64_t col = i >= 2 ? cols.hi : cols.lo, row = 2 * c + (i & 1);
      if (col < p.n && row < p.m) store<T, kEpilogue>(p, row, col, sum[0], sum[kTiles - 1]);
    }
  }
}

// Shared memory for the staged activation row ([1][k / 8 + 1] chunks) of a one-row GEMM with a
// norm, or 0. Measured in Llama-3.2-1B's captured step, a layer's norm GEMMs (qkv, gate+up):
// at batch 1 staged 8.2 + 21.3 us against 9.7 + 24.9 (H200), 9.1 + 27.5 against 10.7 + 31.1
// (H100); at batch 8 slower, 14.8 + 39.3 against 11.6 + 33.2 (H100: eight rows' statistics and
// normalisation, one L2 round trip per row, before the first step). Plain GEMMs (no statistics
// pass to replace) lost too: down +23% at one row, every 8-row shape +32..67% (H200).
constexpr int64_t kStageLimit = 48 * 1024;
int64_t staged_bytes(const SkinnyArgs& args) {
  const int64_t bytes = args.m * (args.k / 8 + 1) * 16;
  return args.norm.weight != nullptr && args.m == 1 && bytes <= kStageLimit ? bytes : 0;
}

template <typename T, GemmEpilogue kEpilogue>
void launch_epilogue(const SkinnyArgs& args, cudaStream_t stream, int device) {
  const dim3 grid(static_cast<unsigned>((args.n + kColumns - 1) / kColumns));
  const dim3 block(kSplitWarps * 32);
  const char* name = "skinny_gemm_kernel";
  if (args.norm.weight == nullptr) {
    return launch_after_prerequisite<skinny_gemm_kernel<T, kEpilogue, false, false>>(
        name, grid, block, 0, stream, device, args);
  }
  if (const int64_t smem = staged_bytes(args); smem > 0) {
    return launch_after_prerequisite<skinny_gemm_kernel<T, kEpilogue, true, true>>(
        name, grid, block, static_cast<size_t>(smem), stream, device, args);
  }
  launch_after_prerequisite<skinny_gemm_kernel<T, kEpilogue, true, false>>(name, grid, block, 0,
                                                                           stream, device, args);
}

template <typename T>
void launch_typed(GemmEpilogue epilogue, const SkinnyArgs& args, cudaStream_t stream,
                  int device) {
  switch (epilogue) {
    case GemmEpilogue::kStore:
      return launch_epilogue<T, GemmEpilogue::kStore>(args, stream, device);
    case GemmEpilogue::kResidual:
      return launch_epilogue<T, GemmEpilogue::kResidual>(args, stream, device);
    case GemmEpilogue::kSwiGlu:
      return launch_epilogue<T, GemmEpilogue::kSwiGlu>(args, stream, device);
    case GemmEpilogue::kGeGlu:
      return launch_epilogue<T, GemmEpilogue::kGeGlu>(args, stream, device);
    case GemmEpilogue::kGelu:
      return launch_epilogue<T, GemmEpilogue::kGelu>(args, stream, device);
    case GemmEpilogue::kRope:
      return launch_epilogue<T, GemmEpilogue::kRope>(args, stream, device);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool skinny_gemm_fits(const GemmCall& call) {
  const bool norm_fits = call.norm == nullptr ||
                         (aligned16(call.norm->weight) &&
                          (call.norm->bias == nullptr || aligned16(call.norm->bias)));
  // kRope: tiles of whole pairs inside one head (tile_columns).
  const bool rope_fits = call.epilogue != GemmEpilogue::kRope ||
                         (call.rope != nullptr && call.rope->head_dim % kColumns == 0 &&
                          call.n % call.rope->head_dim == 0);
  return (call.dtype == ElementType::kFloat16 || call.dtype == ElementType::kBFloat16) &&
         call.m >= 1 && call.m <= kSkinnyMaxRows && call.k >= 8 && call.k % 8 == 0 &&
         call.lda % 8 == 0 && aligned16(call.a) && aligned16(call.w) && norm_fits && rope_fits;
}

void launch_skinny_gemm(const GemmCall& call, cudaStream_t stream, int device) {
  SkinnyArgs args{call.a, call.w, call.d, call.bias, call.m, call.n, call.k, call.lda, call.ldd,
                  GemmNorm{nullptr, nullptr, false, 0.f}, GemmRope{}};
  if (call.norm != nullptr) args.norm = *call.norm;
  if (call.rope != nullptr) args.rope = *call.rope;
  if (call.dtype == ElementType::kFloat16) {
    return launch_typed<__half>(call.epilogue, args, stream, device);
  }
  launch_typed<__nv_bfloat16>(call.epilogue, args, stream, device);
}

}  // namespace djl_attn::cuda
