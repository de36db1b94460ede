"""The plans of the causal_dot_product CUDA launcher: pure functions of a problem and of a GPU's
facts, tested on any machine (tests/plans.py). The expectations are the plans the benchmark tables
in docs/benchmarks.md were measured with (an H200: 132 SMs, 227 KiB of opt-in shared memory per
block), and the limits that decide between them on smaller parts."""

import ctypes

import pytest

from plans import ADA, H200, lib

_linear = lib.djl_attn_test_causal_dot_product_plan
_linear.restype = ctypes.c_char_p
_linear.argtypes = [ctypes.c_int64] * 4 + [ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32,
                                           ctypes.c_int64]


def linear_plan(batch_heads, seqlen, dim, element_size, gpu, requested="auto", dim_v=None):
    sms, smem = gpu[0], gpu[1]
    dim_v = dim if dim_v is None else dim_v
    return _linear(batch_heads, seqlen, dim, dim_v, element_size, requested.encode(), sms,
                   smem).decode()


# bench_linear.py's grid (float16): (B*H, E = M) -> the plan "auto ms" was measured with.
LINEAR_BENCH_PLANS = {
    (4, 32): "low_occupancy/16w",
    (4, 64): "low_occupancy/16w",
    (4, 128): "chunked",
    (256, 32): "chunked",
    (256, 64): "chunked",
    (256, 128): "chunked",
}


@pytest.mark.parametrize("shape", sorted(LINEAR_BENCH_PLANS))
@pytest.mark.parametrize("seqlen", [1024, 4096, 16384, 65536])
def test_linear_plans_of_the_benchmark(shape, seqlen):
    batch_heads, dim = shape
    assert linear_plan(batch_heads, seqlen, dim, 2, H200) == LINEAR_BENCH_PLANS[shape]


def test_linear_plan_rules():
    many = 8 * H200[0]  # B*H past the SM count for every E
    assert linear_plan(many, 128, 32, 2, H200) == "chunked"
    assert linear_plan(many, 127, 64, 2, H200) == "per_thread"  # under two chunks
    assert linear_plan(many, 4096, 128, 4, H200) == "per_thread"  # float32: no chunked kernel
    assert linear_plan(many, 4096, 256, 2, H200) == "per_thread"  # E > 128
    assert linear_plan(1, 4096, 128, 4, H200).startswith("low_occupancy/")
    assert linear_plan(1, 127, 128, 2, H200).startswith("low_occupancy/")
    # Warps per block: about 32 resident warps per SM, 4 to 16 per block (8 at E > 128).
    assert linear_plan(1, 4096, 64, 2, H200) == "low_occupancy/16w"
    assert linear_plan(2000, 4096, 64, 4, H200) == "per_thread"
    assert linear_plan(1, 4096, 256, 4, H200) == "low_occupancy/8w"
    assert linear_plan(100, 4096, 32, 4, H200) == "low_occupancy/4w"


def test_linear_plan_respects_shared_memory():
    assert linear_plan(4096, 4096, 128, 2, H200) == "chunked"
    # E = 128 with 64-column tiles needs 103 KiB: more than sm_86/sm_89 allow.
    assert linear_plan(4096, 4096, 128, 2, ADA) == "per_thread"
    assert linear_plan(4096, 4096, 128, 2, ADA, dim_v=32) == "chunked"  # 32-column tiles fit
    assert linear_plan(4096, 4096, 64, 2, ADA) == "chunked"
    assert linear_plan(4, 4096, 128, 2, ADA).startswith("low_occupancy/")


def test_linear_forced_variants():
    assert linear_plan(1, 1, 64, 2, H200, "chunked") == "chunked"
    assert linear_plan(4096, 4096, 64, 4, H200, "chunked") == "per_thread"  # no float32 chunked
    assert linear_plan(4096, 4096, 256, 2, H200, "chunked") == "per_thread"  # E > 128
    # E = 128 with 64-column tiles needs more shared memory than sm_89 allows a block.
    assert linear_plan(1, 4096, 128, 2, ADA, "chunked") == "per_thread"
    assert linear_plan(1, 4096, 128, 2, ADA, "chunked", dim_v=32) == "chunked"
    assert linear_plan(4096, 4096, 64, 2, H200, "low_occupancy").startswith("low_occupancy/")
    assert linear_plan(1, 4096, 64, 2, H200, "per_thread") == "per_thread"
    assert linear_plan(1, 4096, 64, 2, H200, "fastest").startswith(
        "error: requested: expected one of auto, per_thread, low_occupancy, chunked, got 'fastest'")
