// The plan of the float32 flash attention forward: pure host C++ (libdjl_attn_plans.so tests it
// without a GPU, tests/test_plans_fp32.py).

#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "cuda/flash/flash_fp32.h"
#include "cuda/flash/flash_plan.h"

namespace djl_attn::flash::fp32 {
namespace {

// The smallest compiled head dim >= dim, or none above them all.
std::optional<Fp32HeadDim> compiled_head_dim(int64_t dim) {
#define DJL_FLASH_FP32_PAD_(D) \
  if (dim <= D) return Fp32HeadDim::k##D;
  DJL_FLASH_FP32_FOR_EACH_HEAD_DIM(DJL_FLASH_FP32_PAD_)
#undef DJL_FLASH_FP32_PAD_
  return std::nullopt;
}

bool fits(int head_dim, int warps, const cuda::DeviceFacts& device) {
  return fp32_smem_bytes(head_dim, warps) <= device.smem_optin;
}

}  // namespace

Fp32Mode parse_fp32_mode(const char* value, const char* what) {
  if (value == nullptr || value[0] == '\0') return Fp32Mode::kAuto;
  std::string choices;
  int index = 0;
  for (const char* name : kFp32ModeNames) {
    if (std::strcmp(value, name) == 0) return static_cast<Fp32Mode>(index);
    choices += (index++ == 0 ? "" : ", ");
    choices += name;
  }
  fail_invalid(what, ": expected one of ", choices, ", got '", value, "'");
}

std::optional<Fp32Tile> plan_flash_fp32(const FlashParams& p, Fp32Mode mode,
                                        bool tuning_build, const cuda::DeviceFacts& device) {
  const std::optional<Fp32HeadDim> compiled = compiled_head_dim(p.head_dim);
  if (mode == Fp32Mode::kSimple || p.dtype != ElementType::kFloat32 || device.cc_major < 8 ||
      !compiled) {
    return std::nullopt;
  }
  const int head_dim = static_cast<int>(*compiled);
  Fp32KernelFacts want{head_dim, 4, true, false, false};
  want.split_tf32 =
      mode != Fp32Mode::kTf32 || !fp32_tile_compiled(head_dim, 4, false, tuning_build);
  want.bias = p.q_bias != nullptr || p.k_bias != nullptr || p.v_bias != nullptr;
  // 8-warp tiles read each key/value tile for twice the rows: measured on an H200
  // (docs/benchmarks.md, "float32 flash on the GPU"), 1.24-1.63x the 4-warp tiles at D = 128 and
  // 256; at D = 64 within 5% without a mask and 3-9% slower with a causal one. At 128 rows per
  // block a small batch leaves SMs idle, so they run only where one wave of them fills the GPU.
  const int64_t tiles_of_128 = (p.seqlen_q + 127) / 128 * p.batch * p.heads_q;
  const bool eight_built = fp32_tile_compiled(head_dim, 8, want.split_tf32, tuning_build);
  const bool eight_fit = head_dim > 64 && eight_built && fits(head_dim, 8, device);
  if (mode == Fp32Mode::kWarps8) {
    want.warps = eight_built && fits(head_dim, 8, device) ? 8 : 4;
  } else if (mode == Fp32Mode::kWarps4) {
    want.warps = 4;
  } else {
    want.warps = eight_fit && tiles_of_128 >= device.sm_count ? 8 : 4;
  }
  // The sliding window, soft-capping and ALiBi have one instantiation per head dim: 4 warps,
  // 3xTF32, no bias (DJL_ATTN_FLASH_FP32=8w and tf32 do not apply to such calls; describe()
  // shows it; plan_flash refuses bias with them before this plan).
  want.features = has_flash_features(p);
  if (want.features) want = Fp32KernelFacts{head_dim, 4, true, false, true};
  if (!fits(head_dim, want.warps, device)) return std::nullopt;
  Fp32Tile tile{};
  tile.vectorized = loads_16_bytes(p);
  // Every tile chosen above is compiled where `tuning_build` describes this build, so this
  // build's list has it; a plan asked to describe a tuning build's tile in a build whose list
  // lacks it (the plans library lists every tile) keeps the simple kernel.
  if (!find_fp32_kernel(want, &tile.kernel)) return std::nullopt;
  return tile;
}

std::string describe(const Fp32Tile& tile) {
  const Fp32KernelFacts f = facts_of(tile.kernel);
  std::string s = concat(f.split_tf32 ? "3xtf32" : "tf32", "/d", f.head_dim, "/", f.warps, "w");
  if (f.bias) s += "/bias";
  if (f.features) s += "/features";
  if (!tile.vectorized) s += "/scalar";
  return s;
}

}  // namespace djl_attn::flash::fp32
