"""djl_attn.flash_attention on decode-like shapes (at most 16 query rows per key/value head
after the GQA fold) against the float64 reference. On CUDA these run through the split-KV
decode kernel (cuda/flash/flash_decode.h) and, with DJL_ATTN_FLASH_DECODE=off, through the tile
kernel; on the CPU through its one kernel."""

import math

import pytest
import torch

import reference
from reference import assert_close

flash = torch.ops.djl_attn.flash_attention

LOW_PRECISION = [torch.float16, torch.bfloat16]
# The CPU's one kernel runs a slice of each grid below, sized for the GPU's kernels (conftest.py
# deselects the rest at collection): float16 only, and where a grid varies the head dim or the
# group, one of each. DJL_ATTN_FLASH_DECODE=off has nothing to switch on the CPU.
pytestmark = pytest.mark.cpu_slice(lambda p: p.get("decode_mode", "on") == "on")
CPU_FLOAT16 = pytest.mark.cpu_slice(lambda p: p["dtype"] == torch.float16)
CPU_ONE_GROUP = pytest.mark.cpu_slice(
    lambda p: p["dtype"] == torch.float16 and p["heads_q"] == p["heads_kv"])
CPU_D64_SMALL_GROUPS = pytest.mark.cpu_slice(
    lambda p: p["dtype"] == torch.float16 and p["dim"] == 64 and p["heads_q"] != 16)
# GPU-only: 32k keys (the float64 reference and the CPU kernel would take minutes in CI; its key
# loop is the same at 4096 keys, tested) and the switch between the CUDA kernels.
GPU_ONLY = pytest.mark.cpu_slice(lambda p: False)
# (Hq, Hkv): plain MHA decode (group 1) and groups of 4, 8 and 16 query heads per kv head.
GROUPS = [(4, 4), (8, 2), (8, 1), (16, 1)]
# The decode kernel's head dims (flash_decode.h); others take the tile kernel.
DECODE_HEAD_DIMS = [64, 128, 256]


@pytest.fixture(params=["on", "off"])
def decode_mode(request, device, options):
    """DJL_ATTN_FLASH_DECODE: on runs the decode kernel and fails where it cannot (every shape
    here is one it takes, so a silent fallback to the tile kernel would fail the test), off the
    tile kernel. The CPU has one kernel and ignores it (its "off" cases are deselected)."""
    if device == "cpu":
        return request.param
    options.set("DJL_ATTN_FLASH_DECODE", request.param)
    return request.param


def make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, dtype, device):
    q = torch.randn(batch, seqlen_q, heads_q, dim, dtype=dtype, device=device)
    k = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
    v = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
    return q, k, v


def poison_past_lens(k, v, kv_lens):
    """Copies of k and v with NaN in every key/value past each row's length: a kernel that lets
    one of them contribute returns NaN."""
    k, v = k.clone(), v.clone()
    if kv_lens is not None:
        for b, n in enumerate(kv_lens.cpu().tolist()):
            k[b, n:] = float("nan")
            v[b, n:] = float("nan")
    return k, v


def check(q, k, v, kv_lens, causal, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    batch, seqlen_q, heads_q, _ = q.shape
    kp, vp = poison_past_lens(k, v, kv_lens)
    reference.poison_allocator(q.device, (q.shape, q.dtype),
                               ((batch, heads_q, seqlen_q), torch.float32))
    out, lse = flash(q, kp, vp, kv_lens, scale, causal)
    ref_out, ref_lse = reference.flash_attention(q, k, v, kv_lens, scale, causal)
    assert out.dtype == q.dtype and lse.dtype == torch.float32
    assert lse.shape == (batch, heads_q, seqlen_q)
    assert_close(out.cpu(), ref_out.cpu(), q.dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), q.dtype, "lse")


