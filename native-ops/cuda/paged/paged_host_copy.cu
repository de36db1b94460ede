// Validation copies of the paged operators: every index tensor of a call goes through one
// pinned staging buffer with one stream synchronisation, instead of a pageable copy and a wait
// per tensor (bench_paged.py: the op took 3x the kernel time at batch 1, context 1k).
// (A .cu file: cuda/CMakeLists.txt globs paged/*.cu only.)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_cuda.h"

namespace djl_attn::paged {
namespace {

// Copies start 16-byte aligned in the staging buffer.
constexpr size_t kAlign = 16;

// Page-locked host memory of this thread, grown on demand and kept: the copies of one call
// finish (stream synchronised) before it is reused.
class PinnedStaging {
 public:
  ~PinnedStaging() {
    // At process exit the runtime may be gone already; nothing useful to do about a failure.
    if (data_ != nullptr && cudaFreeHost(data_) != cudaSuccess) cudaGetLastError();
  }

  char* reserve(size_t bytes) {
    if (bytes > capacity_) {
      const size_t grown = bytes > 2 * capacity_ ? bytes : 2 * capacity_;
      if (data_ != nullptr) {
        char* old = data_;
        data_ = nullptr;
        capacity_ = 0;
        DJL_ATTN_CUDA_CHECK(cudaFreeHost(old));
      }
      void* fresh = nullptr;
      // Portable: the same buffer serves copies from every device.
      DJL_ATTN_CUDA_CHECK(cudaHostAlloc(&fresh, grown, cudaHostAllocPortable));
      data_ = static_cast<char*>(fresh);
      capacity_ = grown;
    }
    return data_;
  }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void copy_indices_to_host_cuda(const HostCopy* copies, size_t count) {
  size_t total = 0;
  const void* first = nullptr;
  for (size_t i = 0; i < count; ++i) {
    if (copies[i].bytes == 0) continue;
    if (first == nullptr) first = copies[i].src;
    total += aligned(copies[i].bytes);
  }
  if (total == 0) return;
  // The binding checked that every tensor is on the device of the first.
  const int device = cuda::device_of(first);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  thread_local PinnedStaging staging;
  char* host = staging.reserve(total);
  size_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    if (copies[i].bytes == 0) continue;
    DJL_ATTN_CUDA_CHECK(cudaMemcpyAsync(host + offset, copies[i].src, copies[i].bytes,
                                        cudaMemcpyDeviceToHost, stream));
    offset += aligned(copies[i].bytes);
  }
  DJL_ATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
  offset = 0;
  for (size_t i = 0; i < count; ++i) {
    if (copies[i].bytes == 0) continue;
    std::memcpy(copies[i].dst, host + offset, copies[i].bytes);
    offset += aligned(copies[i].bytes);
  }
}

}  // namespace djl_attn::paged
