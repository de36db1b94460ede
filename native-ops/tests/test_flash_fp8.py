"""djl_attn.flash_attention_fp8 (e4m3fn q, k, v with descales) against the float64 reference of
the dequantized inputs, on the CPU and (when present) CUDA.

The CPU backend dequantizes the inputs and runs the float32 flash kernel: its only error beyond
float32 accumulation is the output's rounding to bfloat16 / float16, and it is held to that. The
CUDA kernel (Hopper, sm_90, D = 128 only) rounds P to e4m3 after scaling it by 2^8, as
FlashAttention-3 does: it is held to 2.5 times the error of the float64 reference computed with
that same rounding (reference.flash_attention_fp8(round_p=True)), plus four ulps of the output
dtype. The logsumexp is float32 from unrounded scores on both: 1e-3 relative.

Inputs: fresh random floats divided by a random descale (per tensor [1], or per batch row and
key/value head [B, Hkv]) and cast with torch's own float8_e4m3fn cast, passed as float8_e4m3fn or
as uint8 (how DJL passes them); awkward lengths (Sq = 1, Sq > Sk, Sk 1, 77, 129, 300), GQA and
MQA, kv_lens with empty and partial rows, causal both ways.
"""

import math

import pytest
import torch

import reference

fp8_attention = torch.ops.djl_attn.flash_attention_fp8

CUDA = torch.cuda.is_available()
IS_HOPPER = CUDA and torch.cuda.get_device_capability() == (9, 0)
# The head dim of the CUDA kernel; the CPU takes every D in [1, 256].
CUDA_HEAD_DIM = 128
CPU_HEAD_DIMS = [32, 64, 80, 256]
OUT_DTYPES = {False: torch.bfloat16, True: torch.float16}
LSE_TOLERANCE = 1e-3


def on_device(device):
    """Skips CUDA on a GPU that is not a Hopper (an environment the CUDA kernel does not run on;
    test_cuda_refuses_what_the_hopper_kernel_cannot_run checks its refusal there)."""
    if device == "cuda" and not IS_HOPPER:
        pytest.skip("the CUDA kernel runs on compute capability 9.0 (its refusal is tested)")


def make_descale(mode, batch, heads_kv, device):
    """None, a per-tensor [1] or a per-(batch row, key/value head) [B, Hkv] descale, random."""
    if mode == "none":
        return None
    shape = (1,) if mode == "tensor" else (batch, heads_kv)
    # Factors around 2^-5 .. 2^-3: the quantized bytes then span e4m3's range for inputs ~N(0, 1).
    return torch.empty(shape).uniform_(1 / 32, 1 / 8).to(device)


def quantize(x, descale, heads_kv):
    """e4m3fn bytes of x / descale (torch's round-to-nearest-even cast, saturated at +-448)."""
    if descale is not None:
        d = descale if descale.dim() == 1 else descale.repeat_interleave(
            x.shape[2] // heads_kv, dim=1)[:, None, :, None]
        x = x / d
    return x.clamp(-reference.FP8_MAX, reference.FP8_MAX).to(torch.float8_e4m3fn)


def make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, device, descale="tensor",
                as_uint8=False):
    """q, k, v (e4m3fn, or uint8 views of them) and their descales (q_descale, k_descale,
    v_descale); `descale` is the mode of all three, or a tuple of one mode each."""
    modes = (descale,) * 3 if isinstance(descale, str) else descale
    scales = [make_descale(mode, batch, heads_kv, device) for mode in modes]
    shapes = [(batch, seqlen_q, heads_q, dim), (batch, seqlen_k, heads_kv, dim),
              (batch, seqlen_k, heads_kv, dim)]
    tensors = []
    for shape, d in zip(shapes, scales):
        t = quantize(torch.randn(shape, device=device), d, heads_kv)
        tensors.append(t.view(torch.uint8) if as_uint8 else t)
    return tensors, scales


def eps(dtype):
    return torch.finfo(dtype).eps


def check_lse(lse, ref_lse):
    lse, ref_lse = lse.cpu().double(), ref_lse.cpu()
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite), "lse: rows without keys differ"
    assert (lse[~finite] == -math.inf).all(), "lse: a row without keys is not -inf"
    if finite.any():
        err = ((lse[finite] - ref_lse[finite]).abs() / ref_lse[finite].abs().clamp(min=1.0)).max()
        assert err.item() <= LSE_TOLERANCE, "lse: max relative error %.3g" % err.item()


