"""The fused BERT operators against float64 references, on CPU and (when present) CUDA.

Channel counts are chosen to reach every CUDA path: 7, 100 and 3001 (no 16-byte vectors: scalar
warp-per-row and block-per-row), 768 and 1000 (vectorised warp-per-row), 4096 (vectorised
block-per-row), 20000 (a row of 80 KB: block-per-row with opted-in shared memory), 60000 (a row
of 240 KB, more than any GPU's shared memory: block-per-row streamed from global memory).
tests/test_plans_bert.py says which plan each shape gets.
"""

import math

import pytest
import torch

import reference
from reference import assert_close

ops = torch.ops.djl_attn

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (activation dtype, parameter dtype): parameters in the activation dtype or in float32.
DTYPE_PAIRS = [
    (torch.float32, torch.float32),
    (torch.float16, torch.float16),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.bfloat16),
    (torch.bfloat16, torch.float32),
]
CHANNELS = [1, 7, 100, 768, 1000, 3001, 4096]


def rows_for(channels):
    # About 16k elements, at least 3 rows: one task on the CPU (test_*_many_rows covers the
    # thread pool), and big rows stay cheap.
    return max(3, min(67, 16384 // channels))


def randn(*shape, dtype, device, offset=0.0):
    return (torch.randn(*shape, dtype=torch.float64) + offset).to(dtype=dtype, device=device)


def params(channels, dtype, device, n):
    return [randn(channels, dtype=dtype, device=device) for _ in range(n)]


# --- add_bias_residual_layernorm ----------------------------------------------------------------


def check_layernorm(x, bias, residual, gamma, beta, eps=1e-5):
    out = ops.add_bias_residual_layernorm(x, bias, residual, gamma, beta, eps)
    assert out.dtype == x.dtype and out.shape == x.shape and out.device == x.device
    expected = reference.add_bias_residual_layernorm(x, bias, residual, gamma, beta, eps)
    assert_close(out.cpu(), expected.cpu(), x.dtype)


@pytest.mark.parametrize("dtype,param_dtype", DTYPE_PAIRS)
@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_layernorm(device, dtype, param_dtype, channels, with_bias):
    rows = rows_for(channels)
    x = randn(rows, channels, dtype=dtype, device=device)
    residual = randn(rows, channels, dtype=dtype, device=device)
    gamma, beta, bias = params(channels, param_dtype, device, 3)
    check_layernorm(x, bias if with_bias else None, residual, gamma, beta)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_wide_row(device, dtype):
    x = randn(2, 20000, dtype=dtype, device=device)
    residual = randn(2, 20000, dtype=dtype, device=device)
    gamma, beta, bias = params(20000, dtype, device, 3)
    check_layernorm(x, bias, residual, gamma, beta)


@pytest.mark.parametrize("dtype,param_dtype", DTYPE_PAIRS)
def test_layernorm_row_past_shared_memory(device, dtype, param_dtype):
    # Every backend takes any C: a float32 row of 60000 channels (240 KB) outgrows the opt-in
    # shared memory of every GPU (227 KiB on an H200), and CUDA then reads it in each pass.
    x = randn(2, 60000, dtype=dtype, device=device, offset=3.0)
    residual = randn(2, 60000, dtype=dtype, device=device)
    gamma, beta, bias = params(60000, param_dtype, device, 3)
    check_layernorm(x, bias, residual, gamma, beta)
    check_layernorm(x, None, residual, gamma, beta)


def test_many_rows_across_threads(device):
    # 256 rows of 768: the CPU kernels split these over the thread pool.
    x = randn(4, 64, 768, dtype=torch.float16, device=device)
    residual = randn(4, 64, 768, dtype=torch.float16, device=device)
    gamma, beta, bias = params(768, torch.float32, device, 3)
    check_layernorm(x, bias, residual, gamma, beta)
    assert_close(ops.add_bias_gelu(x, bias, False).cpu(), reference.add_bias_gelu(x, bias, False).cpu(),
                 torch.float16)
    out = ops.add_bias_residual_affine(x, bias, residual, gamma, beta)
    assert_close(out.cpu(), reference.add_bias_residual_affine(x, bias, residual, gamma, beta).cpu(),
                 torch.float16)


def test_layernorm_batched_shape_and_offset_mean(device):
    # [B, S, C] input, rows away from zero mean (two-pass statistics), a larger eps. (Farther
    # out, rounding x + residual to float32 alone exceeds 1e-5, for torch.layer_norm too.)
    x = randn(2, 9, 768, dtype=torch.float32, device=device, offset=8.0)
    residual = randn(2, 9, 768, dtype=torch.float32, device=device)
    gamma, beta, bias = params(768, torch.float32, device, 3)
    check_layernorm(x, bias, residual, gamma, beta, eps=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_unaligned_views(device, dtype):
    # Contiguous views that start one element into their storage: no 16-byte vectors.
    rows, channels = 5, 768
    x = randn(rows * channels + 1, dtype=dtype, device=device)[1:].view(rows, channels)
    residual = randn(rows * channels + 1, dtype=dtype, device=device)[1:].view(rows, channels)
    gamma = randn(channels + 1, dtype=dtype, device=device)[1:]
    beta, bias = params(channels, dtype, device, 2)
    check_layernorm(x, bias, residual, gamma, beta)


def test_layernorm_constant_row_gives_beta(device):
    # Zero variance: (v - mean) = 0 exactly, so the output is beta whatever rsqrt(eps) is.
    x = torch.full((3, 33), 2.5, device=device)
    residual = torch.full((3, 33), -1.0, device=device)
    gamma, beta = params(33, torch.float32, device, 2)
    out = ops.add_bias_residual_layernorm(x, None, residual, gamma, beta, 1e-12)
    assert torch.equal(out.cpu(), beta.cpu().expand(3, 33))


def test_layernorm_empty_rows(device):
    x = torch.randn(0, 4, 16, device=device)
    gamma, beta = params(16, torch.float32, device, 2)
    assert ops.add_bias_residual_layernorm(x, None, x, gamma, beta, 1e-5).shape == (0, 4, 16)


# --- add_bias_gelu ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,param_dtype", DTYPE_PAIRS)
@pytest.mark.parametrize("channels", [1, 100, 1000, 3072])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("tanh_approximation", [False, True])
def test_gelu(device, dtype, param_dtype, channels, with_bias, tanh_approximation):
    rows = rows_for(channels)
    x = randn(rows, channels, dtype=dtype, device=device)
    bias = randn(channels, dtype=param_dtype, device=device) if with_bias else None
    out = ops.add_bias_gelu(x, bias, tanh_approximation)
    assert out.dtype == dtype and out.shape == x.shape
    expected = reference.add_bias_gelu(x, bias, tanh_approximation)
    assert_close(out.cpu(), expected.cpu(), dtype)


def test_gelu_default_is_erf_form_like_torch(device):
    x = torch.linspace(-6, 6, 1201, device=device).reshape(1, -1)
    assert_close(ops.add_bias_gelu(x, None, False).cpu(), torch.nn.functional.gelu(x.double()).cpu(),
                 torch.float32)
    assert_close(ops.add_bias_gelu(x, None, True).cpu(),
                 torch.nn.functional.gelu(x.double(), approximate="tanh").cpu(), torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_unaligned_and_batched(device, dtype):
    x = randn(2 * 5 * 64 + 1, dtype=dtype, device=device)[1:].view(2, 5, 64)
    bias = randn(64, dtype=dtype, device=device)
    assert_close(ops.add_bias_gelu(x, bias, False).cpu(), reference.add_bias_gelu(x, bias, False).cpu(),
                 dtype)


def test_gelu_empty(device):
    x = torch.randn(3, 0, device=device)
    assert ops.add_bias_gelu(x, None, False).shape == (3, 0)


# --- add_bias_residual_affine -------------------------------------------------------------------


@pytest.mark.parametrize("dtype,param_dtype", DTYPE_PAIRS)
@pytest.mark.parametrize("channels", [1, 7, 100, 768, 1000, 4096])
@pytest.mark.parametrize("with_bias", [False, True])
def test_affine(device, dtype, param_dtype, channels, with_bias):
    rows = rows_for(channels)
    x = randn(rows, channels, dtype=dtype, device=device)
    residual = randn(rows, channels, dtype=dtype, device=device)
    scale, shift, bias = params(channels, param_dtype, device, 3)
    bias = bias if with_bias else None
    out = ops.add_bias_residual_affine(x, bias, residual, scale, shift)
    assert out.dtype == dtype and out.shape == x.shape
    expected = reference.add_bias_residual_affine(x, bias, residual, scale, shift)
    assert_close(out.cpu(), expected.cpu(), dtype)


def test_affine_matches_batchnorm_at_inference(device):
    # What the Java block does: fold BatchNorm's running statistics into scale and shift.
    channels = 96
    bn = torch.nn.BatchNorm1d(channels, eps=1e-5).eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-2, 2)
        bn.running_var.uniform_(0.5, 3)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    x = torch.randn(2, 11, channels)
    residual = torch.randn(2, 11, channels)
    bias = torch.randn(channels)
    with torch.no_grad():
        expected = bn((x + bias + residual).reshape(-1, channels)).reshape(2, 11, channels)
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        shift = bn.bias - bn.running_mean * scale
    out = ops.add_bias_residual_affine(x.to(device), bias.to(device), residual.to(device),
                                       scale.to(device), shift.to(device))
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)


# --- bert_attention -----------------------------------------------------------------------------


def check_bert_attention(qkv, bias, kv_lens, heads, scale=None):
    dim = qkv.shape[-1] // (3 * heads)
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    out = ops.bert_attention(qkv, bias, kv_lens, heads, scale)
    assert out.dtype == qkv.dtype and out.shape == (qkv.shape[0], qkv.shape[1], heads * dim)
    expected = reference.bert_attention(qkv, bias, kv_lens, heads, scale)
    if bias is None or qkv.dtype == torch.float32:
        assert_close(out.cpu(), expected.cpu(), qkv.dtype)
        return
    # In low precision the bias may be added in the input dtype: the CUDA tensor-core kernel
    # adds it to each tile in shared memory and rounds the sum before the matrix products
    # (seen: 1.5e-2 against the exact reference in bfloat16), while the CPU kernel adds it in
    # float32. Either is right; the reference for the first rounds qkv + bias the same way.
    rounded = (qkv.float() + bias.float()).to(qkv.dtype)
    expected_rounded = reference.bert_attention(rounded, None, kv_lens, heads, scale)
    try:
        assert_close(out.cpu(), expected.cpu(), qkv.dtype)
    except AssertionError:
        assert_close(out.cpu(), expected_rounded.cpu(), qkv.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,dim", [(12, 64), (3, 80)])
@pytest.mark.parametrize("seqlen", [1, 7, 113])
@pytest.mark.parametrize("with_bias", [False, True])
def test_bert_attention(device, dtype, heads, dim, seqlen, with_bias):
    qkv = randn(2, seqlen, 3 * heads * dim, dtype=dtype, device=device)
    bias = randn(3 * heads * dim, dtype=dtype, device=device) if with_bias else None
    check_bert_attention(qkv, bias, None, heads)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bert_attention_padding_mask(device, dtype):
    # Length-1 rows, a full row, an empty row (output 0, as flash_attention), a ragged one.
    qkv = randn(4, 37, 3 * 4 * 64, dtype=dtype, device=device)
    bias = randn(3 * 4 * 64, dtype=dtype, device=device)
    kv_lens = torch.tensor([1, 37, 0, 20], dtype=torch.int32, device=device)
    check_bert_attention(qkv, bias, kv_lens, 4)


def test_bert_attention_strided_qkv_and_scale(device):
    # qkv as a view with a row stride wider than 3 * H * D (a slice of a bigger projection).
    big = randn(3, 19, 3 * 2 * 32 + 8, dtype=torch.float32, device=device)
    qkv = big[..., : 3 * 2 * 32]
    assert not qkv.is_contiguous()
    kv_lens = torch.tensor([19, 1, 5], dtype=torch.int32, device=device)
    check_bert_attention(qkv, randn(192, dtype=torch.float32, device=device), kv_lens, 2, scale=0.3)


def test_bert_attention_empty_batch(device):
    qkv = torch.randn(0, 5, 96, device=device)
    assert ops.bert_attention(qkv, None, None, 2, 1.0).shape == (0, 5, 32)


# --- remove_padding / restore_padding -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 7, 12, 768])
def test_padding_round_trip(device, dtype, channels):
    x = randn(5, 13, channels, dtype=dtype, device=device)
    lens = torch.tensor([13, 1, 0, 7, 2], dtype=torch.int32, device=device)
    packed, cu = ops.remove_padding(x, lens)
    ref_packed, ref_cu = reference.remove_padding(x, lens)
    assert cu.dtype == torch.int32 and cu.device == x.device
    assert torch.equal(cu.cpu(), ref_cu)
    assert torch.equal(packed.cpu(), ref_packed.cpu())
    restored = ops.restore_padding(packed, cu, 13)
    assert torch.equal(restored.cpu(), reference.restore_padding(packed, cu, 13).cpu())
    # A longer padded length than any sequence, and an unaligned packed view.
    unaligned = randn(packed.numel() + 1, dtype=dtype, device=device)[1:].view(packed.shape)
    restored = ops.restore_padding(unaligned, cu, 20)
    assert torch.equal(restored.cpu(), reference.restore_padding(unaligned, cu, 20).cpu())


def test_padding_all_empty_and_empty_batch(device):
    x = torch.randn(2, 4, 8, device=device)
    packed, cu = ops.remove_padding(x, torch.zeros(2, dtype=torch.int32, device=device))
    assert packed.shape == (0, 8) and cu.tolist() == [0, 0, 0]
    assert torch.equal(ops.restore_padding(packed, cu, 4).cpu(), torch.zeros(2, 4, 8))
    packed, cu = ops.remove_padding(x[:0], torch.zeros(0, dtype=torch.int32, device=device))
    assert packed.shape == (0, 8) and cu.tolist() == [0]
    assert ops.restore_padding(packed, cu, 4).shape == (0, 4, 8)


# --- validation: every rule names the argument, the expectation and what it got ---------------


def error_of(op, *args):
    with pytest.raises((ValueError, RuntimeError)) as info:
        op(*args)
    return str(info.value)


def ln_args(device, rows=4, channels=16, dtype=torch.float32):
    x = torch.randn(rows, channels, dtype=dtype, device=device)
    return [x, torch.randn(channels, device=device), torch.randn_like(x),
            torch.randn(channels, device=device), torch.randn(channels, device=device), 1e-5]


def test_layernorm_validation(device):
    ln = ops.add_bias_residual_layernorm
    x, bias, residual, gamma, beta, eps = ln_args(device)
    assert "add_bias_residual_layernorm: x: expected at least 1 dim [..., C], got 0 dims" in error_of(
        ln, x[0, 0], None, residual[0, 0], gamma[:1], beta[:1], eps)
    assert "x: expected dtype in {float32, float16, bfloat16}, got" in error_of(
        ln, x.double(), bias, residual.double(), gamma, beta, eps)
    assert "x: expected a contiguous tensor" in error_of(ln, x.t(), None, residual.t(), gamma[:4], beta[:4], eps)
    assert "x: expected a last dim C >= 1, got 0" in error_of(
        ln, x[:, :0], None, residual[:, :0], gamma[:0], beta[:0], eps)
    assert "residual: expected the shape of x [4, 16], got [3, 16]" in error_of(
        ln, x, bias, residual[:3], gamma, beta, eps)
    assert "residual: expected the dtype of x (float32), got float16" in error_of(
        ln, x, bias, residual.half(), gamma, beta, eps)
    assert "residual: expected a contiguous tensor" in error_of(
        ln, x, bias, residual.t().contiguous().t(), gamma, beta, eps)
    assert "gamma: expected 1 dims [C], got 2" in error_of(ln, x, bias, residual, gamma[None], beta, eps)
    assert "gamma: expected size 16 for C" in error_of(ln, x, bias, residual, gamma[:15], beta, eps)
    assert "gamma: expected dtype float16 (the dtype of x) or float32, got bfloat16" in error_of(
        ln, x.half(), None, residual.half(), gamma.bfloat16(), beta.bfloat16(), eps)
    assert "gamma: expected dtype float32 (the dtype of x) or float32, got float16" in error_of(
        ln, x, None, residual, gamma.half(), beta.half(), eps)
    assert "beta: expected the dtype of gamma (float32), got float16" in error_of(
        ln, x.half(), None, residual.half(), gamma, beta.half(), eps)
    assert "bias: expected the dtype of gamma (float16), got float32" in error_of(
        ln, x.half(), bias, residual.half(), gamma.half(), beta.half(), eps)
    assert "bias: expected size 16 for C" in error_of(ln, x, bias[:3], residual, gamma, beta, eps)
    assert "beta: expected a contiguous tensor" in error_of(
        ln, x, bias, residual, gamma, torch.randn(32, device=device)[::2], eps)
    assert "eps: expected a finite value >= 0, got -1" in error_of(ln, x, bias, residual, gamma, beta, -1.0)
    assert "eps: expected a finite value >= 0, got nan" in error_of(
        ln, x, bias, residual, gamma, beta, float("nan"))


def test_gelu_validation(device):
    x = torch.randn(4, 16, device=device)
    assert "add_bias_gelu: x: expected dtype in {float32, float16, bfloat16}, got int32" in error_of(
        ops.add_bias_gelu, x.int(), None, False)
    assert "add_bias_gelu: x: expected a contiguous tensor" in error_of(ops.add_bias_gelu, x.t(), None, False)
    assert "add_bias_gelu: bias: expected size 16 for C" in error_of(
        ops.add_bias_gelu, x, torch.randn(8, device=device), False)
    assert "add_bias_gelu: bias: expected dtype float16 (the dtype of x) or float32, got bfloat16" in error_of(
        ops.add_bias_gelu, x.half(), torch.randn(16, device=device).bfloat16(), False)
    assert "add_bias_gelu: bias: expected 1 dims [C]" in error_of(
        ops.add_bias_gelu, x, torch.randn(1, 16, device=device), False)


def test_affine_validation(device):
    af = ops.add_bias_residual_affine
    x, bias, residual, scale, shift, _ = ln_args(device)
    assert "add_bias_residual_affine: residual: expected the shape of x" in error_of(
        af, x, bias, residual[:, :8], scale, shift)
    assert "add_bias_residual_affine: scale: expected size 16 for C" in error_of(
        af, x, bias, residual, scale[:2], shift)
    assert "add_bias_residual_affine: shift: expected the dtype of scale (float32), got float16" in error_of(
        af, x.half(), bias, residual.half(), scale, shift.half())
    assert "add_bias_residual_affine: bias: expected the dtype of scale (float32), got float16" in error_of(
        af, x, bias.half(), residual, scale, shift)
    assert "add_bias_residual_affine: x: expected dtype in" in error_of(
        af, x.double(), None, residual.double(), scale, shift)


def test_bert_attention_validation(device):
    ba = ops.bert_attention
    qkv = torch.randn(2, 5, 3 * 2 * 16, device=device)
    bias = torch.randn(96, device=device)
    lens = torch.tensor([5, 1], dtype=torch.int32, device=device)
    assert "bert_attention: qkv: expected 3 dims [B, S, 3 * H * D], got 2" in error_of(
        ba, qkv[0], None, None, 2, 1.0)
    assert "bert_attention: num_heads: expected a value >= 1, got 0" in error_of(ba, qkv, None, None, 0, 1.0)
    assert "qkv: expected a last dim 3 * H * D divisible by 3 * num_heads (num_heads = 5), got 96" in (
        error_of(ba, qkv, None, None, 5, 1.0))
    assert "(num_heads = 4611686018427387904), got 96" in error_of(ba, qkv, None, None, 2**62, 1.0)
    assert "qkv: expected a head dim D = last dim / (3 * num_heads) in [1, 256], got 512" in error_of(
        ba, torch.randn(1, 2, 3 * 512, device=device), None, None, 1, 1.0)
    assert "qkv: expected dtype in {float32, float16, bfloat16}, got" in error_of(
        ba, qkv.double(), None, None, 2, 1.0)
    assert "qkv: expected a contiguous last dim" in error_of(
        ba, torch.randn(2, 5, 192, device=device)[..., ::2], None, None, 2, 1.0)
    assert "qkv_bias: expected 1 dims [3 * H * D], got 2" in error_of(ba, qkv, bias[None], None, 2, 1.0)
    assert "qkv_bias: expected size 96 for 3 * H * D" in error_of(ba, qkv, bias[:32], None, 2, 1.0)
    assert "qkv_bias: expected the dtype of qkv (float16), got float32" in error_of(
        ba, qkv.half(), bias, None, 2, 1.0)
    assert "qkv_bias: expected a contiguous tensor" in error_of(
        ba, qkv, torch.randn(192, device=device)[::2], None, 2, 1.0)
    assert "scale: expected a finite value, got inf" in error_of(ba, qkv, None, None, 2, float("inf"))
    assert "kv_lens: expected 1 dims [B]" in error_of(ba, qkv, None, lens[None], 2, 1.0)
    assert "kv_lens: expected size 2 for B" in error_of(ba, qkv, None, lens[:1], 2, 1.0)
    assert "kv_lens: expected dtype int32, got int64" in error_of(ba, qkv, None, lens.long(), 2, 1.0)
    bad = torch.tensor([6, 1], dtype=torch.int32, device=device)
    assert "kv_lens: expected values in [0, S = 5], got 6 at index 0" in error_of(ba, qkv, None, bad, 2, 1.0)
    bad = torch.tensor([1, -2], dtype=torch.int32, device=device)
    assert "got -2 at index 1" in error_of(ba, qkv, None, bad, 2, 1.0)


def test_padding_validation(device):
    x = torch.randn(2, 4, 8, device=device)
    lens = torch.tensor([4, 1], dtype=torch.int32, device=device)
    assert "remove_padding: x: expected 3 dims [B, S, C], got 2" in error_of(ops.remove_padding, x[0], lens)
    assert "remove_padding: x: expected dtype in" in error_of(ops.remove_padding, x.double(), lens)
    assert "remove_padding: x: expected a contiguous tensor" in error_of(
        ops.remove_padding, x.transpose(0, 1), lens)
    assert "remove_padding: lens: expected size 2 for B" in error_of(ops.remove_padding, x, lens[:1])
    assert "remove_padding: lens: expected dtype int32, got int64" in error_of(ops.remove_padding, x, lens.long())
    assert "remove_padding: lens: expected 1 dims [B]" in error_of(ops.remove_padding, x, lens[None])
    bad = torch.tensor([5, 1], dtype=torch.int32, device=device)
    assert "remove_padding: lens: expected values in [0, S = 4], got 5 at index 0" in error_of(
        ops.remove_padding, x, bad)
    bad = torch.tensor([0, -1], dtype=torch.int32, device=device)
    assert "got -1 at index 1" in error_of(ops.remove_padding, x, bad)

    packed = torch.randn(5, 8, device=device)
    cu = torch.tensor([0, 4, 5], dtype=torch.int32, device=device)
    rp = ops.restore_padding
    assert "restore_padding: packed: expected 2 dims [total, C], got 3" in error_of(rp, x, cu, 4)
    assert "restore_padding: packed: expected a contiguous tensor" in error_of(rp, packed.t(), cu, 4)
    assert "restore_padding: cu_seqlens: expected at least 1 element [B + 1], got 0" in error_of(
        rp, packed, cu[:0], 4)
    assert "restore_padding: cu_seqlens: expected dtype int32, got int64" in error_of(rp, packed, cu.long(), 4)
    assert "restore_padding: seqlen: expected a value >= 0, got -1" in error_of(rp, packed, cu, -1)
    assert "cu_seqlens: expected 0 at index 0, got 1" in error_of(
        rp, packed, torch.tensor([1, 4, 5], dtype=torch.int32, device=device), 4)
    assert "cu_seqlens: expected lengths cu_seqlens[b + 1] - cu_seqlens[b] in [0, seqlen = 3], got 4 at b = 0" in (
        error_of(rp, packed, cu, 3))
    assert "got -1 at b = 1" in error_of(rp, packed, torch.tensor([0, 4, 3], dtype=torch.int32, device=device), 4)
    assert "cu_seqlens: expected a last value equal to the tokens of packed (5), got 4" in error_of(
        rp, packed, torch.tensor([0, 2, 4], dtype=torch.int32, device=device), 4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="mixing devices needs a GPU")
def test_rejects_mixed_devices():
    x, bias, residual, gamma, beta, eps = ln_args("cuda")
    assert "residual: expected the device of x (cuda:0), got cpu" in error_of(
        ops.add_bias_residual_layernorm, x, bias, residual.cpu(), gamma, beta, eps)
    assert "gamma: expected the device of x (cuda:0), got cpu" in error_of(
        ops.add_bias_residual_layernorm, x, bias, residual, gamma.cpu(), beta, eps)
    assert "bias: expected the device of x (cuda:0), got cpu" in error_of(
        ops.add_bias_gelu, x, bias.cpu(), False)
    qkv = torch.randn(1, 3, 96, device="cuda")
    assert "qkv_bias: expected the device of qkv (cuda:0), got cpu" in error_of(
        ops.bert_attention, qkv, torch.randn(96), None, 2, 1.0)
    assert "kv_lens: expected the device of qkv (cuda:0), got cpu" in error_of(
        ops.bert_attention, qkv, None, torch.ones(1, dtype=torch.int32), 2, 1.0)
    assert "lens: expected the device of x (cuda:0), got cpu" in error_of(
        ops.remove_padding, torch.randn(1, 3, 4, device="cuda"), torch.ones(1, dtype=torch.int32))


def test_bert_attention_rejects_sequences_past_32_bit_indexing(device):
    # A stride-0 view costs no memory; the binding must refuse it before any kernel indexes rows
    # with 32-bit ints (it would silently read nothing past 2^31).
    qkv = torch.randn(1, 1, 3 * 8, device=device).expand(1, (1 << 30) + 1, 3 * 8)
    message = error_of(ops.bert_attention, qkv, None, None, 1, 1.0)
    assert "bert_attention: qkv" in message and "S <= 2^30" in message and str((1 << 30) + 1) in message


def test_bert_attention_rejects_more_query_tiles_than_one_cuda_grid(device):
    # B * H * ceil(S / 64) = 4096 * 1024 * 1024 = 2^32 query tiles, refused on every backend by
    # the rule the flash bindings share; the stride-0 view allocates nothing.
    qkv = torch.zeros(1, 1, 3 * 1024, device=device).expand(4096, 65536, 3 * 1024)
    message = error_of(ops.bert_attention, qkv, None, None, 1024, 1.0)
    assert ("bert_attention: qkv: expected B * Hq * ceil(Sq / 64) <= 2^31 - 1 (the query tiles of "
            "one CUDA grid), got B = 4096, Hq = 1024, Sq = 65536") in message
    # 2^31 tiles are one too many; 2047 batch rows fit (and the call fails on its scale instead).
    assert "got B = 2048, Hq = 1024" in error_of(ops.bert_attention, qkv[:2048], None, None, 1024, 1.0)
    assert "scale: expected a finite value" in error_of(ops.bert_attention, qkv[:2047], None, None,
                                                        1024, float("nan"))
