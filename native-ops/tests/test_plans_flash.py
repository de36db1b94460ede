"""The plans of the CUDA flash attention forward (cuda/flash/flash_plan.h): pure functions of a
call, the DJL_ATTN_FLASH_* switches, what the build compiled and a GPU's facts, tested on any
machine (tests/plans.py). The expectations for the benchmark shapes are the kernels the tables in
docs/benchmarks.md were measured with on an H200 (132 SMs, 227 KiB of opt-in shared memory per
block, sm_90, a build for 80-real;90 with the Hopper kernel): "ours" and "hopper" of the prefill
table are the Hopper kernel, "sm80" (DJL_ATTN_FLASH_HOPPER=off) the tile kernel with the tuned
tiles; "ours" of the decode table is the split-KV decode kernel on the folded query groups,
"tile" (DJL_ATTN_FLASH_DECODE=off) the tile kernel's 64-row tiles split over the keys.

Split counts depend on how many blocks of a kernel stay resident per SM, which the launcher asks
the CUDA occupancy API; the tests state it. On an H200 both kernels of the decode table keep 2:
the decode kernel at D = 128 needs 100 KiB of shared memory (DecodeTile<128>) and the tile
kernel's 64-row tiles at D = 128 80 KiB, 2 blocks within the SM's 228 KiB, and their registers
allow 2 (__launch_bounds__ of the decode kernel asks for 2; the tile kernel uses at most 176)."""

import ctypes
import re

import pytest

from plans import A100, ADA, H200, lib

TURING = (40, 64 * 1024, 7, 5)  # sm_75: no bfloat16 mma.sync, no cp.async
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}

_flash = lib.djl_attn_test_flash_plan
_flash.restype = ctypes.c_char_p
_flash.argtypes = ([ctypes.c_int32] + [ctypes.c_int64] * 6 +
                   [ctypes.c_double, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p,
                    ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_int32,
                    ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64])

# Flags of djl_attn_test_flash_plan (tests/native/flash_plan_exports.cpp).
FLAGS = {"causal": 1, "varlen": 2, "kv_lens": 4, "bias": 8, "unaligned": 16, "hopper_built": 32,
         "tuning_build": 64, "hopper_free": 128, "broadcast_kv": 256,
         # window_left = `window` (256 unless given), window_right = 16, softcap = 30, ALiBi
         "window_left": 512, "window_right": 1024, "softcap": 2048, "alibi": 4096}
FEATURES = ["window_left", "window_right", "softcap", "alibi"]


def flash_plan(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, dtype="float16", gpu=H200,
               scale=None, decode="auto", hopper="auto", config="auto", tiled_per_sm=2,
               decode_per_sm=2, hopper_built=True, window=256, **flags):
    """The plan's description (describe() in flash_plan.h, plus /scratch<bytes> for a split)."""
    scale = dim ** -0.5 if scale is None else scale
    bits = FLAGS["hopper_built"] if hopper_built else 0
    for name, on in flags.items():
        bits |= FLAGS[name] if on else 0
    sms, smem, major, minor = gpu
    return _flash(DTYPES[dtype], batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, scale, bits,
                  decode.encode(), hopper.encode(), config.encode(), sms, smem, major, minor,
                  tiled_per_sm, decode_per_sm, window).decode()


# --- the benchmark shapes (bench/bench_flash.py) --------------------------------------------------

# Prefill: 16384 tokens per batch, H * D = 2048, S 512..16k, fp16/bf16, D 64/128, causal and not.
PREFILL = [(dtype, dim, seqlen, causal)
           for dtype in ("float16", "bfloat16") for dim in (64, 128)
           for seqlen in (512, 1024, 2048, 4096, 8192, 16384) for causal in (False, True)]
# The sm_80 kernel's tuned tiles (kTunedD64, kTunedD128 in flash_shapes.h).
SM80_TILES = {64: "m128n128w4s2for/128x128", 128: "m128n64w4s2for/128x64"}


@pytest.mark.parametrize("dtype,dim,seqlen,causal", PREFILL)
def test_prefill_benchmark_plans(dtype, dim, seqlen, causal):
    batch, heads = 16384 // seqlen, 2048 // dim
    shape = (batch, seqlen, seqlen, heads, heads, dim)
    # D = 64 runs 3 consumer warpgroups but for causal calls of at most 1024 rows (hopper_consumers).
    consumers = 3 if dim == 64 and not (causal and seqlen <= 1024) else 2
    hopper = "hopper/D%d/consumers%d/grid132/pingpong" % (dim, consumers)
    # "ours" (auto): the grid of 128- or 192-row tiles fills the GPU, so the Hopper kernel takes it.
    assert flash_plan(*shape, dtype=dtype, causal=causal) == hopper
    assert flash_plan(*shape, dtype=dtype, causal=causal, hopper="on") == hopper
    # "sm80": thousands of tiles, no split.
    assert (flash_plan(*shape, dtype=dtype, causal=causal, hopper="off")
            == "tiled/D%d/%s/splits1" % (dim, SM80_TILES[dim]))
    # A build without the sm_90a kernel, and an A100, run the sm_80 kernel with the same tiles.
    assert (flash_plan(*shape, dtype=dtype, causal=causal, hopper_built=False)
            == "tiled/D%d/%s/splits1" % (dim, SM80_TILES[dim]))
    assert (flash_plan(*shape, dtype=dtype, causal=causal, gpu=A100)
            == "tiled/D%d/%s/splits1" % (dim, SM80_TILES[dim]))


