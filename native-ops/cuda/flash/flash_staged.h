// Staging for float16/bfloat16 inputs the tensor-core kernels cannot read in place: head dims
// that are not a multiple of 8 (a row is not a whole number of 16-byte chunks) and views whose
// rows are not 16-byte aligned. q, k and v are copied into contiguous buffers whose rows are
// padded with zeros to a multiple of 8 elements, the tensor-core path runs on those, and the
// output is copied back into the caller's view. Zero columns add nothing to q·k and produce zero
// output columns, which are dropped; the scale is the caller's, so padding does not change it.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "flash/flash_params.h"

namespace djl_attn::flash {

// Whether staging applies: float16/bfloat16, no q/k/v bias (the bias vectors would need the same
// padding), and a head dim that padded to a multiple of 8 is still one the kernels take.
bool staging_applies(const FlashParams& p);

// Runs `run_vectorized` on staged copies of p's q, k and v (head dim rounded up to a multiple of
// 8, contiguous rows) and copies the output back into p.out; the logsumexp is written in place.
void run_staged(const FlashParams& p, cudaStream_t stream, int device,
                const std::function<void(const FlashParams&)>& run_vectorized);

}  // namespace djl_attn::flash
