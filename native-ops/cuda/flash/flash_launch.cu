// Runs the CUDA flash attention forward as its plan (flash_plan.h) says: reads the
// DJL_ATTN_FLASH_* switches (cuda/common/switches.h), asks the plan, and launches the
// kernel it names: the Hopper kernel (hopper/), the sm_80 tile kernel (flash_fwd_hdim*.cu) with
// its combine pass when split, the split-KV decode kernel (flash_decode.cu), the float32
// tensor-core kernel (flash_fp32.cu) or the simple kernel (flash_simple.cu), on the caller's
// tensors or on staged copies (flash_staged.cu). Calls go one way: from here to those files, none
// back.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/switches.h"
#include "cuda/flash/flash_combine.h"
#include "cuda/flash/flash_cuda.h"
#include "cuda/flash/flash_decode.h"
#include "cuda/flash/flash_dispatch.h"
#include "cuda/flash/flash_fp32_launch.h"
#include "cuda/flash/flash_fwd.cuh"
#include "cuda/flash/flash_plan.h"
#include "cuda/flash/flash_simple.cuh"
#include "cuda/flash/flash_staged.h"
#if defined(DJL_ATTN_HOPPER)
#include "cuda/flash/hopper/flash_hopper.h"
#endif

namespace djl_attn::flash {
namespace {

// ---- run-time values to template instantiations ------------------------------------------------

// One instantiation of the tile kernel, as a type.
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg, bool kFeatures = false>
struct TiledInstance {
  // Opts the kernel into its shared memory on `device` (once) and returns its static facts.
  static fwd::FwdShape prepare(int device) {
    return fwd::fwd_shape<T, kHeadDim, kBias, kSmallM, kCfg, kFeatures>(device);
  }
  static void launch(const fwd::FwdArgs& args, cudaStream_t stream) {
    fwd::launch_fwd<T, kHeadDim, kBias, kSmallM, kCfg, kFeatures>(args, stream);
  }
};

// visit_tiled for element type T.
template <typename T, typename Visit>
int visit_tiled_typed(const TiledKernel& kernel, Visit& visit) {
  switch (kernel.config) {  // every fwd::TiledConfig: the configurations this build compiled
#define DJL_FLASH_CONFIG_CASE_(D, C)   \
  case fwd::TiledConfig::kD##D##Cfg##C: \
    return visit(TiledInstance<T, D, false, false, C>{});
    DJL_FLASH_COMPILED_CONFIGS(DJL_FLASH_CONFIG_CASE_)
#undef DJL_FLASH_CONFIG_CASE_
    case fwd::TiledConfig::kBase:
      break;
  }
  return DJL_FLASH_HEAD_DIM_SWITCH(kernel.head_dim, kHeadDim, [&]() -> int {
    if (kernel.features) {  // base tiles without bias only (the plan's rule)
      return DJL_FLASH_BOOL_SWITCH(kernel.small_m, kSmallM, [&]() -> int {
        return visit(TiledInstance<T, kHeadDim, false, kSmallM, 0, true>{});
      });
    }
    return DJL_FLASH_BOOL_SWITCH(kernel.bias, kBias, [&]() -> int {
      return DJL_FLASH_BOOL_SWITCH(kernel.small_m, kSmallM, [&]() -> int {
        return visit(TiledInstance<T, kHeadDim, kBias, kSmallM, 0>{});
      });
    });
  });
}

// Calls visit(TiledInstance<...>{}) for the instantiation `kernel` names; returns its result.
template <typename Visit>
int visit_tiled(const TiledKernel& kernel, Visit visit) {
  return DJL_FLASH_DTYPE_SWITCH(kernel.dtype, T,
                                [&]() -> int { return visit_tiled_typed<T>(kernel, visit); });
}

// The occupancy API's answers for the plan (cached per device by the kernels' prepare calls).
Residency residency(int device) {
  return Residency{
      [device](const TiledKernel& kernel) {
        return visit_tiled(kernel, [&](auto instance) {
          return decltype(instance)::prepare(device).blocks_per_sm;
        });
      },
      [device](const DecodeKernel& kernel) { return decode::blocks_per_sm(kernel, device); }};
}

// ---- the paths ---------------------------------------------------------------------------------

void run_tiled(const FlashParams& p, const FlashPlan& plan, cudaStream_t stream, int device) {
  fwd::FwdArgs args{};
  args.params = p;
  args.m_blocks = plan.m_blocks;
  args.num_splits = plan.split.num_splits;
  args.n_blocks_per_split = plan.split.n_blocks_per_split;
  Tensor o_accum, lse_accum;  // scratch from PyTorch's caching allocator, freed on return
  if (args.num_splits > 1) {
    // Stream order makes the early free safe: the allocator hands the block to later work on
    // this stream only, which the combine pass (a programmatic dependent that waits for this
    // kernel first thing, dependent_launch.cuh) keeps after both kernels.
    args.accum_rows = plan.split.accum_rows;
    const Device dev{DeviceType::kCuda, device};
    o_accum = Tensor::empty({args.num_splits, p.heads_q, args.accum_rows, p.head_dim},
                            DType::kFloat32, dev);
    lse_accum = Tensor::empty({args.num_splits, p.heads_q, args.accum_rows}, DType::kFloat32, dev);
    args.o_accum = o_accum.data_as<float>();
    args.lse_accum = lse_accum.data_as<float>();
  }
  visit_tiled(plan.tiled, [&](auto instance) {
    using Instance = decltype(instance);
    Instance::prepare(device);  // the shared-memory opt-in, once per device
    Instance::launch(args, stream);
    return 0;
  });
  if (args.num_splits > 1) launch_flash_combine(args, stream, device);
}

// Runs the plan's kernel on `p` (the caller's tensors, or the staged copies).
void run_kernel(const FlashParams& params, const FlashPlan& plan, cudaStream_t stream,
                int device) {
  const FlashParams p = plan.fold ? fold_query_groups(params) : params;
  switch (plan.path) {
    case FlashPath::kSimple:
      return run_flash_attention_simple_cuda(p, plan.simple_row_blocks, stream);
    case FlashPath::kDecode:
      return decode::run(p, plan.fold, nullptr, plan.decode, plan.split, stream, device);
#if defined(DJL_ATTN_HOPPER)  // a build without the kernel has no such path (flash_plan.h)
    case FlashPath::kHopper:
      return hopper::run(p, plan, stream, device);
#endif
    case FlashPath::kTiled:
      return run_tiled(p, plan, stream, device);
    case FlashPath::kFp32:
      return fp32::launch_flash_fp32(p, plan.fp32, stream);
  }
}

}  // namespace

void launch_flash_attention_cuda(const FlashParams& params) {
  const int device = cuda::device_of(params.q);
  cuda::DeviceGuard guard(device);
  const cudaStream_t stream = cuda::current_stream(device);
  const FlashPlan plan =
      plan_flash(params, cuda::cuda_switches().flash, cuda::device_facts(device),
                 residency(device));
  if (!plan.refusal.empty()) {
    // The switch forced a kernel that cannot run valid arguments (the CPU and
    // DJL_ATTN_FLASH_DECODE=auto take them), or the plan met a combination the bindings refuse
    // before any launch.
    fail_native("flash_attention: ", plan.refusal);
  }
  if (!plan.staged) return run_kernel(params, plan, stream, device);
  const StagedCopies copies = stage_inputs(params, stream, device);
  run_kernel(copies.params, plan, stream, device);
  unstage_output(copies, params, stream);
}

}  // namespace djl_attn::flash
