"""FlashAttention-2's sliding window, soft-capping and ALiBi in djl_attn.flash_attention and
flash_attention_varlen, against the float64 reference (reference.py), on CPU and (when present)
CUDA.

Semantics (docs/operators.md): with L valid keys and Sq query rows, o = L - Sq; row i sees key j
iff (window_left < 0 or j >= i + o - window_left) and (window_right < 0 or
j <= i + o + window_right) and (not causal or j <= i + o); the score scale * q.k is soft-capped to
softcap * tanh(s / softcap) when softcap > 0 and then given -slope * |i + o - j| (ALiBi).
"""

import math

import pytest
import torch

import reference
from reference import assert_close

flash = torch.ops.djl_attn.flash_attention
varlen = torch.ops.djl_attn.flash_attention_varlen

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
CUDA = torch.cuda.is_available()
IS_HOPPER = CUDA and torch.cuda.get_device_capability() == (9, 0)

# Each feature alone and combined: (window_left, window_right, softcap, alibi), alibi None, "h"
# ([Hq] slopes) or "bh" ([B, Hq] slopes). Windows narrower than a key tile (7), across several
# tiles (70), 0 (each row sees only its own position), one-sided either way, and wider than
# every sequence (5000: normalised away, must still be right).
FEATURES = {
    "window-left": (7, -1, 0.0, None),
    "window-right": (-1, 9, 0.0, None),
    "window-both": (70, 3, 0.0, None),
    "window-zero": (0, 0, 0.0, None),
    "window-wide": (5000, 5000, 0.0, None),
    "softcap": (-1, -1, 1.5, None),
    "alibi-h": (-1, -1, 0.0, "h"),
    "alibi-bh": (-1, -1, 0.0, "bh"),
    "combined": (20, 5, 2.0, "bh"),
}


def slopes_for(kind, batch, heads_q, device):
    """ALiBi slopes as models use them (2^(-8 h / Hq)), shuffled per batch row for "bh"."""
    if kind is None:
        return None
    base = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads_q) for h in range(heads_q)])
    if kind == "h":
        return base.to(device)
    rows = [base[torch.randperm(heads_q)] * (1 + 0.5 * b) for b in range(batch)]
    return torch.stack(rows).to(device) if rows else torch.zeros(0, heads_q, device=device)


@pytest.fixture(autouse=True, params=["on", "off"] if IS_HOPPER else ["auto"])
def hopper_mode(request, options):
    """On a Hopper GPU every test runs with the Hopper kernel forced on (the plan must still
    route feature calls to the sm_80 kernel) and off."""
    if IS_HOPPER:
        options.set("DJL_ATTN_FLASH_HOPPER", request.param)
    return request.param


def light(device, skip):
    if device == "cpu" and skip:
        pytest.skip("this case exercises the CUDA kernels; the CPU runs a slice of the grid")


def run_batched(device, dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, causal,
                feature, kv_lens=None, scale=None):
    window_left, window_right, softcap, alibi = FEATURES[feature]
    q = torch.randn(batch, seqlen_q, heads_q, dim, dtype=dtype, device=device)
    k = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
    v = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
    lens = None if kv_lens is None else torch.tensor(kv_lens, dtype=torch.int32, device=device)
    slopes = slopes_for(alibi, batch, heads_q, device)
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    reference.poison_allocator(device, (q.shape, dtype), ((batch, heads_q, seqlen_q), torch.float32))
    out, lse = flash(q, k, v, lens, scale, causal, window_left, window_right, softcap, slopes)
    ref_out, ref_lse = reference.flash_attention(q, k, v, lens, scale, causal, window_left,
                                                 window_right, softcap, slopes)
    assert out.shape == q.shape and out.dtype == dtype
    assert_close(out.cpu(), ref_out.cpu(), dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), dtype, "lse")
    return ref_lse


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [32, 64, 128, 40, 33])
@pytest.mark.parametrize("feature", sorted(FEATURES))
@pytest.mark.parametrize("causal", [False, True])
def test_each_feature(device, dtype, dim, feature, causal):
    # Sk = 130 is not a multiple of 64; kv_lens leave one row short and one empty-ish. D = 40
    # runs padded to 64, D = 33 on staged copies (float16/bfloat16 on CUDA).
    light(device, dtype != torch.float32 and dim != 64)
    run_batched(device, dtype, 2, 70, 130, 4, 4, dim, causal, feature, kv_lens=[130, 3])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("feature", sorted(FEATURES))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 2), (8, 1)])
