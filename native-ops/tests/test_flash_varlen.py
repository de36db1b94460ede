"""djl_attn.flash_attention_varlen against the float64 reference, on CPU and (when present) CUDA.

Packed layout: q [total_q, Hq, D], k/v [total_k, Hkv, D], int32 cu_seqlens [B + 1];
outputs out [total_q, Hq, D] and lse [Hq, total_q] float32.
"""

import math

import pytest
import torch

import reference
from reference import assert_close

varlen = torch.ops.djl_attn.flash_attention_varlen

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
CUDA = torch.cuda.is_available()


def cu_seqlens(lengths, device):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=device)


def make_inputs(lens_q, lens_k, heads_q, heads_kv, dim, dtype, device):
    q = torch.randn(sum(lens_q), heads_q, dim, dtype=dtype, device=device)
    k = torch.randn(sum(lens_k), heads_kv, dim, dtype=dtype, device=device)
    v = torch.randn(sum(lens_k), heads_kv, dim, dtype=dtype, device=device)
    return q, k, v, cu_seqlens(lens_q, device), cu_seqlens(lens_k, device)


def check(q, k, v, cu_q, cu_k, causal, max_q=None, max_k=None):
    lens_q = (cu_q[1:] - cu_q[:-1]).tolist()
    lens_k = (cu_k[1:] - cu_k[:-1]).tolist()
    max_q = max(lens_q, default=0) if max_q is None else max_q
    max_k = max(lens_k, default=0) if max_k is None else max_k
    scale = 1.0 / math.sqrt(q.shape[-1])
    reference.poison_allocator(q.device, (q.shape, q.dtype), ((q.shape[1], q.shape[0]), torch.float32))
    out, lse = varlen(q, k, v, cu_q, cu_k, max_q, max_k, scale, causal)
    ref_out, ref_lse = reference.flash_attention_varlen(q, k, v, cu_q, cu_k, scale, causal)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == (q.shape[1], q.shape[0]) and lse.dtype == torch.float32
    assert_close(out.cpu(), ref_out.cpu(), q.dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), torch.float32 if q.dtype == torch.float32 else q.dtype, "lse")


# Mixed lengths: single rows, a tile edge (128), a sequence with no queries, one longer than a
# tile; keys longer, shorter (causal rows that see nothing) and equal.
MIXED = [
    ([1, 7, 128, 0, 300], [1, 7, 128, 5, 300]),
    ([5, 1, 129, 64], [200, 1000, 7, 64]),
    ([3, 40], [0, 17]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [64, 80, 128])
@pytest.mark.parametrize("lens", MIXED)
@pytest.mark.parametrize("causal", [False, True])
def test_mixed_lengths(device, dtype, dim, lens, causal):
    if device == "cpu" and dim != 64 and dtype != torch.float32:
        pytest.skip("head dims matter to the CUDA kernels; the CPU runs a slice of the grid")
    q, k, v, cu_q, cu_k = make_inputs(*lens, 4, 4, dim, dtype, device)
    check(q, k, v, cu_q, cu_k, causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 1), (8, 2)])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa(device, dtype, heads_q, heads_kv, causal):
    if device == "cpu" and dtype != torch.float32:
        pytest.skip("dtypes matter to the CUDA kernels; the CPU runs a slice of the grid")
    q, k, v, cu_q, cu_k = make_inputs([1, 33, 70], [90, 33, 70], heads_q, heads_kv, 64, dtype, device)
    check(q, k, v, cu_q, cu_k, causal)


@pytest.mark.skipif(not CUDA, reason="large shapes run on the GPU only")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [32, 96, 256, 7, 100])  # 7 and 100 run staged, padded copies
@pytest.mark.parametrize("causal", [False, True])
def test_head_dims_cuda(dtype, dim, causal):
    q, k, v, cu_q, cu_k = make_inputs([1000, 7, 1, 260], [1000, 300, 4096, 260], 4, 2, dim, dtype, "cuda")
    check(q, k, v, cu_q, cu_k, causal)


def test_views_of_packed_qkv(device):
    for dtype in [torch.float32, torch.float16]:
        qkv = torch.randn(150, 3, 4, 64, device=device, dtype=dtype)
        q, k, v = qkv.unbind(1)
        cu = cu_seqlens([50, 1, 99], device)
        check(q, k, v, cu, cu, True)


def test_max_seqlen_above_the_longest(device):
    q, k, v, cu_q, cu_k = make_inputs([3, 9], [4, 12], 2, 2, 32, torch.float32, device)
    check(q, k, v, cu_q, cu_k, True, max_q=12, max_k=16)


def test_empty_batch(device):
    q, k, v, cu_q, cu_k = make_inputs([], [], 2, 2, 32, torch.float32, device)
    out, lse = varlen(q, k, v, cu_q, cu_k, 0, 0, 1.0, False)
    assert out.shape == (0, 2, 32) and lse.shape == (2, 0)


