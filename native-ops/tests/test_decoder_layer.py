"""djl_attn.decoder_layer (one whole pre-norm decoder layer over a paged KV cache) against the
float64 reference of reference.py, per family (LLaMA with GQA and Llama-3 RoPE scaling, Mistral's
window, Gemma-2's soft-cap, GeGLU and extra norms, GPT-2's LayerNorm, GELU and biases, a Qwen-2
style qkv bias), on decode, prefill and mixed batches, FP8 caches, both GEMM backends, and bad
inputs. Low precision meets the suite's bar: the kernel's error is at most twice the error of the
same reference computed in that precision (float32: within the float32 tolerance).

The correctness tests run on every device the suite sees (conftest's `device`): on a GPU machine
the CUDA kernel (cuda/decoder) meets the same references and bars as the CPU one."""

import math

import pytest
import torch

import reference
from conftest import supported_ints
from reference import ACT_GEGLU_TANH, ACT_GELU_TANH, ACT_SWIGLU, NORM_LAYER, NORM_RMS, TOLERANCE

decoder_layer = torch.ops.djl_attn.decoder_layer

BLOCK_SIZES = supported_ints("paged.block_sizes")

# What each family switches on. window/softcap are the attention's; rope: None (learned
# positions, GPT-2), "default" or "llama3" (rope_type llama3's scaled frequencies).
FAMILIES = {
    "llama": dict(norm=NORM_RMS, act=ACT_SWIGLU, rope="default", interleaved=False),
    "llama3": dict(norm=NORM_RMS, act=ACT_SWIGLU, rope="llama3", interleaved=False),
    "llama2c": dict(norm=NORM_RMS, act=ACT_SWIGLU, rope="default", interleaved=True),
    "mistral": dict(norm=NORM_RMS, act=ACT_SWIGLU, rope="default", interleaved=False, window=4),
    "gemma2": dict(norm=NORM_RMS, act=ACT_GEGLU_TANH, rope="default", interleaved=False,
                   softcap=1.5, post_norms=True, window=6),
    "gpt2": dict(norm=NORM_LAYER, act=ACT_GELU_TANH, rope=None, biases=True),
    "qwen2": dict(norm=NORM_RMS, act=ACT_SWIGLU, rope="default", interleaved=False,
                  qkv_bias=True),
    # A partial rotary embedding (Phi / GPT-NeoX style): the first half of each head's dims.
    "partial": dict(norm=NORM_RMS, act=ACT_SWIGLU, rope="partial", interleaved=False),
}

# (C, Hq, Hkv, D, I): GQA 2:1, MHA with stories260K's head dim 8, MQA with head dim 80.
SHAPES = [(64, 4, 2, 16, 96), (64, 8, 8, 8, 172), (160, 2, 1, 80, 72)]

