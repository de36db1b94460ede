"""The plans of the paged CUDA launchers (cuda/paged/paged_plan.h): pure functions of a problem and
of a GPU's facts, tested on any machine (tests/plans.py). The expectations for the benchmark
shapes are the plans docs/benchmarks.md's paged_attention tables were measured with (an H200: 132
SMs; auto ran the flash decode kernel in every cell, v1/v2 forced ran the smem4 configuration,
v2 shortening its partitions for small grids); the rules decide between them elsewhere."""

import ctypes

import pytest

from plans import A100, ADA, H200, lib

TURING = (40, 64 * 1024, 7, 5)  # sm_75: no cp.async, no flash decode kernel

_decode = lib.djl_attn_test_paged_attention_plan
_decode.restype = ctypes.c_char_p
_decode.argtypes = ([ctypes.c_int64] * 6 + [ctypes.c_int32, ctypes.c_int32, ctypes.c_uint64,
                    ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p,
                    ctypes.c_char_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_int64,
                    ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                    ctypes.c_float])
_prefill = lib.djl_attn_test_paged_prefill_plan
_prefill.restype = ctypes.c_char_p
_prefill.argtypes = [ctypes.c_int64] * 3
_cache = lib.djl_attn_test_reshape_and_cache_plan
_cache.restype = ctypes.c_char_p
_cache.argtypes = ([ctypes.c_int64] * 3 + [ctypes.c_int32, ctypes.c_uint64, ctypes.c_int64,
                   ctypes.c_int64, ctypes.c_uint64, ctypes.c_int32])

ALIGNED = 0x7F0000001000  # 16-byte aligned addresses, as the caching allocator returns them


def fields(text):
    assert not text.startswith("error"), text
    return dict(item.split("=") for item in text.split())


def decode_plan(num_seqs, context, kernel="auto", config="smem4", partition=512, heads_q=32,
                heads_kv=8, dim=128, block_size=16, element_size=2, alibi=False, gpu=H200,
                query_address=ALIGNED, q_seq_stride=None, q_head_stride=None,
                cache_address=ALIGNED, fp8=False, window_left=-1, softcap=0.0):
    """The plan of paged_attention for a query [num_seqs, Hq, D] (contiguous unless strides are
    given) and max_context_len = context; an fp8 cache when `fp8`; the sliding window and
    soft-cap as the operator takes them."""
    q_head_stride = dim if q_head_stride is None else q_head_stride
    q_seq_stride = heads_q * dim if q_seq_stride is None else q_seq_stride
    return fields(_decode(num_seqs, heads_q, heads_kv, dim, block_size, context, element_size,
                          int(alibi), query_address, q_seq_stride, q_head_stride, cache_address,
                          kernel.encode(), config.encode(), partition, *gpu, int(fp8),
                          window_left, softcap).decode())


def v2(partition_size, partitions, num_seqs, config="smem4", heads_q=32, dim=128, head_tiles=1):
    return {"kernel": "v2", "config": config, "head_tiles": str(head_tiles),
            "partition_size": str(partition_size), "partitions": str(partitions),
            "workspace_floats": str(num_seqs * heads_q * partitions * (dim + 2)),
            "seqs_per_launch": str(num_seqs)}


def v1(num_seqs, config="smem4", head_tiles=1):
    return {"kernel": "v1", "config": config, "head_tiles": str(head_tiles),
            "seqs_per_launch": str(num_seqs)}


def flash(num_seqs):
    return {"kernel": "flash", "seqs_per_launch": str(num_seqs)}


# bench_paged.py's grid (Hq 32, Hkv 8, D 128, float16, block 16): (batch, context) -> v2's
# (partition_size, partitions) when forced: 512-token partitions halved, down to 64, while the
# grid has fewer than 4 blocks per SM (528 on 132 SMs).
BENCH_V2 = {
    (1, 1024): (64, 16), (1, 4096): (64, 64), (1, 16384): (128, 128),
    (8, 1024): (64, 16), (8, 4096): (256, 16), (8, 16384): (512, 32),
    (32, 1024): (256, 4), (32, 4096): (512, 8), (32, 16384): (512, 32),
    (128, 1024): (512, 2), (128, 4096): (512, 8), (128, 16384): (512, 32),
}


