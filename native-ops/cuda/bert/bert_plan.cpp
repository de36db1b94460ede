#include "cuda/bert/bert_plan.h"

#include <algorithm>

#include "common/alignment.h"

namespace djl_attn::bert {
namespace {

constexpr int kWarpSize = 32;
// Shared memory a kernel gets without opting in.
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

// A null pointer (an absent optional argument) is never read.
bool aligned_or_null(const void* ptr, int64_t bytes) {
  return ptr == nullptr || aligned(ptr, bytes);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Grid-stride loops make any grid correct; this keeps the grid within CUDA's limit.
int64_t grid_size(int64_t blocks) {
  constexpr int64_t kMaxBlocks = 0x7fffffffLL;
  return std::clamp<int64_t>(blocks, 1, kMaxBlocks);
}

}  // namespace

LayerNormPlan plan_layernorm(const LayerNormParams& p, const cuda::DeviceFacts& device) {
  const int vector = static_cast<int>(16 / element_size(p.dtype));
  const int64_t param_bytes = vector * element_size(p.param_dtype);
  // 16-byte vectors need C to be a multiple of the width and every base pointer aligned (rows
  // then stay aligned); anything else takes the scalar kernels.
  const bool vectorised = p.channels % vector == 0 && aligned(p.x, 16) &&
                          aligned(p.residual, 16) && aligned(p.out, 16) &&
                          aligned(p.gamma, param_bytes) && aligned(p.beta, param_bytes) &&
                          aligned_or_null(p.bias, param_bytes);
  LayerNormPlan plan{};
  plan.vector = vectorised ? vector : 1;
  const int64_t vecs = p.channels / plan.vector;
  // Registers per lane grow with lane_vectors * vector floats, so short rows get a short array:
  // three tiers. Scalar rows (odd C, unaligned views) are rare: one warp tier for them keeps the
  // build lean.
  int lane_vectors = 0;
  if (plan.vector > 1 && vecs <= kWarpSize) {
    lane_vectors = 1;
  } else if (plan.vector > 1 && vecs <= 4 * kWarpSize) {
    lane_vectors = 4;
  } else if (vecs <= 8 * kWarpSize) {
    lane_vectors = 8;
  }
  if (lane_vectors > 0) {
    plan.kernel = !vectorised        ? LayerNormKernel::kScalarWarp8
                  : lane_vectors == 1 ? LayerNormKernel::kWarp1
                  : lane_vectors == 4 ? LayerNormKernel::kWarp4
                                      : LayerNormKernel::kWarp8;
    plan.threads = kLayerNormWarps * kWarpSize;
    plan.blocks = grid_size(ceil_div(p.rows, kLayerNormWarps));
    return plan;
  }
  // Block per row: the row as float32 in shared memory. Rows above 12288 channels need the
  // opt-in shared memory of the device (227 KiB on H100, 163 KiB on A100), of which the static
  // partial sums take a float per warp; rows longer still are read from global memory in each
  // of the kernel's three passes, scalar (a rare shape: one kernel per dtype for it).
  plan.blocks = grid_size(p.rows);
  const int64_t bytes = p.channels * static_cast<int64_t>(sizeof(float));
  const int64_t limit =
      device.smem_optin - static_cast<int64_t>(sizeof(float)) * (kLayerNormMaxThreads / kWarpSize);
  if (bytes > kDefaultSharedBytes && bytes > limit) {
    plan.kernel = LayerNormKernel::kScalarBlockStreamed;
    plan.vector = 1;
  } else {
    plan.kernel = vectorised ? LayerNormKernel::kBlockStaged : LayerNormKernel::kScalarBlockStaged;
    plan.smem_bytes = bytes;
    plan.smem_opt_in = bytes > kDefaultSharedBytes;
  }
  plan.threads = static_cast<int>(std::min<int64_t>(
      kLayerNormMaxThreads, ceil_div(p.channels / plan.vector, kWarpSize) * kWarpSize));
  return plan;
}

ElementwisePlan plan_elementwise(const ElementwiseParams& p) {
  const int vector = static_cast<int>(16 / element_size(p.dtype));
  const int64_t param_bytes = vector * element_size(p.param_dtype);
  const bool vectorised = p.channels % vector == 0 && aligned(p.x, 16) && aligned(p.out, 16) &&
                          aligned_or_null(p.residual, 16) && aligned_or_null(p.bias, param_bytes) &&
                          aligned_or_null(p.scale, param_bytes) &&
                          aligned_or_null(p.shift, param_bytes);
  ElementwisePlan plan{};
  plan.width = vectorised ? VectorWidth::k16Bytes : VectorWidth::kScalar;
  plan.vector = vectorised ? vector : 1;
  plan.blocks = grid_size(ceil_div(p.rows * (p.channels / plan.vector), kElementwiseThreads));
  return plan;
}

PaddingPlan plan_padding(const PaddingParams& p, int64_t rows) {
  PaddingPlan plan{};
  // The widest copy unit that divides the row and keeps every row start aligned.
  const int64_t row_bytes = p.channels * p.element_size;
  plan.unit = PaddingUnit::k2;
  for (PaddingUnit unit : {PaddingUnit::k16, PaddingUnit::k8, PaddingUnit::k4}) {
    const int bytes = static_cast<int>(unit);
    if (row_bytes % bytes == 0 && (p.padded_batch_stride * p.element_size) % bytes == 0 &&
        (p.padded_seq_stride * p.element_size) % bytes == 0 && aligned(p.padded, bytes) &&
        aligned(p.packed, bytes)) {
      plan.unit = unit;
      break;
    }
  }
  plan.row_units = row_bytes / static_cast<int>(plan.unit);
  plan.blocks = grid_size(ceil_div(rows, kPaddingWarps));
  return plan;
}

int lane_vectors(LayerNormKernel kernel) {
  switch (kernel) {
    case LayerNormKernel::kWarp1: return 1;
    case LayerNormKernel::kWarp4: return 4;
    case LayerNormKernel::kWarp8:
    case LayerNormKernel::kScalarWarp8: return 8;
    case LayerNormKernel::kBlockStaged:
    case LayerNormKernel::kScalarBlockStaged:
    case LayerNormKernel::kScalarBlockStreamed: return 0;
  }
  return 0;
}

std::string describe(const LayerNormPlan& plan) {
  const bool staged = plan.kernel == LayerNormKernel::kBlockStaged ||
                      plan.kernel == LayerNormKernel::kScalarBlockStaged;
  std::string s = lane_vectors(plan.kernel) > 0 ? "kernel=warp"
                  : staged                      ? "kernel=block_staged"
                                                : "kernel=block_streamed";
  s += " vector=" + std::to_string(plan.vector);
  if (lane_vectors(plan.kernel) > 0) {
    s += " lane_vectors=" + std::to_string(lane_vectors(plan.kernel));
  }
  s += " threads=" + std::to_string(plan.threads) + " blocks=" + std::to_string(plan.blocks);
  if (staged) {
    s += " smem_bytes=" + std::to_string(plan.smem_bytes) +
         " smem_opt_in=" + (plan.smem_opt_in ? "1" : "0");
  }
  return s;
}

std::string describe(const ElementwisePlan& plan) {
  return "vector=" + std::to_string(plan.vector) + " threads=" +
         std::to_string(kElementwiseThreads) + " blocks=" + std::to_string(plan.blocks);
}

std::string describe(const PaddingPlan& plan) {
  return "unit_bytes=" + std::to_string(static_cast<int>(plan.unit)) +
         " row_units=" + std::to_string(plan.row_units) + " threads=" +
         std::to_string(kPaddingWarps * kWarpSize) + " blocks=" + std::to_string(plan.blocks);
}

}  // namespace djl_attn::bert