def lens_for(seqlen_k, batch, device):
    """Full, 1, 0 and a middle length: rows ending inside a 64-key tile, a row of one key and a
    row of none (output 0, logsumexp -inf)."""
    lens = [seqlen_k, 1, 0, max(seqlen_k // 2 + 3, 1) if seqlen_k > 8 else seqlen_k][:batch]
    return torch.tensor([min(n, seqlen_k) for n in lens], dtype=torch.int32, device=device)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", DECODE_HEAD_DIMS)
@pytest.mark.parametrize("heads_q,heads_kv", GROUPS)
@pytest.mark.parametrize("seqlen_k", [1, 7, 1000, 4096])
@pytest.mark.cpu_slice(lambda p: p["dtype"] == torch.float16 and p["seqlen_k"] != 4096)
def test_decode(device, decode_mode, dtype, dim, heads_q, heads_kv, seqlen_k):
    q, k, v = make_inputs(4, 1, seqlen_k, heads_q, heads_kv, dim, dtype, device)
    check(q, k, v, lens_for(seqlen_k, 4, device), False)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 2), (16, 1)])
def test_decode_without_kv_lens(device, decode_mode, dtype, heads_q, heads_kv):
    # Every row sees all Sk keys; causal has no effect on one query row.
    q, k, v = make_inputs(3, 1, 777, heads_q, heads_kv, 128, dtype, device)
    check(q, k, v, None, False)
    check(q, k, v, None, True)


@GPU_ONLY
def test_decode_long_context(device, decode_mode):
    # Batch 1 at 32k keys: many key ranges and the combine pass; a second row of 5000 keys
    # leaves most of its ranges empty.
    q, k, v = make_inputs(2, 1, 32768, 32, 8, 128, torch.float16, device)
    check(q, k, v, torch.tensor([32768, 5000], dtype=torch.int32, device=device), False)


# Up to 16 query rows without a fold (Sq > 1): each row is one of the decode kernel's m16 tile,
# causal aligned to the bottom-right corner, rows that see no key when kv_len < Sq; 17 rows
# take the tile kernel.
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("seqlen_q", [2, 7, 16, 17])
@pytest.mark.parametrize("heads_q,heads_kv", [(2, 2), (4, 2)])
@pytest.mark.parametrize("causal", [False, True])
@CPU_ONE_GROUP
def test_few_query_rows(device, decode_mode, dtype, seqlen_q, heads_q, heads_kv, causal):
    q, k, v = make_inputs(4, seqlen_q, 300, heads_q, heads_kv, 64, dtype, device)
    kv_lens = torch.tensor([300, 5, 0, 131], dtype=torch.int32, device=device)
    check(q, k, v, kv_lens, causal)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_decode_views_of_fused_qkv(device, decode_mode, dtype):
    # q, k and v as views into one [B, 1, Hq + 2 Hkv, D] projection: strided heads and rows.
    heads_q, heads_kv, dim = 8, 2, 128
    fused = torch.randn(3, 1, heads_q + 2 * heads_kv, dim, dtype=dtype, device=device)
    cache = torch.randn(3, 513, 2 * heads_kv, dim, dtype=dtype, device=device)
    q = fused[:, :, :heads_q]
    k, v = cache[:, :, :heads_kv], cache[:, :, heads_kv:]
    assert not q.is_contiguous() and not k.is_contiguous()
    check(q, k, v, torch.tensor([513, 64, 65], dtype=torch.int32, device=device), False,
          scale=0.3)


@GPU_ONLY
def test_decode_switch_validation(device, options):
    with pytest.raises(ValueError,
                       match=r"DJL_ATTN_FLASH_DECODE: expected one of auto, on, off, got 'fast'"):
        options.set("DJL_ATTN_FLASH_DECODE", "fast")


