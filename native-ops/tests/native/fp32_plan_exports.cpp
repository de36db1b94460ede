// libdjl_attn_plans.so: the CUDA flash forward's plan (cuda/flash/flash_plan.h) for float32 calls,
// with the DJL_ATTN_FLASH_FP32 mode, for tests/test_plans_fp32.py. A call is described the way
// the binding fills FlashParams for contiguous q, k, v [B, S, H, D] (varlen: packed [total, H, D]
// with B sequences of Sq and Sk rows), with flags for what changes the plan; GPUs by their facts.

#include <cstdint>
#include <exception>
#include <string>

#include "common/error.h"
#include "cuda/flash/flash_fp32.h"
#include "cuda/flash/flash_plan.h"
#include "tests/native/plan_exports.h"

namespace {

using namespace djl_attn::flash;
using djl_attn::ElementType;
using djl_attn::plan_exports::FlashCallShape;
using djl_attn::plan_exports::stand_in_flash_params;

// Flags of djl_attn_test_flash_fp32_plan.
constexpr int32_t kCausal = 1;
constexpr int32_t kVarlen = 2;
constexpr int32_t kKvLens = 4;
constexpr int32_t kBias = 8;        // q, k and v bias (the fused BERT path)
constexpr int32_t kUnaligned = 16;  // q starts 4 bytes past a 16-byte boundary
constexpr int32_t kTuningBuild = 32;  // plan for a DJL_ATTN_TUNING build (every tile compiled)

}  // namespace

using djl_attn::plan_exports::keep;

// The plan of a float32 call under DJL_ATTN_FLASH_FP32=`mode` on a GPU with `sm_count` SMs,
// `smem_optin` bytes of opt-in shared memory per block and compute capability
// `cc_major`.`cc_minor`. "error: ..." on failure.
extern "C" const char* djl_attn_test_flash_fp32_plan(const char* mode, int64_t batch,
                                                     int64_t seqlen_q, int64_t seqlen_k,
                                                     int64_t heads_q, int64_t heads_kv,
                                                     int64_t head_dim, int32_t flags,
                                                     int32_t sm_count, int64_t smem_optin,
                                                     int32_t cc_major, int32_t cc_minor) {
  try {
    FlashSwitches switches;
    switches.fp32 = fp32::parse_fp32_mode(mode, "mode");
    switches.tuning_build = (flags & kTuningBuild) != 0;
    FlashCallShape call{batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim,
                        ElementType::kFloat32};
    call.causal = (flags & kCausal) != 0;
    call.varlen = (flags & kVarlen) != 0;
    call.kv_lens = (flags & kKvLens) != 0;
    call.bias = (flags & kBias) != 0;
    call.q_offset_bytes = (flags & kUnaligned) != 0 ? 4 : 0;
    const FlashParams p = stand_in_flash_params(call);
    // The float32 paths ask no occupancy: a residency query would be a plan error.
    const Residency residency{
        [](const TiledKernel&) -> int { djl_attn::fail_native("float32 asked the tile kernel"); },
        [](const DecodeKernel&) -> int {
          djl_attn::fail_native("float32 asked the decode kernel");
        }};
    return keep(describe(
        plan_flash(p, switches, {sm_count, smem_optin, cc_major, cc_minor}, residency)));
  } catch (const std::exception& e) {
    return keep(std::string("error: ") + e.what());
  }
}