# Decode: Sq = 1, Hq = 32, Hkv = 8, D = 128, float16, B 1 and 32, Sk 1k/8k/32k. The 4 query heads
# of each kv head fold into 4 rows: blocks = B * 8. Expected splits and scratch (float32 partials
# [splits, 8, B * 4, 129]) follow the wave-efficiency rules of flash_plan.cpp with 2 resident
# blocks per SM (264 slots): a batch of 32 (256 blocks) already fills 97% of one wave.
DECODE_PLANS = {
    (1, 1024): ("fold+decode/D128/splits8/scratch132096",
                "fold+tiled/D128/base/64x64/splits16/scratch264192"),
    (1, 8192): ("fold+decode/D128/splits32/scratch528384",
                "fold+tiled/D128/base/64x64/splits32/scratch528384"),
    (1, 32768): ("fold+decode/D128/splits31/scratch511872",
                 "fold+tiled/D128/base/64x64/splits31/scratch511872"),
    (32, 1024): ("fold+decode/D128/splits1", "fold+tiled/D128/base/64x64/splits1"),
    (32, 8192): ("fold+decode/D128/splits1", "fold+tiled/D128/base/64x64/splits1"),
    (32, 32768): ("fold+decode/D128/splits1", "fold+tiled/D128/base/64x64/splits1"),
}


@pytest.mark.parametrize("batch,seqlen_k", sorted(DECODE_PLANS))
def test_decode_benchmark_plans(batch, seqlen_k):
    ours, tile = DECODE_PLANS[(batch, seqlen_k)]
    shape = (batch, 1, seqlen_k, 32, 8, 128)
    assert flash_plan(*shape) == ours
    assert flash_plan(*shape, decode="on") == ours
    assert flash_plan(*shape, decode="off") == tile
    # bench_flash.py's ALiBi column: the same fold and split on the ALiBi instantiation (each
    # folded row reads its own query head's slope).
    assert flash_plan(*shape, alibi=True) == ours.replace("decode/D128/", "decode/D128/alibi/")
    # The Hopper switch changes nothing here: 4 folded rows are the decode kernel's, and at most
    # 64 rows keep the tile kernel's 64-row tiles.
    assert flash_plan(*shape, hopper="on") == ours
    assert flash_plan(*shape, decode="off", hopper="on") == tile


# --- the rules ---------------------------------------------------------------------------------


def test_what_the_tensor_core_kernels_cannot_read_in_place_is_staged():
    # D % 8 != 0: copies padded to 40 run the D = 64 instantiation with the tuned tiles; their
    # split scratch is sized by the copies' head dim (2 ranges x 4 heads x 512 rows x 41 floats).
    assert flash_plan(16, 256, 256, 8, 8, 33) == "staged+tiled/D64/m128n128w4s2for/128x128/splits1"
    assert flash_plan(2, 256, 256, 4, 4, 33) == \
        "staged+tiled/D64/m128n128w4s2for/128x128/splits2/scratch671744"
    # Rows that are not 16-byte aligned; the copies are, and take the Hopper kernel.
    assert flash_plan(8, 1024, 1024, 16, 16, 128, unaligned=True) == \
        "staged+hopper/D128/consumers2/grid132/pingpong"
    # A staged decode folds its copies (D = 125 padded to 128). D = 120 needs no copies, and the
    # decode kernel takes exact head dims only: it runs on the tile kernel padded to 128.
    assert flash_plan(1, 1, 4096, 32, 8, 125).startswith("staged+fold+decode/D128/")
    assert flash_plan(1, 1, 4096, 32, 8, 120).startswith("fold+tiled/D128/base/64x64/")
    # q/k/v bias would need the same padding: the simple kernel takes those.
    assert flash_plan(2, 128, 128, 4, 4, 33, bias=True) == "simple"


def test_float32_and_older_gpus_take_the_simple_kernel():
    # float32 takes its own tensor-core kernel from sm_80 on (test_plans_fp32.py), the simple
    # kernel before.
    assert flash_plan(2, 1024, 1024, 16, 16, 128, dtype="float32") == "fp32/3xtf32/d128/8w"
    assert flash_plan(2, 1024, 1024, 16, 16, 128, dtype="float32", gpu=TURING) == "simple"
    assert flash_plan(2, 1024, 1024, 16, 16, 128, gpu=TURING) == "simple"
    # sm_80 but less than the 96 KiB every default tile shape needs.
    assert flash_plan(2, 1024, 1024, 16, 16, 128, gpu=(108, 64 * 1024, 8, 0)) == "simple"
    # Unaligned views are staged only where the tensor-core kernels run at all; float32 copies
    # them float by float.
    assert flash_plan(2, 64, 64, 4, 4, 33, dtype="float32") == "fp32/3xtf32/d64/4w/scalar"
    assert flash_plan(2, 64, 64, 4, 4, 33, gpu=TURING) == "simple"