# --- validation -------------------------------------------------------------------------------


def error_of(*args):
    with pytest.raises((ValueError, RuntimeError)) as info:
        varlen(*args)
    return str(info.value)


def test_rejects_bad_ranks_and_shapes(device):
    q, k, v, cu_q, cu_k = make_inputs([3, 4], [3, 4], 2, 2, 32, torch.float32, device)
    assert "flash_attention_varlen: q: expected 3 dims [total_q, Hq, D], got 4" in error_of(
        q[None], k, v, cu_q, cu_k, 4, 4, 1.0, False)
    assert "v: expected size 7 for total_k" in error_of(q, k, v[:5], cu_q, cu_k, 4, 4, 1.0, False)
    assert "k: expected size 32 for D" in error_of(q, k[..., :16], v, cu_q, cu_k, 4, 4, 1.0, False)


def test_rejects_bad_cu_seqlens(device):
    q, k, v, cu_q, cu_k = make_inputs([3, 4], [3, 4], 2, 2, 32, torch.float32, device)
    assert "cu_seqlens_q: expected dtype int32, got int64" in error_of(
        q, k, v, cu_q.long(), cu_k, 4, 4, 1.0, False)
    assert "cu_seqlens_k: expected size 3 for B + 1" in error_of(
        q, k, v, cu_q, cu_k[:2], 4, 4, 1.0, False)
    bad = torch.tensor([0, 5, 4], dtype=torch.int32, device=device)
    assert "cu_seqlens_q: expected non-decreasing values, got 4 after 5 at index 2" in error_of(
        q, k, v, bad, cu_k, 5, 4, 1.0, False)
    short = torch.tensor([0, 3, 6], dtype=torch.int32, device=device)
    assert "cu_seqlens_k: expected a last value equal to total_k = 7, got 6" in error_of(
        q, k, v, cu_q, short, 4, 4, 1.0, False)
    nonzero = torch.tensor([1, 3, 7], dtype=torch.int32, device=device)
    assert "cu_seqlens_q: expected 0 at index 0, got 1" in error_of(q, k, v, nonzero, cu_k, 4, 4, 1.0, False)
    assert "cu_seqlens_q: expected sequence lengths <= max_seqlen_q = 3, got 4 for sequence 1" in error_of(
        q, k, v, cu_q, cu_k, 3, 4, 1.0, False)
    assert "cu_seqlens_q: expected 1 dims [B + 1], got 2" in error_of(q, k, v, cu_q[None], cu_k, 4, 4, 1.0, False)


def test_rejects_bad_max_seqlen_and_scale(device):
    q, k, v, cu_q, cu_k = make_inputs([3, 4], [3, 4], 2, 2, 32, torch.float32, device)
    assert "max_seqlen_q: expected a value in [0, total_q = 7], got -1" in error_of(
        q, k, v, cu_q, cu_k, -1, 4, 1.0, False)
    assert "max_seqlen_k: expected a value in [0, total_k = 7], got 8" in error_of(
        q, k, v, cu_q, cu_k, 4, 8, 1.0, False)
    assert "scale: expected a finite value" in error_of(q, k, v, cu_q, cu_k, 4, 4, float("inf"), False)


def test_rejects_more_query_tiles_than_one_cuda_grid(device):
    # The CUDA kernels size their grids by the longest sequence: B sequences, one of 2^20 rows, and
    # 1024 heads make B * 1024 * 2^14 query tiles of 64 rows, 2^31 (one too many) at B = 128.
    # Refused on every backend; the stride-0 views allocate nothing.
    total, heads = 1 << 20, 1024
    for batch in (1 << 17, 128):
        q = torch.zeros(1, 1, 8, device=device).expand(total, heads, 8)
        k = torch.zeros(1, 1, 8, device=device).expand(batch, 1, 8)
        cu_q = torch.full((batch + 1,), total, dtype=torch.int32, device=device)
        cu_q[0] = 0
        cu_k = torch.arange(batch + 1, dtype=torch.int32, device=device)
        assert ("flash_attention_varlen: max_seqlen_q: expected B * Hq * ceil(Sq / 64) <= 2^31 - 1 "
                "(the query tiles of one CUDA grid), got B = %d, Hq = 1024, Sq = 1048576" % batch
                ) in error_of(q, k, k, cu_q, cu_k, total, 1, 1.0, False)


def test_rejects_mixed_dtypes_and_heads(device):
    q, k, v, cu_q, cu_k = make_inputs([3, 4], [3, 4], 6, 4, 32, torch.float32, device)
    assert "divides the query heads Hq = 6, got Hkv = 4" in error_of(q, k, v, cu_q, cu_k, 4, 4, 1.0, False)
    q, k, v, cu_q, cu_k = make_inputs([3, 4], [3, 4], 2, 2, 32, torch.float32, device)
    assert "k: expected the dtype of q (float32), got float16" in error_of(
        q, k.half(), v, cu_q, cu_k, 4, 4, 1.0, False)
