// A per-thread scratch buffer for the fused layers: grown to the largest call seen, then reused,
// so that a steady stream of calls allocates nothing.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>

namespace djl_attn {

class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() { std::free(data_); }

  // At least `bytes` bytes, 64-byte aligned; the contents are undefined.
  char* reserve(int64_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      data_ = nullptr;
      capacity_ = 0;
      const size_t size = static_cast<size_t>((bytes + 63) / 64 * 64);
      data_ = static_cast<char*>(std::aligned_alloc(64, size));
      if (data_ == nullptr) throw std::bad_alloc();
      capacity_ = static_cast<int64_t>(size);
    }
    return data_;
  }

  int64_t capacity() const { return capacity_; }

 private:
  char* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace djl_attn
