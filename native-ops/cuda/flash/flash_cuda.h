// The CUDA flash attention forward entry point (plain C++: included by register_cuda.cpp).
#pragma once

#include "flash/flash_params.h"

namespace djl_attn::flash {

// The CUDA backend's launch (FlashBackend::launch) of flash_attention, flash_attention_varlen
// and bert_attention: runs the kernel the plan (flash_plan.h) chooses on PyTorch's current
// stream of the tensors' device, with that device current. The binding has checked every
// argument.
void launch_flash_attention_cuda(const FlashParams& params);

}  // namespace djl_attn::flash
