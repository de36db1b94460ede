"""djl_attn.causal_dot_product against the float64 reference, on CPU and (when present) CUDA.

On CUDA every kernel variant runs each accuracy test: the launcher reads
DJL_ATTN_LINEAR_KERNEL (auto, per_thread, low_occupancy, chunked) on every call.
"""

import contextlib
import ctypes
import os

import pytest
import torch

import reference
from conftest import _find
from reference import TOLERANCE

causal_dot_product = torch.ops.djl_attn.causal_dot_product

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# chunked runs on tensor cores for float16/bfloat16 with E <= 128; asked for float32 or a larger
# E it runs per_thread, so the same loop covers it.
CUDA_VARIANTS = ["auto", "per_thread", "low_occupancy", "chunked"]


@contextlib.contextmanager
def kernel_variant(name):
    old = os.environ.get("DJL_ATTN_LINEAR_KERNEL")
    os.environ["DJL_ATTN_LINEAR_KERNEL"] = name
    try:
        yield
    finally:
        if old is None:
            del os.environ["DJL_ATTN_LINEAR_KERNEL"]
        else:
            os.environ["DJL_ATTN_LINEAR_KERNEL"] = old


def variants(device):
    return CUDA_VARIANTS if device == "cuda" else ["auto"]


def make_inputs(batch, heads, seqlen, dim_qk, dim_v, dtype, device):
    q = torch.randn(batch, heads, seqlen, dim_qk, device=device).to(dtype)
    k = torch.randn(batch, heads, seqlen, dim_qk, device=device).to(dtype)
    v = torch.randn(batch, heads, seqlen, dim_v, device=device).to(dtype)
    return q, k, v


def assert_matches_reference(out, q, k, v, what=""):
    """Error per element relative to sum_{i<=j} |q_j . k_i| |v_i| (at least 1).

    The outputs are sums of many signed terms, so an element can be far smaller than the terms
    it adds up; the error of any summation order is bounded by eps times the sum of the
    magnitudes of those terms, which is therefore the scale the tolerance applies to.
    """
    dtype = q.dtype
    assert out.dtype == dtype and out.shape == (*q.shape[:3], v.shape[-1]), (out.dtype, out.shape)
    expected = reference.causal_dot_product(q, k, v).cpu()
    scale = reference.causal_dot_product(q.abs(), k.abs(), v.abs()).cpu().clamp(min=1.0)
    actual = out.cpu().double()
    assert not torch.isnan(actual).any(), "%s: output has NaN elements" % what
    err = ((actual - expected).abs() / scale).max().item() if actual.numel() else 0.0
    assert err <= TOLERANCE[dtype], "%s: max error %.3g > %.3g for %s" % (what, err, TOLERANCE[dtype], dtype)


