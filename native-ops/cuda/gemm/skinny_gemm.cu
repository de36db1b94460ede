// The skinny GEMM kernel (skinny_gemm.h). A decode step's GEMM has 1 to 8 rows of activations
// against a weight matrix read once: memory-bound, and cuBLASLt's tensor-core tiles, sized for
// many rows, read Llama-3.2-1B's qkv and out projections at ~1.8 TB/s of an H200's ~4.3 (issue
// 22). Here each warp owns one output column (one weight row, two for a gated MLP), streams it
// with 16-byte loads, kUnroll in flight per lane, and keeps one float32 sum per activation row;
// a warp reduction and the epilogue finish the column. One weight load serves every activation
// row, so the rows cost arithmetic, not bandwidth.
//
// Every row's sum runs in the same order whatever m is (a lane's chunks in order, then the same
// butterfly), so a sequence's result does not depend on the batch it is in: a step padded to a
// larger batch bucket computes the same bits.
#include "cuda/gemm/skinny_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/error.h"
#include "cuda/common/activations.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/dependent_launch.cuh"

namespace djl_attn::cuda {
namespace {

constexpr int kWarps = 4;    // output columns per block; small blocks spread a 2k-column matrix over every SM
constexpr int kChunk = 8;    // elements per 16-byte load
constexpr int kUnroll = 8;   // loads in flight per lane and weight row

struct SkinnyArgs {
  const void* a;
  const void* w;
  void* d;
  const float* bias;
  int m;
  int64_t n, k, lda, ldd;
};

template <typename T>
struct Pairs;
template <>
struct Pairs<__half> {
  using type = __half2;
  __device__ static float2 to_float2(type v) { return __half22float2(v); }
};
template <>
struct Pairs<__nv_bfloat16> {
  using type = __nv_bfloat162;
  __device__ static float2 to_float2(type v) { return __bfloat1622float2(v); }
};

// acc += w · a over 8 elements, in element order.
template <typename T>
__device__ __forceinline__ float dot8(float acc, const uint4& w, const uint4& a) {
  using P = Pairs<T>;
  const auto* wp = reinterpret_cast<const typename P::type*>(&w);
  const auto* ap = reinterpret_cast<const typename P::type*>(&a);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 wf = P::to_float2(wp[j]), af = P::to_float2(ap[j]);
    acc = fmaf(wf.x, af.x, acc);
    acc = fmaf(wf.y, af.y, acc);
  }
  return acc;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

constexpr bool gated(GemmEpilogue e) {
  return e == GemmEpilogue::kSwiGlu || e == GemmEpilogue::kGeGlu;
}

// The stored value of one output element from its sums (`up` only when gated): what the
// decoder's unfused kernels compute from the product rounded to T (gemm_cuda.h).
template <typename T, GemmEpilogue kEpilogue>
__device__ __forceinline__ void store(const SkinnyArgs& p, int row, int64_t col, float sum,
                                      float up) {
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

// Grid: ceil(n / kWarps) blocks of kWarps warps; warp w of block b computes column b * kWarps +
// w for every row. kRows >= m: rows past m are skipped (a uniform branch).
template <typename T, int kRows, GemmEpilogue kEpilogue>
__global__ void __launch_bounds__(kWarps * 32) skinny_gemm_kernel(SkinnyArgs p) {
  constexpr int kWeightRows = gated(kEpilogue) ? 2 : 1;
  const int lane = threadIdx.x % 32;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const bool active = col < p.n;
  const int64_t chunks = p.k / kChunk;
  const uint4* w[kWeightRows];
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) {
    w[r] = static_cast<const uint4*>(p.w) + ((active ? col : 0) + r * p.n) * chunks;
  }
  uint4 wv[kWeightRows][kUnroll];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + u * 32 + lane;
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        wv[r][u] = active && c < chunks ? __ldcs(w[r] + c) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  // The weights are no kernel's output: their first loads go out before the wait, while the
  // previous kernel (which writes A, and D for the residual) finishes.
  load(0);
  wait_for_prerequisite_grid();

  float acc[kWeightRows][kRows] = {};
  const uint4* a = static_cast<const uint4*>(p.a);
  const int64_t a_stride = p.lda / kChunk;
  for (int64_t base = 0; base < chunks; base += 32 * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + u * 32 + lane;
      if (c >= chunks) break;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i >= p.m) break;
        const uint4 av = __ldg(a + i * a_stride + c);
#pragma unroll
        for (int r = 0; r < kWeightRows; ++r) acc[r][i] = dot8<T>(acc[r][i], wv[r][u], av);
      }
    }
    if (base + 32 * kUnroll < chunks) load(base + 32 * kUnroll);
  }
  allow_dependent_launch();
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    if (i >= p.m) break;
    const float sum = warp_sum(acc[0][i]);
    const float up = kWeightRows == 2 ? warp_sum(acc[kWeightRows - 1][i]) : 0.f;
    if (lane == i) store<T, kEpilogue>(p, i, col, sum, up);
  }
}

