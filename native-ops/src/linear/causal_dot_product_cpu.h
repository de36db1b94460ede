#pragma once

#include "linear/linear_params.h"

namespace djl_attn::linear {

// Causal linear attention on the CPU in chunked form: per chunk of kChunk steps, the masked
// intra-chunk product plus q times the state carried from earlier chunks. Parallel over (B*H);
// when B*H leaves threads idle, also over segments of L whose starting states come from a
// prefix pass.
void run_causal_dot_product_cpu(const CausalDotProductParams& params);

}  // namespace djl_attn::linear
