// The plans of the BERT CUDA launchers (bert_layernorm.cu, bert_elementwise.cu, bert_padding.cu):
// vector width, kernel tier, threads, grid and shared memory of a call. Pure functions of the
// parameters the binding filled (src/bert/bert_params.h; only the pointers' alignment is looked
// at) and of the device's facts, so they compile without nvcc into libdjl_attn_plans.so and their
// tests (tests/test_plans_bert.py) run without a GPU. Every grid stays within CUDA's limit: the
// kernels stride over the rows a grid does not cover.
#pragma once

#include <cstdint>
#include <string>

#include "bert/bert_params.h"
#include "cuda/common/device_facts.h"

namespace djl_attn::bert {

// add_bias_residual_layernorm: warps per block of the warp-per-row kernel, and the most threads
// of the block-per-row kernels (each takes every 512th vector of its row).
constexpr int kLayerNormWarps = 4;
constexpr int kLayerNormMaxThreads = 512;
// add_bias_gelu / add_bias_residual_affine: threads per block, one vector per thread and step.
constexpr int kElementwiseThreads = 256;
// remove_padding / restore_padding: warps per block, one warp per row.
constexpr int kPaddingWarps = 8;

// The access widths every kernel is compiled for: 16 bytes' worth of elements (8 float16 or
// bfloat16, 4 float32), or one element (odd C, unaligned views).
enum class VectorWidth { kScalar, k16Bytes };

// The copy units the padding kernels are compiled for; the value is the unit's bytes.
enum class PaddingUnit { k2 = 2, k4 = 4, k8 = 8, k16 = 16 };

// Every compiled layernorm kernel: a tier, at the 16-byte width or (kScalar*) one element per
// access. Scalar rows (odd C, unaligned views) are rare: one warp tier for them keeps the build
// lean, and only they are streamed.
enum class LayerNormKernel {
  kWarp1,  // one warp per row, the row in registers: 1, 4 or 8 vectors per lane
  kWarp4,
  kWarp8,
  kScalarWarp8,
  kBlockStaged,  // one block per row, the row staged in shared memory as float32
  kScalarBlockStaged,
  kScalarBlockStreamed  // one block per row, read from global memory once per pass: rows longer
                        // than the device's shared memory holds
};

// The register array per lane of a warp kernel (1, 4 or 8 vectors), 0 for the block kernels.
int lane_vectors(LayerNormKernel kernel);

struct LayerNormPlan {
  LayerNormKernel kernel;
  int vector;        // elements per access: 16 bytes' worth, or 1 for the kScalar* kernels
  int threads;       // per block
  int64_t blocks;
  int64_t smem_bytes;  // block_staged: dynamic shared memory, C float32 values
  bool smem_opt_in;    // block_staged: more than the 48 KiB a kernel gets without opting in
};

LayerNormPlan plan_layernorm(const LayerNormParams& p, const cuda::DeviceFacts& device);

struct ElementwisePlan {
  VectorWidth width;
  int vector;  // elements per access of `width`: 16 bytes' worth, or 1
  int64_t blocks;
};

ElementwisePlan plan_elementwise(const ElementwiseParams& p);

struct PaddingPlan {
  PaddingUnit unit;   // the copy unit
  int64_t row_units;  // units per row
  int64_t blocks;
};

// `rows`: the rows the kernel walks (packed tokens for remove_padding, B * S for restore_padding).
PaddingPlan plan_padding(const PaddingParams& p, int64_t rows);

// "kernel=warp vector=8 lane_vectors=1 threads=128 blocks=1024" and the like.
std::string describe(const LayerNormPlan& plan);
std::string describe(const ElementwisePlan& plan);
std::string describe(const PaddingPlan& plan);

}  // namespace djl_attn::bert
