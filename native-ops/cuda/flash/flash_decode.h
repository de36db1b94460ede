// The split-KV tensor-core decode kernel (flash_decode_kernel.cuh): few query rows (at most 16,
// typically the g = Hq / Hkv query heads of one key/value head folded into rows) against a long
// key/value sequence, read either from dense [B, Sk, Hkv, D] tensors or through a paged cache's
// block table. Run by flash_attention (flash_launch.cu) and paged_attention
// (cuda/paged/paged_attention.cu) as their plans say (flash_plan.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/flash/flash_plan.h"
#include "cuda/flash/flash_shapes.h"
#include "flash/flash_params.h"
#include "paged/paged_params.h"

namespace djl_attn::flash::decode {

// Whether the kernel for `head_dim` can run on `device` (decode_runs_on with the device's facts).
bool runs_on(int64_t head_dim, int device);

// Opts `kernel` into its shared memory on `device` (once) and returns its resident blocks per
// SM there: the plan's Residency.
int blocks_per_sm(const DecodeKernel& kernel, int device);

// Runs `kernel` for `p` split as `split` says (plan_decode_split), as a plan decided it
// (flash_attention's plan_flash, paged_attention's plan_paged_attention), which guarantees what
// the kernel needs: p.seqlen_q <= kMaxRows rows per (batch row, head), batched (not varlen), no
// q/k/v bias, float16/bfloat16, 16-byte aligned rows and strides; a sliding window or soft-cap
// in the features instantiation and ALiBi in the ALiBi one (kernel.features, kernel.alibi,
// decode_kernel). Row i of (b, h) is query p.q + b*q_batch_stride + i*q_seq_stride +
// h*q_head_stride (the same for the output); head h reads key/value head h / (heads_q /
// heads_kv). `folded`: p is fold_query_groups of a one-row call, whose rows share that row's
// position (the window and ALiBi read positions) and are query heads h * Sq + i (ALiBi reads
// their slopes). Writes p.lse (lse_offset(p, b, h) + i) unless it is null.
//
// `paged` null: dense keys/values (kernel.paged is false). Otherwise the paged cache as
// paged_attention carries it: key row r of batch row (sequence) b lives in physical block
// block_tables[b * table_stride + r / block_size] at offset r % block_size (a power of two >= 8:
// a warp's 16 rows span at most two blocks), and the k/v seq_stride of p is the stride between
// the tokens of one block (Hkv * D).
void run(const FlashParams& p, bool folded, const paged::PagedKv* paged,
         const DecodeKernel& kernel, const KeySplit& split, cudaStream_t stream, int device);

}  // namespace djl_attn::flash::decode
