"""One table of bad calls for every djl_attn operator, run on every backend and through the C
interface the Java bridge calls (djl_attn_call).

Each operator has a good call (small, awkward shapes: grouped heads, odd sizes, a padded batch
row) that is checked against the float64 reference; each row of BAD_CALLS changes one thing of
such a call and names the argument and the rule the operator's message must state. A row runs:

  * on the CPU always, and on CUDA when PyTorch sees a GPU (conftest.py then loads
    libdjl_attn_cuda.so): first the unchanged call, which must succeed and match the reference
    (so a row cannot pass by an operator rejecting everything), then the changed call, which must
    raise ValueError with "<operator>: <argument>: <rule>";
  * through djl_attn_call, which must return DJL_ATTN_INVALID_ARGUMENT with the same message;
  * with a GPU, on both backends at once: the CPU and CUDA exceptions must be of one type with one
    message (device names aside, for the rows that mix devices). This is the check that the two
    backends accept exactly the same inputs (issue 13: all validation in the bindings).

ACCEPTED_CALLS are the inputs that a CUDA-only rule once refused (unaligned views, odd head dims
and strides, more sequences or heads than one CUDA grid dimension holds, empty sizes): they must
run on every backend and match the reference.

The rows that mix devices put one tensor on the GPU when there is one; without a GPU, on PyTorch's
`meta` device, which torch.ops sends to a Meta kernel djl_attn does not have, so those rows reach
the binding through djl_attn_call only.

The table covers every operator the library registers: an operator without a good call and rows
(a new one) fails test_every_operator_has_a_good_call_and_bad_rows.
"""

import ctypes
import re
from dataclasses import dataclass, field
from typing import Callable

import pytest
import torch

import reference
from conftest import DEVICES, _find, supported_ints, supported_values
from reference import assert_close
from test_c_api import INVALID_ARGUMENT, call as c_call
from test_flash_fp8 import assert_matches as fp8_matches

lib = ctypes.CDLL(str(_find("libdjl_attn.so")))
lib.djl_attn_operator_count.restype = ctypes.c_int32
lib.djl_attn_operator_name.restype = ctypes.c_char_p
lib.djl_attn_operator_name.argtypes = [ctypes.c_int32]
lib.djl_attn_operator_num_outputs.restype = ctypes.c_int32
lib.djl_attn_operator_num_outputs.argtypes = [ctypes.c_int32]
lib.djl_attn_operator_arg_kinds.restype = ctypes.c_int32
lib.djl_attn_operator_arg_kinds.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32),
                                            ctypes.c_int32]

# The library's own lists: every limit a row tests comes from here, not from a copy.
PAGED_HEAD_DIMS = supported_ints("paged.head_dims")
PAGED_BLOCK_SIZES = supported_ints("paged.block_sizes")
FLASH_MAX_HEAD_DIM = supported_ints("flash.max_head_dim")[0]
LINEAR_MAX_DIM = supported_ints("linear.max_dim")[0]
DTYPES = [getattr(torch, name) for name in supported_values("dtypes")]
DTYPE_LIST = "{" + ", ".join(supported_values("dtypes")) + "}"


def _list(values):
    return "{" + ", ".join(str(v) for v in values) + "}"


def _not_in(values, start, step=1):
    """The first value from `start` (by `step`) that is not in `values`."""
    v = start
    while v in values:
        v += step
    return v


# Paged head dims past the largest and below 1, and a block size the kernels lack.
PAGED_MAX_HEAD_DIM = supported_ints("paged.max_head_dim")[0]
PAGED_BAD_HEAD_DIM = PAGED_MAX_HEAD_DIM + 1
PAGED_BAD_BLOCK_SIZE = _not_in(PAGED_BLOCK_SIZES, PAGED_BLOCK_SIZES[0] // 2 or 1)
PAGED_ODD_BLOCK_SIZE = PAGED_BLOCK_SIZES[0] + 1 if PAGED_BLOCK_SIZES[0] + 1 not in PAGED_BLOCK_SIZES \
    else _not_in(PAGED_BLOCK_SIZES, 3, 2)


# ---- operators: the schema, a good call and its reference -------------------------------------


def _operators():
    """name -> (index, argument names, number of outputs), from the library and its schemas."""
    ops = {}
    for i in range(lib.djl_attn_operator_count()):
        name = lib.djl_attn_operator_name(i).decode()
        (schema,) = torch._C._jit_get_schemas_for_operator("djl_attn::" + name)
        ops[name] = (i, [a.name for a in schema.arguments], lib.djl_attn_operator_num_outputs(i))
    return ops


OPERATORS = _operators()


def randn(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, dtype=torch.float32, device=device).to(dtype)


def ints(values, device, dtype=torch.int32):
    return torch.tensor(values, dtype=dtype, device=device)


def good_flash_attention(d, dtype=torch.float32, batch=2, seqlen_q=5, seqlen_k=7, heads_q=6,
                         heads_kv=3, dim=24, kv_lens=(7, 3)):
    return dict(q=randn(batch, seqlen_q, heads_q, dim, dtype=dtype, device=d),
                k=randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=d),
                v=randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=d),
                kv_lens=None if kv_lens is None else ints(list(kv_lens), d), scale=0.3,
                causal=True, window_left=4, window_right=-1, softcap=2.0,
                alibi_slopes=randn(heads_q, device=d).abs())


def good_flash_attention_varlen(d, dtype=torch.float32, lens_q=(3, 0, 4), lens_k=(5, 2, 4),
                                heads_q=4, heads_kv=2, dim=24):
    cu_q = [0] + [sum(lens_q[: i + 1]) for i in range(len(lens_q))]
    cu_k = [0] + [sum(lens_k[: i + 1]) for i in range(len(lens_k))]
    return dict(q=randn(cu_q[-1], heads_q, dim, dtype=dtype, device=d),
                k=randn(cu_k[-1], heads_kv, dim, dtype=dtype, device=d),
                v=randn(cu_k[-1], heads_kv, dim, dtype=dtype, device=d),
                cu_seqlens_q=ints(cu_q, d), cu_seqlens_k=ints(cu_k, d),
                max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), scale=0.25, causal=True,
                window_left=2, window_right=-1, softcap=3.0,
                alibi_slopes=randn(len(lens_q), heads_q, device=d).abs())


def good_flash_attention_fp8(d, batch=2, seqlen_q=5, seqlen_k=7, heads_q=4, heads_kv=2, dim=128,
                             kv_lens=(7, 3)):
    """e4m3fn bytes as uint8 (how DJL passes them), descales of both shapes; D = 128, the CUDA
    kernel's one head dim."""
    fp8 = lambda *shape: randn(*shape, device=d).to(torch.float8_e4m3fn).view(torch.uint8)
    return dict(q=fp8(batch, seqlen_q, heads_q, dim), k=fp8(batch, seqlen_k, heads_kv, dim),
                v=fp8(batch, seqlen_k, heads_kv, dim),
                kv_lens=None if kv_lens is None else ints(list(kv_lens), d), scale=0.1,
                causal=True, q_descale=torch.rand(1, device=d) + 0.5,
                k_descale=torch.rand(batch, heads_kv, device=d) + 0.5,
                v_descale=torch.rand(batch, heads_kv, device=d) + 0.5, out_float16=False)


def check_flash_attention_fp8(a, outputs):
    out, lse = outputs
    assert out.dtype == (torch.float16 if a["out_float16"] else torch.bfloat16)
    fp8_matches(out, lse, a["q"], a["k"], a["v"], a["kv_lens"], a["scale"], a["causal"],
                [a["q_descale"], a["k_descale"], a["v_descale"]])


def good_bert_attention(d, dtype=torch.float32, batch=2, seqlen=5, heads=2, dim=12):
    width = 3 * heads * dim
    return dict(qkv=randn(batch, seqlen, width, dtype=dtype, device=d),
                qkv_bias=randn(width, dtype=dtype, device=d),
                kv_lens=ints([min(2, seqlen) if b % 2 else seqlen for b in range(batch)], d),
                num_heads=heads, scale=0.25)


def good_layernorm(d, dtype=torch.float32, shape=(2, 3, 24)):
    c = shape[-1]
    return dict(x=randn(*shape, dtype=dtype, device=d), bias=randn(c, dtype=dtype, device=d),
                residual=randn(*shape, dtype=dtype, device=d),
                gamma=randn(c, dtype=dtype, device=d), beta=randn(c, dtype=dtype, device=d),
                eps=1e-5)


def good_gelu(d, dtype=torch.float32, shape=(2, 3, 24)):
    return dict(x=randn(*shape, dtype=dtype, device=d),
                bias=randn(shape[-1], dtype=dtype, device=d), tanh_approximation=False)


def good_affine(d, dtype=torch.float32, shape=(2, 3, 24)):
    c = shape[-1]
    return dict(x=randn(*shape, dtype=dtype, device=d), bias=randn(c, dtype=dtype, device=d),
                residual=randn(*shape, dtype=dtype, device=d),
                scale=randn(c, dtype=dtype, device=d), shift=randn(c, dtype=dtype, device=d))


def good_remove_padding(d, dtype=torch.float32, batch=3, seqlen=5, channels=8, lens=(5, 0, 2)):
    return dict(x=randn(batch, seqlen, channels, dtype=dtype, device=d), lens=ints(list(lens), d))


def good_restore_padding(d, dtype=torch.float32, lens=(5, 0, 2), seqlen=5, channels=8):
    cu = [0] + [sum(lens[: i + 1]) for i in range(len(lens))]
    return dict(packed=randn(cu[-1], channels, dtype=dtype, device=d), cu_seqlens=ints(cu, d),
                seqlen=seqlen)


def good_causal_dot_product(d, dtype=torch.float32, batch=2, heads=2, seqlen=6, dim_qk=8,
                            dim_v=12):
    return dict(q=randn(batch, heads, seqlen, dim_qk, dtype=dtype, device=d),
                k=randn(batch, heads, seqlen, dim_qk, dtype=dtype, device=d),
                v=randn(batch, heads, seqlen, dim_v, dtype=dtype, device=d))


def _caches(d, dtype, num_blocks, block_size, heads_kv, dim, fp8=False):
    """Random caches of `dtype`, or with fp8=True uint8 caches of random e4m3fn bytes (fp8="e5m2":
    of e5m2 bytes)."""
    if fp8:
        fmt = torch.float8_e5m2 if fp8 == "e5m2" else torch.float8_e4m3fn
        return tuple(randn(num_blocks, block_size, heads_kv, dim, device=d)
                     .to(fmt).view(torch.uint8) for _ in range(2))
    return (randn(num_blocks, block_size, heads_kv, dim, dtype=dtype, device=d),
            randn(num_blocks, block_size, heads_kv, dim, dtype=dtype, device=d))


def _scales(d, heads_kv, fp8):
    """k_scale per tensor [1] and v_scale per head [Hkv] for an fp8 cache, else None; and the
    fp8_e5m2 flag (fp8="e5m2": a uint8 cache of e5m2 bytes)."""
    if not fp8:
        return dict(k_scale=None, v_scale=None, fp8_e5m2=False)
    return dict(k_scale=torch.tensor([0.5], device=d),
                v_scale=torch.rand(heads_kv, device=d) + 0.5, fp8_e5m2=fp8 == "e5m2")


def dequantised(a, name):
    """key_cache or value_cache as its values: an fp8 cache's bytes times its scales (float64)."""
    cache = a[name]
    if cache.dtype != torch.uint8:
        return cache
    scale = a["k_scale" if name == "key_cache" else "v_scale"]
    values = cache.view(torch.float8_e5m2 if a["fp8_e5m2"] else torch.float8_e4m3fn).double()
    return values if scale is None else values * scale.double()[:, None]


