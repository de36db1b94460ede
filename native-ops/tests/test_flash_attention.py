"""djl_attn.flash_attention against the float64 reference, on CPU and (when present) CUDA."""

import math

import pytest
import torch

import reference
from conftest import supported_ints
from reference import assert_close

flash = torch.ops.djl_attn.flash_attention

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LOW_PRECISION = [torch.float16, torch.bfloat16]
CUDA = torch.cuda.is_available()
cuda_only = pytest.mark.skipif(not CUDA, reason="large shapes run on the GPU only")


# The head dims of the tensor-core kernel: the library's one list (DJL_FLASH_FOR_EACH_HEAD_DIM of
# src/flash/flash_params.h).
HEAD_DIMS = supported_ints("flash.tensor_core_head_dims")
# Padded up to the next compiled one (80 -> 96, 40 -> 64), and a D % 8 != 0 that runs on staged
# copies padded to 40 (cuda/flash/flash_staged.h).
ODD_HEAD_DIMS = [80, 40, 33]


# The Hopper kernel (cuda/flash/hopper) on compute capability 9.0: every test of this file runs
# on CUDA with DJL_ATTN_FLASH_HOPPER=on (the Hopper kernel for every shape it covers, small
# grids too) and =off (the sm_80 kernel); "auto", which adds a grid-size rule, has its own tests
# below. Elsewhere the variable changes nothing, and the CPU runs once.
HOPPER_ENV = "DJL_ATTN_FLASH_HOPPER"
IS_HOPPER = CUDA and torch.cuda.get_device_capability() == (9, 0)


@pytest.fixture(autouse=True, params=["on", "off"] if CUDA else ["on"])
def hopper_mode(request, options):
    params = getattr(request.node, "callspec", None)
    on_cpu = params is not None and params.params.get("device") == "cpu"
    if request.param == "off" and on_cpu:
        pytest.skip("the Hopper switch is a CUDA setting; the CPU runs once")
    if CUDA:  # the switch belongs to libdjl_attn_cuda.so
        options.set(HOPPER_ENV, request.param)
    return request.param


def cpu_light(device, skip):
    """Keeps the CPU run short: grids meant for the CUDA kernels run a slice of themselves on
    the CPU (whose one kernel the dense tests already cover)."""
    if device == "cpu" and skip:
        pytest.skip("this case exercises the CUDA kernels; the CPU runs a slice of the grid")


def make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, dtype, device):
    q = torch.randn(batch, seqlen_q, heads_q, dim, dtype=dtype, device=device)
    k = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
    v = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
    return q, k, v


def check(q, k, v, kv_lens, causal, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    batch, seqlen_q, heads_q, _ = q.shape
    reference.poison_allocator(q.device, (q.shape, q.dtype), ((batch, heads_q, seqlen_q), torch.float32))
    out, lse = flash(q, k, v, kv_lens, scale, causal)
    ref_out, ref_lse = reference.flash_attention(q, k, v, kv_lens, scale, causal)
    assert out.dtype == q.dtype and lse.dtype == torch.float32
    assert_close(out.cpu(), ref_out.cpu(), q.dtype, "out")
    # The logsumexp is float32 whatever the input dtype; low-precision inputs only change the
    # scores it is computed from, which the reference sees too.
    assert_close(lse.cpu(), ref_lse.cpu(), torch.float32 if q.dtype == torch.float32 else q.dtype, "lse")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [32, 64, 80, 128])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (7, 7), (129, 129), (7, 129), (129, 7), (1, 1000)])
@pytest.mark.parametrize("causal", [False, True])
def test_dense(device, dtype, dim, seqlen_q, seqlen_k, causal):
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 4, dim, dtype, device)
    check(q, k, v, None, causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 2), (8, 1), (4, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_mqa_with_ragged_kv_lens(device, dtype, heads_q, heads_kv, causal):
    cpu_light(device, dtype != torch.float32)
    q, k, v = make_inputs(4, 37, 113, heads_q, heads_kv, 64, dtype, device)
    kv_lens = torch.tensor([113, 1, 0, 60], dtype=torch.int32, device=device)
    check(q, k, v, kv_lens, causal)


# --- the tensor-core CUDA kernel: every compiled head dim, tile edges, GQA, kv_lens ----------


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", HEAD_DIMS + ODD_HEAD_DIMS)
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (7, 300), (128, 128), (129, 64), (1000, 1000)])
@pytest.mark.parametrize("causal", [False, True])
def test_head_dims(device, dtype, dim, seqlen_q, seqlen_k, causal):
    cpu_light(device, seqlen_q * seqlen_k > 128 * 300 or dim != 80)
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 2, dim, dtype, device)
    check(q, k, v, None, causal)