def test_gqa_decode(device, dtype, feature, causal, heads_q, heads_kv):
    # One query row against a cache (decode), grouped heads: the GQA fold must not merge rows
    # whose windows or ALiBi slopes differ.
    light(device, dtype == torch.bfloat16)
    run_batched(device, dtype, 3, 1, 300, heads_q, heads_kv, 64, causal, feature,
                kv_lens=[300, 77, 1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("feature", ["window-left", "combined", "softcap"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (5, 5), (16, 200), (200, 16)])
def test_short_and_uneven(device, dtype, feature, seqlen_q, seqlen_k):
    # One-token sequences, Sq > Sk (rows above the diagonal see nothing), a few decode rows.
    light(device, dtype == torch.bfloat16)
    run_batched(device, dtype, 2, seqlen_q, seqlen_k, 2, 1, 64, True, feature)


def test_rows_that_see_nothing(device):
    # window_right = 0 with window_left = 0 and Sq > L: the first rows sit before key 0, see
    # nothing, and give out 0 and lse -inf, as rows with no valid key do.
    ref_lse = run_batched(device, torch.float32, 1, 10, 4, 2, 2, 32, False, "window-zero")
    assert torch.isinf(ref_lse).any() and torch.isfinite(ref_lse).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batch(device, dtype):
    for feature in ("combined", "alibi-h"):
        window_left, window_right, softcap, alibi = FEATURES[feature]
        q = torch.randn(0, 5, 4, 32, dtype=dtype, device=device)
        k = torch.randn(0, 7, 2, 32, dtype=dtype, device=device)
        slopes = slopes_for(alibi, 0, 4, device)
        out, lse = flash(q, k, k, None, 0.2, True, window_left, window_right, softcap, slopes)
        assert out.shape == (0, 5, 4, 32) and lse.shape == (0, 4, 5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("feature", sorted(FEATURES))
@pytest.mark.parametrize("causal", [False, True])
def test_varlen(device, dtype, feature, causal):
    light(device, dtype == torch.bfloat16)
    window_left, window_right, softcap, alibi = FEATURES[feature]
    lens_q = [1, 70, 0, 129, 5]
    lens_k = [200, 70, 9, 129, 1]
    heads_q, heads_kv, dim = 4, 2, 64
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=device)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=device)
    q = torch.randn(sum(lens_q), heads_q, dim, dtype=dtype, device=device)
    k = torch.randn(sum(lens_k), heads_kv, dim, dtype=dtype, device=device)
    v = torch.randn(sum(lens_k), heads_kv, dim, dtype=dtype, device=device)
    slopes = slopes_for(alibi, len(lens_q), heads_q, device)
    scale = 1.0 / math.sqrt(dim)
    out, lse = varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), scale, causal, window_left,
                      window_right, softcap, slopes)
    ref_out, ref_lse = reference.flash_attention_varlen(q, k, v, cu_q, cu_k, scale, causal,
                                                        window_left, window_right, softcap, slopes)
    assert_close(out.cpu(), ref_out.cpu(), dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), dtype, "lse")


@pytest.mark.parametrize("dtype", DTYPES)
def test_defaults_are_the_plain_call(device, dtype):
    # The schema's defaults (-1, -1, 0.0, None) are the six-argument call, bit for bit.
    q = torch.randn(2, 70, 4, 64, dtype=dtype, device=device)
    k = torch.randn(2, 90, 2, 64, dtype=dtype, device=device)
    v = torch.randn(2, 90, 2, 64, dtype=dtype, device=device)
    plain = flash(q, k, v, None, 0.125, True)
    explicit = flash(q, k, v, None, 0.125, True, -1, -1, 0.0, None)
    assert torch.equal(plain[0], explicit[0]) and torch.equal(plain[1], explicit[1])


def test_features_change_the_result(device):
    # Guards the tests above against a kernel that ignores an argument and a reference that
    # ignores it too: each feature alone moves the output away from the plain call's.
    q = torch.randn(1, 40, 2, 32, device=device)
    k = torch.randn(1, 40, 2, 32, device=device)
    v = torch.randn(1, 40, 2, 32, device=device)
    plain, _ = flash(q, k, v, None, 0.5, False)
    for args in [(3, -1, 0.0, None), (-1, 3, 0.0, None), (-1, -1, 0.5, None),
                 (-1, -1, 0.0, torch.full((2,), 0.5, device=device))]:
        out, _ = flash(q, k, v, None, 0.5, False, *args)
        assert (out - plain).abs().max().item() > 1e-3, args


@pytest.mark.skipif(not CUDA, reason="large shapes run on the GPU only")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("dim", [64, 128, 256])
@pytest.mark.parametrize("feature", ["window-both", "combined", "softcap", "alibi-h"])
@pytest.mark.parametrize("causal", [False, True])
def test_long_sequences(dtype, dim, feature, causal):
    # Several key tiles skipped on both sides of the window, split-KV on a small grid, the
    # tuned tile configurations' head dims (which feature calls leave for the base tiles).
    run_batched("cuda", dtype, 1, 1000, 2100, 2, 1, dim, causal, feature)


@pytest.mark.skipif(not CUDA, reason="DJL_ATTN_FLASH_DECODE chooses between CUDA kernels")
@pytest.mark.parametrize("feature", ["window-left", "softcap", "combined", "alibi-h", "alibi-bh"])
@pytest.mark.parametrize("heads_q,heads_kv", [(4, 4), (8, 2)])
def test_decode_on_runs_window_softcap_and_alibi(options, feature, heads_q, heads_kv):
    # The decode kernel runs the window and the soft-cap (its features instantiation) and ALiBi
    # (its ALiBi instantiation, slopes [Hq] or [B, Hq]), folded GQA rows too: with
    # DJL_ATTN_FLASH_DECODE=on they run there (a refusal would fail the call).
    options.set("DJL_ATTN_FLASH_DECODE", "on")
    for dtype in (torch.float16, torch.bfloat16):
        run_batched("cuda", dtype, 2, 1, 300, heads_q, heads_kv, 64, False, feature,
                    kv_lens=[300, 17])
        run_batched("cuda", dtype, 2, 3, 300, heads_q, heads_kv, 128, True, feature,
                    kv_lens=[300, 2])


@pytest.mark.skipif(not CUDA, reason="DJL_ATTN_FLASH_FP32 chooses between CUDA kernels")
@pytest.mark.parametrize("feature", ["combined", "window-both", "alibi-bh"])
@pytest.mark.parametrize("causal", [False, True])
def test_simple_kernel(options, feature, causal):
    # The one-warp-per-row kernel (float32 forced onto it; GPUs before sm_80 run it for every
    # dtype) takes the features too.
    options.set("DJL_ATTN_FLASH_FP32", "simple")
    run_batched("cuda", torch.float32, 2, 70, 130, 4, 2, 40, causal, feature, kv_lens=[130, 3])
