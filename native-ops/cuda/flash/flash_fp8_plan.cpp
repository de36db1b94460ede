#include "cuda/flash/flash_fp8_plan.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/flash/flash_shapes.h"

namespace djl_attn::flash {
namespace {

// The e4m3 kernel's one instantiation (hopper_layout.cuh static_asserts the same).
constexpr int kFp8HeadDim = 128;
constexpr int kFp8Consumers = 2;

// Whether TMA can describe a [B, S, H, D] e4m3 operand with these strides (bytes): positive,
// 16-byte multiples, below 2^40 (cuTensorMapEncodeTiled's rules).
bool tma_byte_strides(int64_t batch_stride, int64_t seq_stride, int64_t head_stride) {
  for (int64_t s : {seq_stride, head_stride, batch_stride}) {
    if (s <= 0 || s % 16 != 0 || s >= (int64_t{1} << 40)) return false;
  }
  return true;
}

// Whether the transpose of v (flash_hopper_fp8.cu) can read its rows in 16-byte chunks.
bool aligned_rows(const void* data, int64_t batch_stride, int64_t seq_stride, int64_t head_stride) {
  return reinterpret_cast<uintptr_t>(data) % 16 == 0 && batch_stride % 16 == 0 &&
         seq_stride % 16 == 0 && head_stride % 16 == 0;
}

}  // namespace

FlashFp8Plan plan_flash_fp8(const FlashFp8Params& params, const cuda::DeviceFacts& device,
                            bool hopper_built) {
  const FlashParams& p = params.attn;
  FlashFp8Plan plan;
  if (!hopper_built) {
    plan.refusal = "q: the CUDA FP8 kernel is compiled only for sm_90 (this library was built "
                   "without it; CMAKE_CUDA_ARCHITECTURES must include 90)";
    return plan;
  }
  if (device.cc_major != 9 || device.cc_minor != 0) {
    plan.refusal = "q: the CUDA FP8 kernel runs on Hopper GPUs (compute capability 9.0), this "
                   "one is " + std::to_string(device.cc_major) + "." +
                   std::to_string(device.cc_minor) + " (the CPU backend runs any device's "
                   "tensors copied to the host)";
    return plan;
  }
  if (p.head_dim != kFp8HeadDim) {
    plan.refusal = "q: the CUDA FP8 kernel takes head dim " + std::to_string(kFp8HeadDim) +
                   ", got " + std::to_string(p.head_dim);
    return plan;
  }
  // Batch strides of 0 (k and v broadcast over the batch) are valid arguments TMA cannot
  // describe, as are rows that are not 16-byte aligned.
  // A call without keys reads neither k nor v (flash_hopper_fp8.cu maps q in k's place).
  const bool keys = p.seqlen_k > 0;
  if (!tma_byte_strides(p.q_batch_stride, p.q_seq_stride, p.q_head_stride) ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0 ||
      (keys && (!tma_byte_strides(p.k_batch_stride, p.k_seq_stride, p.k_head_stride) ||
                reinterpret_cast<uintptr_t>(p.k) % 16 != 0 ||
                !aligned_rows(p.v, p.v_batch_stride, p.v_seq_stride, p.v_head_stride)))) {
    plan.refusal = "q, k, v: the CUDA FP8 kernel reads rows of 16-byte aligned chunks (q and k "
                   "through TMA), which needs 16-byte aligned data and strides that are "
                   "multiples of 16 elements, positive for q and k (copy the tensors "
                   "contiguous)";
    return plan;
  }
  if (device.smem_optin < hopper::smem_bytes(kFp8HeadDim, kFp8Consumers, 1)) {
    plan.refusal = "q: the CUDA FP8 kernel needs " +
                   std::to_string(hopper::smem_bytes(kFp8HeadDim, kFp8Consumers, 1)) +
                   " bytes of shared memory per block, this GPU offers " +
                   std::to_string(device.smem_optin);
    return plan;
  }
  const int64_t m_blocks = hopper::m_blocks(p.seqlen_q, kFp8Consumers);
  plan.m_blocks = static_cast<int>(m_blocks);
  plan.items = static_cast<int>(m_blocks * p.batch * p.heads_q);
  plan.grid = std::min(plan.items, device.sm_count);
  const int64_t block_n = hopper::block_n(kFp8HeadDim);
  plan.keys_padded = std::max<int64_t>((p.seqlen_k + block_n - 1) / block_n, 1) * block_n;
  plan.vt_bytes = p.batch * p.heads_kv * p.head_dim * plan.keys_padded;
  return plan;
}

}  // namespace djl_attn::flash
