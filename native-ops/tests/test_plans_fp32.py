"""The plan of float32 flash attention calls (cuda/flash/flash_plan.h with flash_fp32.h): which
kernel and tiles a float32 call gets under each DJL_ATTN_FLASH_FP32 mode, on any machine
(tests/plans.py). The expectations for the benchmark shapes are the tiles that the float32 table
in docs/benchmarks.md was measured with on an H200 (132 SMs, 227 KiB of opt-in shared memory per
block): 8-warp tiles at D = 96..256 where their 128-row grid fills the SMs once (they ran
1.24-1.63x the 4-warp tiles at D = 128 and 256), 4-warp tiles at D <= 64 (3-9% faster under a
causal mask, within 5% without) and for small grids."""

import ctypes
import re

import pytest

from plans import A100, ADA, H200, lib

TURING = (40, 64 * 1024, 7, 5)  # sm_75: no tf32 mma.sync, no cp.async

_plan = lib.djl_attn_test_flash_fp32_plan
_plan.restype = ctypes.c_char_p
_plan.argtypes = ([ctypes.c_char_p] + [ctypes.c_int64] * 6 +
                  [ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32])

FLAGS = {"causal": 1, "varlen": 2, "kv_lens": 4, "bias": 8, "unaligned": 16, "tuning": 32}


def fp32_plan(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, mode="auto", gpu=H200, **flags):
    bits = 0
    for name, on in flags.items():
        bits |= FLAGS[name] if on else 0
    sms, smem, major, minor = gpu
    return _plan(mode.encode(), batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, bits, sms, smem,
                 major, minor).decode()


# bench/bench_flash_fp32.py's shapes [B, Sq, Sk, Hq, Hkv, D] -> the plan "auto" was measured with.
BENCH_PLANS = {
    (8, 128, 128, 12, 12, 64): "fp32/3xtf32/d64/4w",
    (1, 512, 512, 16, 16, 64): "fp32/3xtf32/d64/4w",
    (2, 1024, 1024, 16, 16, 64): "fp32/3xtf32/d64/4w",
    (4, 2048, 2048, 16, 16, 128): "fp32/3xtf32/d128/8w",
    (1, 4096, 4096, 32, 8, 128): "fp32/3xtf32/d128/8w",
    # One query row, 4 query heads per key/value head: folded into 4 rows of 8 heads, 128 blocks
    # of 128 rows would leave SMs idle.
    (16, 1, 2048, 32, 8, 128): "fold+fp32/3xtf32/d128/4w",
    (32, 512, 512, 12, 12, 64): "fp32/3xtf32/d64/4w",
    (8, 512, 512, 16, 16, 128): "fp32/3xtf32/d128/8w",
    (8, 2048, 2048, 16, 16, 64): "fp32/3xtf32/d64/4w",
    (2, 4096, 4096, 16, 16, 128): "fp32/3xtf32/d128/8w",
    # D = 80 runs padded to 96; 8 * 8 tiles of 128 rows do not fill 132 SMs.
    (1, 1000, 1000, 8, 8, 80): "fp32/3xtf32/d96/4w",
    (4, 1024, 1024, 8, 8, 256): "fp32/3xtf32/d256/8w",
}


@pytest.mark.parametrize("shape", sorted(BENCH_PLANS))
@pytest.mark.parametrize("causal", [False, True])
def test_plans_of_the_benchmark(shape, causal):
    assert fp32_plan(*shape, causal=causal) == BENCH_PLANS[shape]


def test_modes():
    shape = (4, 2048, 2048, 16, 16, 128)
    assert fp32_plan(*shape, mode="simple") == "simple"
    assert fp32_plan(*shape, mode="4w") == "fp32/3xtf32/d128/4w"
    assert fp32_plan(1, 100, 100, 2, 2, 128, mode="8w") == "fp32/3xtf32/d128/8w"
    assert fp32_plan(1, 100, 100, 2, 2, 128) == "fp32/3xtf32/d128/4w"
    # A tuning build compiles 1xTF32 and 8-warp tiles at D <= 64; the shipped build runs those
    # requests on the tiles it has (fp32_tile_compiled). For tf32 that is only a defensive
    # fallback: the shipped build's switch does not take the value.
    assert fp32_plan(*shape, mode="tf32", tuning=True) == "fp32/tf32/d128/8w"
    assert fp32_plan(*shape, mode="tf32") == "fp32/3xtf32/d128/8w"
    assert fp32_plan(1, 100, 100, 2, 2, 64, mode="8w", tuning=True) == "fp32/3xtf32/d64/8w"
    assert fp32_plan(1, 100, 100, 2, 2, 64, mode="8w") == "fp32/3xtf32/d64/4w"
    assert fp32_plan(*shape, mode="fastest").startswith(
        "error: mode: expected one of auto, tf32, simple, 4w, 8w, got 'fastest'")


