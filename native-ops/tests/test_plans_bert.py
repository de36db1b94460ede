"""The plans of the BERT CUDA launchers (cuda/bert/bert_plan.h): pure functions of a problem and of
a GPU's facts, tested on any machine (tests/plans.py). The expectations for the benchmark shapes
are the plans docs/benchmarks.md's BERT tables were measured with (bench_bert.py on an H200,
float16 activations and parameters: BERT-base, hidden 768 and intermediate 3072, and
all-MiniLM-L6-v2, 384 and 1536, at 32 x 128 and 8 x 512 tokens); the rules decide elsewhere."""

import ctypes

import pytest

from plans import A100, ADA, H200, lib

_layernorm = lib.djl_attn_test_layernorm_plan
_layernorm.restype = ctypes.c_char_p
_layernorm.argtypes = ([ctypes.c_int64] * 2 + [ctypes.c_int32] * 2 + [ctypes.c_uint64] * 2 +
                       [ctypes.c_int32, ctypes.c_int32, ctypes.c_int64])
_elementwise = lib.djl_attn_test_elementwise_plan
_elementwise.restype = ctypes.c_char_p
_elementwise.argtypes = ([ctypes.c_int64] * 2 + [ctypes.c_int32] * 2 + [ctypes.c_uint64] * 2 +
                         [ctypes.c_int32])
_padding = lib.djl_attn_test_padding_plan
_padding.restype = ctypes.c_char_p
_padding.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64]

ALIGNED = 0x7F0000001000  # 16-byte aligned addresses, as the caching allocator returns them


def fields(text):
    return dict(item.split("=") for item in text.decode().split())


def layernorm_plan(rows, channels, element_size=2, param_size=None, activation=ALIGNED,
                   params=ALIGNED, bias=True, gpu=H200):
    param_size = element_size if param_size is None else param_size
    return fields(_layernorm(rows, channels, element_size, param_size, activation, params,
                             int(bias), gpu[0], gpu[1]))


def elementwise_plan(rows, channels, element_size=2, param_size=None, activation=ALIGNED,
                     params=ALIGNED, affine=False):
    param_size = element_size if param_size is None else param_size
    return fields(_elementwise(rows, channels, element_size, param_size, activation, params,
                               int(affine)))


def padding_plan(rows, seqlen, channels, element_size=2, padded=ALIGNED, packed=ALIGNED):
    return fields(_padding(rows, seqlen, channels, element_size, padded, packed))


def warp(vector, lane_vectors, blocks):
    return {"kernel": "warp", "vector": str(vector), "lane_vectors": str(lane_vectors),
            "threads": "128", "blocks": str(blocks)}


# 4096 token rows at both benchmark shapes (32 x 128, 8 x 512).
TOKENS = 4096