def check(q, k, v, device):
    for variant in variants(device):
        with kernel_variant(variant):
            out = causal_dot_product(q, k, v)
        assert_matches_reference(out, q, k, v, "%s/%s" % (device, variant))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "batch,heads,seqlen,dim_qk,dim_v",
    [
        (1, 1, 1, 32, 32),  # L = 1
        (2, 3, 7, 16, 24),  # E != M, short
        (1, 2, 113, 64, 33),  # odd L and M
        (2, 2, 129, 80, 48),  # E not a power of two, chunk boundary + 1
        (1, 1, 1000, 64, 64),  # long, one head: the low-occupancy / segmented paths
        (2, 1, 65, 256, 256),  # largest dims
        (1, 1, 37, 1, 1),  # E = M = 1
        (1, 2, 50, 100, 200),  # M > E
    ],
)
def test_matches_reference(device, dtype, batch, heads, seqlen, dim_qk, dim_v):
    q, k, v = make_inputs(batch, heads, seqlen, dim_qk, dim_v, dtype, device)
    check(q, k, v, device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_heads(device, dtype):
    # B*H large enough to fill every SM of a GPU: the per-thread path under auto.
    q, k, v = make_inputs(8, 32, 41, 32, 64, dtype, device)
    check(q, k, v, device)


def test_strided_views(device):
    # q/k/v as views into [B, L, H, 3, E]-like projections: only the last dim is contiguous, and
    # v starts one element in, so no row is 16-byte aligned (the scalar-load path on CUDA).
    qk = torch.randn(2, 77, 3, 2, 64, device=device)
    q, k = qk[:, :, :, 0].transpose(1, 2), qk[:, :, :, 1].transpose(1, 2)
    v = torch.randn(2, 3, 77, 50, device=device)[..., 1:41]
    assert not q.is_contiguous() and not v.is_contiguous() and v.stride(-1) == 1
    check(q, k, v, device)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_misaligned_half_rows(device, dtype):
    q, k, v = make_inputs(1, 3, 90, 41, 39, dtype, device)
    check(q[..., 1:], k[..., :40], v[..., 3:], device)


def test_cpu_segments_over_length():
    # One head and more threads than heads: the CPU splits L into segments whose starting states
    # come from a prefix pass. Pin the thread count so the split happens on any machine.
    lib = ctypes.CDLL(str(_find("libdjl_attn.so")))
    old = lib.djl_attn_get_num_threads()
    lib.djl_attn_set_num_threads(4)
    try:
        for seqlen in (1000, 129, 64 * 3):
            q, k, v = make_inputs(1, 1, seqlen, 64, 48, torch.float32, "cpu")
            assert_matches_reference(causal_dot_product(q, k, v), q, k, v, "L=%d" % seqlen)
        q, k, v = make_inputs(1, 2, 700, 32, 32, torch.bfloat16, "cpu")
        assert_matches_reference(causal_dot_product(q, k, v), q, k, v, "bf16")
    finally:
        lib.djl_attn_set_num_threads(old)


def test_empty(device):
    for shape in [(0, 2, 5), (2, 0, 5), (2, 2, 0)]:
        q, k, v = make_inputs(*shape, 16, 24, torch.float32, device)
        out = causal_dot_product(q, k, v)
        assert out.shape == (*shape, 24) and out.dtype == torch.float32


# --- validation: every rule names the argument, the expectation and what it got ---------------


def error_of(*args):
    with pytest.raises((ValueError, RuntimeError)) as info:
        causal_dot_product(*args)
    return str(info.value)


def test_rejects_wrong_rank(device):
    q, k, v = make_inputs(1, 2, 4, 8, 8, torch.float32, device)
    assert "q: expected 4 dims [B, H, L, E], got 3" in error_of(q[0], k, v)
    assert "k: expected 4 dims [B, H, L, E], got 5" in error_of(q, k[None], v)
    assert "v: expected 4 dims [B, H, L, M], got 3" in error_of(q, k, v[0])


def test_rejects_mismatched_sizes(device):
    q, k, v = make_inputs(2, 3, 5, 8, 6, torch.float32, device)
    assert "k: expected size 2 for B (the batch of q), got 1" in error_of(q, k[:1], v)
    assert "k: expected size 3 for H (the heads of q), got 2" in error_of(q, k[:, :2], v)
    assert "k: expected size 5 for L (the length of q), got 4" in error_of(q, k[:, :, :4], v)
    assert "k: expected size 8 for E (the feature dim of q), got 7" in error_of(q, k[..., :7], v)
    assert "v: expected size 2 for B (the batch of q), got 1" in error_of(q, k, v[:1])
    assert "v: expected size 3 for H (the heads of q), got 1" in error_of(q, k, v[:, :1])
    assert "v: expected size 5 for L (the length of q), got 3" in error_of(q, k, v[:, :, :3])


def test_rejects_unsupported_dims(device):
    q, k, v = make_inputs(1, 1, 3, 257, 8, torch.float32, device)
    assert "q: expected a feature dim E in [1, 256], got 257" in error_of(q, k, v)
    assert "q: expected a feature dim E in [1, 256], got 0" in error_of(q[..., :0], k[..., :0], v)
    q, k, v = make_inputs(1, 1, 3, 8, 300, torch.float32, device)
    assert "v: expected a feature dim M in [1, 256], got 300" in error_of(q, k, v)
    assert "v: expected a feature dim M in [1, 256], got 0" in error_of(q, k, v[..., :0])


def test_rejects_unsupported_and_mixed_dtypes(device):
    q, k, v = make_inputs(1, 2, 4, 8, 8, torch.float32, device)
    assert "q: expected dtype in {float32, float16, bfloat16}, got" in error_of(q.double(), k.double(), v.double())
    assert "k: expected the dtype of q (float32), got float16" in error_of(q, k.half(), v)
    assert "v: expected the dtype of q (float32), got bfloat16" in error_of(q, k, v.bfloat16())


def test_rejects_non_contiguous_last_dim(device):
    q, k, v = make_inputs(1, 2, 4, 16, 16, torch.float32, device)
    assert "q: expected a contiguous last dim (stride 1), got stride 2" in error_of(q[..., ::2], k[..., :8], v)
    assert "k: expected a contiguous last dim (stride 1), got stride 2" in error_of(q[..., :8], k[..., ::2], v)
    assert "v: expected a contiguous last dim (stride 1), got stride 2" in error_of(q, k, v[..., ::2])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="mixing devices needs a GPU")
def test_rejects_mixed_devices():
    q, k, v = make_inputs(1, 2, 4, 8, 8, torch.float32, "cuda")
    assert "k: expected the device of q (cuda:0), got cpu" in error_of(q, k.cpu(), v)
    assert "v: expected the device of q (cuda:0), got cpu" in error_of(q, k, v.cpu())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the variant switch is read by the CUDA launcher")
def test_rejects_unknown_kernel_variant():
    q, k, v = make_inputs(1, 2, 4, 8, 8, torch.float32, "cuda")
    with kernel_variant("fastest"):
        message = error_of(q, k, v)
    assert "DJL_ATTN_LINEAR_KERNEL: expected one of auto, per_thread, low_occupancy, chunked" in message
    assert "got fastest" in message
    # Nothing is left behind: the next call works.
    assert_matches_reference(causal_dot_product(q, k, v), q, k, v)
