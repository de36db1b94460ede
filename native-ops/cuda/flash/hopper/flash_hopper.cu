// Host side of the Hopper flash attention forward (sm_90a only; see flash_hopper.h and
// cuda/CMakeLists.txt): the TMA tensor maps of q, k and v, the shared-memory opt-in and the
// persistent launch of the kernel (hopper_kernel.cuh and the headers it names, by concern).

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/hopper/flash_hopper.h"
#include "cuda/flash/hopper/hopper_kernel.cuh"
#include "cuda/flash/hopper/hopper_tensor_map.h"

namespace djl_attn::flash::hopper {
namespace {

// A map over one [B, S, H, D] operand whose boxes are 64 columns x `rows` rows of one (batch,
// head), 128-byte swizzled; rows past S read as zeros. The plan checked the strides against
// TMA's rules (tma_strides in flash_plan.cpp); false when the driver refuses anyway.
bool make_map(CUtensorMap* map, const FlashParams& p, const void* ptr, int64_t seqlen,
              int64_t heads, int64_t batch_stride, int64_t seq_stride, int64_t head_stride,
              int rows) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(seqlen),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(seq_stride) * 2,
                                 static_cast<cuuint64_t>(head_stride) * 2,
                                 static_cast<cuuint64_t>(batch_stride) * 2};
  const CUtensorMapDataType type = p.dtype == ElementType::kFloat16
                                       ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return make_tiled_map(map, type, ptr, dims, strides, kPanelCols, static_cast<cuuint32_t>(rows));
}

template <typename T, int kHeadDim, int kConsumers, bool kPingPong>
void prepare(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices];
  if (device >= 0 && device < kMaxDevices && done[device].load()) return;
  DJL_ATTN_CUDA_CHECK(
      cudaFuncSetAttribute(flash_hopper_kernel<T, kHeadDim, kConsumers, kPingPong>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Layout<kHeadDim, kConsumers>::kSmemBytes));
  if (device >= 0 && device < kMaxDevices) done[device].store(true);
}

template <typename T, int kHeadDim, int kConsumers, bool kPingPong>
void launch_one(const HopperArgs& args, int grid, cudaStream_t stream, int device) {
  prepare<T, kHeadDim, kConsumers, kPingPong>(device);
  flash_hopper_kernel<T, kHeadDim, kConsumers, kPingPong>
      <<<static_cast<unsigned>(grid), threads(kConsumers), Layout<kHeadDim, kConsumers>::kSmemBytes,
         stream>>>(args);
  DJL_ATTN_CUDA_CHECK_LAUNCH("flash_hopper_kernel");
}

template <typename T, int kHeadDim, int kConsumers>
void launch(HopperArgs& args, const FlashPlan& plan, cudaStream_t stream, int device) {
  // The work-item counter: scratch from PyTorch's caching allocator, zeroed on the stream. Freed
  // on return, which stream order makes safe (the allocator hands it to later work on this
  // stream only).
  Tensor counter = Tensor::empty({1}, DType::kInt32, Device{DeviceType::kCuda, device});
  args.item_counter = counter.data_as<int>();
  DJL_ATTN_CUDA_CHECK(cudaMemsetAsync(args.item_counter, 0, sizeof(int), stream));
  if (plan.hopper.ping_pong) {
    launch_one<T, kHeadDim, kConsumers, true>(args, plan.hopper_grid, stream, device);
  } else {
    launch_one<T, kHeadDim, kConsumers, false>(args, plan.hopper_grid, stream, device);
  }
}

// The instantiations the plan may choose (HopperTile, hopper::consumers_compiled): D = 64 with 2
// or 3 consumers, D = 128 and 256 with 2.
template <typename T>
void launch_for(HopperArgs& args, const FlashPlan& plan, cudaStream_t stream, int device) {
  switch (plan.hopper.tile) {  // every HopperTile
    case HopperTile::kD64C3: return launch<T, 64, 3>(args, plan, stream, device);
    case HopperTile::kD64C2: return launch<T, 64, 2>(args, plan, stream, device);
    case HopperTile::kD128C2: return launch<T, 128, 2>(args, plan, stream, device);
    case HopperTile::kD256C2: return launch<T, 256, 2>(args, plan, stream, device);
  }
}

}  // namespace

void run(const FlashParams& p, const FlashPlan& plan, cudaStream_t stream, int device) {
  HopperArgs args{};
  args.params = p;
  args.m_blocks = plan.m_blocks;
  args.total_items = plan.hopper_items;
  // The plan checked what the tensor maps need (strides, alignment, sizes): an encoding that
  // fails anyway is a driver problem, not a caller's.
  if (encode_fn() == nullptr) {
    fail_native("flash_attention: the CUDA driver has no cuTensorMapEncodeTiled (needed by the "
                "Hopper kernel; DJL_ATTN_FLASH_HOPPER=off avoids it)");
  }
  if (!make_map(&args.q_map, p, p.q, p.seqlen_q, p.heads_q, p.q_batch_stride, p.q_seq_stride,
                p.q_head_stride, block_m(consumers_of(plan.hopper.tile))) ||
      !make_map(&args.k_map, p, p.k, p.seqlen_k, p.heads_kv, p.k_batch_stride, p.k_seq_stride,
                p.k_head_stride, block_n(p.head_dim)) ||
      !make_map(&args.v_map, p, p.v, p.seqlen_k, p.heads_kv, p.v_batch_stride, p.v_seq_stride,
                p.v_head_stride, block_n(p.head_dim))) {
    fail_native("flash_attention: cuTensorMapEncodeTiled refused a tensor map the plan accepted");
  }
  if (plan.hopper.dtype == ElementType::kFloat16) {
    launch_for<__half>(args, plan, stream, device);
  } else {
    launch_for<__nv_bfloat16>(args, plan, stream, device);
  }
}

}  // namespace djl_attn::flash::hopper

