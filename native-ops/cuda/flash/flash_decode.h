// The split-KV tensor-core decode kernel (flash_decode_kernel.cuh): few query rows (at most 16,
// typically the g = Hq / Hkv query heads of one key/value head folded into rows) against a long
// key/value sequence, read either from dense [B, Sk, Hkv, D] tensors or through a paged cache's
// block table. Used by flash_attention (flash_fwd.cu) and paged_attention
// (cuda/paged/paged_attention.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flash/flash_params.h"

namespace djl_attn::flash::decode {

// Query rows of one thread block: one m16 mma tile.
constexpr int64_t kMaxRows = 16;

// Paged rows: row r of batch row (sequence) b lives in physical block
// block_tables[b * table_stride + r / block_size] at offset r % block_size, and the k/v
// seq_stride of FlashParams is the stride between the tokens of one block (Hkv * D).
struct PagedRows {
  const int32_t* block_tables;
  int64_t table_stride;
  int block_size;  // a power of two >= 8: a warp's 16 rows span at most two blocks
};

// Whether the kernel is compiled for this exact head dim (64, 128, 256).
bool head_dim_compiled(int64_t head_dim);

// Whether the kernel for `head_dim` can run on `device` (sm_80+, enough shared memory).
bool runs_on(int64_t head_dim, int device);

// Runs attention for `p` with p.seqlen_q <= kMaxRows rows per (batch row, head), batched (not
// varlen), no q/k/v bias, float16/bfloat16, p.head_dim compiled, 16-byte aligned rows and
// strides. Row i of (b, h) is query p.q + b*q_batch_stride + i*q_seq_stride + h*q_head_stride
// (the same for the output); head h reads key/value head h / (heads_q / heads_kv). Writes
// p.lse (lse_offset(p, b, h) + i) unless it is null. `paged` null: dense keys/values.
void run(const FlashParams& p, const PagedRows* paged, cudaStream_t stream, int device);

}  // namespace djl_attn::flash::decode
