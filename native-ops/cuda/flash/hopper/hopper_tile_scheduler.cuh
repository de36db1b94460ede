// The Hopper kernel's work (hopper_kernel.cuh): which query tile of which (batch, head) an item
// index is, and the key tiles it needs. The persistent grid hands the indices out (the producer
// claims the next one from args.item_counter and passes it to the consumers through the block's
// two item slots, hopper_mainloop.cuh).
#pragma once

#include "cuda/flash/hopper/hopper_layout.cuh"
#include "flash/flash_params.h"

namespace djl_attn::flash::hopper {

// One unit of work: a block_m-row query tile of one (batch, head) and the key tiles it needs.
struct Work {
  int m0, b, h, h_kv, kv_len, diagonal, n_tiles;
};

template <int kBlockM, int kBlockN>
__device__ __forceinline__ Work work_item(const HopperArgs& args, int idx) {
  const FlashParams& p = args.params;
  Work w;
  // m tiles vary fastest (consecutive items read the same keys and values from L2), last tile
  // first: under a causal mask the last query tiles see the most keys, and handing out the
  // longest work first keeps the final round short.
  const int m_block = args.m_blocks - 1 - idx % args.m_blocks;
  const int bh = idx / args.m_blocks;
  w.b = bh / static_cast<int>(p.heads_q);
  w.h = bh % static_cast<int>(p.heads_q);
  w.h_kv = w.h / static_cast<int>(p.heads_q / p.heads_kv);
  w.m0 = m_block * kBlockM;
  // Batched calls only (the plan gives this kernel no varlen call): the extent without its
  // varlen branches (flash_params.h).
  const SeqExtent<int, /*kVarlen=*/false> seq(p, w.b);
  const int seqlen_q = seq.seqlen_q;
  w.kv_len = seq.kv_len(p, w.b);
  w.diagonal = w.kv_len - seqlen_q;  // row i sees key j iff j <= i + diagonal
  int key_end = w.kv_len;
  if (p.causal) key_end = min(max(min(w.m0 + kBlockM, seqlen_q) + w.diagonal, 0), w.kv_len);
  w.n_tiles = (key_end + kBlockN - 1) / kBlockN;
  return w;
}

}  // namespace djl_attn::flash::hopper
