#pragma once

#include <cstdint>

#include "encoder/encoder_layer_params.h"

namespace djl_attn::encoder {

// One encoder layer on the CPU: the GEMMs on the GEMM layer (libtorch's intra-op threads), the
// attention and the epilogues on the library's pool; temporaries in a per-thread workspace.
void run_encoder_layer_cpu(const EncoderLayerParams& params);

// Bytes of the calling thread's workspace (0 before its first call): tests check that it stops
// growing.
int64_t encoder_workspace_bytes();

}  // namespace djl_attn::encoder
