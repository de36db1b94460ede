// The binding of `djl_attn::bert_attention`: attention straight out of a fused QKV projection.
// It builds a FlashParams whose q, k and v are strided views into qkv and whose output is the
// merged-heads [B, S, H * D] tensor, and runs the flash backend: no head split or merge copies.
#pragma once

#include "flash/flash_op.h"
#include "shim/torch_shim.h"

namespace djl_attn::bert {

// bert_attention(Tensor qkv, Tensor? qkv_bias, Tensor? kv_lens, int num_heads, float scale)
//     -> Tensor
void bert_attention_boxed(shim::StableIValue* stack, const flash::FlashBackend& flash);

}  // namespace djl_attn::bert