# Batches as (cached tokens before the step, new tokens) per sequence.
BATCHES = {
    "decode": [(7, 1), (0, 1), (20, 1)],
    "prefill": [(0, 13)],
    "mixed": [(0, 5), (9, 1), (3, 4), (30, 1), (17, 2)],
}

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def make_weights(family, shape, dtype):
    c, hq, hkv, d, inter = shape
    f = FAMILIES[family]
    gated = f["act"] != ACT_GELU_TANH
    w = {}

    def matrix(rows, cols):
        return (torch.randn(rows, cols, dtype=torch.float64) / math.sqrt(cols)).to(dtype)

    def vector(n, around=0.0, spread=0.1):
        return (around + spread * torch.randn(n, dtype=torch.float64)).float()

    w["attn_norm_weight"] = vector(c, 1.0)
    w["mlp_norm_weight"] = vector(c, 1.0)
    if f["norm"] == NORM_LAYER:
        w["attn_norm_bias"] = vector(c)
        w["mlp_norm_bias"] = vector(c)
    w["qkv_weight"] = matrix((hq + 2 * hkv) * d, c)
    w["out_weight"] = matrix(c, hq * d)
    w["up_weight"] = matrix((2 if gated else 1) * inter, c)
    w["down_weight"] = matrix(c, inter)
    if f.get("biases") or f.get("qkv_bias"):
        w["qkv_bias"] = vector((hq + 2 * hkv) * d, 0.0, 0.3)
    if f.get("biases"):
        w["out_bias"] = vector(c, 0.0, 0.3)
        w["up_bias"] = vector(w["up_weight"].shape[0], 0.0, 0.3)
        w["down_bias"] = vector(c, 0.0, 0.3)
    if f.get("post_norms"):
        w["attn_out_norm_weight"] = vector(c, 1.0)
        w["mlp_out_norm_weight"] = vector(c, 1.0)
    if f["rope"] == "default":
        inv = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        w["rope_cos_sin"] = reference.rope_cos_sin(64, inv)
    elif f["rope"] == "partial":
        inv = 1.0 / 10000.0 ** (torch.arange(0, d // 2, 2, dtype=torch.float64) / (d // 2))
        w["rope_cos_sin"] = reference.rope_cos_sin(64, inv)
    elif f["rope"] == "llama3":
        # Llama-3.2's rope_scaling (factor 32, frequency factors 1 and 4) with an original
        # context of 64, so that head dim 16's frequencies fall in all three bands (unscaled,
        # smoothed, divided by 32).
        inv = reference.llama3_inv_freq(d, 500000.0, 32.0, 1.0, 4.0, 64)
        w["rope_cos_sin"] = reference.rope_cos_sin(64, inv)
    return w


def make_batch(chunks, shape, dtype, block_size, fp8=False):
    """Caches whose first `cached` tokens of each sequence hold earlier keys/values, shuffled
    block tables, and the step's batch tensors. fp8: True for e4m3fn bytes in uint8 caches,
    "e5m2" for e5m2 bytes (the layer's fp8_e5m2=True)."""
    e5m2 = fp8 == "e5m2"
    _, _, hkv, d, _ = shape
    blocks_per_seq = [(cached + new + block_size - 1) // block_size for cached, new in chunks]
    num_blocks = sum(blocks_per_seq) + 3  # spare blocks stay untouched
    order = torch.randperm(num_blocks).tolist()
    max_blocks = max(blocks_per_seq) + 1
    tables = torch.zeros(len(chunks), max_blocks, dtype=torch.int32)
    at = 0
    for s, n in enumerate(blocks_per_seq):
        tables[s, :n] = torch.tensor(order[at:at + n], dtype=torch.int32)
        at += n
    k_scale = v_scale = None
    if fp8:
        k_scale = torch.rand(hkv) * 0.02 + 0.01
        v_scale = torch.tensor([0.015])
        key_cache = reference.fp8_quantise(
            torch.randn(num_blocks, block_size, hkv, d), k_scale, e5m2)
        value_cache = reference.fp8_quantise(
            torch.randn(num_blocks, block_size, hkv, d), v_scale, e5m2)
    else:
        key_cache = torch.randn(num_blocks, block_size, hkv, d).to(dtype)
        value_cache = torch.randn(num_blocks, block_size, hkv, d).to(dtype)
    positions, slots, cu = [], [], [0]
    for s, (cached, new) in enumerate(chunks):
        for p in range(cached, cached + new):
            positions.append(p)
            slots.append(int(tables[s, p // block_size]) * block_size + p % block_size)
        cu.append(cu[-1] + new)
    return dict(
        positions=torch.tensor(positions, dtype=torch.int64),
        key_cache=key_cache, value_cache=value_cache, block_tables=tables,
        cu_seqlens_q=torch.tensor(cu, dtype=torch.int32),
        context_lens=torch.tensor([c + n for c, n in chunks], dtype=torch.int32),
        slot_mapping=torch.tensor(slots, dtype=torch.int64),
        k_scale=k_scale, v_scale=v_scale, fp8_e5m2=e5m2)


def run_op(hidden, b, w, shape, family, check_indices=True, max_seqlen_q=-1, fresh_chunks=False):
    f = FAMILIES[family]
    _, hq, _, d, _ = shape
    decoder_layer(
        hidden, b["positions"], b["key_cache"], b["value_cache"], b["block_tables"],
        b["cu_seqlens_q"], b["context_lens"], b["slot_mapping"], b["k_scale"], b["v_scale"],
        w["attn_norm_weight"], w.get("attn_norm_bias"), w["qkv_weight"], w.get("qkv_bias"),
        w.get("rope_cos_sin"), w["out_weight"], w.get("out_bias"), w.get("attn_out_norm_weight"),
        w["mlp_norm_weight"], w.get("mlp_norm_bias"), w["up_weight"], w.get("up_bias"),
        w["down_weight"], w.get("down_bias"), w.get("mlp_out_norm_weight"), hq, f["norm"],
        f["act"], 1e-5, 1.0 / math.sqrt(d), f.get("window", -1), f.get("softcap", 0.0),
        f.get("interleaved", False), check_indices, max_seqlen_q, fresh_chunks,
        b.get("fp8_e5m2", False))


def reference_layer(hidden, b, w, shape, family, dtype, caches_read=None):
    """(new hidden, k, v) of the reference computed in `dtype`, with k and v [T, Hkv, D] the
    step's rows. The attention reads the caches with those rows written (in `dtype`), or
    `caches_read` when given (an FP8 test passes the kernel's caches: a key one rounding step
    away in e4m3 would otherwise dominate the comparison). vLLM's semantics on an FP8 cache: a
    chunk of one token (a decode row) reads its token back from the cache (quantised), a longer
    chunk attends its tokens as computed (k and v in `dtype`) and only its cached prefix
    dequantised."""
    f = FAMILIES[family]
    _, hq, hkv, d, _ = shape
    q, k, v = reference.decoder_layer_qkv(hidden, b["positions"], w, hq, hkv, f["norm"], 1e-5,
                                          f.get("interleaved", False), dtype)
    if caches_read is None:
        caches_read = (reference.write_cache(b["key_cache"].to(dtype), k, b["slot_mapping"]),
                       reference.write_cache(b["value_cache"].to(dtype), v, b["slot_mapping"]))
    out = reference.decoder_layer_rest(
        hidden, q, caches_read[0], caches_read[1], b["block_tables"], b["cu_seqlens_q"],
        b["context_lens"], w, f["norm"], f["act"], 1e-5, 1.0 / math.sqrt(d),
        f.get("window", -1), f.get("softcap", 0.0), b["k_scale"], b["v_scale"], dtype, k, v,
        b["fp8_e5m2"])
    return out, k, v


def max_error(actual, expected):
    return ((actual.double() - expected.double()).abs() / expected.double().abs().clamp(min=1.0)
            ).max().item()


def fp8_half_step(x, scale, e5m2=False):
    """Half the spacing of e4m3fn (e5m2) values around x / scale, times the scale: the most a
    correct rounding moves x (saturated to +-448 (+-57344) scale first)."""
    s = reference._head_scale(scale, x.shape[-2], x.device).double()
    limit, min_normal, bits = ((reference.FP8_E5M2_MAX, 2.0 ** -14, 2) if e5m2
                               else (reference.FP8_MAX, 2.0 ** -6, 3))
    y = (x / s).abs().clamp(max=limit)
    exponent = torch.floor(torch.log2(y.clamp(min=min_normal)))
    return torch.pow(2.0, exponent - bits - 1) * s


def check_rows(name, cache, slots, original, truth, low, dtype, scale, e5m2=False):
    """The step's rows in their slots (within the dtype's bar, or one e4m3 rounding of the truth
    for FP8), and every other slot untouched."""
    flat = cache.view(-1, cache.shape[2], cache.shape[3])
    keep = slots >= 0
    written = torch.zeros(flat.shape[0], dtype=torch.bool)
    written[slots[keep]] = True
    others = original.view(-1, cache.shape[2], cache.shape[3])[~written]
    assert torch.equal(flat[~written], others), "%s: a slot outside slot_mapping changed" % name
    got, truth, low = flat[slots[keep]], truth[keep], low[keep]
    if cache.dtype == torch.uint8:
        s = reference._head_scale(scale, truth.shape[-2], truth.device).double()
        limit = reference.FP8_E5M2_MAX if e5m2 else reference.FP8_MAX
        sat = torch.maximum(torch.minimum(truth, limit * s), -limit * s)
        err = (reference.fp8_dequantise(got, scale, e5m2) - sat).abs()
        # The rows the kernel rounds differ from the truth by about what the reference computed
        # in `dtype` does: twice its largest error is allowed on top of the rounding.
        bound = fp8_half_step(sat, scale, e5m2) * 1.001 + 2 * (low.double() - truth).abs().max()
        assert (err <= bound).all(), "%s: %d values beyond one e4m3 rounding" % (
            name, int((err > bound).sum()))
    else:
        bar = max(TOLERANCE[torch.float32], 2 * max_error(low, truth))
        err = max_error(got, truth)
        assert err <= bar, "%s: max error %.3g > %.3g" % (name, err, bar)


def on_device(values, device):
    """The batch's or weights' tensors on `device`; other values (flags) as they are."""
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in values.items()}


def check_layer(family, shape, dtype, chunks, block_size=16, fp8=False, check_indices=True,
                skip_slot=None, device="cpu", max_seqlen_q=None, fresh_chunks=False):
    w = make_weights(family, shape, dtype)
    b = make_batch(chunks, shape, dtype, block_size, fp8)
    if skip_slot is not None:
        b["slot_mapping"][skip_slot] = -1
    tokens = int(b["cu_seqlens_q"][-1])
    hidden = torch.randn(tokens, shape[0], dtype=torch.float64).to(dtype)
    before = hidden.clone()
    original = (b["key_cache"].clone(), b["value_cache"].clone())
    if max_seqlen_q is None:  # what a caller that built the batch knows
        max_seqlen_q = max(new for _, new in chunks)
    if device == "cpu":
        run_op(hidden, b, w, shape, family, check_indices, max_seqlen_q, fresh_chunks)
        written = (b["key_cache"], b["value_cache"])
    else:
        # The same inputs on the device; the results come back for the float64 comparison.
        b_dev, hidden_dev = on_device(b, device), hidden.to(device)
        run_op(hidden_dev, b_dev, on_device(w, device), shape, family, check_indices,
               max_seqlen_q, fresh_chunks)
        hidden.copy_(hidden_dev.cpu())
        written = (b_dev["key_cache"].cpu(), b_dev["value_cache"].cpu())
    b["key_cache"], b["value_cache"] = original
    caches_read = written if fp8 else None
    truth, k, v = reference_layer(before, b, w, shape, family, torch.float64, caches_read)
    low, k_low, v_low = reference_layer(before, b, w, shape, family, dtype, caches_read)
    check_rows("key_cache", written[0], b["slot_mapping"], original[0], k, k_low, dtype,
               b["k_scale"], b["fp8_e5m2"])
    check_rows("value_cache", written[1], b["slot_mapping"], original[1], v, v_low, dtype,
               b["v_scale"], b["fp8_e5m2"])
    assert not torch.isnan(hidden).any()
    err = max_error(hidden, truth)
    bar = max(TOLERANCE[torch.float32], 2 * max_error(low, truth))
    assert err <= bar, "hidden: max error %.3g > %.3g (%s, %s)" % (err, bar, family, dtype)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("batch", list(BATCHES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_families(family, batch, dtype, device):
    check_layer(family, SHAPES[0], dtype, BATCHES[batch], device=device)


@pytest.mark.parametrize("shape", SHAPES[1:], ids=str)
@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2"])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_shapes_and_block_sizes(shape, family, block_size, device):
    check_layer(family, shape, torch.float32, BATCHES["mixed"], block_size, device=device)


@pytest.mark.parametrize("family", ["llama3", "mistral", "gemma2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("batch", list(BATCHES))
def test_fp8_cache(family, dtype, batch, device):
    # Chunks of one (decode rows) read their token back quantised, longer chunks attend their
    # new tokens unquantised (reference_layer), in decode, prefill and mixed batches alike; the
    # CPU and CUDA kernels both meet that reference.
    check_layer(family, SHAPES[0], dtype, BATCHES[batch], fp8=True, device=device)


# Prefixes of 0, 1 and 17 cached tokens with chunks of 1, 7 and 33 in one batch, every block
# size: on an FP8 cache the chunks attend their new tokens unquantised.
PREFIX_CHUNKS = [(p, c) for p in (0, 1, 17) for c in (1, 7, 33)]


@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("fp8", [True, "e5m2"], ids=["e4m3", "e5m2"])
def test_fp8_cache_prefix_prefill(block_size, dtype, fp8, device):
    check_layer("llama", SHAPES[0], dtype, PREFIX_CHUNKS, block_size, fp8=fp8, device=device)


# e5m2 caches (vLLM's fp8_e5m2: a uint8 cache with fp8_e5m2=True) on every batch kind.
@pytest.mark.parametrize("family", ["llama3", "gemma2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("batch", list(BATCHES))
def test_fp8_e5m2_cache(family, dtype, batch, device):
    check_layer(family, SHAPES[0], dtype, BATCHES[batch], fp8="e5m2", device=device)


def test_fresh_chunks_fp8_e5m2_cache(device):
    check_layer("llama", SHAPES[0], torch.bfloat16, FRESH_FP8["several"], fp8="e5m2",
                device=device, fresh_chunks=True)


@pytest.mark.parametrize("check_indices", [True, False])
def test_fp8_cache_decode_batch_on_the_prefill_kernel(check_indices, device):
    # A decode batch with max_seqlen_q not given (-1: T) takes the chunked-prefill kernel on CUDA
    # when not checked: its rows are still chunks of one, read back from the cache.
    check_layer("llama", SHAPES[0], torch.float32, BATCHES["decode"], fp8=True, device=device,
                max_seqlen_q=-1, check_indices=check_indices)


def test_unchecked_indices_give_the_same_layer(device):
    check_layer("llama", SHAPES[0], torch.float32, BATCHES["mixed"], check_indices=False,
                device=device)


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_gemm_backends(backend, options):
    options.set("DJL_ATTN_CPU_GEMM", backend)
    check_layer("llama", SHAPES[0], torch.float32, BATCHES["mixed"])


# The decoder's GEMMs on CUDA: a decode step of at most 8 rows of float16/bfloat16 runs the skinny
# kernel (cuda/gemm/skinny_gemm.cu) with the norms in its prologue and bias + RoPE, the MLP's
# activation and the residual adds in its epilogues; DJL_ATTN_GEMM_KERNEL=cublaslt runs cuBLASLt
# and the unfused kernels. Both meet the float64 bar for 1 to 8 rows, every prologue and epilogue
# (RMSNorm, SwiGLU, residual and RoPE: llama; interleaved pairs: llama2c; a qkv bias: qwen2; a
# partial rotary embedding, which keeps the bias + RoPE kernel: partial; GeGLU with Gemma-2's
# post-norms, which keep the residual kernel; LayerNorm, GELU, biases, no RoPE: gpt2) and awkward
# shapes: a column count that leaves a block part-full (I = 74), a down projection whose k (74)
# the kernel does not take, so cuBLASLt runs beside it in one layer, and head dims 16, 32, 80.
DECODE_GEMM_SHAPES = [(64, 4, 2, 16, 96), (96, 3, 1, 32, 74), (160, 2, 1, 80, 72)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GEMM kernels are CUDA's")
@pytest.mark.parametrize("kernel", ["auto", "cublaslt"])
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("family", ["llama", "llama2c", "qwen2", "partial", "gemma2", "gpt2"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_decode_gemm_kernels(kernel, rows, family, dtype, options):
    options.set("DJL_ATTN_GEMM_KERNEL", kernel)
    chunks = [(3 + 7 * i, 1) for i in range(rows)]
    for shape in DECODE_GEMM_SHAPES:
        check_layer(family, shape, dtype, chunks, device="cuda")


@pytest.mark.parametrize("batch", ["decode", "mixed"])
@pytest.mark.parametrize("check_indices", [True, False])
def test_max_seqlen_q_not_given(batch, check_indices, device):
    # -1: the binding takes T, an upper bound; the layer is the same (on CUDA a decode batch then
    # takes the chunked-prefill kernel).
    check_layer("mistral", SHAPES[0], torch.float32, BATCHES[batch], check_indices=check_indices,
                device=device, max_seqlen_q=-1)


def test_max_seqlen_q_below_a_chunk():
    def mutate(w, b, kw):
        kw["max_seqlen_q"] = 3
    _bad(mutate, r"decoder_layer: max_seqlen_q: expected >= every chunk length, got 3 < 5")


def test_max_seqlen_q_out_of_range():
    def mutate(w, b, kw):
        kw["max_seqlen_q"] = 100
    _bad(mutate, r"decoder_layer: max_seqlen_q: expected -1 \(not given: T\) or a value in \[0, T = 13\]")


# Chunks that are their whole contexts (a prompt's first chunk): on CUDA the attention takes the
# flash varlen kernel over the layer's own k and v rows instead of reading the cache back.
FRESH = {"one": [(0, 13)], "several": [(0, 5), (0, 1), (0, 9), (0, 2)]}


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2", "gpt2"])
@pytest.mark.parametrize("batch", list(FRESH))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fresh_chunks(family, batch, dtype, device):
    check_layer(family, SHAPES[0], dtype, FRESH[batch], device=device, fresh_chunks=True)


@pytest.mark.parametrize("shape", SHAPES[1:], ids=str)
def test_fresh_chunks_shapes(shape, device):
    check_layer("llama", shape, torch.float16, FRESH["several"], device=device,
                fresh_chunks=True)


# Fresh chunks of at least 2 tokens: on an FP8 cache a chunk of one reads its token back.
FRESH_FP8 = {"one": [(0, 13)], "several": [(0, 5), (0, 2), (0, 9), (0, 33)]}


@pytest.mark.parametrize("batch", list(FRESH_FP8))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fresh_chunks_fp8_cache(batch, dtype, device):
    # The new tokens unquantised: on CUDA fresh chunks over an FP8 cache take the flash varlen
    # kernel too, and meet the same reference as the CPU's paged kernel.
    check_layer("llama", SHAPES[0], dtype, FRESH_FP8[batch], fp8=True, device=device,
                fresh_chunks=True)


def test_fresh_chunks_of_one_token_on_fp8_cache_refused():
    w = make_weights("llama", SHAPES[0], torch.float32)
    b = make_batch(FRESH["several"], SHAPES[0], torch.float32, 16, fp8=True)
    hidden = torch.randn(int(b["cu_seqlens_q"][-1]), SHAPES[0][0])
    before, cache = hidden.clone(), b["key_cache"].clone()
    with pytest.raises(ValueError, match=r"decoder_layer: fresh_chunks: expected chunks of at "
                       r"least 2 tokens on an fp8 cache \(a chunk of one reads its token back "
                       r"from the cache\), got 1 at sequence 1"):
        run_op(hidden, b, w, SHAPES[0], "llama", fresh_chunks=True)
    assert torch.equal(before, hidden) and torch.equal(cache, b["key_cache"])


def test_fresh_chunks_with_a_cached_prefix():
    def mutate(w, b, kw):
        kw["fresh_chunks"] = True
    _bad(mutate, r"decoder_layer: fresh_chunks: expected every sequence's chunk to be its whole "
         r"context \(nothing cached before it\), got a context of")


def test_one_token(device):
    check_layer("llama", SHAPES[0], torch.float32, [(5, 1)], device=device)


def test_skipped_slot(device):
    # A row whose slot is negative is not cached (reshape_and_cache's rule); the attention then
    # reads what the slot held before, in the kernel and in the reference alike.
    check_layer("llama", SHAPES[0], torch.float32, [(0, 3), (6, 1)], skip_slot=1, device=device)


def test_empty_batch_changes_nothing():
    w = make_weights("llama", SHAPES[0], torch.float32)
    b = make_batch([(4, 1)], SHAPES[0], torch.float32, 16)
    for k in ("positions", "slot_mapping"):
        b[k] = b[k][:0]
    b["cu_seqlens_q"] = torch.tensor([0, 0], dtype=torch.int32)
    b["context_lens"] = torch.tensor([4], dtype=torch.int32)
    hidden = torch.empty(0, SHAPES[0][0])
    cache = b["key_cache"].clone()
    run_op(hidden, b, w, SHAPES[0], "llama")
    assert torch.equal(cache, b["key_cache"])


def _bad(mutate, match, family="llama", dtype=torch.float32):
    w = make_weights(family, SHAPES[0], dtype)
    b = make_batch(BATCHES["mixed"], SHAPES[0], dtype, 16)
    hidden = torch.randn(int(b["cu_seqlens_q"][-1]), SHAPES[0][0]).to(dtype)
    kwargs = {}
    mutate(w, b, kwargs)
    before, cache = hidden.clone(), b["key_cache"].clone()
    with pytest.raises(ValueError, match=match):
        run_op(kwargs.get("hidden", hidden), b, w, kwargs.get("shape", SHAPES[0]), family,
               max_seqlen_q=kwargs.get("max_seqlen_q", -1),
               fresh_chunks=kwargs.get("fresh_chunks", False))
    # A refused call writes nothing.
    assert torch.equal(before, hidden) and torch.equal(cache, b["key_cache"])


def test_bad_qkv_weight_shape():
    def mutate(w, b, kw):
        w["qkv_weight"] = w["qkv_weight"][:-8].contiguous()
    _bad(mutate, r"decoder_layer: qkv_weight: expected size 128 for out \(\(Hq \+ 2 Hkv\) D\)")


def test_bad_down_weight_shape():
    def mutate(w, b, kw):
        w["down_weight"] = w["down_weight"][:, :-1].contiguous()
    _bad(mutate, r"decoder_layer: down_weight: expected size 96 for in")


def test_bad_cache_dtype():
    def mutate(w, b, kw):
        b["key_cache"] = b["key_cache"].half()
        b["value_cache"] = b["value_cache"].half()
    _bad(mutate, r"decoder_layer: key_cache: expected the dtype of hidden \(float32\), got float16")


def test_bad_weight_dtype():
    def mutate(w, b, kw):
        w["out_weight"] = w["out_weight"].double()
    _bad(mutate, r"decoder_layer: out_weight: expected the dtype of hidden \(float32\), got float64")


def test_bad_vector_dtype():
    def mutate(w, b, kw):
        w["attn_norm_weight"] = w["attn_norm_weight"].double()
    _bad(mutate, r"decoder_layer: attn_norm_weight: expected dtype float32, got float64")


def test_rms_norm_with_bias_refused():
    def mutate(w, b, kw):
        w["mlp_norm_bias"] = torch.zeros(SHAPES[0][0])
    _bad(mutate, r"decoder_layer: mlp_norm_bias: expected None for RMSNorm")


def test_odd_gated_rows_refused():
    def mutate(w, b, kw):
        w["up_weight"] = w["up_weight"][:-1].contiguous()
    _bad(mutate, r"decoder_layer: up_weight: expected 2 I >= 2 rows")


def test_heads_not_a_multiple_of_kv_heads():
    def mutate(w, b, kw):
        kw["shape"] = (64, 3, 2, 16, 96)
    _bad(mutate, r"decoder_layer: num_heads: expected a multiple >= 1 of the cache's heads Hkv = 2, got 3")


def test_position_beyond_rope_table():
    def mutate(w, b, kw):
        b["positions"][2] = 64
    _bad(mutate, r"decoder_layer: positions: expected values in \[0, P = 64\).*got 64 at index 2")


def test_slot_beyond_cache():
    def mutate(w, b, kw):
        b["slot_mapping"][0] = b["key_cache"].shape[0] * 16
    _bad(mutate, r"decoder_layer: slot_mapping: expected slots < num_blocks \* block_size")


def test_bad_block_id():
    def mutate(w, b, kw):
        b["block_tables"][1, 0] = 999
    _bad(mutate, r"decoder_layer: block_tables: expected block ids in \[0, num_blocks")


def test_hidden_not_contiguous():
    def mutate(w, b, kw):
        t = int(b["cu_seqlens_q"][-1])
        kw["hidden"] = torch.randn(SHAPES[0][0], t).t()
    _bad(mutate, r"decoder_layer: hidden: expected a contiguous")


def test_rope_table_wider_than_head():
    def mutate(w, b, kw):
        w["rope_cos_sin"] = torch.zeros(64, 18)
    _bad(mutate, r"decoder_layer: rope_cos_sin: expected an even rotary width R in \[2, D = 16\]")


@pytest.mark.parametrize("arg,value,match", [
    (26, 2, r"decoder_layer: norm_type: expected 0 \(RMSNorm\) or 1 \(LayerNorm\), got 2"),
    (27, 3, r"decoder_layer: activation: expected 0 \(SwiGLU\), 1 \(GeGLU, tanh\) or 2"),
    (28, -1.0, r"decoder_layer: norm_eps: expected a finite value >= 0, got -1"),
    (30, -2, r"decoder_layer: window_left"),
    (31, -1.0, r"decoder_layer: softcap"),
])
def test_bad_scalars(arg, value, match):
    w = make_weights("llama", SHAPES[0], torch.float32)
    b = make_batch(BATCHES["decode"], SHAPES[0], torch.float32, 16)
    hidden = torch.randn(3, 64)
    args = [hidden, b["positions"], b["key_cache"], b["value_cache"], b["block_tables"],
            b["cu_seqlens_q"], b["context_lens"], b["slot_mapping"], None, None,
            w["attn_norm_weight"], None, w["qkv_weight"], None, w["rope_cos_sin"],
            w["out_weight"], None, None, w["mlp_norm_weight"], None, w["up_weight"], None,
            w["down_weight"], None, None, 4, NORM_RMS, ACT_SWIGLU, 1e-5, 0.25, -1, 0.0, False,
            True]
    args[arg] = value
    with pytest.raises(ValueError, match=match):
        decoder_layer(*args)


def test_position_checked_without_check_indices():
    # The batch's once-per-step check does not cover positions: on the CPU they are checked on
    # every call (a vouched CUDA call reads nothing back; its caller vouches for them).
    w = make_weights("llama", SHAPES[0], torch.float32)
    b = make_batch(BATCHES["decode"], SHAPES[0], torch.float32, 16)
    b["positions"][1] = -1
    hidden = torch.randn(3, SHAPES[0][0])
    with pytest.raises(ValueError, match=r"decoder_layer: positions: expected values in \[0, P"):
        run_op(hidden, b, w, SHAPES[0], "llama", check_indices=False)


def test_llama3_table_is_transformers():
    # The Llama-3 table the tests rotate by is transformers' own rope_type "llama3": the
    # operator takes any table, so the scaled frequencies are the whole of Llama-3's RoPE.
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    config = transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=4, max_position_embeddings=64,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64})
    inv, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    ours = reference.llama3_inv_freq(16, 500000.0, 32.0, 1.0, 4.0, 64)
    torch.testing.assert_close(ours, inv.double(), rtol=1e-6, atol=0)
    # The three bands are present: unscaled, scaled by 1/32 and smoothed in between.
    plain = 1.0 / 500000.0 ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    ratio = (ours / plain).tolist()
    assert ratio[0] == 1.0 and abs(ratio[-1] - 1 / 32) < 1e-12
    assert any(1 / 32 < r < 1 for r in ratio)
