// Shared by the C entry points of libdjl_attn_plans.so (tests/native/*_plan_exports.cpp): the
// plan functions of the CUDA launchers, reachable through ctypes from tests/test_plans_*.py.
#pragma once

#include <cstdint>
#include <string>

#include "common/element_type.h"

namespace djl_attn::plan_exports {

// The element type of `element_size` bytes: 4 float32, 2 float16 (bfloat16 plans the same).
inline ElementType element_type_of(int32_t element_size) {
  return element_size == 4 ? ElementType::kFloat32 : ElementType::kFloat16;
}

// A pointer at `value`: plans look at the alignment of the pointers they get, never through them.
inline void* address(uint64_t value) { return reinterpret_cast<void*>(value); }

// Keeps a result alive for the caller (one per thread) and returns its C string.
inline const char* keep(std::string value) {
  static thread_local std::string result;
  result = std::move(value);
  return result.c_str();
}

}  // namespace djl_attn::plan_exports
