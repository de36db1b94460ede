#pragma once

#include "flash/flash_fp8_params.h"

namespace djl_attn::flash {

// flash_attention_fp8 on the CPU: q, k and v dequantized (each e4m3fn byte times the descale of
// its batch row and key/value head) into float32 scratch, the float32 flash kernel
// (run_flash_attention_cpu) over them, its output rounded once to out's dtype. P is not
// quantized: the result is the attention of the dequantized inputs, exact to float32
// accumulation, where the CUDA kernel rounds P to e4m3 as FlashAttention-3 does.
void run_flash_attention_fp8_cpu(const FlashFp8Params& params);

}  // namespace djl_attn::flash