@pytest.mark.parametrize("hidden, intermediate", [(768, 3072), (384, 1536)])
def test_plans_of_the_benchmark(hidden, intermediate):
    # add_bias_residual_layernorm over the hidden size: one warp per row, 8 halves per vector,
    # 96 (48) vectors a row: the 4-vector tier.
    assert layernorm_plan(TOKENS, hidden) == warp(8, 4, TOKENS // 4)
    # add_bias_gelu over the intermediate size, add_bias_residual_affine (stock DJL's layer)
    # over the hidden size: 16-byte vectors, 256 threads a block, one vector each.
    assert elementwise_plan(TOKENS, intermediate) == {
        "vector": "8", "threads": "256", "blocks": str(TOKENS * intermediate // 8 // 256)}
    assert elementwise_plan(TOKENS, hidden, affine=True) == {
        "vector": "8", "threads": "256", "blocks": str(TOKENS * hidden // 8 // 256)}


def test_layernorm_tiers():
    # Vectors per row decide the warp tier (1, 4 or 8 per lane), then one block per row.
    assert layernorm_plan(10, 256) == warp(8, 1, 3)
    assert layernorm_plan(10, 264) == warp(8, 4, 3)
    assert layernorm_plan(10, 1024) == warp(8, 4, 3)
    assert layernorm_plan(10, 1032) == warp(8, 8, 3)
    assert layernorm_plan(10, 2048) == warp(8, 8, 3)
    assert layernorm_plan(10, 2056) == {"kernel": "block_staged", "vector": "8", "threads": "288",
                                        "blocks": "10", "smem_bytes": str(2056 * 4),
                                        "smem_opt_in": "0"}
    assert layernorm_plan(10, 8192, element_size=4)["threads"] == "512"
    # float32: 4 per vector.
    assert layernorm_plan(10, 128, element_size=4) == warp(4, 1, 3)
    assert layernorm_plan(10, 1024, element_size=4) == warp(4, 8, 3)


def test_layernorm_scalar_rows():
    # Odd C, an unaligned view, or parameters not aligned to a vector of their dtype: scalar
    # accesses, and only the 8-per-lane warp tier.
    assert layernorm_plan(10, 7) == warp(1, 8, 3)
    assert layernorm_plan(10, 256, activation=ALIGNED + 2) == warp(1, 8, 3)
    assert layernorm_plan(10, 768, activation=ALIGNED + 2) == {
        "kernel": "block_staged", "vector": "1", "threads": "512", "blocks": "10",
        "smem_bytes": str(768 * 4), "smem_opt_in": "0"}
    assert layernorm_plan(10, 256, params=ALIGNED + 2) == warp(1, 8, 3)
    # float32 parameters with float16 activations: a vector of 8 of them is 32 bytes.
    assert layernorm_plan(10, 768, param_size=4, params=ALIGNED + 16)["vector"] == "1"
    assert layernorm_plan(10, 768, param_size=4, params=ALIGNED + 32)["vector"] == "8"
    assert layernorm_plan(10, 768, params=ALIGNED + 2, bias=False)["vector"] == "1"
    assert layernorm_plan(10, 257)["kernel"] == "block_staged"  # 257 scalars: past 256


def test_layernorm_long_rows_follow_the_shared_memory():
    # Past 48 KiB of float32 row the staged kernel opts in, up to what the device allows less a
    # float per warp of the 512 threads; longer rows are streamed from global memory (scalar).
    assert layernorm_plan(2, 12288, element_size=4)["smem_opt_in"] == "0"
    plan = layernorm_plan(2, 12296, element_size=4)
    assert (plan["kernel"], plan["smem_opt_in"], plan["smem_bytes"]) == (
        "block_staged", "1", str(12296 * 4))
    h200_max = (H200[1] - 64) // 4
    assert layernorm_plan(2, h200_max)["kernel"] == "block_staged"
    assert layernorm_plan(2, h200_max + 8) == {"kernel": "block_streamed", "vector": "1",
                                               "threads": "512", "blocks": "2"}
    a100_max = (A100[1] - 64) // 4
    assert layernorm_plan(2, a100_max, gpu=A100)["kernel"] == "block_staged"
    assert layernorm_plan(2, a100_max + 8, gpu=A100)["kernel"] == "block_streamed"
    assert layernorm_plan(2, 40000, gpu=ADA)["kernel"] == "block_streamed"
    assert layernorm_plan(2, 40000, gpu=H200)["kernel"] == "block_staged"


def test_grids_stay_within_cuda_limits():
    assert layernorm_plan(1 << 40, 64)["blocks"] == str(2**31 - 1)
    assert layernorm_plan(1 << 40, 100000)["blocks"] == str(2**31 - 1)
    assert elementwise_plan(1 << 40, 64)["blocks"] == str(2**31 - 1)
    assert padding_plan(1 << 40, 128, 64)["blocks"] == str(2**31 - 1)


def test_elementwise_scalar():
    assert elementwise_plan(10, 7)["vector"] == "1"
    assert elementwise_plan(10, 768, activation=ALIGNED + 2)["vector"] == "1"
    assert elementwise_plan(10, 768, params=ALIGNED + 2)["vector"] == "1"
    assert elementwise_plan(10, 768, param_size=4, params=ALIGNED + 16)["vector"] == "1"
    assert elementwise_plan(3, 7) == {"vector": "1", "threads": "256", "blocks": "1"}
    assert elementwise_plan(10, 768, element_size=4)["vector"] == "4"


def test_padding_units():
    # The widest unit that divides a row and every row start: 16 bytes for BERT-base rows.
    assert padding_plan(TOKENS, 128, 768) == {"unit_bytes": "16", "row_units": "96",
                                              "threads": "256", "blocks": str(TOKENS // 8)}
    assert padding_plan(10, 5, 4)["unit_bytes"] == "8"
    assert padding_plan(10, 5, 6)["unit_bytes"] == "4"
    assert padding_plan(10, 5, 7) == {"unit_bytes": "2", "row_units": "7", "threads": "256",
                                      "blocks": "2"}
    assert padding_plan(10, 5, 768, packed=ALIGNED + 2)["unit_bytes"] == "2"
    assert padding_plan(10, 5, 768, padded=ALIGNED + 4)["unit_bytes"] == "4"
    assert padding_plan(10, 5, 3, element_size=4)["unit_bytes"] == "4"
