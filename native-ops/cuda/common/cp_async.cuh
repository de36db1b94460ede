// cp.async (sm_80+): 16-byte copies from global to shared memory that do not pass through
// registers, grouped and waited for per thread. One definition for every kernel family (the
// paged decode ring, the chunked causal_dot_product, the flash tile, decode and Hopper kernels).
//
// Every wrapper clobbers "memory", so that the compiler neither moves plain C++ reads of the
// shared destination above the wait nor caches them across it: a kernel that reads the copied
// bytes back with ordinary loads (not only through asm such as ldmatrix) relies on that. The
// `unordered` namespace below holds the same instructions without the clobber, for a kernel whose
// every read of copied data follows a wait and a __syncthreads (which orders memory for the
// compiler too) and whose measured schedule the clobber would change.
#pragma once

#include <cstdint>

namespace djl_attn::cuda::ptx {

// Copies 16 bytes from `src` (16-byte aligned global memory) to the shared-memory address `dst`
// (smem_addr in mma.cuh), bypassing L1.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// The same, reading only `src_bytes` (0 or 16) from `src` and zero-filling the rest: rows past
// the end of a tensor become zeros without a branch around the copy.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `kPending` of this thread's committed groups are still in flight (0: all
// done). Other threads' copies need a barrier after this before they are read.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Waits for every copy this thread issued, committed or not (the Hopper producer's zero-filled
// value tile, which it hands over through an mbarrier rather than a commit group).
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

namespace unordered {

// cp_async_16 with zero-fill, without the "memory" clobber (see the top of this file).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}

// 4 bytes (through L1: cp.async.cg takes only 16), or zeros where `src_bytes` is 0.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace unordered

}  // namespace djl_attn::cuda::ptx