def test_hopper_auto_leaves_small_grids_to_the_split_tile_kernel():
    # 2 * 8 * 2 = 32 tiles of 128 rows: less than 80% of 132 SMs.
    small = (2, 256, 4096, 8, 8, 128)
    plan = flash_plan(*small)
    assert plan.startswith("tiled/D128/m128n64w4s2for/128x64/splits") and "/splits1" not in plan
    assert flash_plan(*small, hopper="on") == "hopper/D128/consumers2/grid32/pingpong"
    # 106 tiles fill 80% of the SMs: the Hopper kernel, on a persistent grid of one block per SM.
    rows = hopper_rows(64)
    assert flash_plan(1, rows * 53, 1024, 2, 2, 64) == "hopper/D64/consumers3/grid106/pingpong"
    assert flash_plan(1, rows * 52, 1024, 2, 2, 64).startswith("tiled/")
    assert flash_plan(1, 128 * 53, 1024, 2, 2, 128) == "hopper/D128/consumers2/grid106/pingpong"
    assert flash_plan(1, 128 * 52, 1024, 2, 2, 128).startswith("tiled/")


def hopper_rows(dim, seqlen_q=384, causal=False):
    """Query rows of one Hopper work item at `dim`: 64 per consumer warpgroup (hopper::block_m,
    flash_shapes.h), the count the plan names; its grid agrees: one (batch, head) of seqlen_q
    rows is ceil(seqlen_q / rows) items, each a block of the grid."""
    plan = flash_plan(1, seqlen_q, 1024, 1, 1, dim, causal=causal, hopper="on")
    match = re.fullmatch(r"hopper/D%d/consumers(\d)/grid(\d+)/pingpong" % dim, plan)
    assert match, plan
    rows = 64 * int(match.group(1))
    assert int(match.group(2)) == -(-seqlen_q // rows), (plan, seqlen_q)
    return rows


def test_hopper_d64_consumers_are_chosen_per_call():
    # D = 64 runs 3 consumer warpgroups (192-row tiles) except causal calls of at most 1024 query
    # rows, where 3 measured 6-13% slower than 2 on an H100 (hopper_consumers, flash_plan.cpp).
    for seqlen_q in (129, 385, 1000, 1024):
        assert hopper_rows(64, seqlen_q, causal=True) == 128, seqlen_q
    for seqlen_q in (1025, 4096):
        assert hopper_rows(64, seqlen_q, causal=True) == 192, seqlen_q
    for seqlen_q in (129, 385, 1024, 4096):
        assert hopper_rows(64, seqlen_q) == 192, seqlen_q
    # D = 128 and 256 have 2 consumers only.
    for dim in (128, 256):
        for seqlen_q, causal in ((1024, True), (1024, False), (4096, True), (4096, False)):
            assert hopper_rows(dim, seqlen_q, causal=causal) == 128, (dim, seqlen_q, causal)


def test_hopper_tiles_are_64_rows_per_consumer_warpgroup():
    for dim in (64, 128, 256):
        for causal in (False, True):
            rows = hopper_rows(dim, causal=causal)
            # Query lengths on either side of the tile edges: ceil(Sq / block_m) items per
            # (batch, head), over a grid of at most one block per SM.
            for seqlen_q in (65, rows - 1, rows, rows + 1, 2 * rows + 1, 1000):
                items = 3 * 5 * -(-seqlen_q // rows)
                assert (flash_plan(3, seqlen_q, 700, 5, 5, dim, causal=causal, hopper="on")
                        == "hopper/D%d/consumers%d/grid%d/pingpong"
                        % (dim, rows // 64, min(items, 132))), \
                    (dim, seqlen_q, causal)


def test_hopper_takes_only_what_it_covers():
    big = (8, 1024, 1024, 16, 16)
    assert flash_plan(*big, 64, hopper_free=True) == "hopper/D64/consumers3/grid132/free"
    # D = 256 on 64-key tiles (hopper::block_n) fits the Hopper kernel's shared memory too.
    assert flash_plan(*big, 256) == "hopper/D256/consumers2/grid132/pingpong"
    assert flash_plan(*big, 256, hopper="off").startswith("tiled/D256/base/64x32/")
    # Head dims other than 64, 128 and 256, bias, varlen, a scale <= 0, 64 rows or fewer.
    assert flash_plan(*big, 96).startswith("tiled/D96/base/128x64/")
    assert flash_plan(*big, 128, bias=True) == "tiled/D128/base/128x64/bias/splits1"
    assert flash_plan(*big, 128, varlen=True) == "tiled/D128/m128n64w4s2for/128x64/splits1"
    # A scale <= 0 also rules out the folded-scale tuned tiles.
    assert flash_plan(*big, 128, scale=0.0, hopper="on") == "tiled/D128/base/128x64/splits1"
    assert flash_plan(64, 64, 1024, 16, 16, 128, hopper="on").startswith("tiled/D128/base/64x64/")
    # Compute capability 9.0 only, with the kernel in the build.
    assert flash_plan(*big, 128, gpu=(132, 227 * 1024, 10, 0)).startswith("tiled/")
    assert flash_plan(*big, 128, hopper="on", hopper_built=False).startswith("tiled/")
    # Strides TMA cannot describe: k and v broadcast over the batch (batch stride 0). The tile
    # kernel reads them in place.
    assert (flash_plan(*big, 128, broadcast_kv=True, hopper="on")
            == "tiled/D128/m128n64w4s2for/128x64/splits1")
    # kv_lens and causal masks are the kernel's own business.
    assert flash_plan(*big, 128, kv_lens=True, causal=True) == "hopper/D128/consumers2/grid132/pingpong"


def test_a_named_tile_configuration_is_an_sm80_measurement():
    big = (8, 1024, 1024, 16, 16, 128)
    # Under "auto" a named configuration keeps the call on the sm_80 kernel; "on" still runs
    # the Hopper kernel.
    assert flash_plan(*big, config="base") == "tiled/D128/base/128x64/splits1"
    assert flash_plan(*big, config="base", hopper="on") == "hopper/D128/consumers2/grid132/pingpong"
    assert (flash_plan(*big, config="m128n64w8s2", tuning_build=True, hopper="off")
            == "tiled/D128/m128n64w8s2/128x64/splits1")
    # Where it is not compiled (a shipped build, or another head dim) the default tiles run.
    assert (flash_plan(*big, config="m128n64w8s2", hopper="off")
            == "tiled/D128/base/128x64/splits1")
    assert (flash_plan(8, 1024, 1024, 16, 16, 96, config="m128n64w8s2", tuning_build=True)
            == "tiled/D96/base/128x64/splits1")
    # sm_86/89 (99 KiB per block) run the tuned tiles too: at most 96 KiB, like every default.
    assert flash_plan(*big, gpu=ADA) == "tiled/D128/m128n64w4s2for/128x64/splits1"
    assert flash_plan(8, 1024, 1024, 16, 16, 256, gpu=ADA) == "tiled/D256/base/64x32/splits1"


def test_decode_kernel_rules():
    # Up to 16 rows per (batch, head) after the fold, batched, no bias, D 64/128/256.
    assert flash_plan(4, 16, 4096, 8, 8, 64, decode_per_sm=3).startswith("decode/D64/")
    assert flash_plan(4, 17, 4096, 8, 8, 64).startswith("tiled/D64/base/64x64/")
    assert flash_plan(1, 1, 4096, 64, 4, 128).startswith("fold+decode/D128/")  # 16 rows
    assert flash_plan(1, 1, 4096, 64, 2, 128).startswith("fold+tiled/D128/base/64x64/")  # 32
    assert flash_plan(4, 1, 4096, 8, 8, 96).startswith("tiled/D96/base/64x64/")
    assert flash_plan(4, 1, 4096, 8, 2, 128, bias=True).startswith("tiled/D128/base/64x64/bias")
    assert flash_plan(4, 1, 4096, 8, 2, 128, varlen=True).startswith("tiled/D128/base/64x64/splits1")
    # The decode kernel's shared memory: D = 128 needs 100 KiB, more than sm_86/89 allow; A100 has
    # room for D = 256 (136 KiB).
    assert flash_plan(1, 1, 4096, 32, 8, 128, gpu=ADA).startswith("fold+tiled/D128/base/64x64/")
    assert flash_plan(1, 1, 4096, 32, 8, 64, gpu=ADA).startswith("fold+decode/D64/")
    assert flash_plan(1, 1, 4096, 32, 8, 256, gpu=A100).startswith("fold+decode/D256/")
    assert flash_plan(1, 1, 4096, 32, 8, 256, gpu=ADA).startswith("fold+tiled/D256/base/64x32/")


def test_decode_splits_only_below_one_full_wave():
    # Llama-3.2-1B's decode step (Hq 32 / Hkv 8, D 64, 3 blocks per SM on 132 SMs: 396 slots).
    # Batch 64 folds to 512 blocks, at least one per slot: no ranges, no combine pass; the
    # wave-efficiency rule alone would take 3 ranges (1.29 waves of one range, 0.65 full).
    assert flash_plan(64, 1, 1025, 32, 8, 64, decode_per_sm=3) == "fold+decode/D64/splits1"
    # 50 sequences: 400 blocks, one wave and 4 blocks (0.51 full): one range. 40 sequences fill
    # 320 of the 396 slots: the wave rule decides, and splits.
    assert flash_plan(50, 1, 1025, 32, 8, 64, decode_per_sm=3) == "fold+decode/D64/splits1"
    assert "splits1" not in flash_plan(40, 1, 1025, 32, 8, 64, decode_per_sm=3)


def test_the_fold():
    # One query row of grouped heads in the default logsumexp layout: Hq / Hkv rows of Hkv heads.
    assert flash_plan(2, 1, 1024, 8, 2, 64, decode_per_sm=3).startswith("fold+decode/D64/")
    # Not for ungrouped heads, several rows, or varlen's [Hq, total_q] logsumexp.
    assert flash_plan(2, 1, 1024, 8, 8, 64, decode_per_sm=3).startswith("decode/D64/")
    assert flash_plan(2, 2, 1024, 8, 2, 64, decode_per_sm=3).startswith("decode/D64/")
    assert flash_plan(2, 1, 1024, 8, 2, 64, varlen=True).startswith("tiled/D64/")
    # q bias is per query head: no fold (k/v bias alone would fold).
    assert flash_plan(2, 1, 1024, 8, 2, 64, bias=True).startswith("tiled/D64/base/64x64/bias/")
    # 128 query heads of one kv head fold into 128 rows: past the decode kernel, the Hopper
    # kernel's when forced.
    assert flash_plan(1, 1, 4096, 128, 1, 128, hopper="on") == "fold+hopper/D128/consumers2/grid1/pingpong"


def test_splits_follow_the_residency():
    # 32 tiles of 128 rows over 4096 keys (64 key tiles): fewer slots, fewer ranges.
    shape = (2, 256, 4096, 8, 8, 128)
    one = flash_plan(*shape, tiled_per_sm=1)
    two = flash_plan(*shape, tiled_per_sm=2)
    assert one != two
    assert all(p.startswith("tiled/D128/m128n64w4s2for/128x64/splits") for p in (one, two))
    # A grid that fills 80% of the slots is not split.
    assert flash_plan(8, 256, 4096, 8, 8, 128, hopper="off", tiled_per_sm=1).endswith("/splits1")
    # Varlen batches are never split.
    assert flash_plan(2, 256, 4096, 8, 8, 128, varlen=True, hopper="off").endswith("/splits1")


def test_decode_on_refuses_what_the_decode_kernel_cannot_take():
    refused = "refused: DJL_ATTN_FLASH_DECODE=on: the decode kernel does not take "
    assert flash_plan(1, 1, 10, 4, 2, 96, decode="on") == \
        refused + "a head dim other than 64, 128 or 256, or too little shared memory"
    assert flash_plan(1, 1, 10, 4, 2, 64, dtype="float32", decode="on") == refused + \
        "float32, a head dim that is not a multiple of 8, unaligned rows or a GPU before sm_80"
    assert flash_plan(1, 4, 10, 4, 4, 64, decode="on", bias=True) == refused + "q/k/v bias"
    assert flash_plan(1, 4, 10, 4, 4, 64, decode="on", varlen=True) == refused + "a varlen batch"
    # Staged calls are judged on their copies (D = 61 is padded to 64).
    assert flash_plan(1, 1, 10, 4, 2, 61, decode="on").startswith("staged+fold+decode/D64/")
    assert flash_plan(1, 1, 10, 4, 2, 65, decode="on") == refused + \
        "a head dim other than 64, 128 or 256, or too little shared memory"
    # More than 16 rows is not the decode kernel's to refuse; "auto" falls back.
    assert flash_plan(1, 17, 10, 4, 4, 96, decode="on").startswith("tiled/D96/")
    assert flash_plan(1, 1, 10, 4, 2, 96).startswith("fold+tiled/D96/")


def test_bad_switch_values_are_errors():
    assert flash_plan(1, 1, 10, 4, 2, 64, decode="fast").startswith(
        "error: decode: expected one of auto, on, off, got 'fast'")
    assert flash_plan(1, 1, 10, 4, 2, 64, config="m999").startswith(
        "error: config: no configuration named 'm999'")


# --- FlashAttention-2's features: sliding window, soft-capping, ALiBi --------------------------


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_features_take_the_base_tiles(feature, dtype):
    # Prefill that runs on the Hopper kernel (forced or not) and the tuned sm_80 tiles by
    # default: with a feature, the sm_80 kernel's base tiles, which carry the feature code.
    for dim, tiles in ((64, "128x64"), (128, "128x64"), (96, "128x64"), (256, "64x32")):
        for hopper in ("auto", "on"):
            plan = flash_plan(4, 2048, 2048, 16, 16, dim, dtype=dtype, hopper=hopper,
                              **{feature: True})
            assert plan.startswith("tiled/D%d/base/%s/" % (dim, tiles)), (dim, hopper, plan)
        assert flash_plan(4, 2048, 2048, 16, 16, dim, dtype=dtype).startswith(
            "hopper/" if dim in (64, 128, 256) else "tiled/D%d/base/" % dim)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [64, 128, 256])
def test_window_and_softcap_take_the_decode_kernels_features(dtype, dim):
    # The decode kernel's features instantiation runs the sliding window and the soft-cap, for
    # one row (Sq = 1; window_right is moot there and normalised away) and for a few rows
    # (Sq = 5, causal or with window_right 3: rows at different positions); on and auto alike.
    # ALiBi (with or without the others) runs the ALiBi instantiation; off the tile kernel's base
    # tiles.
    gpu = A100  # D = 256 fits its shared memory
    for shape in ((4, 1, 4096, 8, 8, dim), (4, 5, 4096, 8, 8, dim)):
        assert flash_plan(*shape, dtype=dtype, gpu=gpu).startswith("decode/D%d/splits" % dim)
        for flags in (dict(window_left=True), dict(softcap=True),
                      dict(window_left=True, softcap=True, causal=True),
                      dict(window_left=True, window_right=True)):
            for decode in ("auto", "on"):
                plan = flash_plan(*shape, dtype=dtype, gpu=gpu, decode=decode, **flags)
                assert plan.startswith("decode/D%d/features/splits" % dim), (shape, flags, plan)
            assert flash_plan(*shape, dtype=dtype, gpu=gpu, decode="off", **flags).startswith(
                "tiled/D%d/base/64x" % dim)
        for flags in (dict(), dict(window_left=True, softcap=True), dict(causal=True)):
            for decode in ("auto", "on"):
                plan = flash_plan(*shape, dtype=dtype, gpu=gpu, decode=decode, alibi=True, **flags)
                assert plan.startswith("decode/D%d/alibi/splits" % dim), (shape, flags, plan)
            assert flash_plan(*shape, dtype=dtype, gpu=gpu, decode="off", alibi=True,
                              **flags).startswith("tiled/D%d/base/64x" % dim)
    # window_right with Sq = 1 cuts nothing: the binding drops it, and the plain kernel runs.
    assert flash_plan(4, 1, 4096, 8, 8, 128, window_right=True).startswith("decode/D128/splits")


def test_the_fold_keeps_positions_and_slopes_apart():
    # Folded rows are different query heads at one position. The decode kernel reads them so
    # (one position for the group), so a window folds onto it; the tile kernel would read them as
    # positions, so with the decode kernel off a window runs unfolded. ALiBi: the decode kernel
    # gives each folded row its own query head's slope, the tile kernel would give them the
    # key/value head's: folded onto the decode kernel only. Soft-capping depends on neither and
    # folds everywhere.
    assert flash_plan(2, 1, 1024, 8, 2, 64, decode_per_sm=3).startswith("fold+decode/D64/")
    assert flash_plan(2, 1, 1024, 8, 2, 64, window_left=True).startswith(
        "fold+decode/D64/features/")
    assert flash_plan(2, 1, 1024, 8, 2, 64, window_left=True, decode="off").startswith(
        "tiled/D64/base/64x64/features/")
    assert flash_plan(2, 1, 1024, 8, 2, 64, window_right=True).startswith("fold+decode/D64/splits")
    assert flash_plan(2, 1, 1024, 8, 2, 64, alibi=True).startswith("fold+decode/D64/alibi/")
    assert flash_plan(2, 1, 1024, 8, 2, 64, alibi=True, decode="off").startswith(
        "tiled/D64/base/64x64/features/")
    assert flash_plan(2, 1, 1024, 8, 2, 64, softcap=True).startswith(
        "fold+decode/D64/features/")
    assert flash_plan(2, 1, 1024, 8, 2, 64, softcap=True, decode="off").startswith(
        "fold+tiled/D64/base/64x64/features/")
    # A group of 32 rows is past the decode kernel: a window then runs unfolded on the tile
    # kernel, a soft-cap folded.
    assert flash_plan(2, 1, 1024, 64, 2, 64, window_left=True).startswith("tiled/D64/base/64x64/")
    assert flash_plan(2, 1, 1024, 64, 2, 64, softcap=True).startswith("fold+tiled/D64/base/")


def splits_of(plan):
    return int(plan.split("/splits")[1].split("/")[0])


# The decode split with a window counts tiles from the window's first tile: a context of 32k keys
# with a window of 4096 (Mistral's, window_left = 4095) walks at most 4095 + 1 + 63 keys, 65
# tiles, the split and its scratch those of a 4159-key context without a window.
@pytest.mark.parametrize("batch", [1, 8, 32])
def test_a_decode_window_splits_only_its_span(batch):
    shape = (batch, 1, 32768, 32, 8, 128)
    windowed = flash_plan(*shape, window_left=True, window=4095)
    assert windowed.startswith("fold+decode/D128/features/splits")
    unwindowed_span = flash_plan(batch, 1, 4095 + 1 + 63, 32, 8, 128)
    assert windowed.split("/splits")[1] == unwindowed_span.split("/splits")[1]
    # A split range holds at least two tiles: at most 32 ranges over 65 tiles.
    assert splits_of(windowed) <= 32
    assert splits_of(windowed) <= splits_of(flash_plan(*shape))
    # Rows at Sq different positions: the span grows by Sq - 1 keys (here 4095 + 16 + 63, still
    # 65 tiles).
    many = flash_plan(batch, 16, 32768, 8, 8, 128, window_left=True, window=4095, causal=True)
    assert many.split("/splits")[1] == flash_plan(batch, 16, 4095 + 16 + 63, 8, 8, 128,
                                                  causal=True).split("/splits")[1]


@pytest.mark.parametrize("window", [0, 1, 7, 63, 64, 65, 200, 1000])
def test_decode_window_span_is_capped_by_the_context(window):
    # Small windows: one or two tiles of keys, so batch 1 is hardly split; windows at or past
    # Sk - 1 are no window (normalised by the binding): the plain split of the context.
    plan = flash_plan(1, 1, 1000, 32, 8, 128, window_left=True, window=window)
    span = min(1000, window + 1 + 63)
    if window >= 999:
        assert plan == flash_plan(1, 1, 1000, 32, 8, 128)
    else:
        assert plan.startswith("fold+decode/D128/features/splits")
        tiles = (span + 63) // 64
        assert splits_of(plan) <= max(1, tiles // 2)
        assert plan.split("/splits")[1] == flash_plan(1, 1, span, 32, 8, 128).split("/splits")[1]


@pytest.mark.parametrize("feature", FEATURES)
def test_features_on_the_other_paths(feature):
    on = {feature: True}
    # float32: the float32 tensor-core kernel's feature instantiation, 4-warp 3xTF32 tiles, even
    # where the plain call takes 8-warp tiles.
    assert flash_plan(2, 300, 300, 4, 4, 64, dtype="float32", **on) == "fp32/3xtf32/d64/4w/features"
    assert flash_plan(8, 4096, 4096, 16, 16, 128, dtype="float32") == "fp32/3xtf32/d128/8w"
    assert flash_plan(8, 4096, 4096, 16, 16, 128, dtype="float32", **on) == \
        "fp32/3xtf32/d128/4w/features"
    # Staged copies (D % 8 != 0, unaligned views) run the base tiles on the copies.
    assert flash_plan(2, 300, 300, 4, 4, 61, **on).startswith("staged+tiled/D64/base/")
    assert flash_plan(2, 300, 300, 4, 4, 64, unaligned=True, **on).startswith(
        "staged+tiled/D64/base/")
    # GPUs before sm_80: the simple kernel, which runs them too.
    assert flash_plan(2, 300, 300, 4, 4, 64, gpu=TURING, **on) == "simple"
    assert flash_plan(2, 300, 300, 4, 4, 64, dtype="float32", gpu=TURING, **on) == "simple"


def test_a_window_splits_only_the_keys_it_sees():
    # One 64-row query tile of the tile kernel (decode-like, Sq = 1, the decode kernel off) over
    # 64k keys: without a window the split spreads all 1024 key tiles; a causal window of 256
    # keys leaves each query tile at most (256 + 64) / 64 + 1 = 6 tiles, and the splits share
    # those.
    wide = flash_plan(1, 1, 65536, 4, 4, 64, alibi=True, decode="off")
    narrow = flash_plan(1, 1, 65536, 4, 4, 64, alibi=True, window_left=True, causal=True,
                        decode="off")
    splits = lambda plan: int(plan.split("/splits")[1].split("/")[0])
    assert splits(wide) > 6
    assert 1 <= splits(narrow) <= 6
    # A window open to the right (not causal, no window_right) sees every later key: no cap.
    assert splits(flash_plan(1, 1, 65536, 4, 4, 64, alibi=True, window_left=True,
                             decode="off")) == splits(wide)


def test_features_run_their_own_instantiation():
    # The base tiles' plain instantiation stays as it was; feature calls name the other one.
    assert "/features/" in flash_plan(4, 2048, 2048, 16, 16, 96, softcap=True)
    assert "/features/" not in flash_plan(4, 2048, 2048, 16, 16, 96)
    assert "/features/" in flash_plan(4, 1, 4096, 8, 8, 128, alibi=True, decode="off")
    # The decode kernel's three: plain, features (window, soft-cap), ALiBi (with or without them).
    assert flash_plan(4, 1, 4096, 8, 8, 128).startswith("decode/D128/splits")
    assert flash_plan(4, 1, 4096, 8, 8, 128, softcap=True).startswith("decode/D128/features/")
    assert flash_plan(4, 1, 4096, 8, 8, 128, alibi=True).startswith("decode/D128/alibi/")
    # Bias (bert_attention) and the features (the flash schemas) never meet: refused by the plan
    # (which decides and never throws; the launcher reports it), not one of them dropped.
    assert flash_plan(2, 300, 300, 4, 4, 64, bias=True, softcap=True).startswith(
        "refused: q/k/v bias together with a sliding window")


# --- flash_attention_fp8 (cuda/flash/flash_fp8_plan.h) ------------------------------------------

_fp8 = lib.djl_attn_test_flash_fp8_plan
_fp8.restype = ctypes.c_char_p
_fp8.argtypes = ([ctypes.c_int64] * 6 + [ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                                         ctypes.c_int32, ctypes.c_int32])


def fp8_plan(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, gpu=H200, hopper_built=True,
             **flags):
    bits = FLAGS["hopper_built"] if hopper_built else 0
    for name, on in flags.items():
        bits |= FLAGS[name] if on else 0
    sms, smem, major, minor = gpu
    return _fp8(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, bits, sms, smem, major,
                minor).decode()


@pytest.mark.parametrize("batch, seqlen_q, seqlen_k, heads_q, heads_kv", [
    (16, 1024, 1024, 16, 16), (1, 16384, 16384, 16, 16), (3, 1, 129, 8, 2), (2, 300, 333, 4, 2),
    (1, 77, 0, 2, 1), (5, 129, 1, 3, 3)])
def test_fp8_plan_grid_and_scratch(batch, seqlen_q, seqlen_k, heads_q, heads_kv):
    # 128-row work items per (batch, head), at most one persistent block per SM, and v^T padded
    # to 128-key tiles (one tile when there are no keys: the kernel then reads none of it).
    m_blocks = -(-seqlen_q // 128)
    items = m_blocks * batch * heads_q
    keys = max(-(-seqlen_k // 128), 1) * 128
    assert fp8_plan(batch, seqlen_q, seqlen_k, heads_q, heads_kv, 128) == (
        "grid %d items %d m_blocks %d keys %d vt %d"
        % (min(items, H200[0]), items, m_blocks, keys, batch * heads_kv * 128 * keys))


@pytest.mark.parametrize("dim", [32, 64, 80, 96, 256])
def test_fp8_plan_refuses_other_head_dims_naming_q(dim):
    assert fp8_plan(2, 64, 64, 4, 4, dim) == (
        "refused: q: the CUDA FP8 kernel takes head dim 128, got %d" % dim)


def test_fp8_plan_refuses_what_the_kernel_cannot_run():
    shape = (2, 256, 256, 4, 2, 128)
    assert fp8_plan(*shape).startswith("grid ")
    assert fp8_plan(*shape, hopper_built=False).startswith(
        "refused: q: the CUDA FP8 kernel is compiled only for sm_90")
    for gpu, name in ((A100, "8.0"), (ADA, "8.9"), ((132, 227 * 1024, 10, 0), "10.0")):
        assert fp8_plan(*shape, gpu=gpu) == (
            "refused: q: the CUDA FP8 kernel runs on Hopper GPUs (compute capability 9.0), this "
            "one is %s (the CPU backend runs any device's tensors copied to the host)" % name)
    # k and v shared by the batch rows (batch stride 0) and q off a 16-byte boundary: not TMA's.
    for flag in ("broadcast_kv", "unaligned"):
        assert fp8_plan(*shape, **{flag: True}).startswith("refused: q, k, v: the CUDA FP8 kernel")
    # Less shared memory than the kernel's 80 KiB of tiles.
    assert fp8_plan(*shape, gpu=(132, 64 * 1024, 9, 0)).startswith(
        "refused: q: the CUDA FP8 kernel needs ")


# --- the plan names only what the build compiled (issue 27: launchers only launch) ----------------

NATIVE = __import__("pathlib").Path(__file__).resolve().parents[1]


def _compiled_tile_configs():
    """{(head dim, configuration name)} of the shipped build and of a tuning build, read from the
    instantiation files themselves (flash_fwd_hdim*_cfg_*.cu): the lines before their
    `#if defined(DJL_ATTN_TUNING)` are the shipped build's. Names by kFwdConfigs index
    (flash_shapes.h)."""
    shapes = (NATIVE / "cuda/flash/flash_shapes.h").read_text()
    table = shapes[shapes.index("kFwdConfigs[] = {"):]
    table = table[:table.index("};")]
    names = re.findall(r'\{"([a-z0-9]+)"', table)
    shipped, tuning = set(), set()
    for path in sorted((NATIVE / "cuda/flash").glob("flash_fwd_hdim*_cfg_*.cu")):
        text = path.read_text()
        cut = text.index("#if defined(DJL_ATTN_TUNING)")
        for at, (dim, cfg) in ((m.start(), m.groups()) for m in re.finditer(
                r"DJL_FLASH_INSTANTIATE_FWD_CFG\(\w+, (\d+), (\d+)\)", text)):
            pair = (int(dim), names[int(cfg)])
            (shipped if at < cut else tuning).add(pair)
    return names, shipped, shipped | tuning


CONFIG_NAMES, SHIPPED_CONFIGS, TUNING_CONFIGS = _compiled_tile_configs()


def test_the_instantiation_files_hold_the_tuned_defaults_only_outside_tuning():
    assert SHIPPED_CONFIGS == {(64, "m128n128w4s2for"), (128, "m128n64w4s2for")}
    assert len(TUNING_CONFIGS) == 23  # 14 at D = 64, 9 at D = 128 (the kFwdConfigs masks)


@pytest.mark.parametrize("tuning_build", [False, True])
@pytest.mark.parametrize("hopper_built", [False, True])
@pytest.mark.parametrize("config", ["auto"] + CONFIG_NAMES)
def test_every_switch_value_and_head_dim_plans_a_compiled_kernel(config, hopper_built,
                                                                 tuning_build):
    # Every DJL_ATTN_FLASH_CONFIG value (the plans library takes every name; a shipped build's
    # switch lists only its own) at every head dim, on a GPU with and without the Hopper kernel
    # compiled: a tile configuration the plan names is one the build instantiated, and the
    # Hopper path appears only where the build has it. The launchers have no case to refuse
    # (flash_launch.cu's switch over fwd::TiledConfig, FlashPath without kHopper there).
    compiled = TUNING_CONFIGS if tuning_build else SHIPPED_CONFIGS
    seen = set()
    for dim in (8, 16, 24, 40, 56, 64, 72, 96, 104, 128, 160, 200, 256):
        for dtype in ("float16", "bfloat16"):
            for seqlen, hopper in ((2048, "auto"), (2048, "off"), (300, "on"), (48, "auto")):
                plan = flash_plan(2, seqlen, seqlen, 8, 8, dim, dtype=dtype, config=config,
                                  hopper=hopper, hopper_built=hopper_built,
                                  tuning_build=tuning_build)
                assert not plan.startswith(("refused", "error")), plan
                assert hopper_built or "hopper" not in plan, plan
                tiled = re.search(r"tiled/D(\d+)/([a-z0-9]+)/", plan)
                if tiled:
                    pair = (int(tiled.group(1)), tiled.group(2))
                    assert pair[1] == "base" or pair in compiled, (dim, plan)
                    seen.add(pair[1])
    # The check above met the requested configuration wherever the build has it.
    if config not in ("auto", "base") and any(name == config for _, name in compiled):
        assert config in seen, (config, seen)


@pytest.mark.parametrize("tuning_build", [False, True])
@pytest.mark.parametrize("feature", FEATURES)
def test_float32_feature_calls_plan_the_one_feature_tile(feature, tuning_build):
    # The sliding window, soft-capping and ALiBi have one float32 tile per head dim (4 warps,
    # 3xTF32, no bias: fp32::Fp32Kernel has no other with the features), whatever the grid. A
    # window of 16 keys cuts keys of the 100-key calls too (a wider one is dropped).
    for dim in (8, 32, 50, 64, 96, 128, 200, 256):
        for shape in ((8, 2048, 2048, 16, 16), (1, 100, 100, 2, 2)):
            plan = flash_plan(*shape, dim, dtype="float32", tuning_build=tuning_build,
                              window=16, **{feature: True})
            assert re.fullmatch(r"fp32/3xtf32/d\d+/4w/features(/scalar)?", plan), plan
