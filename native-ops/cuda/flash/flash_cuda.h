// The CUDA flash attention forward entry point (plain C++: included by register_cuda.cpp).
#pragma once

#include "flash/flash_params.h"

namespace djl_attn::flash {

// Runs flash_attention or flash_attention_varlen on `stream` of `device`, which the caller has
// made current. float16/bfloat16 on sm_80+ take the tensor-core kernel (split over the keys
// when the grid would not fill the GPU); float32 and older GPUs take the simple kernel.
void run_flash_attention_cuda(const FlashParams& params, void* stream, int device);

}  // namespace djl_attn::flash
