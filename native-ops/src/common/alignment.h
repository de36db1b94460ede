// Pointer alignment, as the plans test it before they pick a kernel that loads 16 bytes at a time
// (cp.async, vector loads and stores).
#pragma once

#include <cstdint>

namespace djl_attn {

inline bool aligned(const void* ptr, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(bytes) == 0;
}

inline bool aligned16(const void* ptr) { return aligned(ptr, 16); }

}  // namespace djl_attn
