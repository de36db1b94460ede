// The switches of libdjl_attn_cuda.so's launchers as one typed config: every DJL_ATTN_* switch a
// shipped CUDA launcher reads, with its type, in one struct that the launchers read through
// cuda_switches() and nothing else. Documented for users in docs/operators.md ("Switches"):
// each forces a kernel or a tuning choice for tests, benchmarks and comparisons, and its default
// is the plan's own choice. They are declared, with their lists of values, in switches.cpp;
// the environment sets them once at load (common/options.h), djl_attn_set_option in-process.
// The tuning variants some of them name exist only in DJL_ATTN_TUNING builds, where their values
// are accepted (build_flags.h). The CPU library's two switches (DJL_ATTN_CPU_ISA,
// DJL_ATTN_CPU_GEMM) live with its kernels in libdjl_attn.so.
#pragma once

#include "cuda/flash/flash_plan.h"
#include "cuda/gemm/gemm_cuda.h"
#include "cuda/linear/causal_dot_product_plan.h"
#include "cuda/paged/paged_plan.h"

namespace djl_attn::cuda {

struct CudaSwitches {
  // DJL_ATTN_FLASH_DECODE, _HOPPER, _CONFIG, _FP32, _HOPPER_SCHED, and what this build compiled.
  flash::FlashSwitches flash;
  // DJL_ATTN_PAGED_KERNEL, _CONFIG, _PARTITION.
  paged::DecodeOptions paged;
  // DJL_ATTN_LINEAR_KERNEL.
  linear::LinearVariant linear;
  // DJL_ATTN_GEMM_KERNEL.
  GemmRequest gemm;
};

// The switches' current values: cheap (an atomic read each), thread-safe.
CudaSwitches cuda_switches();

}  // namespace djl_attn::cuda