@cuda_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_seqlen_4096(dtype, dim, causal):
    q, k, v = make_inputs(1, 4096, 4096, 2, 1, dim, dtype, "cuda")
    check(q, k, v, None, causal)


@cuda_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_seqlen_4096_gqa_kv_lens(dtype):
    q, k, v = make_inputs(2, 1000, 4096, 8, 1, 128, dtype, "cuda")
    kv_lens = torch.tensor([4096, 1500], dtype=torch.int32, device="cuda")
    check(q, k, v, kv_lens, True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_kv_lens_with_one_valid_key(device, dtype, dim, causal):
    # Row 1 of the batch sees exactly one key; row 2 none (output 0, lse -inf); rows end
    # mid-tile and on a tile edge.
    cpu_light(device, dim != 64)
    q, k, v = make_inputs(5, 7, 200, 8, 1, dim, dtype, device)
    kv_lens = torch.tensor([200, 1, 0, 64, 129], dtype=torch.int32, device=device)
    check(q, k, v, kv_lens, causal)


# --- split-KV (flash-decoding): few query tiles, long keys ------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,seqlen_q,seqlen_k,heads_q,heads_kv,dim", [
    (1, 1, 1000, 8, 8, 128),
    (2, 1, 1000, 32, 8, 128),
    (1, 1, 1000, 8, 1, 64),
    (1, 7, 1000, 4, 4, 64),
])
@pytest.mark.parametrize("causal", [False, True])
def test_split_kv(device, dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, causal):
    cpu_light(device, dtype != torch.float32)
    q, k, v = make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, dtype, device)
    check(q, k, v, None, causal)


@cuda_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("batch,seqlen_q,seqlen_k,heads_q,heads_kv,dim", [
    (1, 1, 32768, 32, 8, 128),
    (2, 1, 8192, 8, 1, 64),
    (1, 16, 20000, 4, 2, 256),
    (3, 1, 5000, 4, 4, 96),
])
@pytest.mark.parametrize("causal", [False, True])
def test_split_kv_long(dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, causal):
    q, k, v = make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, dtype, "cuda")
    kv_lens = torch.randint(1, seqlen_k + 1, (batch,), dtype=torch.int32, device="cuda")
    kv_lens[0] = seqlen_k
    check(q, k, v, kv_lens, causal)


def test_views_of_fused_qkv_low_precision(device):
    # Strided views with 16-byte aligned rows take the tensor-core kernel on the GPU.
    for dtype in LOW_PRECISION:
        qkv = torch.randn(2, 130, 3, 4, 64, device=device, dtype=dtype)
        q, k, v = qkv.unbind(2)
        check(q, k, v, None, True)


def test_unaligned_views(device):
    # Rows that start 2 bytes past a 16-byte boundary: the GPU runs staged, aligned copies.
    x = torch.randn(2, 40, 4, 65, device=device, dtype=torch.float16)
    q = x[..., 1:]
    check(q, q, q, None, False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_long_sequence(device, dtype):
    q, k, v = make_inputs(1, 1000, 1000, 2, 1, 128, dtype, device)
    check(q, k, v, None, True)


def test_views_of_fused_qkv(device):
    # q, k, v as strided views into one [B, S, 3, H, D] projection: only the last dim is
    # contiguous.
    qkv = torch.randn(2, 50, 3, 4, 64, device=device)
    q, k, v = qkv.unbind(2)
    assert not q.is_contiguous()
    check(q, k, v, None, True)


def test_custom_scale(device):
    q, k, v = make_inputs(1, 9, 9, 2, 2, 32, torch.float32, device)
    check(q, k, v, None, False, scale=0.37)


def test_empty_batch(device):
    q, k, v = make_inputs(0, 5, 5, 2, 2, 32, torch.float32, device)
    out, lse = flash(q, k, v, None, 1.0, False)
    assert out.shape == (0, 5, 2, 32) and lse.shape == (0, 2, 5)


def test_no_keys_gives_zero_output_and_minus_inf_lse(device):
    q, k, v = make_inputs(1, 3, 0, 2, 2, 32, torch.float32, device)
    out, lse = flash(q, k, v, None, 1.0, False)
    assert torch.equal(out.cpu(), torch.zeros(1, 3, 2, 32))
    assert torch.isneginf(lse).all()


# --- the Hopper kernel: tile edges, causal Sq != Sk, kv_lens, GQA, strides, routing ------------

hopper_only = pytest.mark.skipif(not CUDA, reason="the Hopper kernel is a CUDA kernel")
# The head dims the Hopper kernel is compiled for (hopper::head_dim_compiled, flash_shapes.h).
HOPPER_DIMS = [64, 128, 256]


@hopper_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", HOPPER_DIMS)
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1000, 4096), (4096, 1000), (1000, 7), (65, 129), (300, 300), (129, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_hopper_partial_tiles(dtype, dim, seqlen_q, seqlen_k, causal):
    # Neither length a multiple of the 128 x 128 tiles; causal with Sq < Sk and Sq > Sk (rows
    # that see no key at all: output 0, lse -inf).
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 2, dim, dtype, "cuda")
    check(q, k, v, None, causal)


