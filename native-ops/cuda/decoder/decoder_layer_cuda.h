// decoder_layer's CUDA backend (docs/design/fused-decoder-layer.md, section 7).
#pragma once

#include "decoder/decoder_layer_params.h"

namespace djl_attn::cuda {

// One decoder layer over the tensors' device and its current stream: launches only, no host
// synchronisation. The temporaries come from PyTorch's caching allocator.
void run_decoder_layer_cuda(const decoder::DecoderLayerParams& params);

}  // namespace djl_attn::cuda