def _tables(lens, block_size, d, num_blocks):
    """Block tables for sequences of `lens` tokens, each using blocks from the end of the cache
    backwards (so ids are not simply the row index), unused columns -1."""
    max_blocks = max([1] + [(n + block_size - 1) // block_size for n in lens])
    tables, next_block = [], num_blocks - 1
    for n in lens:
        used = (n + block_size - 1) // block_size
        row = list(range(next_block, next_block - used, -1))
        next_block -= used
        tables.append(row + [-1] * (max_blocks - used))
    return ints(tables, d) if tables else torch.zeros(0, max_blocks, dtype=torch.int32, device=d)


def good_reshape_and_cache(d, dtype=torch.float32, tokens=3, heads_kv=2, dim=40, num_blocks=4,
                           block_size=8, fp8=False):
    key_cache, value_cache = _caches(d, dtype, num_blocks, block_size, heads_kv, dim, fp8)
    slots = [(5 * t + 3) % (num_blocks * block_size) for t in range(tokens)]
    if tokens > 1:
        slots[1] = -1  # skipped
    return dict(key=randn(tokens, heads_kv, dim, dtype=dtype, device=d),
                value=randn(tokens, heads_kv, dim, dtype=dtype, device=d),
                key_cache=key_cache, value_cache=value_cache,
                slot_mapping=ints(slots, d, torch.int64), check_slots=True,
                **_scales(d, heads_kv, fp8))


# The paged good calls use the sliding window (narrower than the contexts, its edge mid-block) and
# the soft-cap with ALiBi, as the flash ones do.
def good_paged_attention(d, dtype=torch.float32, lens=(20, 9, 0), heads_q=4, heads_kv=2, dim=None,
                         block_size=None, num_blocks=6, alibi=True, fp8=False, window_left=11,
                         softcap=3.0):
    dim = dim or PAGED_HEAD_DIMS[0]
    block_size = block_size or PAGED_BLOCK_SIZES[0]
    needed = sum((n + block_size - 1) // block_size for n in lens)
    num_blocks = max(num_blocks, needed)
    key_cache, value_cache = _caches(d, dtype, num_blocks, block_size, heads_kv, dim, fp8)
    return dict(query=randn(len(lens), heads_q, dim, dtype=dtype, device=d), key_cache=key_cache,
                value_cache=value_cache, block_tables=_tables(lens, block_size, d, num_blocks),
                context_lens=ints(list(lens), d), scale=0.125, max_context_len=max(lens, default=0),
                alibi_slopes=torch.rand(heads_q, device=d) if alibi else None, check_indices=True,
                **_scales(d, heads_kv, fp8), window_left=window_left, softcap=softcap)


def good_paged_prefill_attention(d, dtype=torch.float32, lens=(20, 9, 4), chunks=(3, 2, 0),
                                 heads_q=4, heads_kv=2, dim=None, block_size=None, num_blocks=6,
                                 alibi=True, fp8=False, window_left=5, softcap=3.0,
                                 own_rows=True):
    """A prefill call; `own_rows`: with the chunks' own keys and values (key, value), which
    differ from what the random caches hold at their positions, so the reference (which reads
    them) fails a kernel that reads the cache instead."""
    dim = dim or PAGED_HEAD_DIMS[0]
    block_size = block_size or PAGED_BLOCK_SIZES[0]
    needed = sum((n + block_size - 1) // block_size for n in lens)
    num_blocks = max(num_blocks, needed)
    key_cache, value_cache = _caches(d, dtype, num_blocks, block_size, heads_kv, dim, fp8)
    cu = [0] + [sum(chunks[: i + 1]) for i in range(len(chunks))]
    return dict(query=randn(cu[-1], heads_q, dim, dtype=dtype, device=d), key_cache=key_cache,
                value_cache=value_cache, block_tables=_tables(lens, block_size, d, num_blocks),
                cu_seqlens_q=ints(cu, d), context_lens=ints(list(lens), d), scale=0.125,
                max_seqlen_q=max(chunks, default=0), alibi_slopes=torch.rand(heads_q, device=d) if alibi else None,
                check_indices=True, **_scales(d, heads_kv, fp8), window_left=window_left,
                softcap=softcap, causal=True, window_right=-1,
                key=randn(cu[-1], heads_kv, dim, dtype=dtype, device=d) if own_rows else None,
                value=randn(cu[-1], heads_kv, dim, dtype=dtype, device=d) if own_rows else None)


def _stored(x, cache, scale, e5m2=False):
    """What reshape_and_cache stores of rows x [.., Hkv, D] in `cache`: x itself, or for an fp8
    cache torch's own e4m3fn (e5m2) cast of x / scale, saturated at +-448 (+-57344)."""
    if cache.dtype != torch.uint8:
        return x
    return reference.fp8_quantise(x, None if scale is None else scale.cpu(), e5m2)


def check_reshape_and_cache(a, _outputs):
    # Every token with a slot has its key and value in that slot of the caches (that the other
    # slots are left alone is test_paged.py's check).
    slots = a["slot_mapping"].cpu().tolist()
    kc = a["key_cache"].reshape(-1, *a["key_cache"].shape[2:]).cpu()
    vc = a["value_cache"].reshape(-1, *a["value_cache"].shape[2:]).cpu()
    keys = _stored(a["key"].cpu(), kc, a["k_scale"], a["fp8_e5m2"])
    values = _stored(a["value"].cpu(), vc, a["v_scale"], a["fp8_e5m2"])
    for t, s in enumerate(slots):
        if s >= 0:
            assert torch.equal(kc[s], keys[t]) and torch.equal(vc[s], values[t])


def _compare(expected_fn):
    """A check of an operator's outputs against a float64 reference of its arguments."""

    def check(a, outputs):
        expected = expected_fn(a)
        if not isinstance(expected, tuple):
            expected = (expected,)
        for i, (out, exp) in enumerate(zip(outputs, expected)):
            if out.dtype == torch.int32:
                assert torch.equal(out.cpu(), exp.cpu()), "output %d" % i
            else:
                # The logsumexp is float32 whatever the inputs' dtype.
                assert_close(out.cpu(), exp.cpu(), out.dtype if i == 0 else torch.float32,
                             "output %d" % i)
        assert len(outputs) == len(expected)

    return check


def good_decoder_layer(d, dtype=torch.float32, lens=(20, 9, 4), chunks=(3, 1, 2), hidden=32,
                       heads_q=4, heads_kv=2, dim=16, inter=24, block_size=None, num_blocks=6):
    """A LLaMA-style layer (RMSNorm, SwiGLU, RoPE, window 5, soft-cap 3) over a mixed batch:
    chunks of 3 and 2 new tokens and one decode row. `_before` keeps what the call overwrites."""
    block_size = block_size or PAGED_BLOCK_SIZES[0]
    num_blocks = max(num_blocks, sum((n + block_size - 1) // block_size for n in lens))
    key_cache, value_cache = _caches(d, dtype, num_blocks, block_size, heads_kv, dim)
    tables = _tables(lens, block_size, d, num_blocks)
    positions, slots = [], []
    for s, (ctx, n) in enumerate(zip(lens, chunks)):
        for p in range(ctx - n, ctx):
            positions.append(p)
            slots.append(int(tables[s, p // block_size]) * block_size + p % block_size)
    tokens = len(positions)
    cu = [0] + [sum(chunks[: i + 1]) for i in range(len(chunks))]
    inv = 1.0 / 10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    args = dict(
        hidden=randn(tokens, hidden, dtype=dtype, device=d), positions=ints(positions, d, torch.int64),
        key_cache=key_cache, value_cache=value_cache, block_tables=tables, cu_seqlens_q=ints(cu, d),
        context_lens=ints(list(lens), d), slot_mapping=ints(slots, d, torch.int64), k_scale=None,
        v_scale=None, attn_norm_weight=1 + 0.1 * randn(hidden, device=d), attn_norm_bias=None,
        qkv_weight=randn((heads_q + 2 * heads_kv) * dim, hidden, dtype=dtype, device=d) / 6,
        qkv_bias=None, rope_cos_sin=reference.rope_cos_sin(64, inv).to(d),
        out_weight=randn(hidden, heads_q * dim, dtype=dtype, device=d) / 8, out_bias=None,
        attn_out_norm_weight=None, mlp_norm_weight=1 + 0.1 * randn(hidden, device=d),
        mlp_norm_bias=None, up_weight=randn(2 * inter, hidden, dtype=dtype, device=d) / 6,
        up_bias=None, down_weight=randn(hidden, inter, dtype=dtype, device=d) / 5, down_bias=None,
        mlp_out_norm_weight=None, num_heads=heads_q, norm_type=reference.NORM_RMS,
        activation=reference.ACT_SWIGLU, norm_eps=1e-5, scale=0.25, window_left=5, softcap=3.0,
        rope_interleaved=False, check_indices=True, max_seqlen_q=max(chunks), fresh_chunks=False,
        fp8_e5m2=False)
    args["_before"] = {k: args[k].clone() for k in ("hidden", "key_cache", "value_cache")}
    return args


def check_decoder_layer(a, outputs):
    # The call returns nothing: the stream is updated in place, against the float64 layer of
    # reference.py on the values the call started from (test_decoder_layer.py has the families).
    assert outputs == ()
    b = a["_before"]
    q, k, v = reference.decoder_layer_qkv(b["hidden"].cpu(), a["positions"].cpu(),
                                          {n: t.cpu() if isinstance(t, torch.Tensor) else t
                                           for n, t in a.items()}, a["num_heads"],
                                          b["key_cache"].shape[2], a["norm_type"], a["norm_eps"],
                                          a["rope_interleaved"])
    slots = a["slot_mapping"].cpu()
    kc = reference.write_cache(b["key_cache"].cpu().double(), k, slots)
    vc = reference.write_cache(b["value_cache"].cpu().double(), v, slots)
    w = {n: t.cpu() if isinstance(t, torch.Tensor) else t for n, t in a.items()}
    expected = reference.decoder_layer_rest(
        b["hidden"].cpu(), q, kc, vc, w["block_tables"], w["cu_seqlens_q"], w["context_lens"], w,
        a["norm_type"], a["activation"], a["norm_eps"], a["scale"], a["window_left"], a["softcap"])
    assert_close(a["hidden"].cpu(), expected, a["hidden"].dtype, "hidden")


def good_embed_tokens(d, dtype=torch.float32, tokens=5, hidden=24, vocab=11, positions=7):
    return dict(hidden=torch.zeros(tokens, hidden, dtype=dtype, device=d),
                token_ids=torch.randint(0, vocab, (tokens,), device=d),
                embedding=randn(vocab, hidden, dtype=dtype, device=d),
                positions=torch.randint(0, positions, (tokens,), device=d),
                position_embedding=randn(positions, hidden, dtype=dtype, device=d),
                scale=1.5, check_indices=True)


def check_embed_tokens(a, _outputs):
    expected = a["embedding"].double()[a["token_ids"]] * 1.5 \
        + a["position_embedding"].double()[a["positions"]]
    assert_close(a["hidden"].cpu(), expected.cpu(), a["hidden"].dtype)


def good_decoder_head(d, dtype=torch.float32, tokens=6, hidden=24, vocab=13):
    return dict(logits=torch.zeros(3, vocab, device=d),
                hidden=randn(tokens, hidden, dtype=dtype, device=d),
                rows=ints([5, 0, 2], d, torch.int64),
                norm_weight=randn(hidden, device=d), norm_bias=randn(hidden, device=d),
                head_weight=randn(vocab, hidden, dtype=dtype, device=d),
                norm_type=1, norm_eps=1e-5, softcap=0.0, check_indices=True)


def check_decoder_head(a, _outputs):
    x = a["hidden"].double()[a["rows"]]
    x = x - x.mean(-1, keepdim=True)
    x = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + a["norm_eps"])
    x = x * a["norm_weight"].double() + a["norm_bias"].double()
    assert_close(a["logits"].cpu(), (x @ a["head_weight"].double().T).cpu(), a["hidden"].dtype)


def good_copy_from_host(d, dtype=torch.float32, n=9):
    return dict(dst=torch.zeros(n, dtype=dtype, device=d), src=randn(n, dtype=dtype))


def check_copy_from_host(a, _outputs):
    assert torch.equal(a["dst"].cpu(), a["src"])
def good_sample_tokens(d, dtype=torch.float32, batch=6, vocab=50):
    """Mixed rows: greedy, sampled, top-k, top-p; ids poisoned."""
    return dict(ids=torch.full((batch,), -1, dtype=torch.int64, device=d),
                logits=randn(batch, vocab, dtype=dtype, device=d),
                temperature=torch.tensor([0.0, 1.0, 0.7, 1.3, 0.0, 2.0][:batch] + [1.0] * (batch - 6),
                                         device=d),
                top_k=ints([0, 0, 5, 0, 3, 1][:batch] + [0] * (batch - 6), d),
                top_p=torch.tensor([1.0, 0.9, 1.0, 0.5, 0.2, 1.0][:batch] + [1.0] * (batch - 6),
                                   device=d),
                seeds=ints(list(range(7, 7 + batch)), d, torch.int64),
                offsets=ints([3] * batch, d, torch.int64))


def check_sample_tokens(a, _outputs):
    # Greedy rows: torch.argmax; sampled rows: inside the float64 distribution's support (its
    # nucleus a little wider than the kernel's fixed-point one, test_sample_tokens.py).
    ids = a["ids"].cpu()
    for b in range(ids.shape[0]):
        t = a["temperature"][b].item()
        if t == 0:
            assert ids[b].item() == a["logits"][b].argmax().item(), b
            continue
        probs = reference.sampling_probabilities(a["logits"][b], t, a["top_k"][b].item(),
                                                 min(1.0, a["top_p"][b].item() + 1e-5))
        assert 0 <= ids[b].item() < probs.numel() and probs[ids[b]] > 0, (b, ids[b].item())
def good_encoder_layer(d, dtype=torch.float32, lens=(5, 1, 3), hidden=32, heads=4, inter=48):
    """A BERT layer over three packed sequences; `_before` keeps the stream the call overwrites."""
    tokens = sum(lens)
    cu = [0] + [sum(lens[: i + 1]) for i in range(len(lens))]
    vec = lambda n, around=0.0: around + 0.1 * randn(n, device=d)
    args = dict(
        hidden=randn(tokens, hidden, dtype=dtype, device=d), cu_seqlens=ints(cu, d),
        max_seqlen=max(lens), qkv_weight=randn(3 * hidden, hidden, dtype=dtype, device=d) / 6,
        qkv_bias=vec(3 * hidden), out_weight=randn(hidden, hidden, dtype=dtype, device=d) / 6,
        out_bias=vec(hidden), attn_norm_weight=vec(hidden, 1.0), attn_norm_bias=vec(hidden),
        up_weight=randn(inter, hidden, dtype=dtype, device=d) / 6, up_bias=vec(inter),
        down_weight=randn(hidden, inter, dtype=dtype, device=d) / 7, down_bias=vec(hidden),
        ffn_norm_weight=vec(hidden, 1.0), ffn_norm_bias=vec(hidden), num_heads=heads,
        norm_eps=1e-12, scale=0.35, gelu_tanh=False)
    args["_before"] = args["hidden"].clone()
    return args


def check_encoder_layer(a, outputs):
    # In place, against the float64 layer of reference.py (test_encoder_layer.py has the shapes).
    assert outputs == ()
    w = {n: t.cpu().float() if isinstance(t, torch.Tensor) else t for n, t in a.items()}
    expected = reference.encoder_layer(a["_before"].cpu().float(), w["cu_seqlens"], w,
                                       a["num_heads"], a["norm_eps"], a["scale"], a["gelu_tanh"])
    assert_close(a["hidden"].cpu(), expected, a["hidden"].dtype, "hidden")


def good_gemm_pack_weight(d, rows=24, cols=40, mode=0):
    return dict(weight=randn(rows, cols, device=d), mode=mode)


def check_gemm_pack_weight(a, outputs):
    # A packed weight is good for one thing, encoder_layer's GEMMs: the layer with the blob as its
    # up projection meets the float64 layer with the weight itself.
    (blob,) = outputs
    assert blob.dtype == torch.uint8 and blob.dim() == 1
    w = a["weight"].cpu()
    args = good_encoder_layer("cpu", hidden=w.shape[1], heads=4, inter=w.shape[0])
    args["up_weight"] = blob
    run("encoder_layer", args)
    args["up_weight"] = w
    tolerance = torch.bfloat16 if a["mode"] == 1 else torch.float32
    expected = reference.encoder_layer(args["_before"], args["cu_seqlens"], args,
                                       args["num_heads"], args["norm_eps"], args["scale"],
                                       args["gelu_tanh"])
    assert_close(args["hidden"], expected, tolerance, "layer with the packed weight")


@dataclass
class Operator:
    good: Callable  # (device, **shape) -> {argument: value}, in any order
    check: Callable  # (arguments, outputs) -> None, asserting the outputs


OPS = {
    "flash_attention": Operator(good_flash_attention, _compare(
        lambda a: reference.flash_attention(a["q"], a["k"], a["v"], a["kv_lens"], a["scale"],
                                            a["causal"], a["window_left"], a["window_right"],
                                            a["softcap"], a["alibi_slopes"]))),
    "flash_attention_varlen": Operator(good_flash_attention_varlen, _compare(
        lambda a: reference.flash_attention_varlen(a["q"], a["k"], a["v"], a["cu_seqlens_q"],
                                                   a["cu_seqlens_k"], a["scale"], a["causal"],
                                                   a["window_left"], a["window_right"],
                                                   a["softcap"], a["alibi_slopes"]))),
    "flash_attention_fp8": Operator(good_flash_attention_fp8, check_flash_attention_fp8),
    "bert_attention": Operator(good_bert_attention, _compare(
        lambda a: reference.bert_attention(a["qkv"], a["qkv_bias"], a["kv_lens"], a["num_heads"],
                                           a["scale"]))),
    "add_bias_residual_layernorm": Operator(good_layernorm, _compare(
        lambda a: reference.add_bias_residual_layernorm(a["x"], a["bias"], a["residual"],
                                                        a["gamma"], a["beta"], a["eps"]))),
    "add_bias_gelu": Operator(good_gelu, _compare(
        lambda a: reference.add_bias_gelu(a["x"], a["bias"], a["tanh_approximation"]))),
    "add_bias_residual_affine": Operator(good_affine, _compare(
        lambda a: reference.add_bias_residual_affine(a["x"], a["bias"], a["residual"], a["scale"],
                                                     a["shift"]))),
    "remove_padding": Operator(good_remove_padding, _compare(
        lambda a: reference.remove_padding(a["x"].double(), a["lens"]))),
    "restore_padding": Operator(good_restore_padding, _compare(
        lambda a: reference.restore_padding(a["packed"].double(), a["cu_seqlens"], a["seqlen"]))),
    "causal_dot_product": Operator(good_causal_dot_product, _compare(
        lambda a: reference.causal_dot_product(a["q"], a["k"], a["v"]))),
    "reshape_and_cache": Operator(good_reshape_and_cache, check_reshape_and_cache),
    "paged_attention": Operator(good_paged_attention, _compare(
        lambda a: reference.paged_attention(a["query"], dequantised(a, "key_cache"),
                                            dequantised(a, "value_cache"),
                                            a["block_tables"], a["context_lens"], a["scale"],
                                            a["alibi_slopes"], a["window_left"], a["softcap"]))),
    "paged_prefill_attention": Operator(good_paged_prefill_attention, _compare(
        lambda a: reference.paged_prefill_attention(
            a["query"], dequantised(a, "key_cache"), dequantised(a, "value_cache"),
            a["block_tables"], a["cu_seqlens_q"],
            a["context_lens"], a["scale"], a["alibi_slopes"], a["window_left"], a["softcap"],
            a["causal"], a["window_right"], a["key"], a["value"]))),
    "decoder_layer": Operator(good_decoder_layer, check_decoder_layer),
    "embed_tokens": Operator(good_embed_tokens, check_embed_tokens),
    "decoder_head": Operator(good_decoder_head, check_decoder_head),
    "copy_from_host": Operator(good_copy_from_host, check_copy_from_host),
    "sample_tokens": Operator(good_sample_tokens, check_sample_tokens),
    "encoder_layer": Operator(good_encoder_layer, check_encoder_layer),
    "gemm_pack_weight": Operator(good_gemm_pack_weight, check_gemm_pack_weight),
}

# The operators that take CUDA tensors only, with their own tests (test_step_ops.py: named
# refusals of CPU tensors, of bad arenas and graph ids; a captured step against its eager calls).
CUDA_ONLY = {"cuda_graph_measure_begin", "cuda_graph_measure_end", "cuda_graph_capture_begin",
             "cuda_graph_capture_end", "cuda_graph_replay", "cuda_graph_release"}

# Operators with a CPU kernel only: on another device their calls are refused, naming it.
CPU_ONLY = {"encoder_layer": "expected a tensor on a device with an encoder_layer kernel",
            "gemm_pack_weight": "expected a cpu tensor"}


# Operators whose CUDA kernel runs on Hopper (compute capability 9.0) only: on another GPU every
# CUDA call is refused naming q (test_flash_fp8.py has the kernel's own refusals).
HOPPER_ONLY = {"flash_attention_fp8"}
IS_HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


# ---- changes a row makes to a good call ---------------------------------------------------------


def other_device(device):
    """A device other than `device` for the rows that mix devices: the GPU's counterpart where
    there is one, else PyTorch's `meta` device (its tensors have no storage; the bindings see
    an unsupported device, reached through djl_attn_call only)."""
    if device != "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "meta"


def set_arg(name, make):
    """Replaces argument `name` by make(old value, device)."""

    def change(a, d):
        a[name] = make(a[name], d)

    return change


def set_args(**makes):
    def change(a, d):
        for name, make in makes.items():
            a[name] = make(a[name], d)

    return change


def value(v):
    return lambda _old, _d: v


def drop_dim(t, _d):
    return t[0]


def add_dim(t, _d):
    return t[None]


def to_dtype(dtype):
    return lambda t, _d: t.to(dtype)


def to_other_device(t, d):
    return t.to(other_device(d))


def strided_last_dim(t, _d):
    """The same values with a last-dim stride of 2."""
    wide = torch.empty(*t.shape, 2, dtype=t.dtype, device=t.device)
    wide[..., 0] = t
    return wide[..., 0]


def strided(t, _d):
    """The same values, the first dim with double its stride (last dim still contiguous)."""
    wide = torch.empty(t.shape[0], 2, *t.shape[1:], dtype=t.dtype, device=t.device)
    wide[:, 0] = t
    return wide[:, 0]


def resize(dim, size):
    """A new random tensor like the old one with dim `dim` of `size`."""

    def make(t, _d):
        shape = list(t.shape)
        shape[dim] = size
        if t.is_floating_point():
            return randn(*shape, dtype=t.dtype, device=t.device)
        return torch.zeros(shape, dtype=t.dtype, device=t.device)

    return make


def expand_to(*shape):
    """A tensor of `shape` with no memory of its own (stride 0 in every dim but the last): sizes
    past any real allocation, for the limits on sequence counts and grids."""
    return lambda t, _d: randn(shape[-1], dtype=t.dtype, device=t.device).expand(*shape)


def set_item(index, v):
    def make(t, _d):
        t = t.clone()
        t[index] = v
        return t

    return make


def unaligned(t, _d):
    """The same values in a contiguous view one element past its storage's (aligned) start."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = flat[1:].view(t.shape)
    view.copy_(t)
    return view


# ---- the table -----------------------------------------------------------------------------------


@dataclass
class Row:
    op: str
    what: str  # the row's id
    change: Callable  # (arguments, device) -> None
    arg: str  # the argument the message names
    rule: str  # the rest of the message must contain this
    base: dict = field(default_factory=dict)  # shape of the good call the row changes
    mixes_devices: bool = False

    @property
    def id(self):
        return "%s-%s" % (self.op, self.what)


def rows_for(op, arg, entries, **common):
    return [Row(op, what, change, arg if a is None else a, rule, **{**common, **extra})
            for what, change, a, rule, extra in entries]


def row(what, change, rule, arg=None, **extra):
    return (what, change, arg, rule, extra)


def device_row(what, name, arg=None, ref="q", **extra):
    return row(what, set_arg(name, to_other_device), "expected the device of %s (" % ref,
               arg=arg or name, mixes_devices=True, **extra)


BIG = 2**30 + 1  # one past the longest sequence the flash kernels index with 32-bit ints



def SOFTCAP_AND_SCALE_ROWS():
    """The soft-cap and scale rows the flash and paged attention operators share (one check,
    common/check.h)."""
    return [
        row("softcap-negative", set_arg("softcap", value(-1.0)),
            "expected a finite value >= 0 (0: none), got -1", arg="softcap"),
        row("softcap-nan", set_arg("softcap", value(float("nan"))),
            "expected a finite value >= 0 (0: none), got nan", arg="softcap"),
        row("softcap-inf", set_arg("softcap", value(float("inf"))),
            "expected a finite value >= 0 (0: none), got inf", arg="softcap"),
        # Finite doubles that float32 cannot hold: 1e39 would become inf (every score NaN),
        # 1e-46 would become 0 (the cap silently off).
        row("softcap-float-overflow", set_arg("softcap", value(1e39)),
            "expected 0 (none) or a value float32 holds as a normal number", arg="softcap"),
        row("softcap-float-underflow", set_arg("softcap", value(1e-46)),
            "expected 0 (none) or a value float32 holds as a normal number", arg="softcap"),
        row("scale-float-overflow", set_arg("scale", value(1e39)),
            "expected a finite value (as float32), got 1e+39", arg="scale"),
    ]


def FEATURE_ROWS(heads_q, batch, batch_name):
    """The rows of the arguments both flash operators end with: the sliding window, the
    soft-cap and the ALiBi slopes (the good calls use all three)."""
    return [
        row("window-left-below-minus-one", set_arg("window_left", value(-2)),
            "expected -1 (unbounded) or a value >= 0, got -2", arg="window_left"),
        row("window-right-below-minus-one", set_arg("window_right", value(-5)),
            "expected -1 (unbounded) or a value >= 0, got -5", arg="window_right"),
        *SOFTCAP_AND_SCALE_ROWS(),
        row("alibi-float16", set_arg("alibi_slopes", to_dtype(torch.float16)),
            "expected dtype float32, got float16", arg="alibi_slopes"),
        row("alibi-heads", set_arg("alibi_slopes", resize(-1, heads_q + 1)),
            "expected size %d for Hq (the heads of q)" % heads_q, arg="alibi_slopes"),
        row("alibi-batch", set_arg("alibi_slopes", lambda t, d: randn(batch + 1, heads_q, device=d)),
            "expected size %d for %s (the batch)" % (batch, batch_name), arg="alibi_slopes"),
        row("alibi-rank", set_arg("alibi_slopes", lambda t, d: randn(1, batch, heads_q, device=d)),
            "expected 1 dim [Hq] or 2 dims [B, Hq], got 3", arg="alibi_slopes"),
        row("alibi-strided", set_arg("alibi_slopes", lambda t, d: randn(2 * heads_q, device=d)[::2]),
            "expected a contiguous tensor, got stride 2 at dim 0", arg="alibi_slopes"),
        device_row("alibi-device", "alibi_slopes"),
    ]


FLASH = "flash_attention"
BAD_CALLS = rows_for(FLASH, "q", [
    row("q-rank", set_arg("q", drop_dim), "expected 4 dims [B, Sq, Hq, D], got 3 dims"),
    row("k-rank", set_arg("k", add_dim), "expected 4 dims [B, Sk, Hkv, D], got 5 dims", arg="k"),
    row("v-rank", set_arg("v", drop_dim), "expected 4 dims [B, Sk, Hkv, D], got 3 dims", arg="v"),
    row("k-batch", set_arg("k", resize(0, 3)), "expected size 2 for B (the batch of q)", arg="k"),
    row("v-batch", set_arg("v", resize(0, 1)), "expected size 2 for B (the batch of q)", arg="v"),
    row("k-head-dim", set_arg("k", resize(3, 16)), "expected size 24 for D (the head dim of q)",
        arg="k"),
    row("v-head-dim", set_arg("v", resize(3, 25)), "expected size 24 for D (the head dim of q)",
        arg="v"),
    row("v-seqlen", set_arg("v", resize(1, 6)), "expected size 7 for Sk (the sequence length of k)",
        arg="v"),
    row("v-heads", set_arg("v", resize(2, 1)), "expected size 3 for Hkv (the heads of k)", arg="v"),
    row("heads-not-dividing", set_args(k=resize(2, 4), v=resize(2, 4)),
        "expected a number of heads Hkv >= 1 that divides the query heads Hq = 6, got Hkv = 4",
        arg="k"),
    row("zero-kv-heads", set_args(k=resize(2, 0), v=resize(2, 0)),
        "expected a number of heads Hkv >= 1", arg="k"),
    row("head-dim-too-large",
        set_args(q=resize(3, FLASH_MAX_HEAD_DIM + 1), k=resize(3, FLASH_MAX_HEAD_DIM + 1),
                 v=resize(3, FLASH_MAX_HEAD_DIM + 1)),
        "expected a head dim D in [1, %d], got %d" % (FLASH_MAX_HEAD_DIM, FLASH_MAX_HEAD_DIM + 1)),
    row("head-dim-zero", set_args(q=resize(3, 0), k=resize(3, 0), v=resize(3, 0)),
        "expected a head dim D in [1, %d], got 0" % FLASH_MAX_HEAD_DIM),
    row("q-float64", set_arg("q", to_dtype(torch.float64)),
        "expected dtype in %s, got float64" % DTYPE_LIST),
    # Dtypes outside the library's own list are named too (the shim's dtype getters).
    row("q-bool", set_arg("q", to_dtype(torch.bool)), "expected dtype in %s, got bool" % DTYPE_LIST),
    row("q-uint8", set_arg("q", to_dtype(torch.uint8)),
        "expected dtype in %s, got uint8" % DTYPE_LIST),
    row("q-int32", set_args(q=to_dtype(torch.int32), k=to_dtype(torch.int32),
                            v=to_dtype(torch.int32)), "expected dtype in %s, got int32" % DTYPE_LIST),
    row("k-dtype", set_arg("k", to_dtype(torch.float16)),
        "expected the dtype of q (float32), got float16", arg="k"),
    row("v-dtype", set_arg("v", to_dtype(torch.bfloat16)),
        "expected the dtype of q (float16), got bfloat16", arg="v", base=dict(dtype=torch.float16)),
    device_row("k-device", "k"),
    device_row("v-device", "v"),
    device_row("kv-lens-device", "kv_lens"),
    row("q-strided-last-dim", set_arg("q", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2"),
    row("k-strided-last-dim", set_arg("k", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2", arg="k"),
    row("v-transposed", set_arg("v", lambda t, _d: t.transpose(1, 3).contiguous().transpose(1, 3)),
        "expected a contiguous last dim (stride 1)", arg="v"),
    row("q-seqlen-past-2^30", set_arg("q", expand_to(1, BIG, 6, 24)), "expected Sq <= 2^30",
        base=dict(batch=1, kv_lens=None)),
    row("k-seqlen-past-2^30", set_args(k=expand_to(1, BIG, 3, 24), v=expand_to(1, BIG, 3, 24)),
        "expected Sk <= 2^30", arg="k", base=dict(batch=1, kv_lens=None)),
    # More 64-row query tiles than one CUDA grid holds: a CUDA-only limit once, now the binding's.
    row("query-tiles-past-a-grid",
        set_args(q=expand_to(2**16, 2**22, 1, 8), k=expand_to(2**16, 1, 1, 8),
                 v=expand_to(2**16, 1, 1, 8)),
        "expected B * Hq * ceil(Sq / 64) <= 2^31 - 1 (the query tiles of one CUDA grid), "
        "got B = 65536, Hq = 1, Sq = 4194304",
        base=dict(batch=1, heads_q=1, heads_kv=1, dim=8, kv_lens=None)),
    row("scale-nan", set_arg("scale", value(float("nan"))), "expected a finite value, got nan",
        arg="scale"),
    row("scale-inf", set_arg("scale", value(float("inf"))), "expected a finite value, got inf",
        arg="scale"),
    row("kv-lens-rank", set_arg("kv_lens", add_dim), "expected 1 dims [B], got 2 dims",
        arg="kv_lens"),
    row("kv-lens-size", set_arg("kv_lens", lambda t, d: ints([7, 3, 1], d)),
        "expected size 2 for B (the batch of q)", arg="kv_lens"),
    row("kv-lens-int64", set_arg("kv_lens", to_dtype(torch.int64)),
        "expected dtype int32, got int64", arg="kv_lens"),
    row("kv-lens-strided", set_arg("kv_lens", strided_last_dim),
        "expected a contiguous tensor, got stride 2 at dim 0", arg="kv_lens"),
    row("kv-lens-past-sk", set_arg("kv_lens", set_item(1, 8)),
        "expected values in [0, Sk = 7], got 8 at index 1", arg="kv_lens"),
    row("kv-lens-negative", set_arg("kv_lens", set_item(0, -1)),
        "expected values in [0, Sk = 7], got -1 at index 0", arg="kv_lens"),
] + FEATURE_ROWS(heads_q=6, batch=2, batch_name="B"))

VARLEN = "flash_attention_varlen"
BAD_CALLS += rows_for(VARLEN, "q", [
    row("q-rank", set_arg("q", add_dim), "expected 3 dims [total_q, Hq, D], got 4 dims"),
    row("k-rank", set_arg("k", drop_dim), "expected 3 dims [total_k, Hkv, D], got 2 dims", arg="k"),
    row("v-total", set_arg("v", resize(0, 10)),
        "expected size 11 for total_k (the sequence length of k)", arg="v"),
    row("k-head-dim", set_arg("k", resize(2, 8)), "expected size 24 for D (the head dim of q)",
        arg="k"),
    row("heads-not-dividing", set_args(k=resize(1, 3), v=resize(1, 3)),
        "expected a number of heads Hkv >= 1 that divides the query heads Hq = 4, got Hkv = 3",
        arg="k"),
    row("head-dim-too-large",
        set_args(q=resize(2, FLASH_MAX_HEAD_DIM + 8), k=resize(2, FLASH_MAX_HEAD_DIM + 8),
                 v=resize(2, FLASH_MAX_HEAD_DIM + 8)),
        "expected a head dim D in [1, %d]" % FLASH_MAX_HEAD_DIM),
    row("q-float64", set_arg("q", to_dtype(torch.float64)), "expected dtype in %s" % DTYPE_LIST),
    row("v-dtype", set_arg("v", to_dtype(torch.float16)), "expected the dtype of q (float32)",
        arg="v"),
    device_row("k-device", "k"),
    device_row("cu-seqlens-k-device", "cu_seqlens_k"),
    row("q-strided-last-dim", set_arg("q", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2"),
    row("max-seqlen-q-negative", set_arg("max_seqlen_q", value(-1)),
        "expected a value in [0, total_q = 7], got -1", arg="max_seqlen_q"),
    row("max-seqlen-q-past-total", set_arg("max_seqlen_q", value(8)),
        "expected a value in [0, total_q = 7], got 8", arg="max_seqlen_q"),
    row("max-seqlen-k-past-total", set_arg("max_seqlen_k", value(12)),
        "expected a value in [0, total_k = 11], got 12", arg="max_seqlen_k"),
    row("max-seqlen-q-below-a-length", set_arg("max_seqlen_q", value(3)),
        "expected sequence lengths <= max_seqlen_q = 3, got 4 for sequence 2", arg="cu_seqlens_q"),
    row("scale-nan", set_arg("scale", value(float("nan"))), "expected a finite value",
        arg="scale"),
    row("cu-seqlens-q-rank", set_arg("cu_seqlens_q", add_dim), "expected 1 dims [B + 1]",
        arg="cu_seqlens_q"),
    row("cu-seqlens-q-empty", set_arg("cu_seqlens_q", lambda t, d: t[:0]),
        "expected at least 1 element [B + 1], got 0", arg="cu_seqlens_q"),
    row("cu-seqlens-k-size", set_arg("cu_seqlens_k", lambda t, d: t[:3]),
        "expected size 4 for B + 1 (the size of cu_seqlens_q)", arg="cu_seqlens_k"),
    row("cu-seqlens-q-int64", set_arg("cu_seqlens_q", to_dtype(torch.int64)),
        "expected dtype int32, got int64", arg="cu_seqlens_q"),
    row("cu-seqlens-k-strided", set_arg("cu_seqlens_k", strided_last_dim),
        "expected a contiguous tensor", arg="cu_seqlens_k"),
    row("cu-seqlens-q-start", set_arg("cu_seqlens_q", set_item(0, 1)),
        "expected 0 at index 0, got 1", arg="cu_seqlens_q"),
    row("cu-seqlens-k-decreasing", set_arg("cu_seqlens_k", set_item(2, 4)),
        "expected non-decreasing values, got 4 after 5 at index 2", arg="cu_seqlens_k"),
    row("cu-seqlens-q-end", set_arg("cu_seqlens_q", set_item(3, 6)),
        "expected a last value equal to total_q = 7, got 6", arg="cu_seqlens_q"),
] + FEATURE_ROWS(heads_q=4, batch=3, batch_name="B"))

FP8_ATTN = "flash_attention_fp8"
FP8_DTYPES = "expected dtype in {float8_e4m3fn, uint8}"
BAD_CALLS += rows_for(FP8_ATTN, "q", [
    row("q-rank", set_arg("q", drop_dim), "expected 4 dims [B, Sq, Hq, D], got 3 dims"),
    row("k-rank", set_arg("k", add_dim), "expected 4 dims [B, Sk, Hkv, D], got 5 dims", arg="k"),
    row("v-batch", set_arg("v", resize(0, 1)), "expected size 2 for B (the batch of q)", arg="v"),
    row("v-seqlen", set_arg("v", resize(1, 6)), "expected size 7 for Sk (the sequence length of k)",
        arg="v"),
    row("k-head-dim", set_arg("k", resize(3, 64)), "expected size 128 for D (the head dim of q)",
        arg="k"),
    row("heads-not-dividing", set_args(k=resize(2, 3), v=resize(2, 3)),
        "expected a number of heads Hkv >= 1 that divides the query heads Hq = 4, got Hkv = 3",
        arg="k"),
    row("head-dim-zero", set_args(q=resize(3, 0), k=resize(3, 0), v=resize(3, 0)),
        "expected a head dim D in [1, %d], got 0" % FLASH_MAX_HEAD_DIM),
    row("head-dim-300", set_args(q=resize(3, 300), k=resize(3, 300), v=resize(3, 300)),
        "expected a head dim D in [1, %d], got 300" % FLASH_MAX_HEAD_DIM),
    # Float inputs are refused, not quantized: the caller owns the scales.
    row("q-float16", set_arg("q", to_dtype(torch.float16)), FP8_DTYPES + ", got float16"),
    row("q-float32", set_args(q=to_dtype(torch.float32), k=to_dtype(torch.float32),
                              v=to_dtype(torch.float32)), FP8_DTYPES + ", got float32"),
    row("q-e5m2", set_args(q=lambda t, d: t.view(torch.float8_e5m2),
                           k=lambda t, d: t.view(torch.float8_e5m2),
                           v=lambda t, d: t.view(torch.float8_e5m2)),
        FP8_DTYPES + ", got float8_e5m2"),
    row("k-float8-of-uint8-q", set_arg("k", lambda t, d: t.view(torch.float8_e4m3fn)),
        "expected the dtype of q (uint8), got float8_e4m3fn", arg="k"),
    row("v-float16", set_arg("v", to_dtype(torch.float16)),
        "expected the dtype of q (uint8), got float16", arg="v"),
    device_row("k-device", "k"),
    device_row("v-device", "v"),
    row("q-strided-last-dim", set_arg("q", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2"),
    row("v-strided-last-dim", set_arg("v", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2", arg="v"),
    row("q-seqlen-past-2^30", set_arg("q", expand_to(1, BIG, 4, 128)), "expected Sq <= 2^30",
        base=dict(batch=1, kv_lens=None)),
    row("scale-zero", set_arg("scale", value(0.0)), "expected a finite value > 0, got 0",
        arg="scale"),
    row("scale-negative", set_arg("scale", value(-0.5)), "expected a finite value > 0, got -0.5",
        arg="scale"),
    row("scale-nan", set_arg("scale", value(float("nan"))), "expected a finite value, got nan",
        arg="scale"),
    row("kv-lens-past-sk", set_arg("kv_lens", set_item(1, 8)),
        "expected values in [0, Sk = 7], got 8 at index 1", arg="kv_lens"),
    row("kv-lens-negative", set_arg("kv_lens", set_item(0, -1)),
        "expected values in [0, Sk = 7], got -1 at index 0", arg="kv_lens"),
    row("kv-lens-int64", set_arg("kv_lens", to_dtype(torch.int64)),
        "expected dtype int32, got int64", arg="kv_lens"),
    device_row("kv-lens-device", "kv_lens"),
    row("q-descale-float64", set_arg("q_descale", to_dtype(torch.float64)),
        "expected dtype float32, got float64", arg="q_descale"),
    row("q-descale-size", set_arg("q_descale", lambda t, d: torch.ones(3, device=d)),
        "expected shape [1] (per tensor) or [B, Hkv], got [3]", arg="q_descale"),
    row("k-descale-batch", set_arg("k_descale", lambda t, d: torch.ones(3, 2, device=d)),
        "expected size 2 for B (the batch of q)", arg="k_descale"),
    row("k-descale-heads", set_arg("k_descale", lambda t, d: torch.ones(2, 4, device=d)),
        "expected size 2 for Hkv (the heads of k)", arg="k_descale"),
    row("v-descale-rank", set_arg("v_descale", add_dim),
        "expected 1 dim [1] or 2 dims [B, Hkv], got 3", arg="v_descale"),
    row("v-descale-float16", set_arg("v_descale", to_dtype(torch.float16)),
        "expected dtype float32, got float16", arg="v_descale"),
    row("v-descale-transposed", set_arg("v_descale", lambda t, d: t.t().contiguous().t()),
        "expected a contiguous tensor", arg="v_descale"),
    device_row("q-descale-device", "q_descale"),
    device_row("k-descale-device", "k_descale"),
    device_row("v-descale-device", "v_descale"),
])

BERT = "bert_attention"
BAD_CALLS += rows_for(BERT, "qkv", [
    row("qkv-rank", set_arg("qkv", add_dim), "expected 3 dims [B, S, 3 * H * D], got 4 dims"),
    row("num-heads-zero", set_arg("num_heads", value(0)), "expected a value >= 1, got 0",
        arg="num_heads"),
    row("width-not-divisible", set_arg("qkv", resize(2, 70)),
        "expected a last dim 3 * H * D divisible by 3 * num_heads (num_heads = 2), got 70"),
    row("width-not-divisible-by-heads", set_arg("num_heads", value(5)),
        "expected a last dim 3 * H * D divisible by 3 * num_heads (num_heads = 5), got 72"),
    row("head-dim-too-large",
        set_args(qkv=resize(2, 3 * (FLASH_MAX_HEAD_DIM + 1)),
                 qkv_bias=resize(0, 3 * (FLASH_MAX_HEAD_DIM + 1)), num_heads=value(1)),
        "expected a head dim D = last dim / (3 * num_heads) in [1, %d], got %d"
        % (FLASH_MAX_HEAD_DIM, FLASH_MAX_HEAD_DIM + 1)),
    row("head-dim-zero", set_args(qkv=resize(2, 0), qkv_bias=resize(0, 0)),
        "expected a head dim D = last dim / (3 * num_heads) in [1, %d], got 0" % FLASH_MAX_HEAD_DIM),
    row("qkv-float64", set_args(qkv=to_dtype(torch.float64), qkv_bias=to_dtype(torch.float64)),
        "expected dtype in %s, got float64" % DTYPE_LIST),
    row("qkv-strided-last-dim", set_arg("qkv", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2"),
    row("seqlen-past-2^30", set_args(qkv=expand_to(1, BIG, 72), kv_lens=value(None)),
        "expected S <= 2^30", base=dict(batch=1)),
    row("query-tiles-past-a-grid",
        set_args(qkv=expand_to(2**17, 2**20, 3 * 64 * 1), qkv_bias=value(None), kv_lens=value(None),
                 num_heads=value(64)),
        "expected B * Hq * ceil(Sq / 64) <= 2^31 - 1", base=dict(batch=1)),
    row("bias-rank", set_arg("qkv_bias", add_dim), "expected 1 dims [3 * H * D], got 2 dims",
        arg="qkv_bias"),
    row("bias-size", set_arg("qkv_bias", resize(0, 71)),
        "expected size 72 for 3 * H * D (the last dim of qkv)", arg="qkv_bias"),
    row("bias-dtype", set_arg("qkv_bias", to_dtype(torch.float32)),
        "expected the dtype of qkv (float16), got float32", arg="qkv_bias",
        base=dict(dtype=torch.float16)),
    device_row("bias-device", "qkv_bias", ref="qkv"),
    row("bias-strided", set_arg("qkv_bias", strided_last_dim), "expected a contiguous tensor",
        arg="qkv_bias"),
    row("scale-inf", set_arg("scale", value(-float("inf"))), "expected a finite value",
        arg="scale"),
    row("kv-lens-size", set_arg("kv_lens", resize(0, 3)), "expected size 2 for B (the batch of qkv)",
        arg="kv_lens"),
    row("kv-lens-dtype", set_arg("kv_lens", to_dtype(torch.float32)),
        "expected dtype int32, got float32", arg="kv_lens"),
    device_row("kv-lens-device", "kv_lens", ref="qkv"),
    row("kv-lens-past-s", set_arg("kv_lens", set_item(1, 6)),
        "expected values in [0, S = 5], got 6 at index 1", arg="kv_lens"),
])

LAYERNORM = "add_bias_residual_layernorm"
BAD_CALLS += rows_for(LAYERNORM, "x", [
    row("x-scalar", set_args(x=lambda t, d: t.reshape(-1)[0], residual=lambda t, d: t.reshape(-1)[0]),
        "expected at least 1 dim [..., C], got 0 dims"),
    row("x-no-channels", set_args(x=resize(2, 0), residual=resize(2, 0), gamma=resize(0, 0),
                                  beta=resize(0, 0), bias=resize(0, 0)),
        "expected a last dim C >= 1, got 0"),
    row("x-float64", set_args(x=to_dtype(torch.float64), residual=to_dtype(torch.float64)),
        "expected dtype in %s, got float64" % DTYPE_LIST),
    row("x-not-contiguous", set_args(x=lambda t, d: t.transpose(0, 1).contiguous().transpose(0, 1)),
        "expected a contiguous tensor, got stride"),
    row("residual-shape", set_arg("residual", resize(1, 4)),
        "expected the shape of x [2, 3, 24], got [2, 4, 24]", arg="residual"),
    row("residual-dtype", set_arg("residual", to_dtype(torch.float16)),
        "expected the dtype of x (float32), got float16", arg="residual"),
    device_row("residual-device", "residual", ref="x"),
    row("residual-strided", set_arg("residual", strided), "expected a contiguous tensor",
        arg="residual"),
    row("gamma-rank", set_arg("gamma", add_dim), "expected 1 dims [C], got 2 dims", arg="gamma"),
    row("gamma-size", set_arg("gamma", resize(0, 23)),
        "expected size 24 for C (the last dim of x), got 23", arg="gamma"),
    # Parameters are the activations' dtype or float32; a third dtype is refused.
    row("gamma-dtype", set_arg("gamma", to_dtype(torch.bfloat16)),
        "expected dtype float16 (the dtype of x) or float32, got bfloat16", arg="gamma",
        base=dict(dtype=torch.float16)),
    row("beta-dtype-unlike-gamma", set_arg("beta", to_dtype(torch.float32)),
        "expected the dtype of gamma (float16), got float32", arg="beta",
        base=dict(dtype=torch.float16)),
    row("bias-size", set_arg("bias", resize(0, 25)), "expected size 24 for C", arg="bias"),
    device_row("gamma-device", "gamma", ref="x"),
    row("beta-strided", set_arg("beta", strided_last_dim), "expected a contiguous tensor",
        arg="beta"),
    row("eps-negative", set_arg("eps", value(-1e-5)), "expected a finite value >= 0",
        arg="eps"),
    row("eps-nan", set_arg("eps", value(float("nan"))), "expected a finite value >= 0, got nan",
        arg="eps"),
])

GELU = "add_bias_gelu"
BAD_CALLS += rows_for(GELU, "x", [
    row("x-scalar", set_arg("x", lambda t, d: t.reshape(-1)[0]),
        "expected at least 1 dim [..., C], got 0 dims"),
    row("x-int64", set_arg("x", to_dtype(torch.int64)), "expected dtype in %s, got int64"
        % DTYPE_LIST),
    row("x-strided", set_arg("x", strided), "expected a contiguous tensor"),
    row("bias-rank", set_arg("bias", add_dim), "expected 1 dims [C]", arg="bias"),
    row("bias-size", set_arg("bias", resize(0, 12)), "expected size 24 for C (the last dim of x)",
        arg="bias"),
    row("bias-dtype", set_arg("bias", to_dtype(torch.float16)),
        "expected dtype bfloat16 (the dtype of x) or float32, got float16", arg="bias",
        base=dict(dtype=torch.bfloat16)),
    device_row("bias-device", "bias", ref="x"),
])

AFFINE = "add_bias_residual_affine"
BAD_CALLS += rows_for(AFFINE, "x", [
    row("x-scalar", set_args(x=lambda t, d: t.reshape(-1)[0], residual=lambda t, d: t.reshape(-1)[0]),
        "expected at least 1 dim [..., C], got 0 dims"),
    row("x-float64", set_args(x=to_dtype(torch.float64), residual=to_dtype(torch.float64)),
        "expected dtype in %s" % DTYPE_LIST),
    row("residual-shape", set_arg("residual", add_dim),
        "expected the shape of x [2, 3, 24], got [1, 2, 3, 24]", arg="residual"),
    row("scale-size", set_arg("scale", resize(0, 8)), "expected size 24 for C", arg="scale"),
    row("scale-dtype", set_arg("scale", to_dtype(torch.float64)),
        "expected dtype float32 (the dtype of x) or float32, got float64", arg="scale"),
    row("shift-dtype-unlike-scale", set_arg("shift", to_dtype(torch.float32)),
        "expected the dtype of scale (float16), got float32", arg="shift",
        base=dict(dtype=torch.float16)),
    row("bias-dtype-unlike-scale", set_arg("bias", to_dtype(torch.float32)),
        "expected the dtype of scale (bfloat16), got float32", arg="bias",
        base=dict(dtype=torch.bfloat16)),
    device_row("shift-device", "shift", ref="x"),
    row("shift-strided", set_arg("shift", strided_last_dim), "expected a contiguous tensor",
        arg="shift"),
])

REMOVE = "remove_padding"
BAD_CALLS += rows_for(REMOVE, "x", [
    row("x-rank", set_arg("x", drop_dim), "expected 3 dims [B, S, C], got 2 dims"),
    row("x-float64", set_arg("x", to_dtype(torch.float64)), "expected dtype in %s" % DTYPE_LIST),
    row("x-not-contiguous", set_arg("x", lambda t, d: t.transpose(0, 1).contiguous().transpose(0, 1)),
        "expected a contiguous tensor"),
    row("lens-rank", set_arg("lens", add_dim), "expected 1 dims [B], got 2 dims", arg="lens"),
    row("lens-size", set_arg("lens", lambda t, d: t[:2]), "expected size 3 for B (the batch of x)",
        arg="lens"),
    row("lens-int64", set_arg("lens", to_dtype(torch.int64)), "expected dtype int32, got int64",
        arg="lens"),
    device_row("lens-device", "lens", ref="x"),
    row("lens-strided", set_arg("lens", strided_last_dim), "expected a contiguous tensor",
        arg="lens"),
    row("lens-past-s", set_arg("lens", set_item(2, 6)), "expected values in [0, S = 5], got 6 at "
        "index 2", arg="lens"),
    row("lens-negative", set_arg("lens", set_item(1, -1)),
        "expected values in [0, S = 5], got -1 at index 1", arg="lens"),
    # The prefix sums are int32: more than 2^31 - 1 tokens in all are refused (x has no
    # channels, so no memory behind its 2^20 x 2^12 rows).
    row("lens-sum-past-int32",
        set_args(x=lambda t, d: torch.empty(2**20, 2**12, 0, dtype=t.dtype, device=d),
                 lens=lambda t, d: torch.full((2**20,), 2**12, dtype=torch.int32, device=d)),
        "expected a sum of at most 2^31 - 1 tokens", arg="lens"),
])

RESTORE = "restore_padding"
BAD_CALLS += rows_for(RESTORE, "packed", [
    row("packed-rank", set_arg("packed", add_dim), "expected 2 dims [total, C], got 3 dims"),
    row("packed-int32", set_arg("packed", to_dtype(torch.int32)), "expected dtype in %s"
        % DTYPE_LIST),
    row("packed-strided", set_arg("packed", strided), "expected a contiguous tensor"),
    row("cu-seqlens-rank", set_arg("cu_seqlens", add_dim), "expected 1 dims [B + 1], got 2 dims",
        arg="cu_seqlens"),
    row("cu-seqlens-empty", set_arg("cu_seqlens", lambda t, d: t[:0]),
        "expected at least 1 element [B + 1], got 0", arg="cu_seqlens"),
    row("cu-seqlens-int64", set_arg("cu_seqlens", to_dtype(torch.int64)),
        "expected dtype int32, got int64", arg="cu_seqlens"),
    device_row("cu-seqlens-device", "cu_seqlens", ref="packed"),
    row("cu-seqlens-strided", set_arg("cu_seqlens", strided_last_dim),
        "expected a contiguous tensor", arg="cu_seqlens"),
    row("seqlen-negative", set_arg("seqlen", value(-1)), "expected a value >= 0, got -1",
        arg="seqlen"),
    row("cu-seqlens-start", set_arg("cu_seqlens", set_item(0, 1)), "expected 0 at index 0, got 1",
        arg="cu_seqlens"),
    row("length-past-seqlen", set_arg("seqlen", value(4)),
        "expected lengths cu_seqlens[b + 1] - cu_seqlens[b] in [0, seqlen = 4], got 5 at b = 0",
        arg="cu_seqlens"),
    row("length-negative", set_arg("cu_seqlens", set_item(2, 3)),
        "expected lengths cu_seqlens[b + 1] - cu_seqlens[b] in [0, seqlen = 5], got -2 at b = 1",
        arg="cu_seqlens"),
    row("cu-seqlens-end", set_arg("packed", resize(0, 8)),
        "expected a last value equal to the tokens of packed (8), got 7", arg="cu_seqlens"),
])

LINEAR = "causal_dot_product"
BAD_CALLS += rows_for(LINEAR, "q", [
    row("q-rank", set_arg("q", drop_dim), "expected 4 dims [B, H, L, E], got 3 dims"),
    row("k-rank", set_arg("k", add_dim), "expected 4 dims [B, H, L, E], got 5 dims", arg="k"),
    row("v-rank", set_arg("v", drop_dim), "expected 4 dims [B, H, L, M], got 3 dims", arg="v"),
    row("k-batch", set_arg("k", resize(0, 1)), "expected size 2 for B (the batch of q)", arg="k"),
    row("k-heads", set_arg("k", resize(1, 3)), "expected size 2 for H (the heads of q)", arg="k"),
    row("k-length", set_arg("k", resize(2, 5)), "expected size 6 for L (the length of q)", arg="k"),
    row("k-feature-dim", set_arg("k", resize(3, 9)), "expected size 8 for E (the feature dim of q)",
        arg="k"),
    row("v-length", set_arg("v", resize(2, 7)), "expected size 6 for L (the length of q)", arg="v"),
    row("v-heads", set_arg("v", resize(1, 1)), "expected size 2 for H (the heads of q)", arg="v"),
    row("e-too-large", set_args(q=resize(3, LINEAR_MAX_DIM + 1), k=resize(3, LINEAR_MAX_DIM + 1)),
        "expected a feature dim E in [1, %d], got %d" % (LINEAR_MAX_DIM, LINEAR_MAX_DIM + 1)),
    row("e-zero", set_args(q=resize(3, 0), k=resize(3, 0)),
        "expected a feature dim E in [1, %d], got 0" % LINEAR_MAX_DIM),
    row("m-too-large", set_arg("v", resize(3, LINEAR_MAX_DIM + 1)),
        "expected a feature dim M in [1, %d], got %d" % (LINEAR_MAX_DIM, LINEAR_MAX_DIM + 1),
        arg="v"),
    row("m-zero", set_arg("v", resize(3, 0)), "expected a feature dim M in [1, %d], got 0"
        % LINEAR_MAX_DIM, arg="v"),
    row("q-float64", set_args(q=to_dtype(torch.float64), k=to_dtype(torch.float64),
                              v=to_dtype(torch.float64)), "expected dtype in %s" % DTYPE_LIST),
    # More thread blocks than one CUDA grid holds: a CUDA-only refusal (a NativeError of the
    # launcher) until the binding stated it for both backends.
    row("blocks-past-a-grid",
        set_args(q=expand_to(2**16, 2**8, 1, 8), k=expand_to(2**16, 2**8, 1, 8),
                 v=expand_to(2**16, 2**8, 1, 2**8)),
        "expected B * H * M <= 2^31 - 1 (the thread blocks of one CUDA grid), got B = 65536, "
        "H = 256, M = 256"),
    row("k-dtype", set_arg("k", to_dtype(torch.bfloat16)),
        "expected the dtype of q (float32), got bfloat16", arg="k"),
    row("v-dtype", set_arg("v", to_dtype(torch.float32)),
        "expected the dtype of q (float16), got float32", arg="v", base=dict(dtype=torch.float16)),
    device_row("k-device", "k"),
    device_row("v-device", "v"),
    row("q-strided-last-dim", set_arg("q", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2"),
    row("v-strided-last-dim", set_arg("v", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2", arg="v"),
])

FP8 = dict(fp8=True)
SCALE_RULE = "expected no scale for a float32 cache (scales apply to fp8 caches: uint8, " \
    "float8_e4m3fn or float8_e5m2), got a tensor"


def _scale_rows():
    """The rows every paged operator has for the fp8 scales (k_scale, v_scale) and caches."""
    return [
        row("k-scale-without-fp8-cache", set_arg("k_scale", lambda t, d: torch.ones(1, device=d)),
            SCALE_RULE, arg="k_scale"),
        row("v-scale-without-fp8-cache", set_arg("v_scale", lambda t, d: torch.ones(2, device=d)),
            SCALE_RULE, arg="v_scale"),
        row("k-scale-size", set_arg("k_scale", lambda t, d: torch.ones(3, device=d)),
            "expected size 1 (per tensor) or Hkv = 2 (per head) at dim 0, got 3", arg="k_scale",
            base=FP8),
        row("v-scale-rank", set_arg("v_scale", add_dim), "expected 1 dims [1] or [Hkv], got 2 dims",
            arg="v_scale", base=FP8),
        row("k-scale-float64", set_arg("k_scale", to_dtype(torch.float64)),
            "expected dtype float32, got float64", arg="k_scale", base=FP8),
        row("v-scale-float16", set_arg("v_scale", to_dtype(torch.float16)),
            "expected dtype float32, got float16", arg="v_scale", base=FP8),
        row("v-scale-strided", set_arg("v_scale", strided_last_dim), "expected a contiguous tensor",
            arg="v_scale", base=FP8),
        device_row("k-scale-device", "k_scale", ref="key_cache", base=FP8),
        # Values: a scale of 0 would quantise to NaN bytes, a negative one flip signs.
        row("k-scale-zero", set_arg("k_scale", lambda t, d: torch.zeros_like(t)),
            "expected finite values > 0, got 0 at index 0", arg="k_scale", base=FP8),
        row("v-scale-nan", set_arg("v_scale", lambda t, d: torch.full_like(t, float("nan"))),
            "expected finite values > 0, got nan at index 0", arg="v_scale", base=FP8),
        row("k-scale-negative", set_arg("k_scale", lambda t, d: -t.abs()),
            "expected finite values > 0, got -", arg="k_scale", base=FP8),
        row("fp8-value-cache-of-another-dtype", set_arg("value_cache", lambda t, d: t.float()),
            "expected the dtype of key_cache (uint8), got float32", arg="value_cache", base=FP8),
        # fp8_e5m2 says what a uint8 cache holds; a float8 cache's dtype says it itself.
        row("fp8-e5m2-with-a-float-cache", set_arg("fp8_e5m2", value(True)),
            "expected False for a float32 cache (True says a uint8 cache holds e5m2 bytes), got "
            "True", arg="fp8_e5m2"),
        row("fp8-e5m2-with-an-e4m3fn-cache",
            set_args(key_cache=lambda t, d: t.view(torch.float8_e4m3fn),
                     value_cache=lambda t, d: t.view(torch.float8_e4m3fn),
                     fp8_e5m2=value(True)),
            "expected False for a float8_e4m3fn cache (True says a uint8 cache holds e5m2 bytes), "
            "got True", arg="fp8_e5m2", base=FP8),
    ]


CACHE = "reshape_and_cache"
BAD_CALLS += rows_for(CACHE, "key", [
    row("key-rank", set_arg("key", add_dim), "expected 3 dims [T, Hkv, D], got 4 dims"),
    row("value-rank", set_arg("value", drop_dim), "expected 3 dims [T, Hkv, D], got 2 dims",
        arg="value"),
    row("key-float64", set_args(key=to_dtype(torch.float64), value=to_dtype(torch.float64),
                                key_cache=to_dtype(torch.float64),
                                value_cache=to_dtype(torch.float64)),
        "expected dtype in %s, got float64" % DTYPE_LIST),
    row("value-dtype", set_arg("value", to_dtype(torch.float16)),
        "expected the dtype of key (float32), got float16", arg="value"),
    device_row("value-device", "value", ref="key"),
    device_row("key-cache-device", "key_cache", ref="key"),
    device_row("slot-mapping-device", "slot_mapping", ref="key"),
    row("key-strided-last-dim", set_arg("key", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2"),
    row("value-tokens", set_arg("value", resize(0, 4)), "expected size 3 for T (the tokens of key)",
        arg="value"),
    row("value-heads", set_arg("value", resize(1, 1)), "expected size 2 for Hkv (the heads of key)",
        arg="value"),
    row("value-head-dim", set_arg("value", resize(2, 39)),
        "expected size 40 for D (the head dim of key)", arg="value"),
    row("key-cache-rank", set_arg("key_cache", drop_dim),
        "expected 4 dims [num_blocks, block_size, Hkv, D], got 3 dims", arg="key_cache"),
    row("value-cache-blocks", set_arg("value_cache", resize(0, 5)),
        "expected size 4 for num_blocks (the blocks of key_cache)", arg="value_cache"),
    row("value-cache-block-size", set_arg("value_cache", resize(1, 16)),
        "expected size 8 for block_size (the block size of key_cache)", arg="value_cache"),
    row("key-cache-heads", set_args(key_cache=resize(2, 1), value_cache=resize(2, 1)),
        "expected size 2 for Hkv (the heads of key)", arg="key_cache"),
    row("key-cache-head-dim", set_args(key_cache=resize(3, 48), value_cache=resize(3, 48)),
        "expected size 40 for D (the head dim of key)", arg="key_cache"),
    row("key-cache-dtype", set_arg("key_cache", to_dtype(torch.bfloat16)),
        "expected the dtype of key (float32), got bfloat16", arg="key_cache"),
    row("value-cache-not-contiguous", set_arg("value_cache", strided),
        "expected a contiguous tensor", arg="value_cache"),
    row("block-size-zero", set_args(key_cache=resize(1, 0), value_cache=resize(1, 0)),
        "expected a block size >= 1, got 0", arg="key_cache"),
    row("slot-mapping-rank", set_arg("slot_mapping", add_dim), "expected 1 dims [T], got 2 dims",
        arg="slot_mapping"),
    row("slot-mapping-size", set_arg("slot_mapping", lambda t, d: t[:2]),
        "expected size 3 for T (the tokens of key), got 2", arg="slot_mapping"),
    row("slot-mapping-int32", set_arg("slot_mapping", to_dtype(torch.int32)),
        "expected dtype int64, got int32", arg="slot_mapping"),
    row("slot-mapping-strided", set_arg("slot_mapping", strided_last_dim),
        "expected a contiguous tensor", arg="slot_mapping"),
    row("slot-past-the-caches", set_arg("slot_mapping", set_item(2, 32)),
        "expected slots < num_blocks * block_size = 32 (or negative to skip), got 32 at index 2",
        arg="slot_mapping"),
    # An fp8 cache takes float keys: fp8 (uint8) keys are refused, not copied byte for byte.
    row("fp8-key", set_args(key=lambda t, d: t.to(torch.float8_e4m3fn).view(torch.uint8),
                            value=lambda t, d: t.to(torch.float8_e4m3fn).view(torch.uint8)),
        "expected dtype in %s, got uint8" % DTYPE_LIST, base=FP8),
] + _scale_rows())


def _paged_rows(op, index_rows):
    """The rows paged_attention and paged_prefill_attention share (query and the caches)."""
    return rows_for(op, "query", [
        row("query-rank", set_arg("query", add_dim), "expected 3 dims"),
        row("query-float64", set_args(query=to_dtype(torch.float64),
                                      key_cache=to_dtype(torch.float64),
                                      value_cache=to_dtype(torch.float64)),
            "expected dtype in %s, got float64" % DTYPE_LIST),
        row("query-strided-last-dim", set_arg("query", strided_last_dim),
            "expected a contiguous last dim (stride 1), got stride 2"),
        row("head-dim-past-the-largest",
            set_args(query=resize(2, PAGED_BAD_HEAD_DIM), key_cache=resize(3, PAGED_BAD_HEAD_DIM),
                     value_cache=resize(3, PAGED_BAD_HEAD_DIM)),
            "expected a head dim D in [1, %d], got %d" % (PAGED_MAX_HEAD_DIM, PAGED_BAD_HEAD_DIM)),
        row("head-dim-zero",
            set_args(query=resize(2, 0), key_cache=resize(3, 0), value_cache=resize(3, 0)),
            "expected a head dim D in [1, %d], got 0" % PAGED_MAX_HEAD_DIM),
        row("block-size-not-supported",
            set_args(key_cache=resize(1, PAGED_BAD_BLOCK_SIZE),
                     value_cache=resize(1, PAGED_BAD_BLOCK_SIZE)),
            "expected a block size in %s, got %d" % (_list(PAGED_BLOCK_SIZES), PAGED_BAD_BLOCK_SIZE),
            arg="key_cache"),
        row("block-size-odd",
            set_args(key_cache=resize(1, PAGED_ODD_BLOCK_SIZE),
                     value_cache=resize(1, PAGED_ODD_BLOCK_SIZE)),
            "expected a block size in %s, got %d" % (_list(PAGED_BLOCK_SIZES), PAGED_ODD_BLOCK_SIZE),
            arg="key_cache"),
        row("key-cache-head-dim", set_args(key_cache=resize(3, PAGED_HEAD_DIMS[1]),
                                           value_cache=resize(3, PAGED_HEAD_DIMS[1])),
            "expected size %d for D (the head dim of query)" % PAGED_HEAD_DIMS[0], arg="key_cache"),
        row("heads-not-dividing", set_args(key_cache=resize(2, 3), value_cache=resize(2, 3)),
            "expected a number of heads Hkv that divides the query heads Hq = 4, got Hkv = 3",
            arg="key_cache"),
        row("zero-kv-heads", set_args(key_cache=resize(2, 0), value_cache=resize(2, 0)),
            "expected Hkv >= 1, got 0", arg="key_cache"),
        row("key-cache-rank", set_arg("key_cache", add_dim),
            "expected 4 dims [num_blocks, block_size, Hkv, D], got 5 dims", arg="key_cache"),
        row("value-cache-heads", set_arg("value_cache", resize(2, 1)),
            "expected size 2 for Hkv (the heads of key_cache)", arg="value_cache"),
        row("value-cache-blocks", set_arg("value_cache", resize(0, 7)),
            "expected size 6 for num_blocks (the blocks of key_cache)", arg="value_cache"),
        row("key-cache-dtype", set_arg("key_cache", to_dtype(torch.float16)),
            "expected the dtype of query (float32), got float16", arg="key_cache"),
        device_row("key-cache-device", "key_cache", ref="query"),
        device_row("value-cache-device", "value_cache", ref="query"),
        device_row("block-tables-device", "block_tables", ref="query"),
        device_row("context-lens-device", "context_lens", ref="query"),
        device_row("alibi-device", "alibi_slopes", ref="query"),
        row("key-cache-not-contiguous", set_arg("key_cache", strided),
            "expected a contiguous tensor", arg="key_cache"),
        row("alibi-rank", set_arg("alibi_slopes", lambda t, d: randn(1, 3, 4, device=d)),
            "expected 1 dim [Hq] or 2 dims [num_seqs, Hq], got 3", arg="alibi_slopes"),
        row("alibi-size", set_arg("alibi_slopes", resize(0, 2)),
            "expected size 4 for Hq (the heads of query), got 2", arg="alibi_slopes"),
        row("alibi-sequences", set_arg("alibi_slopes", lambda t, d: randn(4, 4, device=d)),
            "expected size 3 for num_seqs (the sequences), got 4", arg="alibi_slopes"),
        row("alibi-one-row-for-three-sequences", set_arg("alibi_slopes", add_dim),
            "expected size 3 for num_seqs (the sequences), got 1", arg="alibi_slopes"),
        row("alibi-per-sequence-heads", set_arg("alibi_slopes", lambda t, d: randn(3, 5, device=d)),
            "expected size 4 for Hq (the heads of query), got 5", arg="alibi_slopes"),
        row("alibi-per-sequence-transposed",
            set_arg("alibi_slopes", lambda t, d: randn(4, 3, device=d).t()),
            "expected a contiguous tensor", arg="alibi_slopes"),
        row("alibi-float16", set_arg("alibi_slopes", to_dtype(torch.float16)),
            "expected dtype float32, got float16", arg="alibi_slopes"),
        row("alibi-strided", set_arg("alibi_slopes", strided_last_dim),
            "expected a contiguous tensor", arg="alibi_slopes"),
        row("scale-nan", set_arg("scale", value(float("nan"))), "expected a finite value",
            arg="scale"),
        row("window-left-below-minus-one", set_arg("window_left", value(-2)),
            "expected -1 (unbounded) or a value >= 0, got -2", arg="window_left"),
        *SOFTCAP_AND_SCALE_ROWS(),
        row("block-tables-rank", set_arg("block_tables", lambda t, d: t.reshape(-1)),
            "expected 2 dims [num_seqs, max_blocks], got 1 dims", arg="block_tables"),
        row("block-tables-int64", set_arg("block_tables", to_dtype(torch.int64)),
            "expected dtype int32, got int64", arg="block_tables"),
        row("block-tables-transposed", set_arg("block_tables", lambda t, d: t.t().contiguous().t()),
            "expected a contiguous tensor", arg="block_tables"),
        row("context-lens-rank", set_arg("context_lens", add_dim),
            "expected 1 dims [num_seqs], got 2 dims", arg="context_lens"),
        row("context-lens-int64", set_arg("context_lens", to_dtype(torch.int64)),
            "expected dtype int32, got int64", arg="context_lens"),
        row("context-lens-strided", set_arg("context_lens", strided_last_dim),
            "expected a contiguous tensor", arg="context_lens"),
        row("block-id-past-the-caches", set_arg("block_tables", set_item((0, 1), 6)),
            "expected block ids in [0, num_blocks = 6) for the 3 blocks sequence 0 uses, got 6 "
            "at [0, 1]", arg="block_tables"),
        row("block-id-negative", set_arg("block_tables", set_item((1, 0), -1)),
            "expected block ids in [0, num_blocks = 6) for the 2 blocks sequence 1 uses, got -1 "
            "at [1, 0]", arg="block_tables"),
        row("context-past-the-table", set_arg("context_lens", set_item(1, 25)),
            "expected values in [0, max_blocks * block_size = 24], got 25 at index 1",
            arg="context_lens"),
        row("context-negative", set_arg("context_lens", set_item(2, -1)),
            "expected values in [0, max_blocks * block_size = 24], got -1 at index 2",
            arg="context_lens"),
        row("fp8-query", set_arg("query", lambda t, d: t.to(torch.float8_e4m3fn).view(torch.uint8)),
            "expected dtype in %s, got uint8" % DTYPE_LIST, base=FP8),
    ] + index_rows + _scale_rows())


PAGED = "paged_attention"
BAD_CALLS += _paged_rows(PAGED, [
    row("block-tables-rows", set_arg("block_tables", lambda t, d: t[:2]),
        "expected size 3 for num_seqs (the sequences of query), got 2", arg="block_tables"),
    row("context-lens-size", set_arg("context_lens", resize(0, 4)),
        "expected size 3 for num_seqs (the sequences of query), got 4", arg="context_lens"),
    row("max-context-len-negative", set_arg("max_context_len", value(-1)),
        "expected a value in [0, 2^30], got -1", arg="max_context_len"),
    row("max-context-len-past-2^30", set_arg("max_context_len", value(2**30 + 1)),
        "expected a value in [0, 2^30], got 1073741825", arg="max_context_len"),
    row("context-past-max-context-len", set_arg("max_context_len", value(19)),
        "expected values <= max_context_len = 19, got 20 at index 0", arg="context_lens"),
])

PREFILL = "paged_prefill_attention"
BAD_CALLS += _paged_rows(PREFILL, [
    row("block-tables-rows", set_arg("block_tables", lambda t, d: t[:2]),
        "expected size 3 for num_seqs (the sequences of context_lens), got 2", arg="block_tables"),
    row("cu-seqlens-size", set_arg("cu_seqlens_q", lambda t, d: t[:3]),
        "expected size 4 for num_seqs + 1 (the sequences of context_lens plus one), got 3",
        arg="cu_seqlens_q"),
    row("cu-seqlens-int64", set_arg("cu_seqlens_q", to_dtype(torch.int64)),
        "expected dtype int32, got int64", arg="cu_seqlens_q"),
    device_row("cu-seqlens-device", "cu_seqlens_q", ref="query"),
    row("max-seqlen-q-negative", set_arg("max_seqlen_q", value(-1)),
        "expected a value in [0, T = 5], got -1", arg="max_seqlen_q"),
    row("max-seqlen-q-past-t", set_arg("max_seqlen_q", value(6)),
        "expected a value in [0, T = 5], got 6", arg="max_seqlen_q"),
    row("max-seqlen-q-below-a-chunk", set_arg("max_seqlen_q", value(2)),
        "expected >= every chunk length, got 2 < 3 for sequence 0", arg="max_seqlen_q"),
    row("cu-seqlens-start", set_arg("cu_seqlens_q", set_item(0, 1)),
        "expected 0 at index 0, got 1", arg="cu_seqlens_q"),
    row("cu-seqlens-end", set_arg("cu_seqlens_q", set_item(3, 4)),
        "expected the last value to be T = 5 (the rows of query), got 4", arg="cu_seqlens_q"),
    row("cu-seqlens-decreasing", set_arg("cu_seqlens_q", set_item(1, 6)),
        "expected non-decreasing values, got 6 then 5 at index 1", arg="cu_seqlens_q"),
    row("window-right-below-minus-one", set_args(causal=value(False), window_right=value(-2)),
        "expected -1 (unbounded) or a value >= 0, got -2", arg="window_right"),
    # The chunks' own keys and values [T, Hkv, D] (vLLM's prefix prefill).
    row("key-without-value", set_arg("value", value(None)),
        "expected a tensor when key is given (the chunks' own keys and values go together), got "
        "None", arg="value"),
    row("value-without-key", set_arg("key", value(None)),
        "expected a tensor when value is given (the chunks' own keys and values go together), got "
        "None", arg="key"),
    row("key-rank", set_arg("key", add_dim), "expected 3 dims [T, Hkv, D], got 4 dims",
        arg="key"),
    row("key-rows", set_arg("key", resize(0, 4)),
        "expected size 5 for T (the rows of query), got 4", arg="key"),
    row("value-heads", set_arg("value", resize(1, 1)),
        "expected size 2 for Hkv (the heads of key_cache), got 1", arg="value"),
    row("key-head-dim", set_arg("key", resize(2, PAGED_HEAD_DIMS[0] + 1)),
        "expected size %d for D (the head dim of query), got %d"
        % (PAGED_HEAD_DIMS[0], PAGED_HEAD_DIMS[0] + 1), arg="key"),
    row("value-float16", set_arg("value", to_dtype(torch.float16)),
        "expected the dtype of query (float32), got float16", arg="value"),
    row("key-strided-last-dim", set_arg("key", strided_last_dim),
        "expected a contiguous last dim (stride 1), got stride 2", arg="key"),
    device_row("key-device", "key", ref="query"),
    device_row("value-device", "value", ref="query"),
])


# ---- calls once refused by a CUDA-only rule, and awkward shapes: accepted everywhere ------------


def _accepted(op, what, change, check=None, **base):
    return pytest.param(op, change, base, check, id="%s-%s" % (op, what))


MANY = 70000  # past the 65535 a CUDA grid's y or z dimension holds


def one_token_cache(a, d, num_seqs, heads_q, tokens=None):
    """Makes a paged call of `num_seqs` sequences whose context is one token (token 0 of block 0,
    one KV head): each output row is then that token's value row."""
    block_size = a["key_cache"].shape[1]
    dim = a["key_cache"].shape[3]
    a["key_cache"], a["value_cache"] = _caches(d, a["query"].dtype, 1, block_size, 1, dim)
    a["query"] = randn(num_seqs if tokens is None else tokens, heads_q, dim,
                       dtype=a["query"].dtype, device=d)
    a["block_tables"] = torch.zeros(num_seqs, 1, dtype=torch.int32, device=d)
    a["context_lens"] = torch.ones(num_seqs, dtype=torch.int32, device=d)
    a["alibi_slopes"] = None
    if "max_context_len" in a:
        a["max_context_len"] = 1
    else:
        a["cu_seqlens_q"] = torch.arange(num_seqs + 1, dtype=torch.int32, device=d).clamp(max=tokens)
        a["max_seqlen_q"] = 1
        a["key"] = a["value"] = None  # the one token from the cache


def every_row_is_the_one_value(a, outputs):
    (out,) = outputs
    expected = a["value_cache"][0, 0, 0].cpu().double().expand(*out.shape)
    assert_close(out.cpu(), expected, out.dtype)


DECODER = "decoder_layer"
BAD_CALLS += rows_for(DECODER, "hidden", [
    row("hidden-rank", set_arg("hidden", add_dim), "expected 2 dims [T, C], got 3 dims"),
    row("hidden-float64", set_arg("hidden", to_dtype(torch.float64)),
        "expected dtype in %s, got float64" % DTYPE_LIST),
    row("hidden-strided", set_arg("hidden", strided), "expected a contiguous tensor"),
    row("positions-int32", set_arg("positions", to_dtype(torch.int32)),
        "expected dtype int64, got int32", arg="positions"),
    row("positions-size", set_arg("positions", resize(0, 5)),
        "expected size 6 for T (the rows of hidden), got 5", arg="positions"),
    row("position-past-rope-table", set_arg("positions", set_item(0, 64)),
        "expected values in [0, P = 64) (the rows of rope_cos_sin), got 64 at index 0",
        arg="positions"),
    row("key-cache-dtype", set_args(key_cache=to_dtype(torch.float16),
                                    value_cache=to_dtype(torch.float16)),
        "expected the dtype of hidden (float32), got float16", arg="key_cache"),
    row("fp8-e5m2-with-a-float-cache", set_arg("fp8_e5m2", value(True)),
        "expected False for a float32 cache (True says a uint8 cache holds e5m2 bytes), got True",
        arg="fp8_e5m2"),
    row("value-cache-blocks", set_arg("value_cache", lambda t, d: t[:-1]),
        "for num_blocks (the blocks of key_cache)", arg="value_cache"),
    row("block-table-id", set_arg("block_tables", set_item((1, 0), 999)),
        "expected block ids in [0, num_blocks", arg="block_tables"),
    row("cu-seqlens-first", set_arg("cu_seqlens_q", set_item(0, 1)),
        "expected 0 at index 0, got 1", arg="cu_seqlens_q"),
    row("context-lens-int64", set_arg("context_lens", to_dtype(torch.int64)),
        "expected dtype int32, got int64", arg="context_lens"),
    row("slot-past-cache", set_arg("slot_mapping", set_item(0, 10**6)),
        "expected slots < num_blocks * block_size", arg="slot_mapping"),
    row("attn-norm-size", set_arg("attn_norm_weight", resize(0, 31)),
        "expected size 32 for n (the hidden size C of hidden), got 31", arg="attn_norm_weight"),
    row("qkv-rows", set_arg("qkv_weight", resize(0, 100)),
        "expected size 128 for out ((Hq + 2 Hkv) D), got 100", arg="qkv_weight"),
    row("rope-odd-width", set_arg("rope_cos_sin", resize(1, 15)),
        "expected an even rotary width R in [2, D = 16]", arg="rope_cos_sin"),
    row("out-weight-dtype", set_arg("out_weight", to_dtype(torch.float16)),
        "expected the dtype of hidden (float32), got float16", arg="out_weight"),
    row("mlp-norm-float64", set_arg("mlp_norm_weight", to_dtype(torch.float64)),
        "expected dtype float32, got float64", arg="mlp_norm_weight"),
    row("mlp-norm-bias-with-rms", set_arg("mlp_norm_bias", lambda _t, d: torch.zeros(32, device=d)),
        "expected None for RMSNorm (norm_type 0), got a tensor", arg="mlp_norm_bias"),
    row("up-odd-rows", set_arg("up_weight", resize(0, 47)),
        "expected 2 I >= 2 rows (gate rows, then up rows) for a gated activation, got 47",
        arg="up_weight"),
    row("down-width", set_arg("down_weight", resize(1, 25)),
        "expected size 24 for in (the intermediate size I of up_weight), got 25",
        arg="down_weight"),
    row("heads-not-a-multiple", set_arg("num_heads", value(3)),
        "expected a multiple >= 1 of the cache's heads Hkv = 2, got 3", arg="num_heads"),
    row("norm-type", set_arg("norm_type", value(2)),
        "expected 0 (RMSNorm) or 1 (LayerNorm), got 2", arg="norm_type"),
    row("activation", set_arg("activation", value(-1)),
        "expected 0 (SwiGLU), 1 (GeGLU, tanh) or 2 (GELU, tanh), got -1", arg="activation"),
    row("norm-eps-nan", set_arg("norm_eps", value(float("nan"))),
        "expected a finite value >= 0, got nan", arg="norm_eps"),
])

EMBED = "embed_tokens"
BAD_CALLS += rows_for(EMBED, "hidden", [
    row("hidden-rank", set_arg("hidden", add_dim), "expected 2 dims [T, C], got 3 dims"),
    row("hidden-int32", set_arg("hidden", to_dtype(torch.int32)),
        "expected dtype in %s, got int32" % DTYPE_LIST),
    row("ids-int32", set_arg("token_ids", to_dtype(torch.int32)), "expected dtype int64, got int32",
        arg="token_ids"),
    row("ids-size", set_arg("token_ids", resize(0, 4)), "expected size 5 for T (the rows of hidden)",
        arg="token_ids"),
    row("id-past-vocab", set_arg("token_ids", set_item(2, 11)),
        "expected values in [0, V, the rows of embedding = 11), got 11 at index 2",
        arg="token_ids"),
    row("embedding-width", set_arg("embedding", resize(1, 23)),
        "expected size 24 for C (the hidden size C), got 23", arg="embedding"),
    row("embedding-dtype", set_arg("embedding", to_dtype(torch.float16)),
        "expected the dtype of hidden (float32), got float16", arg="embedding"),
    row("positions-without-table", set_arg("position_embedding", value(None)),
        "expected a tensor exactly when position_embedding is given", arg="positions"),
    row("position-past-table", set_arg("positions", set_item(0, 7)),
        "expected values in [0, P, the rows of position_embedding = 7), got 7 at index 0",
        arg="positions"),
    row("position-table-strided", set_arg("position_embedding", strided),
        "expected a contiguous tensor", arg="position_embedding"),
    row("scale-inf", set_arg("scale", value(float("inf"))), "expected a finite float32 value",
        arg="scale"),
])

HEAD = "decoder_head"
BAD_CALLS += rows_for(HEAD, "hidden", [
    row("hidden-rank", set_arg("hidden", drop_dim), "expected 2 dims [T, C], got 1 dims"),
    row("logits-float16", set_arg("logits", to_dtype(torch.float16)),
        "expected dtype float32, got float16", arg="logits"),
    row("logits-rows", set_arg("logits", resize(0, 4)), "expected size 3 for R (the values of rows)",
        arg="logits"),
    row("logits-vocab", set_arg("logits", resize(1, 12)),
        "expected size 13 for V (the rows of head_weight), got 12", arg="logits"),
    row("rows-int32", set_arg("rows", to_dtype(torch.int32)), "expected dtype int64, got int32",
        arg="rows"),
    row("row-past-hidden", set_arg("rows", set_item(1, 6)),
        "expected values in [0, T, the rows of hidden = 6), got 6 at index 1", arg="rows"),
    row("norm-weight-size", set_arg("norm_weight", resize(0, 23)),
        "expected size 24 for C (the hidden size C of hidden), got 23", arg="norm_weight"),
    row("norm-bias-float16", set_arg("norm_bias", to_dtype(torch.float16)),
        "expected dtype float32, got float16", arg="norm_bias"),
    row("head-width", set_arg("head_weight", resize(1, 25)),
        "expected size 24 for C (the hidden size C), got 25", arg="head_weight"),
    row("norm-type", set_arg("norm_type", value(2)), "expected 0 (RMSNorm) or 1 (LayerNorm), got 2",
        arg="norm_type"),
    row("bias-with-rms", set_arg("norm_type", value(0)),
        "expected None for RMSNorm (norm_type 0), got a tensor", arg="norm_bias"),
    row("softcap-negative", set_arg("softcap", value(-1.0)), "expected a finite value >= 0",
        arg="softcap"),
])

COPY = "copy_from_host"
BAD_CALLS += rows_for(COPY, "dst", [
    row("dst-strided", set_arg("dst", lambda t, d: torch.zeros(9, 2, device=d)[:, 0]),
        "expected a contiguous tensor"),
    row("src-size", set_arg("src", resize(0, 8)), "expected 9 elements (those of dst), got 8",
        arg="src"),
    row("src-dtype", set_arg("src", to_dtype(torch.float64)),
        "expected the dtype of dst (float32)", arg="src"),
    row("src-strided", set_arg("src", lambda t, d: torch.zeros(9, 2)[:, 0]),
        "expected a contiguous tensor", arg="src"),
    row("src-float16", set_arg("src", to_dtype(torch.float16)),
        "expected the dtype of dst (float32)", arg="src"),
])

SAMPLE = "sample_tokens"
BAD_CALLS += rows_for(SAMPLE, "logits", [
    row("logits-rank", set_arg("logits", drop_dim), "expected 2 dims [B, V], got 1 dims"),
    row("logits-float64", set_arg("logits", to_dtype(torch.float64)),
        "expected dtype in %s, got float64" % DTYPE_LIST),
    row("logits-strided", set_arg("logits", strided), "expected a contiguous tensor"),
    row("logits-empty-vocabulary", set_arg("logits", resize(1, 0)),
        "expected a vocabulary V in [1, 16777216] (the fixed-point weights' range), got 0"),
    # No rows: a vocabulary past 2^24 without the memory it would take.
    row("logits-vocabulary-past-fixed-point",
        set_arg("logits", lambda t, d: torch.empty(0, 2**24 + 1, device=d)),
        "expected a vocabulary V in [1, 16777216] (the fixed-point weights' range), got 16777217",
        base=dict(batch=0)),
    row("ids-int32", set_arg("ids", to_dtype(torch.int32)), "expected dtype int64, got int32",
        arg="ids"),
    row("ids-size", set_arg("ids", resize(0, 5)), "expected size 6 for B (the rows of logits), got 5",
        arg="ids"),
    row("ids-rank", set_arg("ids", add_dim), "expected 1 dims [B], got 2 dims", arg="ids"),
    device_row("ids-device", "ids", ref="logits"),
    row("temperature-float64", set_arg("temperature", to_dtype(torch.float64)),
        "expected dtype float32, got float64", arg="temperature"),
    row("temperature-size", set_arg("temperature", resize(0, 7)),
        "expected size 6 for B (the rows of logits), got 7", arg="temperature"),
    row("temperature-negative", set_arg("temperature", set_item(2, -0.5)),
        "expected finite values >= 0 (0: greedy), got -0.5 at index 2", arg="temperature"),
    row("temperature-nan", set_arg("temperature", set_item(1, float("nan"))),
        "expected finite values >= 0 (0: greedy), got nan at index 1", arg="temperature"),
    row("temperature-inf", set_arg("temperature", set_item(5, float("inf"))),
        "expected finite values >= 0 (0: greedy), got inf at index 5", arg="temperature"),
    device_row("temperature-device", "temperature", ref="logits"),
    row("top-k-int64", set_arg("top_k", to_dtype(torch.int64)), "expected dtype int32, got int64",
        arg="top_k"),
    row("top-k-negative", set_arg("top_k", set_item(3, -1)),
        "expected values >= 0 (0: every token), got -1 at index 3", arg="top_k"),
    device_row("top-k-device", "top_k", ref="logits"),
    row("top-p-zero", set_arg("top_p", set_item(0, 0.0)),
        "expected values in (0, 1] (1: every token), got 0 at index 0", arg="top_p"),
    row("top-p-above-one", set_arg("top_p", set_item(4, 1.5)),
        "expected values in (0, 1] (1: every token), got 1.5 at index 4", arg="top_p"),
    row("top-p-nan", set_arg("top_p", set_item(2, float("nan"))),
        "expected values in (0, 1] (1: every token), got nan at index 2", arg="top_p"),
    row("top-p-size", set_arg("top_p", resize(0, 1)),
        "expected size 6 for B (the rows of logits), got 1", arg="top_p"),
    device_row("top-p-device", "top_p", ref="logits"),
    row("seeds-int32", set_arg("seeds", to_dtype(torch.int32)), "expected dtype int64, got int32",
        arg="seeds"),
    device_row("seeds-device", "seeds", ref="logits"),
    row("offsets-float32", set_arg("offsets", to_dtype(torch.float32)),
        "expected dtype int64, got float32", arg="offsets"),
    row("offsets-strided", set_arg("offsets", strided_last_dim), "expected a contiguous tensor",
        arg="offsets"),
    device_row("offsets-device", "offsets", ref="logits"),
])

ENCODER = "encoder_layer"
BAD_CALLS += rows_for(ENCODER, "hidden", [
    row("hidden-rank", set_arg("hidden", add_dim), "expected 2 dims [T, C], got 3 dims"),
    row("hidden-float64", set_arg("hidden", to_dtype(torch.float64)),
        "expected dtype in %s, got float64" % DTYPE_LIST),
    row("hidden-strided", set_arg("hidden", strided), "expected a contiguous tensor"),
    row("cu-seqlens-int64", set_arg("cu_seqlens", to_dtype(torch.int64)),
        "expected dtype int32, got int64", arg="cu_seqlens"),
    row("cu-seqlens-first", set_arg("cu_seqlens", set_item(0, 1)),
        "expected 0 at index 0, got 1", arg="cu_seqlens"),
    row("cu-seqlens-last", set_arg("cu_seqlens", set_item(3, 8)),
        "expected the last value to be T = 9 (the rows of hidden), got 8", arg="cu_seqlens"),
    row("max-seqlen-short", set_arg("max_seqlen", value(4)),
        "expected >= every sequence's length, got 4", arg="max_seqlen"),
    row("heads-not-dividing", set_arg("num_heads", value(5)),
        "expected a value >= 1 dividing the hidden size C = 32, got 5", arg="num_heads"),
    row("norm-eps-nan", set_arg("norm_eps", value(float("nan"))),
        "expected a finite value >= 0, got nan", arg="norm_eps"),
    row("qkv-rows", set_arg("qkv_weight", resize(0, 95)),
        "expected size 96 for out (3 C), got 95", arg="qkv_weight"),
    row("qkv-bias-size", set_arg("qkv_bias", resize(0, 32)),
        "expected size 96 for n (3 C), got 32", arg="qkv_bias"),
    row("out-weight-dtype", set_arg("out_weight", to_dtype(torch.float16)),
        "expected the dtype of hidden (float32), got float16", arg="out_weight"),
    row("out-bias-float64", set_arg("out_bias", to_dtype(torch.float64)),
        "expected dtype float32, got float64", arg="out_bias"),
    row("attn-norm-weight-size", set_arg("attn_norm_weight", resize(0, 31)),
        "expected size 32 for n (the hidden size C of hidden), got 31", arg="attn_norm_weight"),
    row("attn-norm-bias-strided", set_arg("attn_norm_bias", lambda t, d: randn(64, device=d)[::2]),
        "expected a contiguous tensor", arg="attn_norm_bias"),
    row("up-weight-width", set_arg("up_weight", resize(1, 33)),
        "expected size 32 for in (the hidden size C of hidden), got 33", arg="up_weight"),
    row("up-weight-not-packed", set_arg("up_weight", lambda t, d: torch.zeros(80, dtype=torch.uint8,
                                                                             device=d)),
        "expected a gemm_pack_weight result, got not a packed weight", arg="up_weight"),
    row("up-bias-size", set_arg("up_bias", resize(0, 47)),
        "expected size 48 for n (the intermediate size I, up_weight's out), got 47", arg="up_bias"),
    row("down-width", set_arg("down_weight", resize(1, 47)),
        "expected size 48 for in (the intermediate size I, up_weight's out), got 47",
        arg="down_weight"),
    row("down-bias-rank", set_arg("down_bias", add_dim), "expected 1 dims [n], got 2 dims",
        arg="down_bias"),
    row("ffn-norm-weight-float16", set_arg("ffn_norm_weight", to_dtype(torch.float16)),
        "expected dtype float32, got float16", arg="ffn_norm_weight"),
    row("ffn-norm-bias-size", set_arg("ffn_norm_bias", resize(0, 33)),
        "expected size 32 for n (the hidden size C of hidden), got 33", arg="ffn_norm_bias"),
    device_row("cu-seqlens-device", "cu_seqlens", ref="hidden"),
])

PACK = "gemm_pack_weight"
BAD_CALLS += rows_for(PACK, "weight", [
    row("weight-rank", set_arg("weight", add_dim), "expected 2 dims [out, in], got 3 dims"),
    row("weight-float16", set_arg("weight", to_dtype(torch.float16)),
        "expected dtype float32, got float16"),
    row("weight-float64", set_arg("weight", to_dtype(torch.float64)),
        "expected dtype float32, got float64"),
    row("weight-strided", set_arg("weight", strided), "expected a contiguous tensor"),
    row("weight-no-rows", set_arg("weight", resize(0, 0)),
        "expected out >= 1 and in >= 1, got shape [0, 40]"),
    row("mode-unknown", set_arg("mode", lambda v, d: 3),
        "expected 0 (float32), 1 (bfloat16) or 2 (int8), got 3", arg="mode"),
])


ACCEPTED_CALLS = [
    # Views that are not 16-byte aligned and odd strides (the CUDA flash kernels stage them).
    _accepted(FLASH, "unaligned-views", set_args(q=unaligned, k=unaligned, v=unaligned)),
    _accepted(FLASH, "odd-strides", set_args(q=strided, k=strided, v=strided), dim=33),
    _accepted(FLASH, "odd-head-dim", lambda a, d: None, dim=33),
    _accepted(FLASH, "head-dim-1", lambda a, d: None, dim=1),
    # At the usual scale 1/sqrt(D): the rows' fixed 0.3 spreads D = 256 scores over ~5 sigma, where
    # any float32 attention (stock's too) drifts past 1e-5 (docs/benchmarks.md, accuracy against
    # the scale); accuracy is test_flash_fp32.py's subject, acceptance this row's.
    _accepted(FLASH, "largest-head-dim", lambda a, d: a.update(scale=FLASH_MAX_HEAD_DIM ** -0.5),
              dim=FLASH_MAX_HEAD_DIM, heads_q=2, heads_kv=1),
    _accepted(FLASH, "one-query-row", lambda a, d: None, seqlen_q=1, dtype=torch.float16),
    _accepted(FLASH, "empty-batch", lambda a, d: None, batch=0, kv_lens=()),
    _accepted(FLASH, "no-queries", lambda a, d: None, seqlen_q=0),
    _accepted(FLASH, "no-keys", lambda a, d: None, seqlen_k=0, kv_lens=(0, 0)),
    _accepted(FP8_ATTN, "float8-e4m3fn", set_args(q=lambda t, d: t.view(torch.float8_e4m3fn),
                                                  k=lambda t, d: t.view(torch.float8_e4m3fn),
                                                  v=lambda t, d: t.view(torch.float8_e4m3fn))),
    _accepted(FP8_ATTN, "no-descales", set_args(q_descale=value(None), k_descale=value(None),
                                                v_descale=value(None))),
    _accepted(FP8_ATTN, "out-float16-no-kv-lens", set_args(out_float16=value(True),
                                                           kv_lens=value(None))),
    _accepted(FP8_ATTN, "odd-strides", set_args(q=strided, k=strided, v=strided)),
    _accepted(FP8_ATTN, "empty-batch", lambda a, d: None, batch=0, kv_lens=()),
    _accepted(FP8_ATTN, "no-queries", lambda a, d: None, seqlen_q=0),
    _accepted(FP8_ATTN, "no-keys", lambda a, d: None, seqlen_k=0, kv_lens=(0, 0)),
    _accepted(VARLEN, "unaligned-views", set_args(q=unaligned, k=unaligned, v=unaligned),
              dtype=torch.bfloat16),
    _accepted(VARLEN, "odd-head-dim", lambda a, d: None, dim=7),
    _accepted(VARLEN, "empty", lambda a, d: None, lens_q=(0,), lens_k=(0,)),
    _accepted(BERT, "odd-head-dim-unaligned", set_arg("qkv", unaligned), dim=13, heads=3),
    _accepted(BERT, "strided-qkv", set_arg("qkv", strided), dtype=torch.float16),
    _accepted(BERT, "empty-batch", set_arg("kv_lens", value(None)), batch=0),
    _accepted(LAYERNORM, "unaligned-odd-channels",
              set_args(x=unaligned, residual=unaligned, gamma=unaligned), shape=(5, 1023)),
    _accepted(LAYERNORM, "float32-params-of-half",
              set_args(gamma=to_dtype(torch.float32), beta=to_dtype(torch.float32),
                       bias=to_dtype(torch.float32)), dtype=torch.float16),
    _accepted(LAYERNORM, "no-rows", lambda a, d: None, shape=(0, 24)),
    # A row longer than a GPU's shared memory holds (once a CUDA-only refusal; now streamed).
    _accepted(LAYERNORM, "row-past-shared-memory", lambda a, d: None, shape=(2, 65537)),
    _accepted(GELU, "unaligned-odd-channels", set_args(x=unaligned, bias=unaligned), shape=(3, 7, 5)),
    _accepted(GELU, "no-channels", set_arg("bias", value(None)), shape=(4, 0)),
    _accepted(AFFINE, "unaligned", set_args(x=unaligned, residual=unaligned, shift=unaligned),
              shape=(9, 31), dtype=torch.bfloat16),
    _accepted(REMOVE, "unaligned", set_arg("x", unaligned), channels=7),
    _accepted(REMOVE, "empty-batch", lambda a, d: None, batch=0, lens=()),
    _accepted(RESTORE, "unaligned", set_arg("packed", unaligned), channels=9),
    _accepted(RESTORE, "empty-batch", lambda a, d: None, lens=()),
    _accepted(LINEAR, "unaligned-views", set_args(q=unaligned, k=unaligned, v=unaligned),
              dim_qk=5, dim_v=3),
    # q and k scaled by E^-1/4 (q . k by 1 / sqrt(E), as attention scales it): the unscaled sums
    # of E products are large enough for float32 rounding to pass the tolerance.
    _accepted(LINEAR, "largest-dims",
              set_args(q=lambda t, d: t * LINEAR_MAX_DIM ** -0.25,
                       k=lambda t, d: t * LINEAR_MAX_DIM ** -0.25), dim_qk=LINEAR_MAX_DIM,
              dim_v=LINEAR_MAX_DIM, batch=1, heads=1, seqlen=3),
    _accepted(LINEAR, "strided", set_args(q=strided, v=strided), dtype=torch.float16),
    _accepted(LINEAR, "empty-length", lambda a, d: None, seqlen=0),
    _accepted(CACHE, "unaligned-caches", set_args(key_cache=unaligned, value_cache=unaligned,
                                                  key=strided)),
    _accepted(CACHE, "no-tokens", lambda a, d: None, tokens=0),
    _accepted(PAGED, "unaligned-caches", set_args(key_cache=unaligned, value_cache=unaligned),
              dtype=torch.float16),
    _accepted(PAGED, "strided-query", set_arg("query", strided), dtype=torch.bfloat16),
    _accepted(PAGED, "no-sequences", lambda a, d: None, lens=()),
    _accepted(PAGED, "all-contexts-empty", lambda a, d: None, lens=(0, 0)),
    _accepted(PREFILL, "no-sequences", lambda a, d: None, lens=(), chunks=()),
    _accepted(PREFILL, "unaligned-caches", set_args(key_cache=unaligned, value_cache=unaligned),
              dtype=torch.bfloat16),
    _accepted(PREFILL, "strided-query", set_arg("query", strided)),
    # FlashAttention's flash_attn_with_kvcache through block tables (once refused): ALiBi slopes
    # per sequence, non-causal rows with a right window, chunks longer than their context.
    _accepted(PAGED, "alibi-per-sequence",
              set_arg("alibi_slopes", lambda t, d: torch.rand(3, 4, device=d))),
    _accepted(PREFILL, "alibi-per-sequence",
              set_arg("alibi_slopes", lambda t, d: torch.rand(3, 4, device=d))),
    _accepted(PREFILL, "non-causal-window-right",
              set_args(causal=value(False), window_right=value(2))),
    _accepted(PREFILL, "chunks-longer-than-contexts", lambda a, d: None, lens=(2, 9, 0),
              chunks=(3, 2, 4)),
    _accepted(PREFILL, "non-causal-chunks-longer-than-contexts",
              set_args(causal=value(False), alibi_slopes=lambda t, d: torch.rand(3, 4, device=d)),
              lens=(2, 9, 0), chunks=(3, 2, 4)),
    # More sequences or heads than a CUDA grid dimension holds: once CUDA-only refusals.
    _accepted(PAGED, "more-sequences-than-a-grid-holds",
              lambda a, d: one_token_cache(a, d, MANY, 2), every_row_is_the_one_value,
              dtype=torch.float16),
    _accepted(PREFILL, "more-sequences-than-a-grid-holds",
              lambda a, d: one_token_cache(a, d, MANY, 1, tokens=MANY), every_row_is_the_one_value),
    _accepted(PREFILL, "more-heads-than-a-grid-holds",
              lambda a, d: one_token_cache(a, d, 1, MANY, tokens=1), every_row_is_the_one_value),
    _accepted(FLASH, "more-batch-rows-than-a-grid-holds", lambda a, d: None, batch=MANY,
              seqlen_q=1, seqlen_k=2, heads_q=1, heads_kv=1, dim=8, kv_lens=None),
] + [
    # Every head dim in [1, max]: between the compiled ones (on CUDA the next one up runs them,
    # or the element-load kernel where a row is not a whole number of 16-byte vectors).
    _accepted(op, "head-dim-%d-%s" % (dim, str(dtype).split(".")[1]), lambda a, d: None, dim=dim,
              dtype=dtype)
    for op in (PAGED, PREFILL)
    for dim, dtype in ((1, torch.float32), (7, torch.float16), (8, torch.float16),
                       (24, torch.bfloat16), (32, torch.float16), (100, torch.float32),
                       (200, torch.bfloat16), (PAGED_MAX_HEAD_DIM, torch.float16))
] + [
    _accepted(op, "fp8-head-dim-%d" % dim, lambda a, d: None, dim=dim, fp8=True,
              dtype=torch.float16)
    for op in (PAGED, PREFILL)
    for dim in (16, 40, 64, 128)
] + [
    # e5m2 caches: uint8 with fp8_e5m2=True, and float8_e5m2 tensors (the flag then optional).
    _accepted(op, "fp8-e5m2-head-dim-%d" % dim, lambda a, d: None, dim=dim, fp8="e5m2",
              dtype=dtype)
    for op in (PAGED, PREFILL)
    for dim, dtype in ((40, torch.float16), (64, torch.bfloat16), (128, torch.float32))
] + [
    _accepted(CACHE, "fp8-e5m2", lambda a, d: None, fp8="e5m2", dtype=torch.float16),
    _accepted(CACHE, "fp8-e5m2-vectorised", lambda a, d: None, fp8="e5m2", dim=64),
] + [
    _accepted(op, "head-dim-%d-block-size-%d" % (dim, bs), lambda a, d: None, dim=dim,
              block_size=bs, dtype=dtype)
    for op in (PAGED, PREFILL)
    for dim in PAGED_HEAD_DIMS
    for bs, dtype in zip(PAGED_BLOCK_SIZES, DTYPES * len(PAGED_BLOCK_SIZES))
    if dim == PAGED_HEAD_DIMS[0] or bs == PAGED_BLOCK_SIZES[-1]
]

ACCEPTED_CALLS += [
    _accepted(SAMPLE, "no-rows", lambda a, d: None, batch=0),
    _accepted(SAMPLE, "one-token-vocabulary", lambda a, d: None, vocab=1),
    _accepted(SAMPLE, "float16-logits", lambda a, d: None, dtype=torch.float16),
    _accepted(SAMPLE, "bfloat16-logits", lambda a, d: None, dtype=torch.bfloat16),
    _accepted(SAMPLE, "more-rows-than-settings-patterns", lambda a, d: None, batch=40, vocab=300),
]


# ---- running a call -----------------------------------------------------------------------------


def ordered(op, args):
    """The arguments in schema order."""
    return [args[name] for name in OPERATORS[op][1]]


def run(op, args):
    """Calls the operator through torch.ops; returns its outputs as a tuple of tensors."""
    out = getattr(torch.ops.djl_attn, op)(*ordered(op, args))
    if out is None:
        return ()
    return out if isinstance(out, tuple) else (out,)


def good_args(op, device, base):
    return OPS[op].good(device, **base)


def run_good(op, device, base, change=None, check=None):
    """Runs a good call (changed by `change`, when given) and checks its outputs (against the
    operator's reference unless `check` is given)."""
    args = good_args(op, device, base)
    if change is not None:
        change(args, device)
    (check or OPS[op].check)(args, run(op, args))


def bad_args(r, device):
    args = good_args(r.op, device, r.base)
    r.change(args, device)
    return args


def rejection(r, device):
    """The exception the row's call raises on `device`."""
    args = bad_args(r, device)
    with pytest.raises(Exception) as info:
        run(r.op, args)
    if device == "cuda":
        torch.cuda.synchronize()
    return info.value


def expected_message_part(r):
    return "%s: %s: " % (r.op, r.arg)


def c_interface_call(op, args):
    """djl_attn_call with the schema's argument kinds, as the Java bridge calls it."""
    index, names, num_outputs = OPERATORS[op]
    kinds = (ctypes.c_int32 * len(names))()
    assert lib.djl_attn_operator_arg_kinds(index, kinds, len(names)) == len(names)
    pairs = []
    for kind, name in zip(kinds, names):
        v = args[name]
        pairs.append((kind, int(v) if isinstance(v, bool) else v))
    return c_call(op, pairs, num_outputs)


def _same_message(a, b):
    # Device names differ between the two runs of a row that mixes devices ("expected the
    # device of q (cpu), got cuda:0" against "(cuda:0), got cpu"); nothing else may.
    unify = lambda s: re.sub(r"\b(cuda:\d+|cuda|cpu|meta)\b", "<device>", s)
    return unify(a) == unify(b)


# ---- the tests ----------------------------------------------------------------------------------


def test_every_operator_has_a_good_call_and_bad_rows():
    # A new operator without a good call and bad rows here fails this test.
    assert set(OPS) | CUDA_ONLY == set(OPERATORS), \
        "operators without a table: %s; table without an operator: %s" \
        % (sorted(set(OPERATORS) - set(OPS) - CUDA_ONLY), sorted(set(OPS) - set(OPERATORS)))
    rows_per_op = {op: [r for r in BAD_CALLS if r.op == op] for op in OPS}
    for op, rows in rows_per_op.items():
        assert len(rows) >= 5, "%s has %d bad rows" % (op, len(rows))
        # Every tensor argument is the subject of at least one row.
        names = OPERATORS[op][1]
        good = good_args(op, "cpu", {})
        for name in names:
            if isinstance(good[name], torch.Tensor):
                assert any(r.arg == name for r in rows), "%s: no row names %s" % (op, name)
    ids = [r.id for r in BAD_CALLS]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    for r in BAD_CALLS:
        assert r.arg in OPERATORS[r.op][1], r.id


def refused_off_the_cpu(op, device, args):
    """True (after checking the refusal) when `op` has no kernel on `device`."""
    if device != "cpu" and op in HOPPER_ONLY and not IS_HOPPER:
        with pytest.raises(ValueError, match="%s: q: " % op):
            run(op, args)
        return True
    if device == "cpu" or op not in CPU_ONLY:
        return False
    with pytest.raises(ValueError, match=CPU_ONLY[op]):
        run(op, args)
    return True


@pytest.mark.parametrize("op", sorted(OPS))
def test_good_call(device, op):
    if refused_off_the_cpu(op, device, good_args(op, device, {})):
        return
    run_good(op, device, {})


@pytest.mark.parametrize("r", BAD_CALLS, ids=[r.id for r in BAD_CALLS])
def test_bad_call_is_rejected_naming_the_argument(device, r):
    if refused_off_the_cpu(r.op, device, good_args(r.op, device, r.base)):
        return
    run_good(r.op, device, r.base)
    error = rejection(r, device)
    if r.mixes_devices and other_device(device) == "meta":
        # torch.ops sends a call with a meta tensor to the Meta kernel, which djl_attn does not
        # register; the binding's device check is reached through djl_attn_call (next test).
        assert type(error) is NotImplementedError and "Meta" in str(error), repr(error)
        return
    assert type(error) is ValueError, repr(error)
    message = str(error)
    assert expected_message_part(r) + "expected" in message, message
    assert r.rule in message, message


@pytest.mark.parametrize("r", BAD_CALLS, ids=[r.id for r in BAD_CALLS])
def test_bad_call_through_the_c_interface(device, capfd, r):
    if refused_off_the_cpu(r.op, device, good_args(r.op, device, r.base)):
        return
    args = bad_args(r, device)
    capfd.readouterr()
    status, message, _ = c_interface_call(r.op, args)
    if device == "cuda":
        torch.cuda.synchronize()
    assert status == INVALID_ARGUMENT, message
    assert message.startswith(expected_message_part(r) + "expected"), message
    assert r.rule in message, message
    assert capfd.readouterr().err == ""
    if not (r.mixes_devices and other_device(device) == "meta"):
        # The same words as the Python exception of the same call.
        assert message in str(rejection(r, device))


@pytest.mark.skipif("cuda" not in DEVICES, reason="compares the CPU and CUDA backends")
@pytest.mark.parametrize("r", BAD_CALLS, ids=[r.id for r in BAD_CALLS])
def test_cpu_and_cuda_reject_alike(r):
    if refused_off_the_cpu(r.op, "cuda", good_args(r.op, "cuda", r.base)):
        return
    cpu, cuda = rejection(r, "cpu"), rejection(r, "cuda")
    assert type(cpu) is type(cuda), (repr(cpu), repr(cuda))
    assert _same_message(str(cpu), str(cuda)), (str(cpu), str(cuda))


@pytest.mark.parametrize("op,change,base,check", ACCEPTED_CALLS)
def test_accepted_call(device, op, change, base, check):
    if refused_off_the_cpu(op, device, good_args(op, device, base)):
        return
    run_good(op, device, base, change, check)
