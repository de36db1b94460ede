// Shared by the C entry points of libdjl_attn_plans.so (tests/native/*_plan_exports.cpp): the
// plan functions of the CUDA launchers, reachable through ctypes from tests/test_plans_*.py.
#pragma once

#include <string>

namespace djl_attn::plan_exports {

// Keeps a result alive for the caller (one per thread) and returns its C string.
inline const char* keep(std::string value) {
  static thread_local std::string result;
  result = std::move(value);
  return result.c_str();
}

}  // namespace djl_attn::plan_exports