@pytest.mark.parametrize("shape", sorted(BENCH_V2))
def test_decode_plans_of_the_benchmark(shape):
    batch, context = shape
    assert decode_plan(batch, context) == flash(batch)
    assert decode_plan(batch, context, "flash") == flash(batch)
    assert decode_plan(batch, context, "v1") == v1(batch)
    assert decode_plan(batch, context, "v2") == v2(*BENCH_V2[shape], batch)


# The configuration table of bench_paged.py (v2 forced above context 2k, /pN: the partition
# DJL_ATTN_PAGED_PARTITION starts from): (batch, context, start) -> (partition_size, partitions).
# Only batch 32 at 4k with 2048-token partitions has too small a grid (256 x 2 blocks) and halves.
CONFIG_TABLE_V2 = {
    (32, 4096, 512): (512, 8), (32, 4096, 1024): (1024, 4), (32, 4096, 2048): (1024, 4),
    (32, 16384, 512): (512, 32), (32, 16384, 1024): (1024, 16), (32, 16384, 2048): (2048, 8),
    (128, 4096, 512): (512, 8), (128, 4096, 1024): (1024, 4), (128, 4096, 2048): (2048, 2),
    (128, 16384, 512): (512, 32), (128, 16384, 1024): (1024, 16), (128, 16384, 2048): (2048, 8),
}


@pytest.mark.parametrize("case", sorted(CONFIG_TABLE_V2))
@pytest.mark.parametrize("config", ["default", "smem4"])
def test_decode_plans_of_the_configuration_table(case, config):
    batch, context, partition = case
    assert decode_plan(batch, context, "v2", config, partition) == v2(
        *CONFIG_TABLE_V2[case], batch, config)


# bench_decode_step.py: 32:8 heads, D 128, float16, contexts 1k and 4k (+ the new token).
@pytest.mark.parametrize("batch", [1, 8, 32, 64])
@pytest.mark.parametrize("context", [1025, 4097])
def test_decode_step_plans(batch, context):
    assert decode_plan(batch, context) == flash(batch)


def test_decode_v1_v2_rules():
    # No flash kernel (float32 here): auto takes v1 when the grid is full and the context short,
    # v2 otherwise, and v1 for a single partition or more than 8192 of them.
    f32 = dict(element_size=4)
    assert decode_plan(66, 2048, **f32) == v1(66, "default")  # 66 x 8 = 528 blocks: full
    assert decode_plan(65, 2048, **f32) == v2(512, 4, 65, "default")  # 520 x 4 blocks
    assert decode_plan(16, 2048, **f32) == v2(256, 8, 16, "default")  # 128 x 4: halved once
    assert decode_plan(66, 2049, **f32) == v2(512, 5, 66, "default")
    assert decode_plan(1, 512, **f32) == v1(1, "default")  # one partition
    assert decode_plan(1, 513, **f32) == v2(64, 9, 1, "default")
    assert decode_plan(1, 8192 * 512 + 1, **f32) == v1(1, "default")  # 8193 partitions
    # On a smaller GPU the grid is full earlier (4 x 108 blocks on an A100).
    assert decode_plan(54, 2048, gpu=A100, **f32) == v1(54, "default")
    assert decode_plan(53, 2048, gpu=A100, **f32) == v2(512, 4, 53, "default")
    # v2 stops halving at 64 tokens, or once the grid is full (8 x 2048 blocks here).
    assert decode_plan(1, 100, "v2", **f32) == v2(64, 2, 1, "default")
    assert decode_plan(1, 1 << 20, **f32) == v2(512, 2048, 1, "default")
    # A GQA group larger than 4 query heads takes several tiles: 32:1 is 8 tiles.
    assert decode_plan(66, 2048, heads_kv=1, **f32) == v1(66, "default", head_tiles=8)


