// Registration of the djl_attn operator namespace in PyTorch's dispatcher.
#pragma once

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
// registered by this copy, or no such kernel). The C interface runs it in validation-only mode
// before dispatching (common/call_mode.h).
shim::BoxedKernel registered_kernel(const char* dispatch_key, const char* name);

// An operator as its schema defines it: name, the kind of each argument (DJL_ATTN_ARG_* of
// djl_attn/c_api.h) and the number of returned tensors. Parsed once from the schema strings,
// so the C interface and the Java bridge read the schemas rather than restating them.
struct OperatorSignature {
  std::string name;
  std::string schema;
  std::vector<int32_t> arg_kinds;
  int32_t num_outputs;
};

// Every operator this library defines, in registration order.
const std::vector<OperatorSignature>& operator_signatures();

// The signature of `name`, or null when no operator has that name.
const OperatorSignature* find_operator(const char* name);

}  // namespace djl_attn