template <typename T, GemmEpilogue kEpilogue>
void launch_rows(const SkinnyArgs& args, cudaStream_t stream, int device) {
  const dim3 grid(static_cast<unsigned>((args.n + kWarps - 1) / kWarps)), block(kWarps * 32);
  const char* name = "skinny_gemm_kernel";
  if (args.m == 1) {
    return launch_after_prerequisite<skinny_gemm_kernel<T, 1, kEpilogue>>(name, grid, block, 0,
                                                                          stream, device, args);
  }
  if (args.m == 2) {
    return launch_after_prerequisite<skinny_gemm_kernel<T, 2, kEpilogue>>(name, grid, block, 0,
                                                                          stream, device, args);
  }
  if (args.m <= 4) {
    return launch_after_prerequisite<skinny_gemm_kernel<T, 4, kEpilogue>>(name, grid, block, 0,
                                                                          stream, device, args);
  }
  launch_after_prerequisite<skinny_gemm_kernel<T, 8, kEpilogue>>(name, grid, block, 0, stream,
                                                                 device, args);
}

template <typename T>
void launch_typed(const GemmCall& call, const SkinnyArgs& args, cudaStream_t stream, int device) {
  switch (call.epilogue) {
    case GemmEpilogue::kStore: return launch_rows<T, GemmEpilogue::kStore>(args, stream, device);
    case GemmEpilogue::kResidual:
      return launch_rows<T, GemmEpilogue::kResidual>(args, stream, device);
    case GemmEpilogue::kSwiGlu: return launch_rows<T, GemmEpilogue::kSwiGlu>(args, stream, device);
    case GemmEpilogue::kGeGlu: return launch_rows<T, GemmEpilogue::kGeGlu>(args, stream, device);
    case GemmEpilogue::kGelu: return launch_rows<T, GemmEpilogue::kGelu>(args, stream, device);
  }
  fail_native("gemm: unknown epilogue ", static_cast<int>(call.epilogue));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool skinny_gemm_fits(const GemmCall& call) {
  return (call.dtype == ElementType::kFloat16 || call.dtype == ElementType::kBFloat16) &&
         call.m >= 1 && call.m <= kSkinnyMaxRows && call.k >= kChunk && call.k % kChunk == 0 &&
         call.lda % kChunk == 0 && aligned16(call.a) && aligned16(call.w);
}

void launch_skinny_gemm(const GemmCall& call, cudaStream_t stream, int device) {
  const SkinnyArgs args{call.a, call.w,   call.d,   call.bias, static_cast<int>(call.m),
                        call.n, call.k,   call.lda, call.ldd};
  if (call.dtype == ElementType::kFloat16) return launch_typed<__half>(call, args, stream, device);
  launch_typed<__nv_bfloat16>(call, args, stream, device);
}

}  // namespace djl_attn::cuda
