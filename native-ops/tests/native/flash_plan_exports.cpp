// libdjl_attn_plans.so: the CUDA flash forward's plan (cuda/flash/flash_plan.h) for
// tests/test_plans_flash.py. A call is described the way the binding fills FlashParams for
// contiguous q, k, v [B, S, H, D] (varlen: packed [total, H, D] with B sequences of Sq and Sk
// rows), with flags for what changes the plan; GPUs by their facts, and the two kernels' resident
// blocks per SM (the occupancy API's answers on that GPU) as the test states them.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "common/error.h"
#include "cuda/flash/flash_fp8_plan.h"
#include "cuda/flash/flash_plan.h"
#include "tests/native/plan_exports.h"

namespace {

using namespace djl_attn::flash;
using djl_attn::fail_invalid;

// Flags of djl_attn_test_flash_plan.
constexpr int32_t kCausal = 1;
constexpr int32_t kVarlen = 2;
constexpr int32_t kKvLens = 4;
constexpr int32_t kBias = 8;        // q, k and v bias (the fused BERT path)
constexpr int32_t kUnaligned = 16;  // q starts 2 bytes past a 16-byte boundary
constexpr int32_t kHopperBuilt = 32;
constexpr int32_t kTuningBuild = 64;
constexpr int32_t kHopperFree = 128;  // DJL_ATTN_FLASH_HOPPER_SCHED=free
constexpr int32_t kBroadcastKv = 256;  // k and v shared by the batch rows (batch stride 0)
// FlashAttention-2's features, given as the schema takes them and normalised by the binding's
// own set_window (flash_params.h): window_left (the `window_left` argument), a window_right that
// cuts keys of some row (16, or Sq - 2 for fewer rows; none at Sq = 1), softcap = 30, ALiBi
// slopes.
constexpr int32_t kWindowLeft = 512;
constexpr int32_t kWindowRight = 1024;
constexpr int32_t kSoftcap = 2048;
constexpr int32_t kAlibi = 4096;

bool is(const char* value, const char* name) { return std::strcmp(value, name) == 0; }

DecodeMode decode_mode(const char* value) {
  if (value == nullptr || *value == '\0' || is(value, "auto")) return DecodeMode::kAuto;
  if (is(value, "on")) return DecodeMode::kOn;
  if (is(value, "off")) return DecodeMode::kOff;
  fail_invalid("decode: expected one of auto, on, off, got '", value, "'");
}

HopperMode hopper_mode(const char* value) {
  if (value == nullptr || *value == '\0' || is(value, "auto")) return HopperMode::kAuto;
  if (is(value, "on")) return HopperMode::kOn;
  if (is(value, "off")) return HopperMode::kOff;
  fail_invalid("hopper: expected one of auto, on, off, got '", value, "'");
}

int config_index(const char* value) {
  if (value == nullptr || *value == '\0' || is(value, "auto")) return kAutoConfig;
  for (int c = 0; c < fwd::kNumFwdConfigs; ++c) {
    if (is(value, fwd::kFwdConfigs[c].name)) return c;
  }
  fail_invalid("config: no configuration named '", value, "'");
}

}  // namespace

using djl_attn::ElementType;
using djl_attn::plan_exports::FlashCallShape;
using djl_attn::plan_exports::keep;
using djl_attn::plan_exports::stand_in_flash_params;

