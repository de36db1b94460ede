// What a plan needs to know of a GPU. Plain C++ (no CUDA headers): the plan functions that take
// it compile into libdjl_attn_plans.so without nvcc, so tests describe GPUs they do not have.
#pragma once

#include <cstdint>

namespace djl_attn::cuda {

struct DeviceFacts {
  int sm_count;        // streaming multiprocessors
  int64_t smem_optin;  // opt-in shared memory per block, bytes
  int cc_major;        // compute capability, e.g. 9 for sm_90
  int cc_minor;
};

}  // namespace djl_attn::cuda
