// The CPU kernel of sample_tokens.
#pragma once

#include "sampling/sampling_params.h"

namespace djl_attn::sampling {

// Chooses every row's id (B >= 1), rows in parallel on the library's pool when the batch is
// large enough to pay for it.
void run_sample_tokens_cpu(const SampleTokensParams& params);

}  // namespace djl_attn::sampling