def test_head_dims_pad_to_compiled_ones():
    expected = {1: 32, 32: 32, 33: 64, 64: 64, 80: 96, 96: 96, 100: 128, 128: 128, 130: 256,
                256: 256}
    for dim, padded in expected.items():
        plan = fp32_plan(1, 300, 300, 4, 4, dim)
        assert plan.startswith("fp32/3xtf32/d%d/4w" % padded), (dim, plan)
        # Head dims that are not a multiple of 4 floats are copied float by float.
        assert plan.endswith("/scalar") == (dim % 4 != 0), (dim, plan)


def test_bias_varlen_and_views():
    assert fp32_plan(8, 128, 128, 12, 12, 64, bias=True, kv_lens=True) == "fp32/3xtf32/d64/4w/bias"
    assert fp32_plan(4, 1000, 1000, 16, 4, 128, varlen=True, causal=True) == "fp32/3xtf32/d128/8w"
    assert fp32_plan(2, 300, 300, 4, 4, 64, unaligned=True) == "fp32/3xtf32/d64/4w/scalar"
    # The GQA fold needs a query row per batch entry in batched mode and no q bias.
    assert fp32_plan(2, 1, 500, 8, 2, 64) == "fold+fp32/3xtf32/d64/4w"
    assert fp32_plan(2, 1, 500, 8, 2, 64, varlen=True) == "fp32/3xtf32/d64/4w"
    assert fp32_plan(2, 1, 500, 8, 2, 64, bias=True) == "fp32/3xtf32/d64/4w/bias"


def test_smaller_gpus():
    # A100 (163 KiB): D = 64, 96 (even its 8-warp tiles, 162 KiB) and 256 (16-key tiles) fit;
    # D = 128 needs 174 KiB even with 4 warps and runs on the simple kernel there.
    assert fp32_plan(4, 2048, 2048, 16, 16, 64, gpu=A100) == "fp32/3xtf32/d64/4w"
    assert fp32_plan(4, 2048, 2048, 16, 16, 96, gpu=A100) == "fp32/3xtf32/d96/8w"
    assert fp32_plan(4, 2048, 2048, 16, 16, 256, gpu=A100) == "fp32/3xtf32/d256/4w"
    assert fp32_plan(4, 2048, 2048, 16, 16, 128, gpu=A100) == "simple"
    # sm_89 (99 KiB): D <= 64 only.
    assert fp32_plan(4, 2048, 2048, 16, 16, 64, gpu=ADA) == "fp32/3xtf32/d64/4w"
    assert fp32_plan(4, 2048, 2048, 16, 16, 96, gpu=ADA) == "simple"
    # Before sm_80: no tf32 tensor cores.
    assert fp32_plan(4, 2048, 2048, 16, 16, 64, gpu=TURING) == "simple"


def compiled_fp32_tile(dim, warps, precision, features, tuning):
    """An independent statement of what a build compiles (flash_fp32.h): the shipped build the
    3xTF32 tiles of 4 warps, and of 8 warps above D = 64; a tuning build every (warps, precision)
    pair; the sliding window, soft-cap and ALiBi one 4-warp 3xTF32 tile per head dim."""
    if features:
        return warps == 4 and precision == "3xtf32"
    return tuning or (precision == "3xtf32" and (warps == 4 or dim > 64))


@pytest.mark.parametrize("tuning", [False, True])
@pytest.mark.parametrize("mode", ["auto", "tf32", "4w", "8w"])
def test_every_mode_and_head_dim_plans_a_compiled_tile(mode, tuning):
    # Every DJL_ATTN_FLASH_FP32 value that plans a tile, every head dim up to 256, with and without
    # bias: the tile the plan names (fp32::Fp32Kernel, whose enumerators are
    # the build's tiles, so the launcher has no case to refuse) is one the build compiled.
    for dim in range(1, 257, 3):
        for shape in ((8, 2048, 2048, 16, 16), (1, 100, 100, 2, 2)):
            for flags in ({}, {"bias": True}, {"causal": True, "kv_lens": True}):
                plan = fp32_plan(*shape, dim, mode=mode, tuning=tuning, **flags)
                m = re.fullmatch(r"fp32/(3xtf32|tf32)/d(\d+)/(\d)w(/bias)?(/features)?(/scalar)?",
                                 plan)
                assert m, plan
                padded = int(m.group(2))
                assert padded >= dim and padded in (32, 64, 96, 128, 256), plan
                assert compiled_fp32_tile(padded, int(m.group(3)), m.group(1),
                                          m.group(5) is not None, tuning), plan
                assert (m.group(4) is not None) == bool(flags.get("bias")), plan

