// Runs flash_attention_fp8 on CUDA as its plan (flash_fp8_plan.h) says: the Hopper e4m3 kernel
// (hopper/flash_hopper_fp8.cu), or the plan's refusal for a call it cannot run.

#include "common/error.h"
#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_cuda.h"
#include "cuda/flash/flash_fp8_plan.h"
#if defined(DJL_ATTN_HOPPER)
#include "cuda/flash/hopper/flash_hopper.h"
#endif

namespace djl_attn::flash {

void launch_flash_attention_fp8_cuda(const FlashFp8Params& params) {
#if defined(DJL_ATTN_HOPPER)
  constexpr bool kHopperBuilt = true;
#else
  constexpr bool kHopperBuilt = false;
#endif
  const int device = cuda::device_of(params.attn.q);
  cuda::DeviceGuard guard(device);
  const FlashFp8Plan plan = plan_flash_fp8(params, cuda::device_facts(device), kHopperBuilt);
  // A call the binding accepts that this GPU or build cannot run: the user's to change
  // (another device, the CPU backend), so an invalid argument naming q, not a native failure.
  if (!plan.refusal.empty()) fail_invalid("flash_attention_fp8: ", plan.refusal);
#if defined(DJL_ATTN_HOPPER)
  // Scratch from PyTorch's caching allocator, freed on return: stream order makes that safe (the
  // allocator hands it to later work on this stream only).
  const Device dev{DeviceType::kCuda, device};
  Tensor vt = Tensor::empty({plan.vt_bytes}, DType::kUInt8, dev);
  Tensor item_counter = Tensor::empty({1}, DType::kInt32, dev);
  hopper::run_fp8(params, plan, vt.data_as<uint8_t>(), item_counter.data_as<int>(),
                  cuda::current_stream(device), device);
#endif
}

}  // namespace djl_attn::flash