def test_decode_stream_configs_exist_for_half_precision_d64_d128_only():
    for dim, config in ((64, "smem4"), (128, "smem4"), (80, "default"), (96, "default"),
                        (256, "default")):
        assert decode_plan(32, 4096, "v2", dim=dim)["config"] == config
    assert decode_plan(32, 4096, "v2", element_size=4)["config"] == "default"
    assert decode_plan(32, 4096, "v2", config="default")["config"] == "default"


def test_decode_flash_rules():
    # Each of these keeps the flash kernel off; auto (and a forced flash) then run v1/v2.
    off = [dict(element_size=4),
           dict(dim=96),  # no flash kernel for D = 96 (64, 128, 256 only)
           dict(gpu=TURING),  # sm_75: the flash kernel needs sm_80
           dict(heads_q=136, heads_kv=8),  # a group of 17 query heads: more than one m16 tile
           dict(query_address=ALIGNED + 2),  # query rows not 16-byte aligned
           dict(q_seq_stride=32 * 128 + 4), dict(q_head_stride=132)]
    for case in off:
        for kernel in ("auto", "flash"):
            assert decode_plan(32, 4096, kernel, **case)["kernel"] == "v2", (case, kernel)
    assert decode_plan(32, 4096, heads_q=128, heads_kv=8) == flash(32)  # a group of 16
    # ALiBi ([Hq] or [num_seqs, Hq]: the plan sees only that there are slopes) runs its ALiBi
    # instantiation, forced or not.
    for kernel in ("auto", "flash"):
        assert decode_plan(32, 4096, kernel, alibi=True) == flash(32)
        assert decode_plan(32, 4096, kernel, alibi=True, heads_q=128) == flash(32)
    # The flash kernel's shared memory (flash_shapes.h): D = 64 takes 66 KiB, D = 128 100 KiB
    # and D = 256 136 KiB, so an sm_89 part (99 KiB) runs it at D = 64 only, an A100 at all three.
    assert decode_plan(32, 4096, dim=64, heads_q=8, heads_kv=2, gpu=ADA) == flash(32)
    for dim in (128, 256):
        assert decode_plan(32, 4096, dim=dim, gpu=ADA)["kernel"] == "v2"
        assert decode_plan(32, 4096, dim=dim, gpu=A100) == flash(32)


def test_decode_forced_v2_lengthens_partitions_past_8192():
    # 2^23 tokens in 512-token partitions would be 16384 partitions; v2 takes 1024 tokens.
    assert decode_plan(1, 1 << 23, "v2") == v2(1024, 8192, 1)
    assert decode_plan(1, 1 << 30, "v2") == v2(131072, 8192, 1)
    assert decode_plan(1, 1 << 23, "v1") == v1(1)


def test_decode_unaligned_caches_take_the_row_kernel():
    for kernel in ("auto", "v1", "v2", "flash"):
        plan = decode_plan(8, 4096, kernel, cache_address=ALIGNED + 2)
        assert plan == {"kernel": "rows", "seqs_per_launch": "8"}
    assert decode_plan(8, 4096, cache_address=ALIGNED + 8, element_size=4)["kernel"] == "rows"


@pytest.mark.parametrize("kernel", ["v1", "v2"])
@pytest.mark.parametrize("block_size", [4, 12, 64])
def test_decode_block_sizes_off_the_list_take_the_row_kernel(kernel, block_size):
    # v1/v2 have a kernel per listed block size (the bindings refuse others): the plan names one
    # of them to the launcher, or runs the row kernel; fp8 caches take any at run time.
    assert decode_plan(4, 1000, kernel=kernel, block_size=block_size)["kernel"] == "rows"
    assert decode_plan(4, 1000, kernel=kernel, block_size=32)["kernel"] == kernel
    fp8 = decode_plan(4, 1000, kernel=kernel, block_size=block_size, fp8=True)
    assert (fp8["kernel"], fp8["block_size"]) == (kernel, "run_time")


