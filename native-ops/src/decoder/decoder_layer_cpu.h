// The CPU kernel of decoder_layer.
#pragma once

#include "decoder/decoder_layer_params.h"

namespace djl_attn::decoder {

// Runs one layer on a validated, non-empty problem (T >= 1). The GEMMs go through the GEMM
// layer (gemm/gemm.h), the cache write and the attention through the CPU paged kernels; the
// temporaries live in a per-thread workspace that grows to the largest call and is reused.
void run_decoder_layer_cpu(const DecoderLayerParams& params);

}  // namespace djl_attn::decoder
