// Registration of the djl_attn operator namespace in PyTorch's dispatcher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shim/torch_shim.h"

namespace djl_attn {

// True when the djl_attn schemas are defined in this process. Registration runs when the
// library is loaded; when it could not run (no libtorch loaded), `message` says why.
bool operators_registered(std::string* message);

// Registers `kernels` for one dispatch key ("CPU", "CUDA"), unless another copy of the library
// already defined the namespace (then that copy's kernels serve). Throws NativeError on
// failure. Used by the CPU library and by the CUDA library's load-time registration.
struct KernelEntry {
  const char* name;
  shim::BoxedKernel fn;
};
void register_kernels(const char* dispatch_key, const KernelEntry* kernels, int count);

// The kernel this copy of the library registered for `name` under `dispatch_key`, or null (not
// registered by this copy, or no such kernel). The C interface runs it directly for a call that
// mixes a cpu or cuda tensor with one on a device no kernel serves (meta), which the dispatcher
// would send to that device's missing kernel.
shim::BoxedKernel registered_kernel(const char* dispatch_key, const char* name);

// An operator as its schema defines it: name, the kind of each argument (DJL_ATTN_ARG_* of
// djl_attn/c_api.h) and the number of returned tensors. Parsed once from the schema strings,
// so the C interface and the Java bridge read the schemas rather than restating them.
struct OperatorSignature {
  std::string name;
  std::string qualified_name;  // "djl_attn::<name>", as the dispatcher looks it up
  std::string schema;
  std::vector<int32_t> arg_kinds;
  int32_t num_outputs;
};

// The most arguments a schema may have: the C interface builds each call's dispatcher stack in a
// fixed array of this many slots (decoder_layer, the longest, has 36).
constexpr size_t kMaxStackSlots = 64;

// Every operator this library defines, in registration order.
const std::vector<OperatorSignature>& operator_signatures();

// The signature of `name`, or null when no operator has that name.
const OperatorSignature* find_operator(const char* name);

}  // namespace djl_attn