@pytest.mark.parametrize("dim,dtype,reason", [
    (96, torch.float16, "a head dim other than 64, 128 or 256"),
    (64, torch.float32, "float32"),
])
@GPU_ONLY
def test_decode_on_names_what_it_cannot_take(device, options, dim, dtype, reason):
    options.set("DJL_ATTN_FLASH_DECODE", "on")
    q, k, v = make_inputs(1, 1, 10, 4, 2, dim, dtype, device)
    # The arguments are valid: the switch forced a kernel that cannot run them (a RuntimeError,
    # the kind of a native failure, not a ValueError).
    with pytest.raises(RuntimeError, match="DJL_ATTN_FLASH_DECODE=on: the decode kernel does not "
                                           "take " + reason):
        flash(q, k, v, None, 0.125, False)
    options.set("DJL_ATTN_FLASH_DECODE", "auto")  # auto falls back instead
    out, _ = flash(q, k, v, None, 0.125, False)
    ref, _ = reference.flash_attention(q, k, v, None, 0.125, False)
    assert_close(out.cpu(), ref.cpu(), dtype, "out")


# --- the sliding window and soft-cap (the decode kernel's features instantiation) ---------------
# Windows (window_left) of 0 (the row's own key), 1, narrower than the kernel's 64-key tile (7),
# one tile (64), across tiles and ranges (100, 1000), and wider than every context (5000: the
# binding drops it); soft-caps of 0 (none) and 5 (tight enough to move every output), alone and
# with a window. Rows that see part of a tile before the window, and whole tiles and ranges
# before it, have their keys and values poisoned with NaN (poison_before_window): the kernel
# must not read them.
WINDOWS = [0, 1, 7, 64, 100, 1000, 5000]
SOFTCAPS = [0.0, 5.0]


def first_visible_keys(kv_lens, batch, seqlen_q, seqlen_k, window_left):
    """Per batch row, the first key its earliest query row (position L - Sq) sees."""
    lens = [seqlen_k] * batch if kv_lens is None else kv_lens.cpu().tolist()
    return [max(0, n - seqlen_q - window_left) if window_left >= 0 else 0 for n in lens]


def poison_before_window(k, v, firsts):
    """Copies of k and v with NaN in every key/value before each batch row's first visible key:
    a kernel that lets one of them reach the output, even as 0 * value, returns NaN."""
    k, v = k.clone(), v.clone()
    for b, first in enumerate(firsts):
        k[b, :first] = float("nan")
        v[b, :first] = float("nan")
    return k, v


def check_features(q, k, v, kv_lens, causal, window_left, window_right, softcap, poison,
                   alibi_slopes=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    batch, seqlen_q, heads_q, _ = q.shape
    ref_out, ref_lse = reference.flash_attention(q, k, v, kv_lens, scale, causal, window_left,
                                                 window_right, softcap, alibi_slopes)
    kp, vp = poison_past_lens(k, v, kv_lens)
    if poison:
        kp, vp = poison_before_window(
            kp, vp, first_visible_keys(kv_lens, batch, seqlen_q, k.shape[1], window_left))
    reference.poison_allocator(q.device, (q.shape, q.dtype),
                               ((batch, heads_q, seqlen_q), torch.float32))
    out, lse = flash(q, kp, vp, kv_lens, scale, causal, window_left, window_right, softcap,
                     alibi_slopes)
    assert out.dtype == q.dtype and lse.shape == (batch, heads_q, seqlen_q)
    assert_close(out.cpu(), ref_out.cpu(), q.dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), q.dtype, "lse")
    return ref_out


def poisons(device, decode_mode):
    """Whether keys before the window may be NaN: the decode kernel zero-fills them (and so does
    the CPU, which skips them); the tile kernel (DJL_ATTN_FLASH_DECODE=off) loads whole tiles from
    the window's first and multiplies probability 0 by what is there, as dense inputs allow."""
    return decode_mode == "on"


