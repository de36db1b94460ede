// Reading a boxed kernel's arguments from the dispatcher stack and writing its outputs.
//
// Conventions of PyTorch's stable ABI boxed kernels (verified on 2.7.1 and 2.13): each Tensor
// argument arrives as a new handle the kernel owns; `Tensor?` arrives as 0 for None, otherwise
// as a pointer to a heap StableIValue holding a new handle (the receiver frees both); `float`
// arrives as the bits of a double, `int` as int64, `bool` in the low byte (the
// other bytes are undefined). Outputs are new handles
// written to stack[0..num_outputs).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>

#include "common/tensor.h"

namespace djl_attn {

inline Tensor take_tensor(const shim::StableIValue* stack, int index) {
  return Tensor(reinterpret_cast<shim::AtenTensorHandle>(stack[index]));
}

inline std::optional<Tensor> take_optional_tensor(const shim::StableIValue* stack, int index) {
  if (stack[index] == 0) return std::nullopt;
  auto* boxed = reinterpret_cast<shim::StableIValue*>(stack[index]);
  Tensor tensor(reinterpret_cast<shim::AtenTensorHandle>(*boxed));
  delete boxed;
  return tensor;
}

inline double read_float(const shim::StableIValue* stack, int index) {
  double value;
  std::memcpy(&value, &stack[index], sizeof(value));
  return value;
}

inline int64_t read_int(const shim::StableIValue* stack, int index) {
  return static_cast<int64_t>(stack[index]);
}

// A bool occupies only the low byte of its slot: libtorch 2.7.1 leaves the other bytes
// uninitialised (seen: 0x08c4834816d5ad00 for false), so reading the whole word is wrong.
inline bool read_bool(const shim::StableIValue* stack, int index) {
  return (stack[index] & 0xffu) != 0;
}

inline void put_tensor(shim::StableIValue* stack, int index, Tensor tensor) {
  stack[index] = reinterpret_cast<shim::StableIValue>(tensor.release());
}

}  // namespace djl_attn