@hopper_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", HOPPER_DIMS)
@pytest.mark.parametrize("causal", [False, True])
def test_hopper_kv_lens_and_gqa(dtype, dim, causal):
    # GQA 8:1; rows of 1 and 0 valid keys, one ending mid-tile and one on a tile edge. Value rows
    # past each row's valid length hold NaN: a masked key must contribute nothing.
    q, k, v = make_inputs(5, 300, 700, 8, 1, dim, dtype, "cuda")
    kv_lens = torch.tensor([700, 1, 0, 128, 389], dtype=torch.int32, device="cuda")
    check(q, k, v, kv_lens, causal)
    k_nan, v_nan = k.clone(), v.clone()
    for b, n in enumerate(kv_lens.tolist()):
        k_nan[b, n:] = float("nan")
        v_nan[b, n:] = float("nan")
    scale = 1.0 / math.sqrt(dim)
    out, lse = flash(q, k_nan, v_nan, kv_lens, scale, causal)
    ref_out, ref_lse = reference.flash_attention(q, k, v, kv_lens, scale, causal)
    assert_close(out.cpu(), ref_out.cpu(), dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), dtype, "lse")


@hopper_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("seqlen_q", [65, 127, 129, 191, 192, 193, 385, 1024, 1025, 1153])
@pytest.mark.parametrize("seqlen_k", [1, 191, 450, 1100])
@pytest.mark.parametrize("causal", [False, True])
def test_hopper_d64_tile_edges(dtype, seqlen_q, seqlen_k, causal):
    # Both D = 64 kernels, as the plan picks them (hopper_consumers, flash_plan.cpp): 2 consumer
    # warpgroups (128-row tiles) for causal calls of at most 1024 query rows, 3 (192-row tiles)
    # for the causal ones past 1024 and every non-causal one. Query lengths on both sides of one
    # and two tiles of either size and of 1024, the last tile's rows past Sq left alone (they
    # would be the next batch row's), causal diagonals that cross the third consumer's rows,
    # GQA 3:1.
    q, k, v = make_inputs(3, seqlen_q, seqlen_k, 6, 2, 64, dtype, "cuda")
    check(q, k, v, None, causal)


@hopper_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("seqlen_q", [193, 1153])
@pytest.mark.parametrize("causal", [False, True])
def test_hopper_d64_tile_edges_with_kv_lens(dtype, seqlen_q, causal):
    # Valid lengths of 0, 1, one ending mid key tile and one on a key-tile edge, under a full tile
    # and a one-row tile (193: 2 consumers when causal, else 3; 1153 = 6 x 192 + 1: 3 consumers)
    # and GQA 4:1.
    q, k, v = make_inputs(4, seqlen_q, 400, 8, 2, 64, dtype, "cuda")
    kv_lens = torch.tensor([400, 0, 1, 256], dtype=torch.int32, device="cuda")
    check(q, k, v, kv_lens, causal)


@hopper_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", HOPPER_DIMS)
def test_hopper_strided_views(dtype, dim):
    # q, k, v as views of one fused [B, S, 3, H, D] projection, and a key tensor whose heads
    # are padded apart: only the last dim is contiguous.
    qkv = torch.randn(2, 333, 3, 4, dim, device="cuda", dtype=dtype)
    q, k, v = qkv.unbind(2)
    check(q, k, v, None, True)
    wide = torch.randn(2, 257, 2, dim + 64, device="cuda", dtype=dtype)
    k2 = wide[..., :dim]
    v2 = torch.randn(2, 2, 257, dim, device="cuda", dtype=dtype).transpose(1, 2)
    q2 = torch.randn(2, 200, 4, dim, device="cuda", dtype=dtype)
    check(q2, k2, v2, None, False)


@hopper_only
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("causal", [False, True])
def test_hopper_auto_large_grid(options, dtype, causal):
    # A grid that fills the GPU: what "auto" routes to the Hopper kernel.
    options.set(HOPPER_ENV, "auto")
    q, k, v = make_inputs(2, 2048, 2048, 16, 4, 128, dtype, "cuda")
    check(q, k, v, None, causal)