# Every (window, cap) pair but the one that changes nothing (5000 > Sk, no cap: test_decode's).
FEATURE_PAIRS = [(w, c) for w in WINDOWS for c in SOFTCAPS if not (w == 5000 and c == 0.0)]


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", DECODE_HEAD_DIMS)
@pytest.mark.parametrize("heads_q,heads_kv", GROUPS)
@pytest.mark.parametrize("window_left,softcap", FEATURE_PAIRS)
@CPU_D64_SMALL_GROUPS
def test_decode_window_softcap(device, decode_mode, dtype, dim, heads_q, heads_kv, window_left,
                               softcap):
    # One query row (folded with GQA: the group's rows share the query's position), kv_lens
    # that are full, 1, 0, odd and inside a tile; Sk = 300 is not a multiple of 64.
    q, k, v = make_inputs(5, 1, 300, heads_q, heads_kv, dim, dtype, device)
    kv_lens = torch.tensor([300, 1, 0, 131, 77], dtype=torch.int32, device=device)
    check_features(q, k, v, kv_lens, False, window_left, -1, softcap, poisons(device, decode_mode))


# Up to 16 query rows without a fold: the rows sit at different positions and see different
# windows (masked per row); causal and not, with window_right where it cuts (non-causal, Sq > 1).
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("seqlen_q", [2, 5, 16])
@pytest.mark.parametrize("heads_q,heads_kv", [(2, 2), (4, 2)])
@pytest.mark.parametrize("causal,window_right", [(True, -1), (False, -1), (False, 0), (False, 2)])
@pytest.mark.parametrize("window_left,softcap", [(0, 0.0), (7, 0.0), (64, 5.0), (130, 0.0),
                                                 (-1, 5.0)])
@CPU_ONE_GROUP
def test_few_rows_window_softcap(device, decode_mode, dtype, seqlen_q, heads_q, heads_kv, causal,
                                 window_right, window_left, softcap):
    q, k, v = make_inputs(4, seqlen_q, 300, heads_q, heads_kv, 64, dtype, device)
    kv_lens = torch.tensor([300, 5, 0, 131], dtype=torch.int32, device=device)
    check_features(q, k, v, kv_lens, causal, window_left, window_right, softcap,
                   poisons(device, decode_mode))


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("window_left", [0, 63, 64, 4095])
@pytest.mark.parametrize("softcap", SOFTCAPS)
@CPU_FLOAT16
def test_decode_window_without_kv_lens(device, decode_mode, dtype, window_left, softcap):
    # Every row has Sk keys (a multiple of 64 here, so the window's start falls on a tile edge
    # for some windows and inside a tile for others).
    q, k, v = make_inputs(2, 1, 4096, 32, 8, 128, dtype, device)
    check_features(q, k, v, None, True, window_left, -1, softcap, poisons(device, decode_mode))


@GPU_ONLY
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("window_left", [0, 5, 64, 1000, 4095])
@pytest.mark.parametrize("softcap", SOFTCAPS)
def test_decode_long_context_small_window(device, decode_mode, dtype, window_left, softcap):
    # Batch 1 and 3 at 32k keys with Mistral's window (4095) and smaller ones: the split
    # counts tiles from the window's first, so many ranges over the window and none before it;
    # the other rows end inside a tile and at 1 key.
    q, k, v = make_inputs(3, 1, 32768, 32, 8, 128, dtype, device)
    kv_lens = torch.tensor([32768, 30001, 1], dtype=torch.int32, device=device)
    check_features(q, k, v, kv_lens, False, window_left, -1, softcap, poisons(device, decode_mode))
    check_features(q[:1], k[:1], v[:1], None, False, window_left, -1, softcap,
                   poisons(device, decode_mode))


def test_decode_features_change_the_result(device):
    # Guards the cases above against a kernel and a reference that both ignore an argument: a
    # window and a soft-cap each move a decode step's output.
    q, k, v = make_inputs(1, 1, 500, 8, 2, 64, torch.float16, device)
    plain, _ = flash(q, k, v, None, 0.125, False)
    for window_left, softcap in ((10, 0.0), (-1, 1.0)):
        out, _ = flash(q, k, v, None, 0.125, False, window_left, -1, softcap, None)
        assert (out.float() - plain.float()).abs().max().item() > 1e-2, (window_left, softcap)


