"""djl_attn.causal_dot_product against the float64 reference, on CPU and (when present) CUDA.

On CUDA every kernel variant runs each accuracy test, forced through the switch
DJL_ATTN_LINEAR_KERNEL (auto, per_thread, low_occupancy, chunked), set in-process per test.
"""

import contextlib
import ctypes

import pytest
import torch

import reference
from conftest import _find, get_option, set_option
from reference import TOLERANCE

causal_dot_product = torch.ops.djl_attn.causal_dot_product

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# chunked runs on tensor cores for float16/bfloat16 with E <= 128; asked for float32 or a larger
# E it runs per_thread, so the same loop covers it. auto runs chunked on a GPU when B*H fills the
# SMs, L >= 128 and the dtype and E allow (test_auto_plan).
CUDA_VARIANTS = ["auto", "per_thread", "low_occupancy", "chunked"]


@contextlib.contextmanager
def kernel_variant(name):
    """Forces a CUDA variant (DJL_ATTN_LINEAR_KERNEL, a switch of libdjl_attn_cuda.so) for the
    block; without a GPU the CPU kernel runs and there is nothing to switch."""
    if not torch.cuda.is_available():
        yield
        return
    old = get_option("DJL_ATTN_LINEAR_KERNEL")
    set_option("DJL_ATTN_LINEAR_KERNEL", name)
    try:
        yield
    finally:
        set_option("DJL_ATTN_LINEAR_KERNEL", old)


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


HALF_DTYPES = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize(
    "batch,heads,seqlen,dim_qk,dim_v",
    [
        (1, 2, 1, 64, 64),  # one partial chunk of one step
        (2, 1, 7, 32, 96),  # E = 32 < M: one full and one half-empty 64-column tile
        (1, 2, 64, 128, 128),  # exactly one chunk, two column tiles
        (1, 1, 65, 100, 7),  # E zero-padded to 128, M = 7 in a 32-column tile
        (1, 1, 1000, 128, 64),  # many chunks, a partial last one
        (2, 1, 1000, 32, 96),  # many chunks, E = 32 state split by columns
        (1, 1, 200, 48, 32),  # E padded to 64, M = 32 tile
    ],
)
def test_chunked_shapes(device, dtype, batch, heads, seqlen, dim_qk, dim_v):
    # The tensor-core kernel's tiles: chunks of 64 steps, E padded to 32/64/128, tiles of 64 (or
    # 32) columns; on CUDA `chunked` runs each of these, on the CPU the CPU kernel does.
    q, k, v = make_inputs(batch, heads, seqlen, dim_qk, dim_v, dtype, device)
    check(q, k, v, device)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_many_heads_long(device, dtype):
    # B*H = 256 and L past two chunks: what auto gives the chunked kernel on a GPU.
    q, k, v = make_inputs(16, 16, 150, 64, 64, dtype, device)
    check(q, k, v, device)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_strided_half_views(device, dtype):
    # q, k, v as views into one [B, L, H, 3, E] projection: every row 16-byte aligned but nothing
    # contiguous beyond the last dim (the cp.async path with real strides) ...
    qkv = torch.randn(2, 77, 3, 3, 64, device=device).to(dtype)
    q, k, v = (qkv[:, :, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous() and q.stride(-2) % 8 == 0
    check(q, k, v, device)
    # ... and v starting one element in, so no row of it is aligned (the element-wise path).
    v = torch.randn(2, 3, 77, 50, device=device).to(dtype)[..., 1:41]
    check(q, k, v, device)


def test_state_beyond_float16_range(device):
    # k_i v_i >= 36 everywhere, so after 2048 steps every element of the state sum k v^T exceeds
    # float16's 65504; q is small, so the outputs stay far inside the range. A state rounded to
    # float16 would be infinite here: the chunked kernel keeps it in float32 (tf32 as an operand).
    gen = torch.Generator().manual_seed(5)
    shape = (1, 2, 2048)
    q = ((torch.rand(*shape, 32, generator=gen) * 2 - 1) * 0.005).half().to(device)
    k = (torch.rand(*shape, 32, generator=gen) * 2 + 6).half().to(device)
    v = (torch.rand(*shape, 40, generator=gen) * 2 + 6).half().to(device)
    state = k.double().transpose(-1, -2) @ v.double()
    assert state.min().item() > 65504
    assert reference.causal_dot_product(q, k, v).abs().max().item() < 30000
    check(q, k, v, device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the plan is the CUDA launcher's")
def test_auto_plan():
    lib = ctypes.CDLL(str(_find("libdjl_attn_cuda.so")))
    plan = lib.djl_attn_causal_dot_product_plan
    plan.restype = ctypes.c_char_p
    plan.argtypes = [ctypes.c_int64] * 4 + [ctypes.c_int32] * 2
    device = torch.cuda.current_device()
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    many = 8 * sms  # B*H past the SM count for every E

    def chose(bh, seqlen, dim, element_size):
        return plan(bh, seqlen, dim, dim, element_size, device).decode()

    with kernel_variant("auto"):
        assert chose(many, 4096, 128, 2) == "chunked"
        assert chose(many, 128, 32, 2) == "chunked"
        assert chose(many, 127, 64, 2) == "per_thread"  # under two chunks
        assert chose(many, 4096, 128, 4) == "per_thread"  # float32
        assert chose(many, 4096, 256, 2) == "per_thread"  # E > 128
        assert chose(1, 4096, 64, 2).startswith("low_occupancy/")
        assert chose(1, 4096, 128, 2) == "chunked"  # few blocks, but E > 64
        assert chose(1, 4096, 128, 4).startswith("low_occupancy/")  # float32
        assert chose(1, 127, 128, 2).startswith("low_occupancy/")  # under two chunks
    with kernel_variant("chunked"):
        assert chose(1, 1, 64, 2) == "chunked"
        assert chose(many, 4096, 64, 4) == "per_thread"  # no float32 chunked kernel


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_misaligned_half_rows(device, dtype):
    q, k, v = make_inputs(1, 3, 90, 41, 39, dtype, device)
    check(q[..., 1:], k[..., :40], v[..., 3:], device)


def test_cpu_segments_over_length():
    # One head and more threads than heads: the CPU splits L into segments whose starting states
    # come from a prefix pass. Pin the thread count so the split happens on any machine.
    lib = ctypes.CDLL(str(_find("libdjl_attn.so")))
    lib.djl_attn_set_num_threads(4)
    try:
        for seqlen in (1000, 129, 64 * 3):
            q, k, v = make_inputs(1, 1, seqlen, 64, 48, torch.float32, "cpu")
            assert_matches_reference(causal_dot_product(q, k, v), q, k, v, "L=%d" % seqlen)
        q, k, v = make_inputs(1, 2, 700, 32, 32, torch.bfloat16, "cpu")
        assert_matches_reference(causal_dot_product(q, k, v), q, k, v, "bf16")
    finally:
        lib.djl_attn_set_num_threads(0)  # the default: libtorch's own setting


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
    with pytest.raises(ValueError, match="DJL_ATTN_LINEAR_KERNEL: expected one of auto, per_thread, "
                                         "low_occupancy, chunked, got 'fastest'"):
        set_option("DJL_ATTN_LINEAR_KERNEL", "fastest")
    # Refused where it is set: calls keep working.
    assert_matches_reference(causal_dot_product(q, k, v), q, k, v)
