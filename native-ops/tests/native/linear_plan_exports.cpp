// libdjl_attn_plans.so: C entry points to the pure plan functions of the CUDA launchers, for the
// plan tests (tests/test_plans_*.py, through ctypes), one file per kernel family. Built with the
// CPU library, without nvcc, and never packaged: the shipped libraries export no test-only symbol.

#include <cstdint>
#include <exception>
#include <string>

#include "cuda/linear/causal_dot_product_plan.h"
#include "tests/native/plan_exports.h"

using djl_attn::plan_exports::keep;

// The causal_dot_product variant for a GPU with `sm_count` SMs and `smem_optin` bytes of opt-in
// shared memory per block; `requested` is a DJL_ATTN_LINEAR_KERNEL value. "error: ..." on failure.
extern "C" const char* djl_attn_test_causal_dot_product_plan(int64_t batch_heads, int64_t seqlen,
                                                             int64_t dim_qk, int64_t dim_v,
                                                             int32_t element_size,
                                                             const char* requested,
                                                             int32_t sm_count,
                                                             int64_t smem_optin) {
  using namespace djl_attn::linear;
  try {
    const LinearVariant variant = parse_linear_variant(requested, "requested");
    return keep(describe(plan_causal_dot_product(batch_heads, seqlen, dim_qk, dim_v, element_size,
                                                 variant, {sm_count, smem_optin, 9, 0})));
  } catch (const std::exception& e) {
    return keep(std::string("error: ") + e.what());
  }
}
