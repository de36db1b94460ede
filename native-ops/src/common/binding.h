// Helpers shared by the operator bindings (the code between PyTorch tensors and kernel
// parameter structs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/element_type.h"
#include "common/tensor.h"

namespace djl_attn {

// The kernel element type of a floating dtype; the binding has checked that it is one.
ElementType element_type(DType dtype);

// Copies device memory to the host; null when the tensors already live in host memory.
using CopyToHost = void (*)(void* dst, const void* src, size_t bytes);

// The first `count` int32 values of `t` (contiguous), read on the host: directly on the CPU,
// through `copy_to_host` for device memory. Used to range-check lengths and offsets.
std::vector<int32_t> read_int32(const Tensor& t, int64_t count, CopyToHost copy_to_host);

}  // namespace djl_attn