def assert_matches(out, lse, q, k, v, kv_lens, scale, causal, descales):
    """Holds a call's out and lse to the float64 reference at the tolerance of q's device (this
    file's docstring); test_bad_inputs.py checks its good calls with it too."""
    ref, ref_lse = reference.flash_attention_fp8(q, k, v, kv_lens, scale, causal, *descales)
    ours = out.cpu().double()
    ref = ref.cpu()
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    assert not torch.isnan(ours).any(), "out has NaN (unwritten or bad) elements"
    err = (ours - ref).abs()
    if q.device.type == "cpu":
        # The output's rounding (half an ulp of each element) and float32 accumulation (a few
        # ulps of float32 of the largest value of v).
        v_max = reference.fp8_descaled(v, descales[2]).abs().max().item() if v.numel() else 0.0
        bound = 0.5 * eps(out.dtype) * ref.abs() + 1e-5 * max(1.0, v_max)
        worst = (err - bound).max().item() if err.numel() else 0.0
        assert worst <= 0, "out: error %.3g past the output's rounding" % worst
    elif ref.numel() == 0 or k.shape[1] == 0:
        # No output, or no keys: every row is zeros (the reference's too), exactly.
        assert err.numel() == 0 or err.max().item() == 0, "out: a call without keys must be zeros"
    else:
        ref_pq, _ = reference.flash_attention_fp8(q, k, v, kv_lens, scale, causal, *descales,
                                                  round_p=True)
        p_error = (ref_pq.cpu() - ref).abs().max().item() if ref.numel() else 0.0
        bound = 2.5 * p_error + 4 * eps(out.dtype) * (ref.abs().max().item() if ref.numel() else 0)
        assert err.max().item() <= bound, "out: max error %.3g > %.3g (P's e4m3 error %.3g)" % (
            err.max().item(), bound, p_error)
    check_lse(lse, ref_lse)


def check(q, k, v, kv_lens, scale, causal, descales, out_float16):
    """Runs the operator and holds out and lse to the reference at the device's tolerance."""
    batch, seqlen_q, heads_q, dim = q.shape
    out_dtype = OUT_DTYPES[out_float16]
    reference.poison_allocator(q.device, (q.shape, out_dtype),
                               ((batch, heads_q, seqlen_q), torch.float32))
    out, lse = fp8_attention(q, k, v, kv_lens, scale, causal, *descales, out_float16)
    assert out.dtype == out_dtype and lse.dtype == torch.float32
    assert out.shape == (batch, seqlen_q, heads_q, dim) and lse.shape == (batch, heads_q, seqlen_q)
    assert out.device == q.device and lse.device == q.device
    assert_matches(out, lse, q, k, v, kv_lens, scale, causal, descales)
    return out, lse


# B, Sq, Sk, Hq, Hkv, descale mode, uint8 inputs: the awkward shapes.
SHAPES = [
    (1, 1, 1, 1, 1, "none", False),
    (2, 1, 300, 8, 2, "head", True),  # a decode row, GQA 4:1
    (3, 77, 77, 4, 1, "tensor", False),  # MQA, Sk not a multiple of 128
    (2, 129, 129, 4, 4, "head", False),
    (2, 7, 129, 8, 2, "tensor", True),
    (3, 130, 77, 4, 1, "head", True),  # Sq > Sk: causal rows past the diagonal see every key
    (1, 64, 300, 4, 1, "none", True),
]