@pytest.mark.skipif(not IS_HOPPER, reason="the Hopper kernel runs on compute capability 9.0")
@pytest.mark.parametrize("mode,expected", [("auto", True), ("on", True), ("off", False)])
def test_hopper_kernel_is_what_runs(options, mode, expected):
    options.set(HOPPER_ENV, mode)
    q, k, v = make_inputs(2, 2048, 2048, 16, 16, 128, torch.bfloat16, "cuda")
    flash(q, k, v, None, 0.1, True)  # warm-up outside the profile
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        flash(q, k, v, None, 0.1, True)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert any("flash_hopper_kernel" in n for n in names) == expected, names


@pytest.mark.skipif(not IS_HOPPER, reason="the Hopper kernel runs on compute capability 9.0")
def test_hopper_schedules_agree_and_bad_schedule_is_rejected(options):
    # DJL_ATTN_FLASH_HOPPER_SCHED picks the consumers' GEMM scheduling for measurements; both
    # compute the same function.
    options.set(HOPPER_ENV, "on")
    q, k, v = make_inputs(2, 700, 900, 4, 2, 128, torch.float16, "cuda")
    for sched in ("pingpong", "free"):
        options.set("DJL_ATTN_FLASH_HOPPER_SCHED", sched)
        check(q, k, v, None, True)
    with pytest.raises(ValueError,
                       match="DJL_ATTN_FLASH_HOPPER_SCHED: expected one of pingpong, free, got 'fast'"):
        options.set("DJL_ATTN_FLASH_HOPPER_SCHED", "fast")


def test_rejects_bad_hopper_setting(device, options):
    if device == "cpu":
        pytest.skip("the Hopper switch is read by the CUDA dispatcher")
    with pytest.raises(ValueError, match="DJL_ATTN_FLASH_HOPPER: expected one of auto, on, off, "
                                         "got 'yes'"):
        options.set(HOPPER_ENV, "yes")


# --- validation: every rule names the argument, the expectation and what it got ---------------


def error_of(*args):
    with pytest.raises((ValueError, RuntimeError)) as info:
        flash(*args)
    return str(info.value)


def test_rejects_more_query_tiles_than_one_cuda_grid(device):
    # B * Hq * ceil(Sq / 64) = 4096 * 1024 * 1024 = 2^32 query tiles: more than one CUDA grid
    # holds, refused on every backend (the binding states the rule once). Stride-0 views
    # allocate nothing.
    q = torch.zeros(1, 1, 1, 8, device=device).expand(4096, 65536, 1024, 8)
    k = torch.zeros(1, 1, 1, 8, device=device).expand(4096, 4, 1, 8)
    assert ("flash_attention: q: expected B * Hq * ceil(Sq / 64) <= 2^31 - 1 (the query tiles of "
            "one CUDA grid), got B = 4096, Hq = 1024, Sq = 65536") in error_of(
        q, k, k, None, 1.0, False)
    # 2^31 tiles are one too many; 511 heads fit (and the call fails on its scale instead).
    assert "got B = 4096, Hq = 512, Sq = 65536" in error_of(q[:, :, :512], k, k, None, 1.0, False)
    assert "scale: expected a finite value" in error_of(q[:, :, :511], k, k, None, float("nan"),
                                                        False)


def test_rejects_wrong_rank(device):
    q, k, v = make_inputs(1, 4, 4, 2, 2, 32, torch.float32, device)
    assert "q: expected 4 dims [B, Sq, Hq, D], got 3" in error_of(q[0], k, v, None, 1.0, False)
    assert "k: expected 4 dims" in error_of(q, k[0], v, None, 1.0, False)


def test_rejects_mismatched_batch_and_head_dim(device):
    q, k, v = make_inputs(2, 4, 4, 2, 2, 32, torch.float32, device)
    assert "k: expected size 2 for B" in error_of(q, k[:1], v, None, 1.0, False)
    assert "k: expected size 32 for D" in error_of(q, k[..., :16], v, None, 1.0, False)
    assert "v: expected size 4 for Sk" in error_of(q, k, v[:, :3], None, 1.0, False)


def test_rejects_heads_not_multiple(device):
    q, k, v = make_inputs(1, 4, 4, 6, 4, 32, torch.float32, device)
    assert "divides the query heads Hq = 6, got Hkv = 4" in error_of(q, k, v, None, 1.0, False)


