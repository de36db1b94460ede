// The CUDA flash attention forward entry point (plain C++: included by register_cuda.cpp).
#pragma once

#include "flash/flash_fp8_params.h"
#include "flash/flash_params.h"

namespace djl_attn::flash {

// The CUDA backend's launch (FlashBackend::launch) of flash_attention, flash_attention_varlen
// and bert_attention: runs the kernel the plan (flash_plan.h) chooses on PyTorch's current
// stream of the tensors' device, with that device current. The binding has checked every
// argument.
void launch_flash_attention_cuda(const FlashParams& params);

// The CUDA backend's launch (FlashBackend::launch_fp8) of flash_attention_fp8: the Hopper FP8
// kernel (sm_90, head dim 128) on PyTorch's current stream of q's device. The binding has
// checked every argument; a call this kernel cannot run (another GPU, another head dim) is
// refused with an InvalidArgument naming q.
void launch_flash_attention_fp8_cuda(const FlashFp8Params& params);

}  // namespace djl_attn::flash