# --- ALiBi (the decode kernel's ALiBi instantiation) --------------------------------------------
# Slopes [Hq] and [B, Hq] (rows far apart, so that a row read for another batch row or another
# head fails); one query row folded with GQA (each folded row is a query head and reads its own
# slope) and a few unfolded rows (one head, rows at different positions, causal or not), alone
# and with the window and soft-cap; keys past the lengths and before the window poisoned.


def alibi_slopes(kind, batch, heads_q, device):
    if kind == "heads":
        return (torch.rand(heads_q) * 0.5 + 0.05).to(device)
    rows = torch.rand(batch, heads_q) * 0.25 + torch.arange(batch)[:, None] * 0.3 + 0.05
    return rows.to(device)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("dim", DECODE_HEAD_DIMS)
@pytest.mark.parametrize("heads_q,heads_kv", GROUPS)
@pytest.mark.parametrize("slopes", ["heads", "batch"])
@pytest.mark.parametrize("window_left,softcap", [(-1, 0.0), (7, 0.0), (100, 5.0), (-1, 5.0)])
@CPU_D64_SMALL_GROUPS
def test_decode_alibi(device, decode_mode, dtype, dim, heads_q, heads_kv, slopes, window_left,
                      softcap):
    q, k, v = make_inputs(5, 1, 300, heads_q, heads_kv, dim, dtype, device)
    kv_lens = torch.tensor([300, 1, 0, 131, 77], dtype=torch.int32, device=device)
    check_features(q, k, v, kv_lens, False, window_left, -1, softcap,
                   poisons(device, decode_mode), alibi_slopes(slopes, 5, heads_q, device))


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("seqlen_q", [2, 5, 16])
@pytest.mark.parametrize("heads_q,heads_kv", [(2, 2), (4, 2)])
@pytest.mark.parametrize("causal,window_right", [(True, -1), (False, -1), (False, 2)])
@pytest.mark.parametrize("window_left,softcap", [(-1, 0.0), (7, 0.0), (130, 5.0)])
@CPU_ONE_GROUP
def test_few_rows_alibi(device, decode_mode, dtype, seqlen_q, heads_q, heads_kv, causal,
                        window_right, window_left, softcap):
    # Rows at different positions: each row's distance to a key is its own (-slope * |i + o - j|,
    # on both sides of the diagonal when not causal).
    q, k, v = make_inputs(4, seqlen_q, 300, heads_q, heads_kv, 64, dtype, device)
    kv_lens = torch.tensor([300, 5, 0, 131], dtype=torch.int32, device=device)
    check_features(q, k, v, kv_lens, causal, window_left, window_right, softcap,
                   poisons(device, decode_mode), alibi_slopes("batch", 4, heads_q, device))


@GPU_ONLY
@pytest.mark.parametrize("window_left", [-1, 4095])
def test_decode_alibi_long_context(device, decode_mode, window_left):
    # Many key ranges merged by the combine pass, each scored with the rows' own slopes.
    q, k, v = make_inputs(3, 1, 32768, 32, 8, 128, torch.float16, device)
    kv_lens = torch.tensor([32768, 30001, 1], dtype=torch.int32, device=device)
    check_features(q, k, v, kv_lens, False, window_left, -1, 0.0, poisons(device, decode_mode),
                   alibi_slopes("batch", 3, 32, device))


def test_decode_alibi_changes_the_result(device):
    # Guards the cases above against a kernel and a reference that both ignore the slopes or
    # their batch rows.
    q, k, v = make_inputs(2, 1, 500, 8, 2, 64, torch.float16, device)
    heads = alibi_slopes("heads", 2, 8, device)
    plain, _ = flash(q, k, v, None, 0.125, False)
    with_heads, _ = flash(q, k, v, None, 0.125, False, -1, -1, 0.0, heads)
    per_batch, _ = flash(q, k, v, None, 0.125, False, -1, -1, 0.0,
                         torch.stack([heads, heads * 3]))
    assert (with_heads.float() - plain.float()).abs().max().item() > 1e-2
    assert torch.equal(per_batch[0], with_heads[0])
    assert (per_batch[1].float() - with_heads[1].float()).abs().max().item() > 1e-2