// The plan for a call of `dtype` (0 float32, 1 float16, 2 bfloat16) on a GPU with `sm_count` SMs,
// `smem_optin` bytes of opt-in shared memory per block and compute capability
// `cc_major`.`cc_minor`, where the tile kernel keeps `tiled_blocks_per_sm` and the decode kernel
// `decode_blocks_per_sm` blocks resident per SM. `decode`, `hopper`, `config`: the
// DJL_ATTN_FLASH_DECODE, _HOPPER and _CONFIG values; `window_left` the left window when the
// kWindowLeft flag is set. "error: ..." on failure.
extern "C" const char* djl_attn_test_flash_plan(
    int32_t dtype, int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
    int64_t heads_kv, int64_t head_dim, double scale, int32_t flags, const char* decode,
    const char* hopper, const char* config, int32_t sm_count, int64_t smem_optin,
    int32_t cc_major, int32_t cc_minor, int32_t tiled_blocks_per_sm,
    int32_t decode_blocks_per_sm, int64_t window_left) {
  try {
    if (dtype < 0 || dtype > 2) fail_invalid("dtype: expected 0, 1 or 2, got ", dtype);
    FlashSwitches switches;
    switches.decode = decode_mode(decode);
    switches.hopper = hopper_mode(hopper);
    switches.config = config_index(config);
    switches.hopper_ping_pong = (flags & kHopperFree) == 0;
    switches.hopper_built = (flags & kHopperBuilt) != 0;
    switches.tuning_build = (flags & kTuningBuild) != 0;

    FlashCallShape call{batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim,
                        static_cast<ElementType>(dtype)};
    call.scale = static_cast<float>(scale);
    call.causal = (flags & kCausal) != 0;
    call.varlen = (flags & kVarlen) != 0;
    call.kv_lens = (flags & kKvLens) != 0;
    call.bias = (flags & kBias) != 0;
    call.broadcast_kv = (flags & kBroadcastKv) != 0;
    call.q_offset_bytes = (flags & kUnaligned) != 0 ? 2 : 0;
    if ((flags & kWindowLeft) != 0) call.window_left = window_left;
    if ((flags & kWindowRight) != 0 && seqlen_q > 1) {
      call.window_right = std::min<int64_t>(16, seqlen_q - 2);
    }
    if ((flags & kSoftcap) != 0) call.softcap = 30.f;
    call.alibi = (flags & kAlibi) != 0;
    const FlashParams p = stand_in_flash_params(call);

    const Residency residency{[&](const TiledKernel&) { return tiled_blocks_per_sm; },
                              [&](const DecodeKernel&) { return decode_blocks_per_sm; }};
    const djl_attn::cuda::DeviceFacts device{sm_count, smem_optin, cc_major, cc_minor};
    const FlashPlan plan = plan_flash(p, switches, device, residency);
    std::string text = describe(plan);
    if (plan.split.scratch_bytes > 0) text += "/scratch" + std::to_string(plan.split.scratch_bytes);
    return keep(text);
  } catch (const std::exception& e) {
    return keep(std::string("error: ") + e.what());
  }
}

// flash_attention_fp8's plan (cuda/flash/flash_fp8_plan.h) for contiguous e4m3 q, k, v [B, S, H,
// D] (flags: kHopperBuilt, kUnaligned, kBroadcastKv as above): "refused: <reason>", or "grid G
// items I m_blocks M keys K vt V". "error: ..." on failure.
extern "C" const char* djl_attn_test_flash_fp8_plan(int64_t batch, int64_t seqlen_q,
                                                    int64_t seqlen_k, int64_t heads_q,
                                                    int64_t heads_kv, int64_t head_dim,
                                                    int32_t flags, int32_t sm_count,
                                                    int64_t smem_optin, int32_t cc_major,
                                                    int32_t cc_minor) {
  try {
    // One-byte elements: the stand-in's element strides are byte strides.
    FlashCallShape call{batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim,
                        ElementType::kBFloat16};
    call.scale = 1.f;
    call.broadcast_kv = (flags & kBroadcastKv) != 0;
    call.q_offset_bytes = (flags & kUnaligned) != 0 ? 2 : 0;
    FlashFp8Params params;
    params.attn = stand_in_flash_params(call);
    const djl_attn::cuda::DeviceFacts device{sm_count, smem_optin, cc_major, cc_minor};
    const FlashFp8Plan plan = plan_flash_fp8(params, device, (flags & kHopperBuilt) != 0);
    if (!plan.refusal.empty()) return keep("refused: " + plan.refusal);
    return keep("grid " + std::to_string(plan.grid) + " items " + std::to_string(plan.items) +
                " m_blocks " + std::to_string(plan.m_blocks) + " keys " +
                std::to_string(plan.keys_padded) + " vt " + std::to_string(plan.vt_bytes));
  } catch (const std::exception& e) {
    return keep(std::string("error: ") + e.what());
  }
}
