// The combine pass of split-KV attention (flash_combine.cu), shared by the tile kernel's split
// mode (flash_launch.cu) and the decode kernel (flash_decode.cu).
#pragma once

#include <cuda_runtime.h>

#include "cuda/flash/flash_fwd.cuh"

namespace djl_attn::flash {

// The most key ranges the combine kernel merges (their logsumexps in registers, kMaxKeySplits /
// 32 per lane): the plan's limit (flash_shapes.h).
constexpr int kMaxCombineSplits = kMaxKeySplits;

// Merges args.num_splits partial results per (head, row) from args.o_accum / args.lse_accum
// (rows b * Sq + i, see fwd::FwdArgs) into args.params.out, and writes args.params.lse unless
// it is null. float16/bfloat16 outputs. Launched on `device` as a programmatic dependent of the
// split kernel before it on the stream (dependent_launch.cuh), which may let it start early.
// Preconditions, which the plans keep (plan_flash, plan_decode_split): num_splits <=
// kMaxCombineSplits, heads_q * accum_rows within one grid, head_dim <= kMaxHeadDim.
void launch_flash_combine(const fwd::FwdArgs& args, cudaStream_t stream, int device);

}  // namespace djl_attn::flash
