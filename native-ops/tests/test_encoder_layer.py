"""djl_attn.encoder_layer (one whole post-norm BERT encoder layer over packed tokens) against the
float64 reference of reference.py: awkward lengths (1, 7, 113, 511, 512) and ragged batches,
plain and packed weights (gemm_pack_weight: MKL's packed layout, the bfloat16 and int8 modes), every
stream dtype, both GEMM backends, one and two threads on both thread backends, the workspace reused across calls, and bad
inputs. Low precision meets the suite's bar: the kernel's error is at most twice the error of the
same reference computed in that precision. encoder_layer has a CPU kernel only (the CUDA encoder
runs op by op), so these run on the CPU."""

import ctypes
import math

import pytest
import torch

import reference
from conftest import _find
from reference import TOLERANCE

encoder_layer = torch.ops.djl_attn.encoder_layer
gemm_pack_weight = torch.ops.djl_attn.gemm_pack_weight

# (C, H, I): MiniLM-L6's layer, and a small one with head dim 80.
MINILM = (384, 12, 1536)
SMALL = (160, 2, 224)

BATCHES = {
    "one": [1],
    "seven": [7],
    "long": [511],
    "full": [512],
    "ragged": [113, 1, 7, 0, 40],
    "awkward": [1, 7, 113, 511, 512],
}

NAMES = ["qkv", "out", "up", "down"]

# gemm_pack_weight's mode argument.
MODES = {"f32": 0, "bf16": 1, "int8": 2}
GEMM_DTYPES = {"bf16": torch.bfloat16, "int8": torch.int8}


def make_weights(c, inter):
    def matrix(rows, cols):
        return torch.randn(rows, cols, dtype=torch.float64) / math.sqrt(cols)

    def vector(n, around=0.0, spread=0.1):
        return (around + spread * torch.randn(n, dtype=torch.float64)).float()

    w = {
        "qkv_weight": matrix(3 * c, c).float(),
        "qkv_bias": vector(3 * c),
        "out_weight": matrix(c, c).float(),
        "out_bias": vector(c),
        "attn_norm_weight": vector(c, 1.0),
        "attn_norm_bias": vector(c),
        "up_weight": matrix(inter, c).float(),
        "up_bias": vector(inter),
        "down_weight": matrix(c, inter).float(),
        "down_bias": vector(c),
        "ffn_norm_weight": vector(c, 1.0),
        "ffn_norm_bias": vector(c),
    }
    return w