def test_rejects_unsupported_and_mixed_dtypes(device):
    q, k, v = make_inputs(1, 4, 4, 2, 2, 32, torch.float32, device)
    assert "q: expected dtype in {float32, float16, bfloat16}, got" in error_of(
        q.double(), k.double(), v.double(), None, 1.0, False
    )
    assert "k: expected the dtype of q (float32), got float16" in error_of(q, k.half(), v, None, 1.0, False)


def test_rejects_non_contiguous_last_dim(device):
    q, k, v = make_inputs(1, 4, 4, 2, 2, 64, torch.float32, device)
    assert "q: expected a contiguous last dim" in error_of(q[..., ::2], k[..., :32], v[..., :32], None, 1.0, False)


def test_rejects_bad_kv_lens(device):
    q, k, v = make_inputs(2, 4, 6, 2, 2, 32, torch.float32, device)
    lens = torch.tensor([6, 2], dtype=torch.int32, device=device)
    assert "kv_lens: expected size 2 for B" in error_of(q, k, v, lens[:1], 1.0, False)
    assert "kv_lens: expected dtype int32, got int64" in error_of(q, k, v, lens.long(), 1.0, False)
    too_long = torch.tensor([7, 2], dtype=torch.int32, device=device)
    assert "kv_lens: expected values in [0, Sk = 6], got 7 at index 0" in error_of(q, k, v, too_long, 1.0, False)
    negative = torch.tensor([1, -1], dtype=torch.int32, device=device)
    assert "got -1 at index 1" in error_of(q, k, v, negative, 1.0, False)


def test_rejects_non_finite_scale(device):
    q, k, v = make_inputs(1, 4, 4, 2, 2, 32, torch.float32, device)
    assert "scale: expected a finite value" in error_of(q, k, v, None, float("nan"), False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="mixing devices needs a GPU")
def test_rejects_mixed_devices():
    q, k, v = make_inputs(1, 4, 4, 2, 2, 32, torch.float32, "cuda")
    assert "k: expected the device of q (cuda:0), got cpu" in error_of(q, k.cpu(), v, None, 1.0, False)


def test_rejects_sequences_past_32_bit_indexing(device):
    # Stride-0 views cost no memory; the kernels index rows with 32-bit ints, so the binding must
    # refuse lengths past 2^30 rather than let a kernel silently read nothing.
    q = torch.randn(1, 1, 1, 8, device=device)
    long = torch.randn(1, 1, 1, 8, device=device).expand(1, (1 << 30) + 1, 1, 8)
    with pytest.raises((ValueError, RuntimeError), match=r"flash_attention: k: expected Sk <= 2\^30"):
        torch.ops.djl_attn.flash_attention(q, long, long, None, 1.0, False)
    with pytest.raises((ValueError, RuntimeError), match=r"flash_attention: q: expected Sq <= 2\^30"):
        torch.ops.djl_attn.flash_attention(long, q, q, None, 1.0, False)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", [7, 100, 250])
@pytest.mark.parametrize("causal", [False, True])
def test_head_dims_not_multiple_of_8(device, dtype, dim, causal):
    # Staged on the GPU: rows padded with zeros to 8, 104 and 256 (the last one the largest head
    # dim), GQA, kv_lens with a row of one key and one of none, NaN past each row's keys (a
    # padded copy that let them in would return NaN), decode and prefill shapes, strided views.
    cpu_light(device, dim != 7)
    for seqlen_q, seqlen_k in [(1, 300), (130, 257)]:
        q, k, v = make_inputs(4, seqlen_q, seqlen_k, 8, 2, dim, dtype, device)
        kv_lens = torch.tensor([seqlen_k, 1, 0, seqlen_k // 2 + 1], dtype=torch.int32,
                               device=device)
        kp, vp = k.clone(), v.clone()
        for b, n in enumerate(kv_lens.tolist()):
            kp[b, n:], vp[b, n:] = float("nan"), float("nan")
        reference.poison_allocator(q.device, (q.shape, q.dtype),
                                   ((4, 8, seqlen_q), torch.float32))
        out, lse = flash(q, kp, vp, kv_lens, 0.3, causal)
        ref_out, ref_lse = reference.flash_attention(q, k, v, kv_lens, 0.3, causal)
        assert_close(out.cpu(), ref_out.cpu(), dtype, "out D=%d Sq=%d" % (dim, seqlen_q))
        assert_close(lse.cpu(), ref_lse.cpu(), dtype, "lse D=%d Sq=%d" % (dim, seqlen_q))
    fused = torch.randn(2, 70, 3, 4, dim, dtype=dtype, device=device)  # strided head views
    q, k, v = fused.unbind(2)
    check(q, k, v, None, causal)
