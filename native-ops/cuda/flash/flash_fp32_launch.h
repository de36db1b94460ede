// The launcher of the float32 tensor-core flash attention forward (flash_fp32_kernel.cuh). The
// tile comes from the plan (flash_fp32.h describes it); this file is for the CUDA side only.
#pragma once

#include <cuda_runtime.h>

#include "cuda/flash/flash_fp32.h"
#include "flash/flash_params.h"

namespace djl_attn::flash::fp32 {

// Runs flash_attention or flash_attention_varlen in float32 with `tile` on `stream`; the caller
// has made the tensors' device current and checked that the device takes the tile (sm_80+,
// fp32_smem_bytes of opt-in shared memory) and that the problem fits it (padded head dim,
// 16-byte alignment when vectorized).
void launch_flash_fp32(const FlashParams& params, const Fp32Tile& tile, cudaStream_t stream);

// One compiled tile (an Fp32Kernel), instantiated with the other tiles of its head dim in
// flash_fp32_hdim<D>.cu.
template <int kHeadDim, int kWarps, bool kSplit, bool kBias, bool kFeatures>
void launch_flash_fp32_tile(const FlashParams& params, bool vectorized, cudaStream_t stream);

}  // namespace djl_attn::flash::fp32