def test_decode_batches_past_the_grid_limit_run_in_slices():
    # v1/v2 put the sequences in grid y (at most 65535); the flash kernel puts batch x Hkv
    # blocks in grid x (at most 2^31 - 1).
    assert decode_plan(65535, 64, element_size=4)["seqs_per_launch"] == "65535"
    assert decode_plan(70000, 64, element_size=4)["seqs_per_launch"] == "65535"
    assert decode_plan(70000, 4096, "v2", element_size=4) == v2(512, 8, 65535, "default")
    assert decode_plan(70000, 64) == flash(70000)
    assert decode_plan(1 << 30, 64, heads_q=8) == flash((2**31 - 1) // 8)


def test_prefill_grid_stays_within_cuda_limits():
    assert _prefill(3, 32, 100).decode() == "grid=25,32,3"
    assert _prefill(70000, 70000, 1).decode() == "grid=1,65535,65535"
    assert _prefill(1, 1, 1 << 40).decode() == "grid=2147483647,1,1"
    assert _prefill(2, 4, 0).decode() == "grid=0,4,2"  # nothing to launch


def cache_plan(tokens, dim=128, element_size=2, key_address=ALIGNED, token_stride=None,
               head_stride=None, cache_address=ALIGNED, heads_kv=8, fp8=False):
    head_stride = dim if head_stride is None else head_stride
    token_stride = heads_kv * dim if token_stride is None else token_stride
    return fields(_cache(tokens, heads_kv, dim, element_size, key_address, token_stride,
                         head_stride, cache_address, int(fp8)).decode())


def test_reshape_and_cache_plans():
    # bench_paged.py's cache writes (Hkv 8, D 128, float16): 16-byte copies, a block per token.
    for tokens in (128, 16384):
        assert cache_plan(tokens) == {"vectorised": "1", "blocks": str(tokens)}
    # Element copies when a row, a stride or a pointer is not a whole number of 16 bytes.
    assert cache_plan(4, dim=100)["vectorised"] == "0"
    assert cache_plan(4, dim=100, element_size=4)["vectorised"] == "1"
    assert cache_plan(4, key_address=ALIGNED + 2)["vectorised"] == "0"
    assert cache_plan(4, cache_address=ALIGNED + 2)["vectorised"] == "0"
    assert cache_plan(4, token_stride=8 * 128 + 4)["vectorised"] == "0"
    assert cache_plan(4, head_stride=132)["vectorised"] == "0"
    # Past CUDA's grid limit the launch runs slices of 2^31 - 1 tokens.
    assert cache_plan(1 << 32)["blocks"] == str(2**31 - 1)


def flash_fp8(num_seqs, partition_size=0, partitions=1, heads_q=32, dim=128):
    plan = {"kernel": "flash_fp8", "seqs_per_launch": str(num_seqs)}
    if partitions > 1:
        plan.update(partition_size=str(partition_size), partitions=str(partitions),
                    workspace_floats=str(num_seqs * heads_q * partitions * (dim + 2)))
    return plan


# bench_paged.py's fp8 shapes and a few others (Hq 32, Hkv 8, D 128, float16 queries, H200):
# one block per (sequence, kv head) and v2's partitions, halved while fewer than 4 blocks per SM.
FP8_PLANS = {
    (32, 4096): (512, 8), (32, 8192): (512, 16), (64, 4096): (512, 8), (64, 8192): (512, 16),
    (1, 1024): (64, 16), (128, 512): (0, 1),
}


@pytest.mark.parametrize("kernel", ["auto", "flash"])
@pytest.mark.parametrize("shape", sorted(FP8_PLANS))
def test_fp8_caches_run_the_fp8_tensor_core_kernel(kernel, shape):
    batch, context = shape
    assert decode_plan(batch, context, kernel, fp8=True) == flash_fp8(batch, *FP8_PLANS[shape])


def test_fp8_caches_fall_back_to_v1_v2():
    # What the fp8 tensor-core kernel does not take runs v1/v2 as for a float16 cache: forced
    # v1/v2, float32 queries, ALiBi, head dims other than 64/128/256, groups above 16, sm_75.
    for kw in (dict(kernel="v1"), dict(kernel="v2"), dict(element_size=4), dict(alibi=True),
               dict(dim=80), dict(dim=96), dict(heads_q=32, heads_kv=1), dict(gpu=TURING)):
        fp8 = decode_plan(32, 4096, fp8=True, **kw)
        assert fp8["kernel"] in ("v1", "v2"), kw
        forced = kw.get("kernel", "v2" if fp8["kernel"] == "v2" else "v1")
        # ... on the register default (fp8 caches have no stream configurations) and one kernel
        # for every block size.
        assert fp8 == {**decode_plan(32, 4096, **{**kw, "kernel": forced}),
                       "config": "default", "block_size": "run_time"}, kw
    # The fp8 kernel's ring at D = 256 (104 KiB) exceeds an sm_89 part's 99 KiB: v1/v2 there;
    # D = 128 (72 KiB) fits.
    assert decode_plan(32, 4096, dim=256, fp8=True, gpu=ADA)["kernel"] in ("v1", "v2")
    assert decode_plan(32, 4096, dim=128, fp8=True, gpu=ADA)["kernel"] == "flash_fp8"
    assert decode_plan(32, 4096, dim=256, fp8=True, gpu=A100)["kernel"] == "flash_fp8"
    # A cache view that is not 16-byte aligned runs the element-load kernel, fp8 or not.
    assert decode_plan(32, 4096, fp8=True, cache_address=ALIGNED + 8)["kernel"] == "rows"
    # Very long contexts: longer partitions, at most 8192 of them.
    assert decode_plan(1, 1 << 23, fp8=True) == flash_fp8(1, 1024, 8192)


@pytest.mark.parametrize("config", ["smem4", "default"])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("kernel", ["v1", "v2"])
def test_fp8_caches_run_the_register_default_whatever_config_is_asked(kernel, dim, config):
    # smem4 is compiled for float16/bfloat16 caches only (has_stream_configs): an fp8 cache
    # asking for it gets the default, where the same call on a float16 cache gets what it asked.
    assert decode_plan(32, 4096, kernel, config, dim=dim, fp8=True)["config"] == "default"
    assert decode_plan(32, 4096, kernel, config, dim=dim)["config"] == config


@pytest.mark.parametrize("block_size", [8, 16, 32])
@pytest.mark.parametrize("kw", [dict(kernel="v1"), dict(kernel="v2"), dict(element_size=4),
                                dict(alibi=True), dict(dim=80), dict(dim=48)])
def test_fp8_v1_v2_take_the_block_size_at_run_time(block_size, kw):
    # One fp8 v1/v2 kernel per (query dtype, head dim) serves every block size; the float16 cache
    # of the same call runs the kernel compiled for its block size (no block_size field).
    fp8 = decode_plan(32, 4096, block_size=block_size, fp8=True, **kw)
    assert fp8["kernel"] in ("v1", "v2") and fp8["block_size"] == "run_time", kw
    assert "block_size" not in decode_plan(32, 4096, block_size=block_size, **kw), kw
    # The fp8 tensor-core kernel and the element-load kernel have no such field.
    assert "block_size" not in decode_plan(32, 4096, block_size=block_size, fp8=True)
    assert "block_size" not in decode_plan(32, 4096, block_size=block_size, dim=40, fp8=True)


def test_fp8_reshape_and_cache_plans():
    # 8 elements per thread and one 8-byte store: rows of whole words and 8-byte aligned caches;
    # the keys are read an element at a time, so their strides and address do not matter.
    assert cache_plan(128, fp8=True) == {"vectorised": "1", "blocks": "128"}
    assert cache_plan(4, fp8=True, key_address=ALIGNED + 2, head_stride=131)["vectorised"] == "1"
    assert cache_plan(4, fp8=True, cache_address=ALIGNED + 8)["vectorised"] == "1"
    assert cache_plan(4, fp8=True, cache_address=ALIGNED + 4)["vectorised"] == "0"
    assert cache_plan(4, dim=100, fp8=True)["vectorised"] == "0"
    assert cache_plan(4, dim=104, fp8=True)["vectorised"] == "1"


def test_head_dims_between_the_compiled_ones():
    # Rows of whole 16-byte vectors: v1/v2 on the next compiled head dim (smem4 where that one
    # has it); other rows: the element-load kernel.
    assert decode_plan(32, 4096, "v2", dim=32) == {**v2(512, 8, 32, dim=32),
                                                   "padded_head_dim": "64"}
    assert decode_plan(32, 4096, "v1", dim=200) == {**v1(32, "default"), "padded_head_dim": "256"}
    assert decode_plan(32, 4096, "v1", dim=100, element_size=4) == {**v1(32, "default"),
                                                                    "padded_head_dim": "128"}
    assert decode_plan(32, 4096, "v1", dim=112) == {**v1(32, "smem4"), "padded_head_dim": "128"}
    for kw in (dict(dim=20), dict(dim=7), dict(dim=1, element_size=4), dict(dim=255),
               dict(dim=40, fp8=True), dict(dim=8, fp8=True)):
        assert decode_plan(32, 4096, **kw)["kernel"] == "rows", kw
    assert decode_plan(32, 4096, "v1", dim=48, fp8=True) == {**v1(32, "default"),
                                                            "padded_head_dim": "64",
                                                            "block_size": "run_time"}
    # The compiled head dims run their own kernels (no padded_head_dim field).
    assert "padded_head_dim" not in decode_plan(32, 4096, "v2", dim=80)
    # The flash kernels keep their own head dims: auto on D = 32 runs v2.
    assert decode_plan(32, 4096, dim=32)["kernel"] == "v2"
    assert decode_plan(32, 4096, dim=32, fp8=True)["kernel"] == "v2"


# ---- sliding window and soft-cap ----------------------------------------------------------------
# The flash family's decode kernel runs both in its features instantiation: a call on a
# float16/bfloat16 cache with a window or a soft-cap stays on it (auto and a forced flash alike),
# which starts each sequence at its window's first tile and splits only the window's span (the
# split is flash_attention's, plan_decode_split over decode_walked_keys: test_plans_flash.py's
# test_a_decode_window_splits_only_its_span), ALiBi too (its ALiBi instantiation), and forced
# v1/v2 run them too. The fp8 tensor-core kernel has the window and soft-cap and keeps running
# them; ALiBi sends an fp8 cache to v1/v2.

FEATURES = [(0, 0.0), (4094, 0.0), (1000, 0.0), (-1, 30.0), (4096, 50.0)]


@pytest.mark.parametrize("kernel", ["auto", "flash"])
def test_decode_features_stay_on_the_flash_kernel(kernel):
    assert decode_plan(8, 4096, kernel)["kernel"] == "flash"
    for window_left, softcap in FEATURES + [(4095, 0.0), (4096, 0.0), (1 << 40, 0.0)]:
        for batch, context in ((8, 4096), (1, 32768), (128, 32768)):
            plan = decode_plan(batch, context, kernel, window_left=window_left, softcap=softcap)
            assert plan == flash(batch), (window_left, softcap, plan)
        # bfloat16 (plans like float16), and a group of 16 query heads per kv head.
        assert decode_plan(8, 4096, kernel, window_left=window_left, softcap=softcap,
                           heads_q=128)["kernel"] == "flash"
        plan = decode_plan(8, 4096, kernel, window_left=window_left, softcap=softcap, alibi=True)
        assert plan == flash(8), (window_left, softcap, plan)
    # What keeps the flash kernel off without features keeps it off with them.
    for off in (dict(dim=96), dict(element_size=4), dict(heads_q=136)):
        plan = decode_plan(8, 4096, kernel, window_left=100, softcap=30.0, **off)
        assert plan["kernel"] in ("v1", "v2"), (off, plan)


def test_forced_v1_v2_still_run_the_features():
    assert decode_plan(8, 4096, "v1", window_left=100, softcap=30.0) == v1(8)
    assert decode_plan(8, 4096, "v2", window_left=100, softcap=30.0)["kernel"] == "v2"


@pytest.mark.parametrize("kernel", ["auto", "flash"])
def test_fp8_decode_features_stay_on_the_tensor_cores(kernel):
    for window_left, softcap in FEATURES + [(-1, 0.0), (1 << 40, 0.0)]:
        plan = decode_plan(8, 4096, kernel, fp8=True, window_left=window_left, softcap=softcap)
        assert plan["kernel"] == "flash_fp8", (window_left, softcap, plan)
        plan = decode_plan(8, 4096, kernel, fp8=True, window_left=window_left, softcap=softcap,
                           alibi=True)
        assert plan["kernel"] in ("v1", "v2"), (window_left, softcap, plan)


def test_decode_window_sizes_v2_by_its_span():
    # Batch 1, 32k context, a 4k window (Mistral): v2 splits the window's span (at most
    # window_left + 64 keys), not the context: 4160 keys at 64-token partitions (the grid of 8
    # kv heads x 65 partitions is still below 4 blocks per SM on 132 SMs), where the whole
    # context takes 128 partitions of 256. No block is launched for keys before the window.
    assert decode_plan(1, 32768, "v2") == v2(256, 128, 1)
    assert decode_plan(1, 32768, "v2", window_left=4096) == v2(64, 65, 1)
    # Where the flash kernel does not run (query rows that are not 16-byte aligned here), auto's
    # v1/v2 choice sizes by the span: a window narrower than v1's automatic limit on a full grid
    # is one pass of v1.
    unaligned = dict(query_address=ALIGNED + 2)
    assert decode_plan(1, 32768, window_left=4096, **unaligned) == v2(64, 65, 1)
    assert decode_plan(128, 32768, window_left=1000, **unaligned) == v1(128)
    assert decode_plan(128, 32768, window_left=-1, softcap=30.0, **unaligned) == v2(512, 64, 128)
    # A window of 0 (the query's own key): one pass, whatever the context.
    assert decode_plan(1, 32768, "v1", window_left=0) == v1(1)
    assert decode_plan(1, 32768, window_left=0, **unaligned) == v1(1)


def test_fp8_decode_window_sizes_the_split_by_its_span():
    # flash_fp8 splits like v2: batch 1, 32k context, 4k window: 65 partitions of 64 (4160 keys)
    # instead of the whole context's.
    whole = decode_plan(1, 32768, fp8=True)
    windowed = decode_plan(1, 32768, fp8=True, window_left=4096)
    assert whole["kernel"] == windowed["kernel"] == "flash_fp8"
    assert (windowed["partition_size"], windowed["partitions"]) == ("64", "65")
    assert int(whole["partitions"]) * int(whole["partition_size"]) >= 32768


STREAM_CONFIGS = ["default", "smem4", "w8l2", "smem8", "pf", "w8l2pf"]


@pytest.mark.parametrize("config", STREAM_CONFIGS)
@pytest.mark.parametrize("kernel", ["auto", "v1", "v2"])
def test_every_config_and_head_dim_plans_a_compiled_kernel(kernel, config):
    # v1/v2's launcher (paged_attention_launch.cuh) instantiates the stream configurations for
    # float16/bfloat16 query and caches at (kernel) head dims 64 and 128 only, the register
    # default elsewhere: for every switch value, head dim of the list and off it (padded up),
    # dtype and cache, the plan names a configuration only where it is compiled. (The tuning
    # configurations exist in a shipped build's StreamConfig not at all.)
    for dim in (16, 32, 48, 64, 72, 80, 96, 112, 128, 192, 256):
        for element_size, fp8 in ((2, False), (4, False), (2, True), (4, True)):
            plan = decode_plan(32, 4096, kernel, config, dim=dim, element_size=element_size,
                               fp8=fp8)
            if plan["kernel"] not in ("v1", "v2"):
                continue
            runs = int(plan.get("padded_head_dim", dim))
            assert runs in (64, 80, 96, 128, 256) and runs >= dim, plan
            streams = element_size == 2 and not fp8 and runs in (64, 128)
            assert plan["config"] == (config if streams else "default"), (dim, plan)
