// Registration of the djl_attn operator namespace in PyTorch's dispatcher.
#pragma once

#include <string>

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

}  // namespace djl_attn
