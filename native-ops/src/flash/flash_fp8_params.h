// Parameters of flash_attention_fp8: the flash forward over e4m3 q, k and v with dequantization
// factors (FlashAttention-3's FP8 forward), shared by the CPU and CUDA backends. Knows nothing
// of PyTorch: the binding (flash_fp8_op.cpp) fills it from tensors.
#pragma once

#include <cstdint>

#include "flash/flash_params.h"

namespace djl_attn::flash {

// A dequantization factor: element (b, h_kv) at data[b * batch_stride + h_kv * head_stride];
// strides 0 and 0 for a per-tensor factor ([1]), Hkv and 1 for one per batch row and key/value
// head ([B, Hkv], FlashAttention-3's descale shape). Null data: the factor is 1. Query head h
// takes the factor of its key/value head h / (Hq / Hkv).
struct Fp8Descale {
  const float* data = nullptr;  // float32, on q's device
  int64_t batch_stride = 0, head_stride = 0;
};

struct FlashFp8Params {
  // q, k and v point at e4m3fn bytes (torch.float8_e4m3fn, or uint8 holding its bits), strides
  // in elements (= bytes); out is attn.dtype (float16 or bfloat16), lse float32. Batched mode
  // only: no varlen offsets, bias, window, soft-cap or ALiBi (FlashParams' defaults). The value
  // of a q element x is x * q_descale(b, h_kv), likewise k and v; attn.scale multiplies the
  // dequantized q·k.
  FlashParams attn;
  Fp8Descale q_descale, k_descale, v_descale;
};

}  // namespace djl_attn::flash