def call(hidden, cu, max_seqlen, w, heads, eps=1e-12, scale=None, gelu_tanh=False, packed=None):
    """Runs the layer in place on `hidden`; `packed` maps weight names to blobs."""
    c = hidden.shape[1]
    scale = 1.0 / math.sqrt(c // heads) if scale is None else scale
    weight = lambda name: (packed or {}).get(name, w[name + "_weight"])
    encoder_layer(hidden, cu, max_seqlen, weight("qkv"), w["qkv_bias"], weight("out"),
                  w["out_bias"], w["attn_norm_weight"], w["attn_norm_bias"], weight("up"),
                  w["up_bias"], weight("down"), w["down_bias"], w["ffn_norm_weight"],
                  w["ffn_norm_bias"], heads, eps, scale, gelu_tanh)
    return hidden


def batch(lens):
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
    return cu, max(lens)


def run_case(shape, lens, dtype=torch.float32, packing=None, gelu_tanh=False):
    c, heads, inter = shape
    w = make_weights(c, inter)
    cu, max_seqlen = batch(lens)
    x = torch.randn(int(cu[-1]), c)
    expected = reference.encoder_layer(
        x, cu, w, heads, 1e-12, 1 / math.sqrt(c // heads), gelu_tanh,
        gemm_dtype=GEMM_DTYPES.get(packing))
    packed = None
    if packing is not None:
        packed = {n: gemm_pack_weight(w[n + "_weight"], MODES[packing]) for n in NAMES}
    wt = dict(w)
    for n in NAMES:
        wt[n + "_weight"] = w[n + "_weight"].to(dtype)
    actual = call(x.to(dtype).clone(), cu, max_seqlen, wt, heads, gelu_tanh=gelu_tanh,
                  packed=packed)
    return actual, expected, x, w, cu


@pytest.mark.parametrize("lens", list(BATCHES))
@pytest.mark.parametrize("packing", [None, "f32"])
def test_float32_minilm_shape(lens, packing):
    actual, expected, *_ = run_case(MINILM, BATCHES[lens], packing=packing)
    reference.assert_close(actual, expected, torch.float32)


@pytest.mark.parametrize("gelu_tanh", [False, True])
def test_small_shape_head_dim_80(gelu_tanh):
    actual, expected, *_ = run_case(SMALL, BATCHES["ragged"], gelu_tanh=gelu_tanh)
    reference.assert_close(actual, expected, torch.float32)


def _low_precision_bar(actual, expected, same_precision, dtype=None):
    """Within twice the error of the same layer computed in the low precision; with `dtype`, or
    within the suite's relative tolerance for that dtype (reference.TOLERANCE) of the output's
    magnitude: a reference that happens to round luckily on one CPU (its GEMM path is the CPU's:
    AMX, AVX-512 FP16 or neither) must not set a bar below the dtype's own rounding."""
    err = (actual.double() - expected).abs().max().item()
    bar = (same_precision.double() - expected).abs().max().item()
    floor = 0.0 if dtype is None else TOLERANCE[dtype] * expected.abs().max().item()
    assert not torch.isnan(actual).any()
    assert err <= max(2 * bar + 1e-6, floor), (
        "error %.3g > twice the same-precision reference's %.3g and the %s floor %.3g"
        % (err, bar, dtype, floor))


def test_bfloat16_mode():
    # float32 stream, bfloat16 GEMMs: the bar is the float64 reference whose GEMM operands and
    # results are rounded to bfloat16, against the exact one.
    actual, expected_bf16, x, w, cu = run_case(MINILM, BATCHES["ragged"], packing="bf16")
    exact = reference.encoder_layer(x, cu, w, 12, 1e-12, 1 / math.sqrt(32), False)
    _low_precision_bar(actual, exact, expected_bf16)
    assert (actual.double() - exact).abs().max().item() > 0  # really ran in bfloat16


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("lens", ["one", "seven", "ragged", "awkward"])
def test_int8_mode(lens, threads):
    # float32 stream, int8 GEMMs (activations per row, weights per output channel): the bar is
    # the float64 reference with the same quantization, against the exact one.
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        actual, expected_int8, x, w, cu = run_case(MINILM, BATCHES[lens], packing="int8")
    finally:
        torch.set_num_threads(before)
    exact = reference.encoder_layer(x, cu, w, 12, 1e-12, 1 / math.sqrt(32), False)
    _low_precision_bar(actual, exact, expected_int8)
    assert (actual.double() - exact).abs().max().item() > 1e-4  # really ran in int8


def test_int8_mode_zero_and_non_finite_rows():
    # A zero row quantizes to zeros (scale 0, no division by zero); a row with infinity gives NaN
    # outputs as the float32 product would, not an exception from a pool worker.
    c, heads, inter = SMALL
    w = make_weights(c, inter)
    packed = {n: gemm_pack_weight(w[n + "_weight"], 2) for n in NAMES}
    cu, m = batch([3, 2])
    x = torch.randn(5, c)
    x[1] = 0
    out = call(x.clone(), cu, m, w, heads, packed=packed)
    assert torch.isfinite(out).all()
    x[4, 7] = float("inf")
    out = call(x.clone(), cu, m, w, heads, packed=packed)
    assert torch.isnan(out[3:]).any() and torch.isfinite(out[:3]).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_streams(dtype):
    c, heads, inter = SMALL
    actual, exact, x, w, cu = run_case(SMALL, BATCHES["ragged"], dtype=dtype)
    # The same layer in `dtype` through torch's own ops, per sequence.
    wd = {k: v.to(dtype) if k.endswith("_weight") and v.dim() == 2 else v for k, v in w.items()}
    lowp = reference.encoder_layer(x.to(dtype), cu, w, heads, 1e-12, 1 / math.sqrt(c // heads),
                                   False, gemm_dtype=dtype)
    _low_precision_bar(actual.float(), exact, lowp, dtype)


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_gemm_backends(backend, options):
    options.set("DJL_ATTN_CPU_GEMM", backend)
    actual, expected, *_ = run_case(SMALL, BATCHES["ragged"], packing="f32")
    reference.assert_close(actual, expected, torch.float32)


@pytest.mark.parametrize("pool", ["own", "openmp"])
@pytest.mark.parametrize("threads", [1, 2])
def test_threads(threads, pool, options):
    # The kernels' loops on the library's own pool and on libtorch's OpenMP team.
    options.set("DJL_ATTN_CPU_THREADS", pool)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        actual, expected, *_ = run_case(MINILM, BATCHES["awkward"], packing="f32")
    finally:
        torch.set_num_threads(before)
    reference.assert_close(actual, expected, torch.float32)


def test_thread_count_follows_torch():
    # Unset, the kernels' thread count is libtorch's, read at every call (DJL sets it after the
    # library is loaded); an explicit djl_attn_set_num_threads overrides it until reset with 0.
    lib = ctypes.CDLL(str(_find("libdjl_attn.so")))
    before = torch.get_num_threads()
    try:
        for n in (1, 3, 2):
            torch.set_num_threads(n)
            assert lib.djl_attn_get_num_threads() == n
        lib.djl_attn_set_num_threads(5)
        assert lib.djl_attn_get_num_threads() == 5
    finally:
        lib.djl_attn_set_num_threads(0)
        torch.set_num_threads(before)
    assert lib.djl_attn_get_num_threads() == before


def test_repeated_calls_give_the_same_result():
    # The workspace is reused: a smaller call after a larger one reads nothing stale.
    c, heads, inter = SMALL
    w = make_weights(c, inter)
    cu_big, m_big = batch([300, 200])
    cu, m = batch([9, 4])
    x = torch.randn(13, c)
    first = call(x.clone(), cu, m, w, heads)
    call(torch.randn(500, c), cu_big, m_big, w, heads)
    second = call(x.clone(), cu, m, w, heads)
    assert torch.equal(first, second)


def test_packed_weight_is_process_local_and_checked():
    w = torch.randn(48, 32)
    blob = gemm_pack_weight(w, 0)
    assert blob.dtype == torch.uint8 and blob.dim() == 1
    with pytest.raises(ValueError, match="weight: expected dtype float32"):
        gemm_pack_weight(w.double(), 0)
    with pytest.raises(ValueError, match="weight: expected 2 dims"):
        gemm_pack_weight(w.view(-1), 2)
    with pytest.raises(ValueError, match="mode: expected 0 \\(float32\\), 1 \\(bfloat16\\) or 2"):
        gemm_pack_weight(w, 3)


# ---- bad inputs -------------------------------------------------------------------------------

def _good():
    c, heads, inter = SMALL
    w = make_weights(c, inter)
    cu, m = batch([5, 3])
    return torch.randn(8, c), cu, m, w, heads


def _bad(match, **change):
    x, cu, m, w, heads = _good()
    w = dict(w)
    packed = change.pop("packed", None)
    for k, v in change.items():
        if k in w:
            w[k] = v(w[k]) if callable(v) else v
    x = change["hidden"](x) if "hidden" in change else x
    cu = change["cu_seqlens"] if "cu_seqlens" in change else cu
    m = change["max_seqlen"] if "max_seqlen" in change else m
    heads = change["num_heads"] if "num_heads" in change else heads
    eps = change.get("eps", 1e-12)
    with pytest.raises(ValueError, match=match):
        call(x, cu, m, w, heads, eps=eps, scale=0.125, packed=packed)


def test_bad_hidden():
    _bad("hidden: expected 2 dims", hidden=lambda x: x.view(2, 4, -1))
    _bad("hidden: expected dtype in", hidden=lambda x: x.double())
    _bad("hidden: expected a contiguous tensor", hidden=lambda x: x.t().contiguous().t())


def test_bad_heads_and_scalars():
    _bad("num_heads: expected a value >= 1 dividing", num_heads=3)
    _bad("num_heads: expected a value >= 1 dividing", num_heads=0)
    _bad("norm_eps: expected a finite value >= 0", eps=-1.0)


def test_bad_cu_seqlens():
    _bad("cu_seqlens: expected dtype int32", cu_seqlens=torch.tensor([0, 5, 8]))
    _bad("cu_seqlens: expected 0 at index 0", cu_seqlens=torch.tensor([1, 5, 8], dtype=torch.int32))
    _bad("cu_seqlens: expected non-decreasing",
         cu_seqlens=torch.tensor([0, 5, 4, 8], dtype=torch.int32))
    _bad("cu_seqlens: expected the last value to be T = 8",
         cu_seqlens=torch.tensor([0, 5, 7], dtype=torch.int32))
    _bad("max_seqlen: expected >= every sequence's length", max_seqlen=4)
    _bad("max_seqlen: expected a value in", max_seqlen=-1)


def test_bad_weights():
    _bad("qkv_weight: expected size 480 for out", qkv_weight=lambda t: t[:-1].contiguous())
    _bad("down_weight: expected size 223 for in", up_weight=lambda t: t[:-1].contiguous(),
         up_bias=lambda t: t[:-1].contiguous(), down_weight=lambda t: t)
    _bad("out_weight: expected the dtype of hidden", out_weight=lambda t: t.double())
    _bad("up_bias: expected size 224 for n", up_bias=lambda t: t[:-1].contiguous())
    _bad("ffn_norm_bias: expected dtype float32", ffn_norm_bias=lambda t: t.double())
    _bad("out_weight: expected a gemm_pack_weight result, got not a packed weight",
         packed={"out": torch.zeros(100, dtype=torch.uint8)})
    _bad("qkv_weight: expected a packed weight of \\[480, 160\\]",
         packed={"qkv": gemm_pack_weight(torch.randn(160, 160), 2)})


def test_packed_weight_needs_a_float32_hidden():
    x, cu, m, w, heads = _good()
    w16 = {k: v.bfloat16() if k.endswith("_weight") and v.dim() == 2 else v for k, v in w.items()}
    with pytest.raises(ValueError, match="packed weights need a float32 hidden"):
        call(x.bfloat16(), cu, m, w16, heads,
             packed={"up": gemm_pack_weight(w["up_weight"], 0)})
