// Staging for float16/bfloat16 inputs the tensor-core kernels cannot read in place: head dims
// that are not a multiple of 8 (a row is not a whole number of 16-byte chunks) and views whose
// rows are not 16-byte aligned. q, k and v are copied into contiguous buffers whose rows are
// padded with zeros to a multiple of 8 elements (staged_layout in flash_plan.h), the planned
// kernel runs on those, and the output is copied back into the caller's view. Zero columns add
// nothing to q·k and produce zero output columns, which are dropped; the scale is the caller's,
// so padding does not change it. The plan decides when (FlashPlan::staged).
#pragma once

#include <cuda_runtime.h>

#include "common/tensor.h"
#include "flash/flash_params.h"

namespace djl_attn::flash {

// The padded copies of one call and the parameters that describe them.
struct StagedCopies {
  Tensor q, k, v, out;
  FlashParams params;  // staged_layout(p) with the copies' pointers; p's logsumexp
};

// Allocates the copies of p's q, k, v and output (freed with the result; stream order keeps them
// alive for the kernels queued on `stream`) and queues the padding copies of q, k and v.
StagedCopies stage_inputs(const FlashParams& p, cudaStream_t stream, int device);

// Queues the copy of the staged output back into p.out (the logsumexp was written in place).
void unstage_output(const StagedCopies& copies, const FlashParams& p, cudaStream_t stream);

}  // namespace djl_attn::flash