@pytest.mark.parametrize("shape", SHAPES, ids=["-".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("out_float16", [False, True])
def test_shapes(device, shape, causal, out_float16):
    on_device(device)
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, descale, as_uint8 = shape
    (q, k, v), descales = make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv,
                                      CUDA_HEAD_DIM, device, descale, as_uint8)
    check(q, k, v, None, CUDA_HEAD_DIM ** -0.5, causal, descales, out_float16)


@pytest.mark.parametrize("descale", ["none", "tensor", "head"])
@pytest.mark.parametrize("as_uint8", [False, True])
def test_descales(device, descale, as_uint8):
    on_device(device)
    (q, k, v), descales = make_inputs(2, 33, 129, 8, 2, CUDA_HEAD_DIM, device, descale, as_uint8)
    check(q, k, v, None, 0.1, True, descales, False)


def test_each_descale_alone(device):
    # One factor at a time, the others absent: a kernel that applied q's factor to k (or took
    # [B, Hkv] transposed) fails here.
    on_device(device)
    for i in range(3):
        modes = tuple("head" if j == i else "none" for j in range(3))
        (q, k, v), descales = make_inputs(3, 20, 77, 4, 2, CUDA_HEAD_DIM, device, modes)
        check(q, k, v, None, 0.1, False, descales, True)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("out_float16", [False, True])
def test_kv_lens(device, causal, out_float16):
    # Rows with no keys (output 0, lse -inf), partial rows, and a full one; with causal the
    # diagonal is bottom-right aligned to each row's kv_len, so in row 1 (kv_len 5 < Sq) the first
    # queries see nothing.
    on_device(device)
    (q, k, v), descales = make_inputs(3, 9, 129, 4, 1, CUDA_HEAD_DIM, device, "head")
    kv_lens = torch.tensor([0, 5, 129], dtype=torch.int32, device=device)
    out, lse = check(q, k, v, kv_lens, 0.125, causal, descales, out_float16)
    assert (out[0] == 0).all() and (lse[0] == -math.inf).all()


# The CPU's head dims: the CUDA kernel has D = 128 only (every other test here runs it), and
# refuses them by name (test_cuda_refuses_what_the_hopper_kernel_cannot_run, test_plans_flash.py),
# so on CUDA they are deselected.
@pytest.mark.cuda_slice(lambda p: False)
@pytest.mark.parametrize("dim", CPU_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
def test_head_dims(device, dim, causal):
    on_device(device)
    (q, k, v), descales = make_inputs(2, 17, 129, 4, 2, dim, device, "head", dim % 64 == 0)
    kv_lens = torch.tensor([129, 40], dtype=torch.int32, device=device)
    check(q, k, v, kv_lens, dim ** -0.5, causal, descales, dim == 80)


def test_strided_views(device):
    # q, k and v as views into one fused [B, S, Hq + 2 Hkv, D] projection: any strides with a
    # contiguous last dim.
    on_device(device)
    heads_q, heads_kv = 4, 2
    fused = quantize(torch.randn(2, 50, heads_q + 2 * heads_kv, CUDA_HEAD_DIM, device=device),
                     None, 1).view(torch.uint8)
    q, k, v = fused.split([heads_q, heads_kv, heads_kv], dim=2)
    assert not q.is_contiguous()
    check(q, k, v, None, 0.1, True, [None, torch.tensor([0.25], device=device), None], False)


@pytest.mark.parametrize("batch,seqlen_q,seqlen_k,heads_q", [(0, 5, 7, 4), (2, 0, 7, 4),
                                                             (2, 5, 0, 4), (2, 5, 7, 0)])
def test_empty(device, batch, seqlen_q, seqlen_k, heads_q):
    # As flash_attention: empty outputs for no batch, queries or heads; with no keys every row
    # sees nothing (output 0, lse -inf).
    on_device(device)
    heads_kv = 2 if heads_q else 1
    (q, k, v), descales = make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv,
                                      CUDA_HEAD_DIM, device, "head")
    out, lse = fp8_attention(q, k, v, None, 0.1, False, *descales, True)
    assert out.shape == (batch, seqlen_q, heads_q, CUDA_HEAD_DIM) and out.dtype == torch.float16
    assert lse.shape == (batch, heads_q, seqlen_q)
    assert (out == 0).all() and (lse == -math.inf).all()


def test_saturated_and_subnormal_bytes(device):
    # Every byte value but NaN's: +-448 (the saturated maximum), subnormals and zeros, through
    # the CPU's conversion table and the GPU's cvt.
    on_device(device)
    nan = {0x7F, 0xFF}
    values = torch.tensor([b for b in range(256) if b not in nan], dtype=torch.uint8)
    q = values[torch.randint(0, values.numel(), (2, 16, 2, CUDA_HEAD_DIM))].to(device)
    k = values[torch.randint(0, values.numel(), (2, 40, 1, CUDA_HEAD_DIM))].to(device)
    v = values[torch.randint(0, values.numel(), (2, 40, 1, CUDA_HEAD_DIM))].to(device)
    # Scores of e4m3 values up to 448^2 * 128: a tiny scale keeps the softmax from one-hot.
    check(q, k, v, None, 1e-7, False, [None, None, None], False)


@pytest.mark.skipif(not CUDA, reason="the refusals are the CUDA kernel's")
def test_cuda_refuses_what_the_hopper_kernel_cannot_run():
    # Another head dim (and, off Hopper, any call): refused naming q, never a crash.
    (q, k, v), descales = make_inputs(1, 4, 8, 2, 1, 64, "cuda", "tensor")
    with pytest.raises(ValueError, match="flash_attention_fp8: q: "):
        fp8_attention(q, k, v, None, 0.1, False, *descales, False)
    if not IS_HOPPER:
        (q, k, v), descales = make_inputs(1, 4, 8, 2, 1, CUDA_HEAD_DIM, "cuda", "tensor")
        with pytest.raises(ValueError, match="flash_attention_fp8: q: "):
            fp8_attention(q, k, v, None, 0.1, False, *descales, False)
    torch.cuda.synchronize()


@pytest.mark.skipif(not IS_HOPPER, reason="compares the CPU and Hopper backends")
def test_cpu_and_cuda_agree_within_p_rounding():
    # The same bytes on both backends: the GPU's difference from the CPU's exact result stays
    # within the P-rounding bound.
    (q, k, v), descales = make_inputs(2, 100, 300, 8, 2, CUDA_HEAD_DIM, "cpu", "head")
    cpu, cpu_lse = fp8_attention(q, k, v, None, 0.09, True, *descales, False)
    to = lambda t: None if t is None else t.cuda()
    gpu, gpu_lse = fp8_attention(q.cuda(), k.cuda(), v.cuda(), None, 0.09, True,
                                 *[to(d) for d in descales], False)
    ref, _ = reference.flash_attention_fp8(q, k, v, None, 0.09, True, *descales)
    ref_pq, _ = reference.flash_attention_fp8(q, k, v, None, 0.09, True, *descales, round_p=True)
    bound = 2.5 * (ref_pq - ref).abs().max().item() + 8 * eps(torch.bfloat16) * ref.abs().max()
    assert (gpu.cpu().double() - cpu.double()).abs().max().item() <= bound
    check_lse(gpu_lse, cpu_lse.double())
