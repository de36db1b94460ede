// The sm_90a instructions the Hopper kernel is built from (hopper_kernel.cuh): mbarriers, TMA
// loads, shared-memory matrix descriptors, the wgmma chains of S = Q K^T and O += P V, and the
// named barriers of the consumers' ping-pong. Device code only where the arch-specific sm_90a
// features are (DJL_HOPPER_DEVICE_CODE).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/cp_async.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/flash/hopper/flash_hopper_wgmma.cuh"

namespace djl_attn::flash::hopper {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DJL_HOPPER_DEVICE_CODE 1
#endif

#ifdef DJL_HOPPER_DEVICE_CODE

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// One box of a 4-d tensor map into shared memory, completing `bar`'s transaction count.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
      "%4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle. K-major operands: 8-row groups 1024 bytes
// apart (stride offset), the leading offset unused. The MN-major V operand is only ever read one
// 64-column panel at a time, so its leading offset (the panel stride) is unused as well, and
// both offsets hold the 1024-byte stride between groups of 8 keys.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lead, uint32_t stride) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>(lead >> 4) << 16) | (static_cast<uint64_t>(stride >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Ties registers that an in-flight wgmma reads or writes to this point of the program, so that
// the compiler neither reads an accumulator before the wait nor reuses an operand register.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

using cuda::ptx::cp_async_16;
using cuda::ptx::cp_async_wait_all;
using cuda::ptx::fast_exp2;
using cuda::ptx::pack2;

// S (+)= Q K^T for one 32-byte step of the head dim (16 two-byte or 32 e4m3 elements): a
// 64 x kN score tile, kN / 2 floats per thread.
template <typename T, int kN>
__device__ __forceinline__ void mma_qk(float (&s)[kN / 2], uint64_t da, uint64_t db, int scale_d) {
  static_assert(kN == 64 || kN == 128, "the score tile widths of block_n");
  if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) {
    static_assert(kN == 128, "the e4m3 kernel's block_n");
    wgmma_ss_m64n128k32_e4m3(s, da, db, scale_d);
  } else if constexpr (kN == 128) {
    if constexpr (std::is_same_v<T, __half>) {
      wgmma_ss_m64n128k16_f16(s, da, db, scale_d);
    } else {
      wgmma_ss_m64n128k16_bf16(s, da, db, scale_d);
    }
  } else {
    if constexpr (std::is_same_v<T, __half>) {
      wgmma_ss_m64n64k16_f16(s, da, db, scale_d);
    } else {
      wgmma_ss_m64n64k16_bf16(s, da, db, scale_d);
    }
  }
}
// Four probabilities as one register of the e4m3 A fragment, `a` in the lowest byte, each rounded
// to nearest and saturated at 448.
__device__ __forceinline__ uint32_t pack4_e4m3(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

template <typename T>
__device__ __forceinline__ void mma_pv(float (&o)[32], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (std::is_same_v<T, __half>) {
    wgmma_rs_m64n64k16_f16(o, a, db, 1);
  } else {
    wgmma_rs_m64n64k16_bf16(o, a, db, 1);
  }
}

// Named barriers 1.. (0 is __syncthreads), one per consumer, order the consumers' GEMM issue:
// consumer c waits on barrier 1 + c, which the consumer before it arrives at, so each barrier
// counts two warpgroups.
__device__ __forceinline__ void named_bar_sync(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

#endif  // DJL_HOPPER_DEVICE_CODE

}  // namespace djl_attn::flash::hopper
