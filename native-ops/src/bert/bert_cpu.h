// The fused BERT operators on the CPU: parallel over rows on the library's thread pool, float32
// arithmetic whatever the storage dtype.
#pragma once

#include "bert/bert_params.h"

namespace djl_attn::bert {

void run_layernorm_cpu(const LayerNormParams& params);
void run_elementwise_cpu(const ElementwiseParams& params);
void run_remove_padding_cpu(const PaddingParams& params);
void run_restore_padding_cpu(const PaddingParams& params);

}  // namespace djl_attn::bert
