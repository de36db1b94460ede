// The binding of `djl_attn::flash_attention_fp8`: the flash forward over e4m3fn q, k and v with
// dequantization factors (FlashAttention-3's FP8 forward). Reads the boxed arguments, validates
// them once for every caller, allocates the outputs and hands a FlashFp8Params to the device
// backend's launch_fp8 (flash_op.h's FlashBackend).
#pragma once

#include "flash/flash_op.h"
#include "shim/torch_shim.h"

namespace djl_attn::flash {

// flash_attention_fp8(Tensor q, Tensor k, Tensor v, Tensor? kv_lens, float scale, bool causal,
//     Tensor? q_descale=None, Tensor? k_descale=None, Tensor? v_descale=None,
//     bool out_float16=False) -> (Tensor out, Tensor lse)
// q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D]: float8_e4m3fn, or uint8 holding e4m3fn bytes (DJL
// has no fp8 dtype); each descale float32 [1] or [B, Hkv] (None: 1); out [B, Sq, Hq, D]
// bfloat16 (float16 with out_float16), lse [B, Hq, Sq] float32.
void flash_attention_fp8_boxed(shim::StableIValue* stack, const FlashBackend& backend);

}  // namespace djl_attn::flash
