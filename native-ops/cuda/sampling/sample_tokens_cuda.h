// sample_tokens' CUDA backend (docs/operators.md, "sample_tokens").
#pragma once

#include "sampling/sampling_params.h"

namespace djl_attn::cuda {

// Every row's id on the tensors' device and its current stream: two launches (pass 1 by
// segments, then a block per row), no host synchronisation, the segments' results in a Scratch
// (capture-safe: a captured step's arena).
void run_sample_tokens_cuda(const sampling::SampleTokensParams& params);

// True when the current stream of the device holding `ptr` is being captured into a CUDA graph.
bool stream_is_capturing(const void* ptr);

}  // namespace djl_attn::cuda
