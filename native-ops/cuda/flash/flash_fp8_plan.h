// The plan of flash_attention_fp8 on CUDA (flash_fp8_launch.cu): whether the Hopper e4m3
// kernel (hopper/flash_hopper_fp8.cu) can run a call, and its persistent grid and scratch. A pure
// function of the parameters and the device's facts, so it compiles without nvcc and its tests
// (tests/test_plans_flash.py, through libdjl_attn_plans.so) run without a GPU.
//
// The kernel runs D = 128 on compute capability 9.0, in builds that compile sm_90a; there is no
// other CUDA kernel for e4m3 inputs, so every other call is refused, naming q (the CPU backend
// runs any head dim).
#pragma once

#include <cstdint>
#include <string>

#include "cuda/common/device_facts.h"
#include "flash/flash_fp8_params.h"

namespace djl_attn::flash {

struct FlashFp8Plan {
  // Why the kernel cannot run the call, for the user ("q: ..."); empty when it runs.
  std::string refusal;
  int m_blocks = 0;  // 128-row query tiles per (batch, head)
  int items = 0;     // m_blocks * B * Hq work items
  int grid = 0;      // persistent blocks: min(items, SMs)
  // Keys of the transposed copy of v ([B, Hkv, D, keys_padded] bytes): Sk rounded up to the
  // kernel's 128-key tiles (one tile when Sk = 0, which reads none of it), and its size.
  int64_t keys_padded = 0;
  int64_t vt_bytes = 0;
};

FlashFp8Plan plan_flash_fp8(const FlashFp8Params& p, const cuda::DeviceFacts& device,
                            bool hopper_built);

}  // namespace djl_attn::flash
