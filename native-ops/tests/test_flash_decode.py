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
CUDA = torch.cuda.is_available()
# (Hq, Hkv): plain MHA decode (group 1) and groups of 4, 8 and 16 query heads per kv head.
GROUPS = [(4, 4), (8, 2), (8, 1), (16, 1)]
# The decode kernel's head dims (flash_decode.h); others take the tile kernel.
DECODE_HEAD_DIMS = [64, 128, 256]


@pytest.fixture(params=["on", "off"])
def decode_mode(request, device, options):
    """DJL_ATTN_FLASH_DECODE: on runs the decode kernel and fails where it cannot (every shape
    here is one it takes, so a silent fallback to the tile kernel would fail the test), off the
    tile kernel. The CPU has one kernel and ignores it."""
    if device == "cpu":
        if request.param != "on":
            pytest.skip("the CPU has one flash attention kernel")
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
def test_decode(device, decode_mode, dtype, dim, heads_q, heads_kv, seqlen_k):
    if device == "cpu" and (dtype != torch.float16 or seqlen_k == 4096):
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    q, k, v = make_inputs(4, 1, seqlen_k, heads_q, heads_kv, dim, dtype, device)
    check(q, k, v, lens_for(seqlen_k, 4, device), False)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 2), (16, 1)])
def test_decode_without_kv_lens(device, decode_mode, dtype, heads_q, heads_kv):
    # Every row sees all Sk keys; causal has no effect on one query row.
    q, k, v = make_inputs(3, 1, 777, heads_q, heads_kv, 128, dtype, device)
    check(q, k, v, None, False)
    check(q, k, v, None, True)


@pytest.mark.skipif(not CUDA, reason="a long context runs on the GPU only")
def test_decode_long_context(device, decode_mode):
    if device != "cuda":
        pytest.skip("a long context runs on the GPU only")
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
def test_few_query_rows(device, decode_mode, dtype, seqlen_q, heads_q, heads_kv, causal):
    if device == "cpu" and (dtype != torch.float16 or heads_q != heads_kv):
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
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


def test_decode_switch_validation(device, options):
    if device != "cuda":
        pytest.skip("DJL_ATTN_FLASH_DECODE chooses between CUDA kernels")
    with pytest.raises(ValueError,
                       match=r"DJL_ATTN_FLASH_DECODE: expected one of auto, on, off, got 'fast'"):
        options.set("DJL_ATTN_FLASH_DECODE", "fast")


@pytest.mark.parametrize("dim,dtype,reason", [
    (96, torch.float16, "a head dim other than 64, 128 or 256"),
    (64, torch.float32, "float32"),
])
def test_decode_on_names_what_it_cannot_take(device, options, dim, dtype, reason):
    if device != "cuda":
        pytest.skip("DJL_ATTN_FLASH_DECODE chooses between CUDA kernels")
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
