"""djl_attn.reshape_and_cache, paged_attention and paged_prefill_attention against float64
references computed on each sequence's K/V gathered through its block table, on CPU and (when
present) CUDA, where each kernel variant (DJL_ATTN_PAGED_KERNEL=v1|v2|flash) and each kernel
configuration (DJL_ATTN_PAGED_CONFIG) runs too."""

import math

import pytest
import torch

import reference
from conftest import option_values, supported_ints
from reference import assert_close

reshape_and_cache = torch.ops.djl_attn.reshape_and_cache
paged_attention = torch.ops.djl_attn.paged_attention
paged_prefill = torch.ops.djl_attn.paged_prefill_attention

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# The library's own lists (kHeadDims, kBlockSizes of src/paged/paged_params.h).
HEAD_DIMS = supported_ints("paged.head_dims")
BLOCK_SIZES = supported_ints("paged.block_sizes")
# Every head dim in [1, MAX_HEAD_DIM] is accepted; HEAD_DIMS are the ones the CUDA vector kernels
# are compiled for (others run on the next one up, or on the element-load kernel).
MAX_HEAD_DIM = supported_ints("paged.max_head_dim")[0]
# "auto" lets the launcher's plan choose; v1 (one pass per sequence), v2 (partitioned context
# plus a reduce kernel) and flash (the tensor-core split-KV decode kernel,
# cuda/flash/flash_decode.h) force one CUDA kernel. A forced flash runs what auto would choose
# between v1 and v2 where the flash kernel does not apply (float32, fp8 caches with ALiBi, head
# dims other than 64/128/256, groups above 16: tests/test_plans_paged.py). The CPU has one kernel.
VARIANTS = ["auto", "v1", "v2", "flash"]
# CUDA kernel configurations (DJL_ATTN_PAGED_CONFIG, cuda/paged/paged_attention_launch.cuh):
# the default, 8 warps with 2 + 2 loads per lane, two cp.async shared-memory rings, and the
# register ones with the next cache block prefetched into L2. The non-default ones exist for
# float16/bfloat16 caches and head dims 64 and 128 only. Unset, the launcher picks smem4 where it
# exists (tests without this fixture run that choice).
# The configurations this build has (the tuning ones only in a DJL_ATTN_TUNING build).
CONFIGS = option_values("DJL_ATTN_PAGED_CONFIG") if torch.cuda.is_available() else ["default"]
TUNED_DTYPES = [torch.float16, torch.bfloat16]
TUNED_HEAD_DIMS = [64, 128]


@pytest.fixture(params=VARIANTS)
def variant(request, device, options):
    if device == "cpu":
        if request.param != "auto":
            pytest.skip("the CPU has one paged attention kernel")
        return request.param
    options.set("DJL_ATTN_PAGED_KERNEL", request.param)
    return request.param


@pytest.fixture(params=CONFIGS)
def config(request, device, options):
    if device == "cpu" and request.param != "default":
        pytest.skip("the CPU has one paged attention kernel")
    if (request.param != "default" and "variant" in request.fixturenames
            and request.getfixturevalue("variant") == "flash"):
        pytest.skip("DJL_ATTN_PAGED_CONFIG configures v1/v2, not the flash kernel")
    if device == "cuda":
        options.set("DJL_ATTN_PAGED_CONFIG", request.param)
    return request.param


def skip_untuned(config, dtype, dim):
    """Shapes without the non-default configurations run the default kernel: nothing new to
    test there."""
    if config != "default" and (dtype not in TUNED_DTYPES or dim not in TUNED_HEAD_DIMS):
        pytest.skip("DJL_ATTN_PAGED_CONFIG=%s has no kernel for %s, D = %d" % (config, dtype, dim))


class Paged:
    """A paged cache holding sequences of the given context lengths in shuffled, non-contiguous
    physical blocks (plus spare blocks nobody owns); unused table entries hold garbage ids."""

    def __init__(self, context_lens, block_size, heads_kv, dim, dtype, device, spare_blocks=3,
                 extra_columns=1):
        self.block_size = block_size
        used = [(n + block_size - 1) // block_size for n in context_lens]
        num_blocks = sum(used) + spare_blocks
        self.max_blocks = max(used + [0]) + extra_columns
        perm = torch.randperm(num_blocks)
        tables = torch.full((len(context_lens), self.max_blocks), -7, dtype=torch.int32)
        at = 0
        for s, u in enumerate(used):
            tables[s, :u] = perm[at : at + u].to(torch.int32)
            at += u
        # Ids past a sequence's blocks are never read: make them out of range on purpose.
        tables[:, self.max_blocks - 1 :][tables[:, self.max_blocks - 1 :] == -7] = num_blocks + 5
        self.block_tables = tables.to(device)
        self.context_lens = torch.tensor(context_lens, dtype=torch.int32, device=device)
        shape = (num_blocks, block_size, heads_kv, dim)
        # Poisoned: a kernel that reads a slot no sequence owns returns NaN.
        self.key_cache = torch.full(shape, float("nan"), dtype=dtype, device=device)
        self.value_cache = torch.full(shape, float("nan"), dtype=dtype, device=device)

    def slots(self, seq, positions):
        """slot_mapping entries of the given token positions of one sequence."""
        table = self.block_tables[seq].cpu().long()
        pos = torch.as_tensor(positions, dtype=torch.long)
        return table[pos // self.block_size] * self.block_size + pos % self.block_size

    def fill(self, keys, values):
        """Writes each sequence's keys/values [ctx, Hkv, D] with one reshape_and_cache call."""
        slots = [self.slots(s, torch.arange(k.shape[0])) for s, k in enumerate(keys)]
        device = self.key_cache.device
        reshape_and_cache(torch.cat(keys), torch.cat(values), self.key_cache, self.value_cache,
                          torch.cat(slots).to(device))


def poison_before_window(paged, context_lens, window_left, poison):
    """Overwrites each sequence's keys and values before its window (after the reference was
    taken): a kernel that lets a hidden key reach the output, even as 0 * value, returns NaN."""
    if window_left < 0:
        return
    for s, n in enumerate(context_lens):
        first = max(0, n - 1 - window_left)
        if first == 0:
            continue
        slots = paged.slots(s, torch.arange(first)).to(paged.key_cache.device)
        for cache in (paged.key_cache, paged.value_cache):
            rows = cache.view(torch.uint8) if poison == FP8_NAN_BYTE else cache
            rows.view(-1, *cache.shape[2:])[slots] = poison


def random_kv(context_lens, heads_kv, dim, dtype, device):
    keys = [torch.randn(n, heads_kv, dim, dtype=dtype, device=device) for n in context_lens]
    values = [torch.randn(n, heads_kv, dim, dtype=dtype, device=device) for n in context_lens]
    return keys, values


def check_decode(context_lens, block_size, heads_q, heads_kv, dim, dtype, device, alibi=False,
                 max_context_len=None, scale=None, window_left=-1, softcap=0.0):
    paged = Paged(context_lens, block_size, heads_kv, dim, dtype, device)
    keys, values = random_kv(context_lens, heads_kv, dim, dtype, device)
    paged.fill(keys, values)
    for s, n in enumerate(context_lens):
        # reshape_and_cache put every token where its block table says.
        got = reference.gather_paged(paged.key_cache, paged.block_tables[s].cpu(), n)
        assert torch.equal(got, keys[s])
        got = reference.gather_paged(paged.value_cache, paged.block_tables[s].cpu(), n)
        assert torch.equal(got, values[s])
    query = torch.randn(len(context_lens), heads_q, dim, dtype=dtype, device=device)
    slopes = torch.rand(heads_q, device=device) * 0.5 if alibi else None
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    max_len = max(context_lens + [0]) if max_context_len is None else max_context_len

    expected = reference.paged_attention(query, paged.key_cache, paged.value_cache,
                                         paged.block_tables, paged.context_lens, scale, slopes,
                                         window_left, softcap)
    poison_before_window(paged, context_lens, window_left, float("nan"))
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, scale, max_len, slopes, window_left=window_left,
                          softcap=softcap)
    assert out.dtype == dtype and out.shape == query.shape
    assert_close(out.cpu(), expected.cpu(), dtype)
    return out


# Context 1, 0, a whole number of blocks, a partial last block, and more than one 512-token
# partition of the v2 kernel.
MIXED_CONTEXTS = [1, 0, 96, 37, 600]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", HEAD_DIMS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_decode_grid(device, variant, config, dtype, dim, block_size):
    skip_untuned(config, dtype, dim)
    check_decode(MIXED_CONTEXTS, block_size, 4, 2, dim, dtype, device)


# The CUDA kernel serves up to 4 query heads of a group per thread block: groups of 1, 2, 4,
# 8 (two tiles), 6 (a tile of 4 and one of 2) and 5 (4 and 1).
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (8, 2), (8, 1), (6, 3), (12, 2), (5, 1)])
@pytest.mark.parametrize("alibi", [False, True])
def test_decode_gqa_mqa_alibi(device, variant, config, heads_q, heads_kv, alibi):
    check_decode([113, 7, 1, 1000], 16, heads_q, heads_kv, 128, torch.float16, device, alibi=alibi)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_decode_grouped_heads_every_block_size(device, variant, dtype, block_size):
    # A group of 6 (two head tiles, one partial) with ALiBi, every dtype and block size, an odd
    # head dim in 16-byte vectors (80) and contexts ending mid-block.
    check_decode([1, 77, 300], block_size, 12, 2, 80, dtype, device, alibi=True)


@pytest.mark.parametrize("dtype", TUNED_DTYPES)
@pytest.mark.parametrize("dim", TUNED_HEAD_DIMS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("heads_q,heads_kv", [(12, 2), (5, 1)])
def test_decode_configs_grouped_alibi(device, variant, config, dtype, dim, block_size, heads_q,
                                      heads_kv):
    # Every kernel configuration on the shapes it has: partial head tiles (6 = 4 + 2, 5 = 4 + 1),
    # ALiBi, contexts of one token, mid-block ends and several 64-token v2 partitions per warp.
    if device == "cpu" and (dim != 128 or block_size != 16):
        pytest.skip("the CPU kernel has one path; a few shapes suffice there")
    check_decode([1, 77, 300, 1100], block_size, heads_q, heads_kv, dim, dtype, device,
                 alibi=True)


def test_decode_full_grid_long_partitions(device, variant, config):
    # 80 sequences x 8 kv heads fill the grid of a GPU of up to 160 SMs without splitting, so
    # v2 keeps its 512-token partitions (the small tests above shrink them to 64): 2 partitions,
    # the last partial, and auto picks v1 for these lengths.
    if device == "cpu":
        pytest.skip("sizes the CUDA grid (and takes seconds on the CPU)")
    lens = torch.randint(520, 700, (80,)).tolist()
    check_decode(lens, 16, 8, 8, 64, torch.float16, device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_long_context(device, variant, config, dtype):
    # Several v2 partitions; max_context_len larger than any context is allowed.
    skip_untuned(config, dtype, 128)
    check_decode([3000, 1500], 16, 4, 1, 128, dtype, device, alibi=True, max_context_len=3100)


def test_decode_context_past_48k_of_shared_memory(device, variant, config):
    # 14000 scores need 56 KB of shared memory in v1: the kernel must opt in past 48 KiB.
    if device == "cpu":
        pytest.skip("a CUDA shared-memory limit")
    check_decode([14000, 3], 32, 2, 1, 64, torch.float16, device)


def test_decode_custom_scale_and_many_sequences(device, variant):
    lens = torch.randint(0, 200, (37,)).tolist()
    check_decode(lens, 8, 2, 2, 64, torch.float32, device, scale=0.37)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_decode_strided_query(device, variant, dtype):
    # The query as a view into a fused [num_seqs, Hq + 2 Hkv, D] projection.
    paged = Paged([20, 50], 16, 2, 64, dtype, device)
    keys, values = random_kv([20, 50], 2, 64, dtype, device)
    paged.fill(keys, values)
    fused = torch.randn(2, 8, 64, dtype=dtype, device=device)
    query = fused[:, :4]
    assert not query.is_contiguous()

    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, 0.125, 50, None)
    expected = reference.paged_attention(query, paged.key_cache, paged.value_cache,
                                         paged.block_tables, paged.context_lens, 0.125)
    assert_close(out.cpu(), expected.cpu(), dtype)


# Groups at the flash kernel's limit (16 query heads of one kv head fill its m16 tile), past it
# (32: auto and a forced flash run v1/v2), and a plain MHA group of 1, with
# contexts around its 64-key tiles and a long one that it splits over the SMs.
@pytest.mark.parametrize("heads_q,heads_kv", [(16, 1), (32, 2), (32, 1), (4, 4)])
@pytest.mark.parametrize("dtype", TUNED_DTYPES)
def test_decode_large_groups(device, variant, heads_q, heads_kv, dtype):
    if device == "cpu" and dtype != torch.float16:
        pytest.skip("the CPU kernel has one path; one dtype suffices there")
    lens = [1, 63, 64, 65, 129] + ([5000] if device == "cuda" else [700])
    check_decode(lens, 16, heads_q, heads_kv, 128, dtype, device)


def test_decode_empty_batch(device, variant):
    paged = Paged([], 16, 2, 64, torch.float16, device)
    query = torch.randn(0, 4, 64, dtype=torch.float16, device=device)
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, 1.0, 0, None)
    assert out.shape == (0, 4, 64)


def test_context_zero_gives_zero(device, variant, config):
    paged = Paged([0, 0], 16, 2, 64, torch.float16, device)
    query = torch.randn(2, 4, 64, dtype=torch.float16, device=device)
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, 1.0, 0, None)
    assert torch.equal(out.cpu(), torch.zeros(2, 4, 64, dtype=torch.float16))


def unaligned_copy(cache):
    """The same values in a contiguous view that starts one element past the (aligned) start of
    its storage: a cache carved out of a larger buffer, not 16-byte aligned."""
    flat = torch.empty(cache.numel() + 1, dtype=cache.dtype, device=cache.device)
    view = flat[1:].view(cache.shape)
    view.copy_(cache)
    assert view.data_ptr() % 16 != 0 and view.is_contiguous()
    return view


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_unaligned_caches(device, variant, dtype):
    # Caches that are not 16-byte aligned run on every backend and kernel request (on CUDA the
    # warp-per-row kernel of paged_prefill_attention reads them), with the same results, ALiBi
    # and GQA included; so do reshape_and_cache and paged_prefill_attention.
    lens = [1, 40, 77]
    paged = Paged(lens, 16, 2, 80, dtype, device)
    paged.key_cache = unaligned_copy(paged.key_cache)
    paged.value_cache = unaligned_copy(paged.value_cache)
    keys, values = random_kv(lens, 2, 80, dtype, device)
    paged.fill(keys, values)
    for s, n in enumerate(lens):
        assert torch.equal(reference.gather_paged(paged.key_cache, paged.block_tables[s].cpu(), n),
                           keys[s])
    query = torch.randn(len(lens), 6, 80, dtype=dtype, device=device)
    slopes = torch.rand(6, device=device)
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, 0.1, 77, slopes)
    expected = reference.paged_attention(query, paged.key_cache, paged.value_cache,
                                         paged.block_tables, paged.context_lens, 0.1, slopes)
    assert_close(out.cpu(), expected.cpu(), dtype)
    cu = torch.tensor([0, 1, 11, 14], dtype=torch.int32, device=device)
    rows = torch.randn(14, 6, 80, dtype=dtype, device=device)
    out = paged_prefill(rows, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                        paged.context_lens, 0.1, 10, slopes)
    expected = reference.paged_prefill_attention(rows, paged.key_cache, paged.value_cache,
                                                 paged.block_tables, cu, paged.context_lens, 0.1,
                                                 slopes)
    assert_close(out.cpu(), expected.cpu(), dtype)


def one_token_cache(dtype, device, heads_kv=1, dim=64):
    """A cache of one block whose first token has a known value row: every query that attends
    to that token alone gets exactly that row back."""
    key_cache = torch.randn(1, 8, heads_kv, dim, dtype=dtype, device=device)
    value_cache = torch.randn(1, 8, heads_kv, dim, dtype=dtype, device=device)
    return key_cache, value_cache


def test_decode_more_sequences_than_a_cuda_grid_holds(device, variant):
    # 70000 sequences (CUDA puts at most 65535 in a grid's y): each of one token, all in the same
    # block, so each output row is that token's value row.
    num_seqs = 70000
    key_cache, value_cache = one_token_cache(torch.float16, device)
    tables = torch.zeros(num_seqs, 1, dtype=torch.int32, device=device)
    lens = torch.ones(num_seqs, dtype=torch.int32, device=device)
    query = torch.randn(num_seqs, 2, 64, dtype=torch.float16, device=device)
    out = paged_attention(query, key_cache, value_cache, tables, lens, 0.125, 1, None)
    assert_close(out.cpu(), value_cache[0, 0].cpu().double().expand(num_seqs, 2, 64),
                 torch.float16)


def test_prefill_more_heads_and_sequences_than_a_cuda_grid_holds(device):
    # 70000 query heads, then 70000 sequences of one row (CUDA's grid y and z hold 65535 each).
    key_cache, value_cache = one_token_cache(torch.float32, device)
    many = 70000
    one = torch.ones(1, dtype=torch.int32, device=device)
    query = torch.randn(1, many, 64, device=device)
    out = paged_prefill(query, key_cache, value_cache, torch.zeros(1, 1, dtype=torch.int32,
                        device=device), torch.tensor([0, 1], dtype=torch.int32, device=device),
                        one, 0.125, 1, None)
    assert_close(out.cpu(), value_cache[0, 0].cpu().double().expand(1, many, 64), torch.float32)
    query = torch.randn(many, 1, 64, device=device)
    out = paged_prefill(query, key_cache, value_cache,
                        torch.zeros(many, 1, dtype=torch.int32, device=device),
                        torch.arange(many + 1, dtype=torch.int32, device=device),
                        torch.ones(many, dtype=torch.int32, device=device), 0.125, 1, None)
    assert_close(out.cpu(), value_cache[0, 0].cpu().double().expand(many, 1, 64), torch.float32)


# ---- reshape_and_cache ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [64, 80, 7])
def test_reshape_and_cache_skips_negative_slots(device, dtype, dim):
    cache_shape = (5, 8, 3, dim)
    key_cache = torch.randn(cache_shape, dtype=dtype, device=device)
    value_cache = torch.randn(cache_shape, dtype=dtype, device=device)
    key = torch.randn(13, 3, dim, dtype=dtype, device=device)
    value = torch.randn(13, 3, dim, dtype=dtype, device=device)
    slots = torch.randperm(40)[:13]
    slots[[2, 5, 11]] = -1
    expected_k, expected_v = key_cache.clone(), value_cache.clone()
    for t, slot in enumerate(slots.tolist()):
        if slot >= 0:
            expected_k.view(-1, 3, dim)[slot] = key[t]
            expected_v.view(-1, 3, dim)[slot] = value[t]
    reshape_and_cache(key, value, key_cache, value_cache, slots.to(device))
    assert torch.equal(key_cache, expected_k)
    assert torch.equal(value_cache, expected_v)


def test_reshape_and_cache_strided_inputs(device):
    # key and value as views into one fused [T, 3, Hkv, D] projection.
    fused = torch.randn(9, 3, 2, 64, dtype=torch.float16, device=device)
    key, value = fused[:, 1], fused[:, 2]
    key_cache = torch.zeros(2, 16, 2, 64, dtype=torch.float16, device=device)
    value_cache = torch.zeros_like(key_cache)
    slots = torch.arange(9, device=device) * 3
    reshape_and_cache(key, value, key_cache, value_cache, slots)
    assert torch.equal(key_cache.view(-1, 2, 64)[slots.cpu()], key)
    assert torch.equal(value_cache.view(-1, 2, 64)[slots.cpu()], value)


def test_reshape_and_cache_no_tokens(device):
    key_cache = torch.randn(2, 16, 2, 64, device=device)
    value_cache = torch.randn(2, 16, 2, 64, device=device)
    before = key_cache.clone(), value_cache.clone()
    empty = torch.empty(0, 2, 64, device=device)
    reshape_and_cache(empty, empty, key_cache, value_cache,
                      torch.empty(0, dtype=torch.long, device=device))
    assert torch.equal(key_cache, before[0]) and torch.equal(value_cache, before[1])


# ---- paged prefill --------------------------------------------------------------------------


def run_chunked_prefill(lengths, chunk_sizes, block_size, heads_q, heads_kv, dim, dtype, device,
                        alibi=None, window_left=-1, softcap=0.0):
    """Prefills each sequence in chunks (a different chunk size per sequence, all sequences in
    one call per step), caching each chunk's K/V first; returns per-sequence (q, k, v, out)."""
    paged = Paged(lengths, block_size, heads_kv, dim, dtype, device)
    qs = [torch.randn(n, heads_q, dim, dtype=dtype, device=device) for n in lengths]
    keys, values = random_kv(lengths, heads_kv, dim, dtype, device)
    outs = [[] for _ in lengths]
    done = [0] * len(lengths)
    scale = 1.0 / math.sqrt(dim)
    while any(d < n for d, n in zip(done, lengths)):
        chunks = [min(c, n - d) for c, d, n in zip(chunk_sizes, done, lengths)]
        slots = torch.cat([paged.slots(s, torch.arange(d, d + c)) for s, (d, c) in
                           enumerate(zip(done, chunks))])
        k_new = torch.cat([k[d : d + c] for k, d, c in zip(keys, done, chunks)])
        v_new = torch.cat([v[d : d + c] for v, d, c in zip(values, done, chunks)])
        reshape_and_cache(k_new, v_new, paged.key_cache, paged.value_cache, slots.to(device))
        q_new = torch.cat([q[d : d + c] for q, d, c in zip(qs, done, chunks)])
        cu = torch.tensor([0] + chunks, dtype=torch.int32).cumsum(0).to(torch.int32)
        ctx = torch.tensor([d + c for d, c in zip(done, chunks)], dtype=torch.int32)
        out = paged_prefill(q_new, paged.key_cache, paged.value_cache, paged.block_tables,
                            cu.to(device), ctx.to(device), scale, max(chunks), alibi,
                            window_left=window_left, softcap=softcap)
        if alibi is not None:
            # The dense reference's ALiBi is -slope * |i - j|, the paged one slope * (j - p):
            # the same on the causal keys; each step against the paged reference.
            expected = reference.paged_prefill_attention(q_new, paged.key_cache,
                                                         paged.value_cache, paged.block_tables,
                                                         cu, ctx, scale, alibi, window_left,
                                                         softcap)
            assert_close(out.cpu(), expected.cpu(), dtype, "prefill step")
        for s, (a, b) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
            outs[s].append(out[a:b])
        done = [d + c for d, c in zip(done, chunks)]
    return qs, keys, values, [torch.cat(o) for o in outs], scale


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_chunked_prefill_equals_dense_causal(device, dtype, block_size):
    lengths = [1, 7, 113, 300]
    qs, keys, values, outs, scale = run_chunked_prefill(lengths, [1, 3, 50, 128], block_size, 4, 2,
                                                        80, dtype, device)
    for q, k, v, out in zip(qs, keys, values, outs):
        expected, _ = reference.flash_attention(q[None], k[None], v[None], None, scale, True)
        assert_close(out.cpu(), expected[0].cpu(), dtype, "chunked prefill vs dense")


@pytest.mark.parametrize("dim", HEAD_DIMS)
@pytest.mark.parametrize("heads_q,heads_kv", [(4, 4), (4, 1)])
def test_prefill_head_dims_and_groups(device, dim, heads_q, heads_kv):
    qs, keys, values, outs, scale = run_chunked_prefill([33, 70], [33, 25], 16, heads_q, heads_kv,
                                                        dim, torch.float16, device)
    for q, k, v, out in zip(qs, keys, values, outs):
        expected, _ = reference.flash_attention(q[None], k[None], v[None], None, scale, True)
        assert_close(out.cpu(), expected[0].cpu(), torch.float16, "chunked prefill vs dense")


def test_prefill_with_alibi(device):
    slopes = torch.rand(4, device=device)
    run_chunked_prefill([40, 90], [17, 90], 8, 4, 2, 64, torch.float32, device, alibi=slopes)


def test_prefill_of_one_token_equals_decode(device):
    lens = [1, 5, 77, 400]
    paged = Paged(lens, 16, 2, 128, torch.float16, device)
    keys, values = random_kv(lens, 2, 128, torch.float16, device)
    paged.fill(keys, values)
    query = torch.randn(4, 8, 128, dtype=torch.float16, device=device)
    slopes = torch.rand(8, device=device)
    cu = torch.arange(5, dtype=torch.int32, device=device)
    prefill = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                            paged.context_lens, 0.1, 1, slopes)
    decode = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                             paged.context_lens, 0.1, 400, slopes)
    assert_close(prefill.cpu(), decode.cpu().double(), torch.float16)


def test_prefill_sequence_without_new_tokens(device):
    # A sequence with an empty chunk contributes no rows.
    paged = Paged([10, 20], 8, 1, 64, torch.float32, device)
    keys, values = random_kv([10, 20], 1, 64, torch.float32, device)
    paged.fill(keys, values)
    query = torch.randn(5, 2, 64, device=device)
    cu = torch.tensor([0, 0, 5], dtype=torch.int32, device=device)
    out = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                        paged.context_lens, 0.125, 5, None)
    expected = reference.paged_prefill_attention(query, paged.key_cache, paged.value_cache,
                                                 paged.block_tables, cu, paged.context_lens, 0.125)
    assert_close(out.cpu(), expected.cpu(), torch.float32)


# ---- validation -----------------------------------------------------------------------------


def decode_args(device, dtype=torch.float16, lens=(20, 9), dim=64, block_size=16, heads=(4, 2)):
    paged = Paged(list(lens), block_size, heads[1], dim, dtype, device)
    keys, values = random_kv(list(lens), heads[1], dim, dtype, device)
    paged.fill(keys, values)
    query = torch.randn(len(lens), heads[0], dim, dtype=dtype, device=device)
    return dict(query=query, key_cache=paged.key_cache, value_cache=paged.value_cache,
                block_tables=paged.block_tables, context_lens=paged.context_lens, scale=0.125,
                max_context_len=max(lens), alibi_slopes=None)


def call_decode(args):
    return paged_attention(args["query"], args["key_cache"], args["value_cache"],
                           args["block_tables"], args["context_lens"], args["scale"],
                           args["max_context_len"], args["alibi_slopes"])


def expect_error(match, fn, *args):
    with pytest.raises(ValueError, match=match):
        fn(*args)


def test_validation_block_ids(device):
    args = decode_args(device)
    tables = args["block_tables"].clone()
    tables[1, 0] = args["key_cache"].shape[0]  # one past the last block
    args["block_tables"] = tables
    expect_error(r"paged_attention: block_tables: expected block ids in \[0, num_blocks", call_decode, args)
    tables[1, 0] = -1
    expect_error(r"paged_attention: block_tables: expected block ids", call_decode, args)


def test_validation_unused_table_entries_are_ignored(device):
    args = decode_args(device, lens=(16, 9))
    args["block_tables"][:, 1:] = 10**6  # sequences of <= 16 tokens use only column 0
    call_decode(args)


def test_validation_context_lens(device):
    args = decode_args(device)
    max_tokens = args["block_tables"].shape[1] * 16
    args["context_lens"] = torch.tensor([max_tokens + 1, 9], dtype=torch.int32, device=device)
    args["max_context_len"] = max_tokens + 1
    expect_error(r"context_lens: expected values in \[0, max_blocks \* block_size", call_decode, args)
    args["context_lens"] = torch.tensor([-1, 9], dtype=torch.int32, device=device)
    expect_error(r"context_lens: expected values in \[0", call_decode, args)
    args["context_lens"] = torch.tensor([20, 9], dtype=torch.int32, device=device)
    args["max_context_len"] = 19
    expect_error(r"context_lens: expected values <= max_context_len = 19", call_decode, args)
    args["max_context_len"] = -1
    expect_error(r"max_context_len: expected a value in \[0", call_decode, args)


@pytest.mark.parametrize(
    "arg,value,match",
    [
        ("query", lambda a: a["query"].to(torch.float64), r"query: expected dtype in"),
        ("query", lambda a: a["query"].float(), r"key_cache: expected the dtype of query"),
        ("query", lambda a: torch.zeros(*a["query"].shape[:2], MAX_HEAD_DIM + 1,
                                        dtype=a["query"].dtype, device=a["query"].device),
         r"query: expected a head dim D in \[1, %d\], got %d" % (MAX_HEAD_DIM, MAX_HEAD_DIM + 1)),
        ("query", lambda a: a["query"][:, :3].contiguous(), r"key_cache: expected a number of heads Hkv that divides the query heads Hq = 3"),
        ("query", lambda a: a["query"][0], r"query: expected 3 dims"),
        ("block_tables", lambda a: a["block_tables"].long(), r"block_tables: expected dtype int32"),
        ("block_tables", lambda a: a["block_tables"][:1], r"block_tables: expected size 2 for num_seqs"),
        ("context_lens", lambda a: a["context_lens"].long(), r"context_lens: expected dtype int32"),
        ("value_cache", lambda a: a["value_cache"][:, :, :1].contiguous(), r"value_cache: expected size 2 for Hkv"),
        ("key_cache", lambda a: a["key_cache"].transpose(1, 2).contiguous().transpose(1, 2),
         r"key_cache: expected a contiguous tensor"),
        ("alibi_slopes", lambda a: torch.ones(4, dtype=torch.float16, device=a["query"].device), r"alibi_slopes: expected dtype float32"),
        ("alibi_slopes", lambda a: torch.ones(3, device=a["query"].device), r"alibi_slopes: expected size 4 for Hq"),
        ("scale", lambda a: float("inf"), r"scale: expected a finite value"),
    ],
)
def test_validation_decode_arguments(device, arg, value, match):
    args = decode_args(device)
    args[arg] = value(args)
    expect_error("paged_attention: " + match, call_decode, args)


def test_validation_block_size(device):
    args = decode_args(device)
    args["key_cache"] = args["key_cache"].reshape(-1, 4, 2, 64)
    args["value_cache"] = args["value_cache"].reshape(-1, 4, 2, 64)
    expect_error(r"paged_attention: key_cache: expected a block size in \{" + ", ".join(str(b) for b in BLOCK_SIZES) + r"\}, got 4",
                 call_decode, args)


def test_validation_devices(device):
    if device != "cuda":
        pytest.skip("needs a second device")
    args = decode_args(device)
    args["block_tables"] = args["block_tables"].cpu()
    expect_error(r"block_tables: expected the device of query \(cuda:0\), got cpu", call_decode, args)


def test_validation_slot_out_of_range_writes_nothing(device):
    key_cache = torch.randn(2, 8, 2, 64, device=device)
    value_cache = torch.randn(2, 8, 2, 64, device=device)
    before = key_cache.clone(), value_cache.clone()
    key = torch.randn(3, 2, 64, device=device)
    slots = torch.tensor([0, 5, 16], device=device)  # 16 = num_blocks * block_size
    expect_error(r"reshape_and_cache: slot_mapping: expected slots < num_blocks \* block_size = 16 "
                 r"\(or negative to skip\), got 16 at index 2",
                 reshape_and_cache, key, key, key_cache, value_cache, slots)
    assert torch.equal(key_cache, before[0]) and torch.equal(value_cache, before[1])


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda k, v, kc, vc, s: (k, v, kc, vc, s.int()), r"slot_mapping: expected dtype int64"),
        (lambda k, v, kc, vc, s: (k, v, kc, vc, s[:2]), r"slot_mapping: expected size 3 for T"),
        (lambda k, v, kc, vc, s: (k, v.half(), kc, vc, s), r"value: expected the dtype of key"),
        (lambda k, v, kc, vc, s: (k, v, kc.half(), vc, s), r"key_cache: expected the dtype of key"),
        (lambda k, v, kc, vc, s: (k, v, kc, vc[:, :, :1].contiguous(), s), r"value_cache: expected size 2 for Hkv"),
        (lambda k, v, kc, vc, s: (k[:, :1].contiguous(), v[:, :1].contiguous(), kc, vc, s), r"key_cache: expected size 1 for Hkv"),
        (lambda k, v, kc, vc, s: (k.transpose(0, 2), v, kc, vc, s), r"key: expected a contiguous last dim"),
    ],
)
def test_validation_reshape_and_cache_arguments(device, change, match):
    cache = torch.randn(2, 8, 2, 64, device=device)
    key = torch.randn(3, 2, 64, device=device)
    slots = torch.tensor([0, 5, 9], device=device)
    expect_error("reshape_and_cache: " + match, reshape_and_cache,
                 *change(key, key.clone(), cache, cache.clone(), slots))


def prefill_call(device, cu, ctx, max_seqlen_q, tokens=None):
    paged = Paged([20, 9], 8, 2, 64, torch.float32, device)
    tokens = cu[-1] if tokens is None else tokens
    query = torch.randn(tokens, 2, 64, device=device)
    return (query, paged.key_cache, paged.value_cache, paged.block_tables,
            torch.tensor(cu, dtype=torch.int32, device=device),
            torch.tensor(ctx, dtype=torch.int32, device=device), 0.125, max_seqlen_q, None)


def test_validation_prefill(device):
    expect_error(r"paged_prefill_attention: cu_seqlens_q: expected the last value to be T = 5",
                 paged_prefill, *prefill_call(device, [0, 3, 4], [20, 9], 3, tokens=5))
    expect_error(r"cu_seqlens_q: expected 0 at index 0, got 1",
                 paged_prefill, *prefill_call(device, [1, 3, 4], [20, 9], 3, tokens=4))
    expect_error(r"cu_seqlens_q: expected non-decreasing values",
                 paged_prefill, *prefill_call(device, [0, 5, 4], [20, 9], 4, tokens=4))
    expect_error(r"max_seqlen_q: expected >= every chunk length, got 2 < 3",
                 paged_prefill, *prefill_call(device, [0, 3, 4], [20, 9], 2))
    expect_error(r"max_seqlen_q: expected a value in \[0, T = 4\], got 5",
                 paged_prefill, *prefill_call(device, [0, 3, 4], [20, 9], 5))
    expect_error(r"cu_seqlens_q: expected size 3 for num_seqs \+ 1",
                 paged_prefill, *prefill_call(device, [0, 3], [20, 9], 3))
    expect_error(r"paged_prefill_attention: block_tables: expected block ids",
                 paged_prefill, *prefill_call(device, [0, 3, 4], [20, 9], 3)[:3],
                 torch.full((2, 3), 99, dtype=torch.int32, device=device),
                 *prefill_call(device, [0, 3, 4], [20, 9], 3)[4:])


def test_validation_kernel_choice(device, options):
    if device != "cuda":
        pytest.skip("DJL_ATTN_PAGED_KERNEL chooses between CUDA kernels")
    args = decode_args(device)
    # A value not in the list is refused where it is set (the environment's is reported at load).
    with pytest.raises(ValueError, match=r"DJL_ATTN_PAGED_KERNEL: expected one of auto, v1, v2, "
                                         r"flash, got 'v3'"):
        options.set("DJL_ATTN_PAGED_KERNEL", "v3")
    expected = reference.paged_attention(args["query"], args["key_cache"], args["value_cache"],
                                         args["block_tables"], args["context_lens"], 0.125)
    # A large max_context_len with short contexts is fine for every kernel: v2 has at most 8192
    # partitions, so past 2^22 tokens it takes longer ones than 512; v1's state is per thread
    # block, not per token.
    for variant, max_len in (("v2", 1 << 20), ("v2", 1 << 23), ("v2", 1 << 30), ("v1", 1 << 23),
                             ("auto", 1 << 23), ("flash", 1 << 23)):
        options.set("DJL_ATTN_PAGED_KERNEL", variant)
        args["max_context_len"] = max_len
        assert_close(call_decode(args).cpu(), expected.cpu(), torch.float16)


@pytest.mark.parametrize("partition", ["64", "1024", "8192"])
def test_decode_partition_size(device, config, partition, options):
    # DJL_ATTN_PAGED_PARTITION sets the length v2 starts from. 80 sequences x 8 kv heads fill
    # the grid of a GPU of up to 160 SMs, so the launcher keeps it: many short partitions, a few
    # long ones, and one longer than every context (a single partition; the reduce still runs).
    # A small batch then shrinks it again.
    if device != "cuda":
        pytest.skip("a CUDA launch setting")
    options.set("DJL_ATTN_PAGED_KERNEL", "v2")
    options.set("DJL_ATTN_PAGED_PARTITION", partition)
    lens = torch.randint(0, 3000, (80,)).tolist()
    check_decode(lens, 16, 16, 8, 128, torch.float16, device, alibi=True)
    check_decode([2500, 1, 1030, 0], 32, 4, 1, 64, torch.bfloat16, device)


def test_validation_kernel_config(device, options):
    if device != "cuda":
        pytest.skip("DJL_ATTN_PAGED_CONFIG and DJL_ATTN_PAGED_PARTITION choose CUDA kernels")
    args = decode_args(device)
    with pytest.raises(ValueError, match=r"DJL_ATTN_PAGED_CONFIG: expected one of "
                                         + ", ".join(CONFIGS) + r", got 'fast'"):
        options.set("DJL_ATTN_PAGED_CONFIG", "fast")
    for bad in ("32", "100", "16384", "1k"):
        with pytest.raises(ValueError, match=r"DJL_ATTN_PAGED_PARTITION: expected one of 512, 64, "
                                             r".*, 8192, got '%s'" % bad):
            options.set("DJL_ATTN_PAGED_PARTITION", bad)
    # A shape without the tuned kernels (float32) runs the default under any configuration.
    options.unset("DJL_ATTN_PAGED_PARTITION")
    args = decode_args(device, dtype=torch.float32, dim=80)
    expected = reference.paged_attention(args["query"], args["key_cache"], args["value_cache"],
                                         args["block_tables"], args["context_lens"], 0.125)
    for name in CONFIGS:
        options.set("DJL_ATTN_PAGED_CONFIG", name)
        assert_close(call_decode(args).cpu(), expected.cpu(), torch.float32)


# check_indices=False / check_slots=False: the caller (Java's PagedKvCache, for a PagedBatch it
# checked once for the step) vouches for the index values; the results are the same, and on a GPU
# the calls make no device-to-host copy, so a decode step's per-layer calls can be captured in a
# CUDA graph (capture fails on any synchronisation).
def test_vouched_indices_give_the_same_results(device, variant):
    args = decode_args(device, lens=(20, 9, 33))
    checked = call_decode(args)
    vouched = paged_attention(args["query"], args["key_cache"], args["value_cache"],
                              args["block_tables"], args["context_lens"], args["scale"],
                              args["max_context_len"], None, check_indices=False)
    assert torch.equal(checked, vouched)
    lens = [5, 17]
    paged = Paged(lens, 8, 2, 64, torch.float16, device)
    keys, values = random_kv(lens, 2, 64, torch.float16, device)
    slots = torch.cat([paged.slots(s, torch.arange(n)) for s, n in enumerate(lens)]).to(device)
    reshape_and_cache(torch.cat(keys), torch.cat(values), paged.key_cache, paged.value_cache,
                      slots, check_slots=False)
    for s, n in enumerate(lens):
        got = reference.gather_paged(paged.key_cache, paged.block_tables[s].cpu(), n)
        assert torch.equal(got, keys[s])
    query = torch.randn(sum(lens), 4, 64, dtype=torch.float16, device=device)
    cu = torch.tensor([0, 5, 22], dtype=torch.int32, device=device)
    expected = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                             paged.context_lens, 0.125, 17, None)
    got = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                        paged.context_lens, 0.125, 17, None, check_indices=False)
    assert torch.equal(expected, got)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="host synchronisation is a GPU matter")
def test_vouched_decode_step_has_no_host_synchronisation():
    args = decode_args("cuda", lens=(40, 300, 7))
    key = torch.randn(3, 2, 64, dtype=torch.float16, device="cuda")
    # Rewrites position 39 of sequence 0 and 6 of sequence 2, skips sequence 1.
    slots = args["block_tables"][[0, 2], [2, 0]].long() * 16 + torch.tensor([7, 6], device="cuda")
    slots = torch.cat([slots[:1], torch.tensor([-1], device="cuda"), slots[1:]])

    def step(check):
        reshape_and_cache(key, key, args["key_cache"], args["value_cache"], slots,
                          check_slots=check)
        return paged_attention(args["query"], args["key_cache"], args["value_cache"],
                               args["block_tables"], args["context_lens"], args["scale"],
                               args["max_context_len"], None, check_indices=check)

    expected = step(True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step(False)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, expected)


# ---- FP8 (e4m3fn) caches ----------------------------------------------------------------------
# An fp8 cache is a uint8 (or float8_e4m3fn) cache of OCP e4m3fn bytes; reshape_and_cache writes
# sat(rne(x / scale)), the attention operators read byte * scale; scales are float32 [1] (per
# tensor) or [Hkv] (per head). The bytes are checked against torch's own float8_e4m3fn cast
# (reference.fp8_quantise), the attention against the float64 reference over the dequantised
# cache (reference.fp8_dequantise) at the query dtype's tolerance.

FP8_CACHE_DTYPES = [torch.uint8, torch.float8_e4m3fn]


def fp8_scales(kind, heads_kv, device):
    """k_scale and v_scale: None, per tensor [1] or per head [Hkv], fresh random values."""
    if kind == "none":
        return None, None
    n = 1 if kind == "tensor" else heads_kv
    return (torch.rand(n, device=device) * 0.1 + 0.01, torch.rand(n, device=device) * 0.1 + 0.01)


FP8_NAN_BYTE = 0x7F  # e4m3fn's NaN


def fp8_cache(num_blocks, block_size, heads_kv, dim, cache_dtype, device):
    """An fp8 cache poisoned with the NaN byte: a kernel that reads a slot no sequence owns
    returns NaN."""
    cache = torch.full((num_blocks, block_size, heads_kv, dim), FP8_NAN_BYTE, dtype=torch.uint8,
                       device=device)
    return cache.view(cache_dtype)


def as_bytes(cache):
    return cache.view(torch.uint8)


class PagedFp8(Paged):
    """A Paged cache of fp8 bytes with its scales: e4m3fn, or e5m2 when `e5m2` (a uint8 cache
    then passes fp8_e5m2=True to every operator; a float8_e5m2 one says it by its dtype)."""

    def __init__(self, context_lens, block_size, heads_kv, dim, device, scales="tensor",
                 cache_dtype=torch.uint8, e5m2=False):
        super().__init__(context_lens, block_size, heads_kv, dim, torch.float16, device)
        self.key_cache = fp8_cache(*self.key_cache.shape, cache_dtype, device)
        self.value_cache = fp8_cache(*self.value_cache.shape, cache_dtype, device)
        self.k_scale, self.v_scale = fp8_scales(scales, heads_kv, device)
        self.e5m2 = e5m2 or cache_dtype == torch.float8_e5m2
        # The flag as a caller passes it: only a uint8 cache needs it.
        self.flag = self.e5m2 and cache_dtype == torch.uint8

    def fill(self, keys, values):
        slots = [self.slots(s, torch.arange(k.shape[0])) for s, k in enumerate(keys)]
        reshape_and_cache(torch.cat(keys), torch.cat(values), self.key_cache, self.value_cache,
                          torch.cat(slots).to(self.key_cache.device), True, self.k_scale,
                          self.v_scale, fp8_e5m2=self.flag)

    def dequantised(self):
        return (reference.fp8_dequantise(self.key_cache, self.k_scale, self.e5m2),
                reference.fp8_dequantise(self.value_cache, self.v_scale, self.e5m2))


def fp8_rows(tokens, heads_kv, dim, dtype, device, scale):
    """Rows whose x / scale spans e4m3's range, subnormals (below 2^-6) included."""
    magnitude = torch.exp2(torch.empty(tokens, heads_kv, dim).uniform_(-11, 9))
    sign = torch.randint(0, 2, (tokens, heads_kv, dim)) * 2 - 1
    x = (sign * magnitude).to(device) * (1 if scale is None else scale.cpu()[:, None].to(device))
    return x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scales", ["none", "tensor", "head"])
@pytest.mark.parametrize("cache_dtype", FP8_CACHE_DTYPES)
@pytest.mark.parametrize("dim", [64, 80, 7])
def test_fp8_reshape_and_cache_matches_torch_cast(device, dtype, scales, cache_dtype, dim):
    heads_kv, tokens, block_size = 3, 37, 8
    k_scale, v_scale = fp8_scales(scales, heads_kv, device)
    key = fp8_rows(tokens, heads_kv, dim, dtype, device, k_scale)
    value = fp8_rows(tokens, heads_kv, dim, dtype, device, v_scale)
    key_cache = fp8_cache(6, block_size, heads_kv, dim, cache_dtype, device)
    value_cache = fp8_cache(6, block_size, heads_kv, dim, cache_dtype, device)
    slots = torch.randperm(6 * block_size)[:tokens]
    slots[5] = -1  # skipped: the slot keeps its poison
    reshape_and_cache(key, value, key_cache, value_cache, slots.to(device), True, k_scale, v_scale)
    kc = as_bytes(key_cache).reshape(-1, heads_kv, dim).cpu()
    vc = as_bytes(value_cache).reshape(-1, heads_kv, dim).cpu()
    expected_k = reference.fp8_quantise(key, k_scale).cpu()
    expected_v = reference.fp8_quantise(value, v_scale).cpu()
    written = slots >= 0
    assert torch.equal(kc[slots[written]], expected_k[written])
    assert torch.equal(vc[slots[written]], expected_v[written])
    untouched = torch.ones(kc.shape[0], dtype=torch.bool)
    untouched[slots[written]] = False
    assert (kc[untouched] == 0x7F).all() and (vc[untouched] == 0x7F).all()


def test_fp8_every_value_and_every_tie(device):
    # The 254 finite e4m3fn values round-trip, and each midpoint between neighbours rounds to
    # the one with the even mantissa, as torch's cast does.
    values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    values = values[values.isfinite()]
    ordered = values.unique()  # sorted, -0 and 0 merged
    ties = (ordered[1:] + ordered[:-1]) / 2
    x = torch.cat([values, ties]).reshape(-1, 1, 1)
    cache = fp8_cache(x.shape[0], 1, 1, 1, torch.uint8, device)
    other = fp8_cache(x.shape[0], 1, 1, 1, torch.uint8, device)
    slots = torch.arange(x.shape[0], device=device)
    reshape_and_cache(x.to(device), x.to(device), cache, other, slots)
    assert torch.equal(cache.reshape(-1).cpu(), reference.fp8_quantise(x, None).reshape(-1))
    assert torch.equal(cache[: values.shape[0]].reshape(-1).cpu(),
                       values.to(torch.float8_e4m3fn).view(torch.uint8))


def test_fp8_saturation_and_nan(device):
    # Beyond +-448 (after the scale), infinities included: +-448. NaN stays NaN.
    x = torch.tensor([448.0, 464.0, 480.0, 1e4, float("inf"), -500.0, -float("inf"), 20.0,
                      float("nan")], device=device).reshape(-1, 1, 1)
    scale = torch.tensor([0.25], device=device)  # 20 / 0.25 = 80: in range
    cache = fp8_cache(x.shape[0], 1, 1, 1, torch.uint8, device)
    other = fp8_cache(x.shape[0], 1, 1, 1, torch.uint8, device)
    slots = torch.arange(x.shape[0], device=device)
    reshape_and_cache(x, x, cache, other, slots, True, scale, scale)
    got = cache.reshape(-1).view(torch.float8_e4m3fn).float().cpu()
    expected = torch.tensor([448.0, 448.0, 448.0, 448.0, 448.0, -448.0, -448.0, 80.0])
    assert torch.equal(got[:-1], expected)
    assert got[-1].isnan()


def check_decode_fp8(context_lens, block_size, heads_q, heads_kv, dim, dtype, device,
                     scales="tensor", cache_dtype=torch.uint8, alibi=False, window_left=-1,
                     softcap=0.0, e5m2=False):
    paged = PagedFp8(context_lens, block_size, heads_kv, dim, device, scales, cache_dtype, e5m2)
    keys, values = random_kv(context_lens, heads_kv, dim, dtype, device)
    if paged.k_scale is not None:
        # Values of the size the scales are for: about 1 / scale around the middle of e4m3.
        keys = [k * paged.k_scale.to(dtype)[:, None] * 16 for k in keys]
        values = [v * paged.v_scale.to(dtype)[:, None] * 16 for v in values]
    paged.fill(keys, values)
    key_values, value_values = paged.dequantised()
    query = torch.randn(len(context_lens), heads_q, dim, dtype=dtype, device=device)
    slopes = torch.rand(heads_q, device=device) * 0.5 if alibi else None
    scale = 1.0 / math.sqrt(dim)
    if paged.k_scale is not None:
        scale /= 16 * paged.k_scale.max().item()  # scores of order 1, as in a model
    expected = reference.paged_attention(query, key_values, value_values, paged.block_tables,
                                         paged.context_lens, scale, slopes, window_left, softcap)
    poison_before_window(paged, context_lens, window_left, FP8_NAN_BYTE)
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, scale, max(context_lens + [0]), slopes, True,
                          paged.k_scale, paged.v_scale, window_left, softcap,
                          fp8_e5m2=paged.flag)
    assert out.dtype == dtype and out.shape == query.shape
    # Relative to the values' size (16 * v_scale), as assert_close's tolerance is to 1.
    size = 1.0 if paged.v_scale is None else 16 * paged.v_scale.max().item()
    assert_close(out.cpu().double() / size, expected.cpu() / size, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", HEAD_DIMS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_fp8_decode_grid(device, variant, config, dtype, dim, block_size):
    if config != "default":
        # fp8 caches run the register default whatever is asked (test_plans_paged.py asserts
        # the plan ignores the switch for them): the config="default" case of this grid already
        # runs that very kernel on the same shapes.
        pytest.skip("DJL_ATTN_PAGED_CONFIG=%s has no fp8 kernel: fp8 caches run the default "
                    "kernel, tested by the default case" % config)
    check_decode_fp8(MIXED_CONTEXTS, block_size, 4, 2, dim, dtype, device)


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_fp8_decode_long_contexts_every_block_size(device, variant, block_size):
    # CUDA v1/v2 on an fp8 cache take the block size at run time: a warp's 32 lanes hold the
    # cache block ids of its next 32 / (32 / block_size) steps of 32 tokens, reloaded past them.
    # Contexts past 4 warps x 32 lanes x 32 tokens (v1) reload them at every block size; D = 80
    # and a group of 5 keep auto off the fp8 tensor-core kernel; 4097 ends 1 token into a step.
    check_decode_fp8([4097, 1, 2100, 33], block_size, 5, 1, 80, torch.bfloat16, device, "head")


@pytest.mark.parametrize("scales", ["none", "tensor", "head"])
@pytest.mark.parametrize("cache_dtype", FP8_CACHE_DTYPES)
# Groups of 1, 4, 6 (with ALiBi: v1/v2), 5, 16 (the fp8 tensor-core kernel's largest) and 32
# (v1/v2).
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (8, 2), (12, 2), (5, 1), (32, 2), (32, 1)])
def test_fp8_decode_scales_and_groups(device, variant, config, scales, cache_dtype, heads_q,
                                      heads_kv):
    check_decode_fp8([113, 7, 1, 1000], 16, heads_q, heads_kv, 128, torch.float16, device, scales,
                     cache_dtype, alibi=heads_q == 12)


def test_fp8_decode_many_sequences_one_pass(device, variant):
    # 300 sequences x 2 kv heads fill a GPU's grid without splitting the context: the one-pass
    # path of the CUDA kernels (tests/test_plans_paged.py), contexts of every length to 200.
    lens = torch.randint(1, 201, (300,)).tolist()
    check_decode_fp8(lens, 16, 8, 2, 128, torch.float16, device, "head")


def test_fp8_decode_empty_batch(device, variant):
    paged = PagedFp8([], 16, 2, 64, device)
    query = torch.randn(0, 4, 64, dtype=torch.bfloat16, device=device)
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, 0.125, 0, None, True, paged.k_scale, paged.v_scale)
    assert out.shape == (0, 4, 64) and out.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [64, 80, 128])
@pytest.mark.parametrize("scales", ["tensor", "head"])
@pytest.mark.parametrize("e5m2", [False, True], ids=["e4m3", "e5m2"])
def test_fp8_prefill(device, dtype, dim, scales, e5m2):
    lens, chunks, heads_q, heads_kv = [1, 37, 200, 16], [1, 5, 64, 0], 6, 2
    paged = PagedFp8(lens, 16, heads_kv, dim, device, scales, e5m2=e5m2)
    keys, values = random_kv(lens, heads_kv, dim, dtype, device)
    keys = [k * paged.k_scale.to(dtype)[:, None] * 16 for k in keys]
    values = [v * paged.v_scale.to(dtype)[:, None] * 16 for v in values]
    paged.fill(keys, values)
    key_values, value_values = paged.dequantised()
    cu = torch.tensor([0] + chunks).cumsum(0).to(torch.int32)
    query = torch.randn(int(cu[-1]), heads_q, dim, dtype=dtype, device=device)
    slopes = torch.rand(heads_q, device=device) * 0.5
    scale = 1.0 / (math.sqrt(dim) * 16 * paged.k_scale.max().item())
    out = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables,
                        cu.to(device), paged.context_lens, scale, max(chunks), slopes, True,
                        paged.k_scale, paged.v_scale, fp8_e5m2=paged.flag)
    expected = reference.paged_prefill_attention(query, key_values, value_values,
                                                 paged.block_tables, cu, paged.context_lens,
                                                 scale, slopes)
    size = 16 * paged.v_scale.max().item()
    assert_close(out.cpu().double() / size, expected.cpu() / size, dtype)



# ---- prefix prefill with the chunks' own keys and values (vLLM's semantics) -------------------
# paged_prefill_attention(..., key=, value=): each chunk attends its cached prefix from the cache
# (an fp8 cache: dequantised, byte * scale) and its own tokens from key / value as given, not
# their quantised copies that reshape_and_cache wrote. The reference is the float64 attention over
# the dequantised prefix and the exact new rows. Prefixes of 0, 1 and 17 tokens and chunks of 1,
# 7 and 33 (every pair in one batch) put the chunk's first token at a block's start, inside one
# and past a block edge.

PREFIX_CHUNK_PAIRS = [(p, c) for p in (0, 1, 17) for c in (1, 7, 33)]


def prefix_prefill(pairs, block_size, heads_q, heads_kv, dim, dtype, device, fp8,
                   scales="head", cache_dtype=torch.uint8, alibi=False, window_left=-1,
                   softcap=0.0, packed_qkv=False, e5m2=False):
    """Caches every sequence's prefix and chunk (as a caller does before the attention), then
    runs the prefill of the chunks with their own rows. Returns (out, the reference with exact
    new rows, the reference that reads the new rows back from the cache, the values' size)."""
    lens = [p + c for p, c in pairs]
    if fp8:
        paged = PagedFp8(lens, block_size, heads_kv, dim, device, scales, cache_dtype, e5m2)
    else:
        paged = Paged(lens, block_size, heads_kv, dim, dtype, device)
    keys, values = random_kv(lens, heads_kv, dim, dtype, device)
    size, scale = 1.0, 1.0 / math.sqrt(dim)
    if fp8 and paged.k_scale is not None:
        keys = [k * paged.k_scale.to(dtype)[:, None] * 16 for k in keys]
        values = [v * paged.v_scale.to(dtype)[:, None] * 16 for v in values]
        size = 16 * paged.v_scale.max().item()
        scale /= 16 * paged.k_scale.max().item()
    paged.fill(keys, values)
    new_k = torch.cat([k[p:] for k, (p, _) in zip(keys, pairs)])
    new_v = torch.cat([v[p:] for v, (p, _) in zip(values, pairs)])
    tokens = new_k.shape[0]
    query = torch.randn(tokens, heads_q, dim, dtype=dtype, device=device)
    if packed_qkv:
        # Strided views of one [T, Hq + 2 Hkv, D] tensor, as decoder_layer's qkv rows are.
        qkv = torch.cat([query, new_k, new_v], dim=1)
        query, new_k, new_v = (qkv[:, :heads_q], qkv[:, heads_q:heads_q + heads_kv],
                               qkv[:, heads_q + heads_kv:])
    cu = torch.tensor([0] + [c for _, c in pairs]).cumsum(0).to(torch.int32)
    slopes = torch.rand(heads_q, device=device) * 0.5 if alibi else None
    k_scale = paged.k_scale if fp8 else None
    v_scale = paged.v_scale if fp8 else None
    out = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables,
                        cu.to(device), paged.context_lens, scale, max(c for _, c in pairs),
                        slopes, True, k_scale, v_scale, window_left, softcap, key=new_k, value=new_v,
                        fp8_e5m2=fp8 and paged.flag)
    key_values, value_values = paged.dequantised() if fp8 else (paged.key_cache,
                                                                  paged.value_cache)
    args = (query, key_values, value_values, paged.block_tables, cu, paged.context_lens, scale,
            slopes, window_left, softcap)
    exact = reference.paged_prefill_attention(*args, key=new_k, value=new_v)
    read_back = reference.paged_prefill_attention(*args)
    return out, exact, read_back, size


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("cache", ["fp8", "fp8_e5m2", "same-dtype"])
def test_prefix_prefill_attends_new_tokens_unquantised(device, dtype, block_size, cache):
    fp8 = cache != "same-dtype"
    out, exact, read_back, size = prefix_prefill(PREFIX_CHUNK_PAIRS, block_size, 4, 2, 64, dtype,
                                                 device, fp8, e5m2=cache == "fp8_e5m2")
    assert out.dtype == dtype and out.shape == exact.shape
    assert_close(out.cpu().double() / size, exact.cpu() / size, dtype)
    if fp8:
        # The two semantics differ by more than the tolerance: a kernel that read the new
        # tokens back quantised fails the assertion above.
        gap = ((exact - read_back).abs().max() / size).item()
        assert gap > 2 * reference.TOLERANCE[dtype], gap
    else:
        # A cache of the query's dtype holds the new rows exactly: the same attention.
        assert torch.equal(exact, read_back)


@pytest.mark.parametrize("cache_dtype", FP8_CACHE_DTYPES)
@pytest.mark.parametrize("scales", ["none", "tensor", "head"])
def test_prefix_prefill_fp8_features_and_strided_rows(device, cache_dtype, scales):
    # GQA 3:1, D = 80, window, soft-cap and ALiBi, the new rows as strided views of packed qkv.
    out, exact, _, size = prefix_prefill(PREFIX_CHUNK_PAIRS, 16, 6, 2, 80, torch.bfloat16,
                                         device, True, scales, cache_dtype, alibi=True,
                                         window_left=9, softcap=2.0, packed_qkv=True)
    assert_close(out.cpu().double() / size, exact.cpu() / size, torch.bfloat16)


def test_prefix_prefill_sequences_without_new_tokens(device):
    # A sequence without a chunk reads nothing of key / value; one of context 0 neither.
    out, exact, _, size = prefix_prefill([(5, 0), (0, 3), (40, 0), (9, 2)], 8, 4, 4, 64,
                                         torch.float16, device, True)
    assert_close(out.cpu().double() / size, exact.cpu() / size, torch.float16)

def fp8_against_fp16(heads_q, heads_kv, device, lens=(1, 300, 1024, 4000), dim=128, e5m2=False):
    """A LLaMA-7B-shaped decode layer (D 128) on random data, its K/V once in an fp16 cache and
    once in an fp8 cache with per-head scales max|x| / 448 (as a calibration would set them):
    the max abs difference of the outputs relative to max |output of the fp16 cache|, and the
    same for the fp16 cache's own error against float64."""
    lens = list(lens)
    half = Paged(lens, 16, heads_kv, dim, torch.float16, device)
    keys, values = random_kv(lens, heads_kv, dim, torch.float16, device)
    half.fill(keys, values)
    k_all, v_all = torch.cat(keys).float(), torch.cat(values).float()
    limit = reference.FP8_E5M2_MAX if e5m2 else reference.FP8_MAX
    k_scale = (k_all.abs().amax(dim=(0, 2)) / limit).contiguous()
    v_scale = (v_all.abs().amax(dim=(0, 2)) / limit).contiguous()
    fp8 = PagedFp8(lens, 16, heads_kv, dim, device, "head", e5m2=e5m2)
    fp8.block_tables = half.block_tables
    fp8.k_scale, fp8.v_scale = k_scale, v_scale
    fp8.fill(keys, values)
    query = torch.randn(len(lens), heads_q, dim, dtype=torch.float16, device=device)
    scale = dim ** -0.5
    args = (half.block_tables, half.context_lens, scale, max(lens), None)
    out16 = paged_attention(query, half.key_cache, half.value_cache, *args).double()
    out8 = paged_attention(query, fp8.key_cache, fp8.value_cache, *args, True, k_scale,
                           v_scale, fp8_e5m2=fp8.flag).double()
    exact = reference.paged_attention(query, half.key_cache, half.value_cache, half.block_tables,
                                      half.context_lens, scale)
    size = out16.abs().max().item()
    return ((out8 - out16).abs().max().item() / size,
            (out16.cpu() - exact.cpu()).abs().max().item() / size)


@pytest.mark.parametrize("heads_q,heads_kv", [(32, 32), (32, 8)])
def test_fp8_against_fp16_cache_llama7b_layer(device, variant, heads_q, heads_kv):
    # docs/operators.md states these errors (measured 0.043 on the CPU). The bound is e4m3's:
    # 3 mantissa bits round each value by up to 2^-4 relative, so an output row (a convex
    # combination of V rows: the one V row at context 1, where the error peaks) moves by up to
    # 2^-4 of max |V| from V's rounding, plus what K's rounding does to the weights.
    fp8_error, fp16_error = fp8_against_fp16(heads_q, heads_kv, device)
    print("fp8 vs fp16 cache, Hq %d Hkv %d: %.3g (fp16 cache vs float64: %.3g)"
          % (heads_q, heads_kv, fp8_error, fp16_error))
    assert fp8_error < 0.1
    assert fp16_error < fp8_error



@pytest.mark.parametrize("heads_q,heads_kv", [(32, 32), (32, 8)])
def test_fp8_e5m2_against_fp16_cache_llama7b_layer(device, variant, heads_q, heads_kv):
    # e5m2's 2 mantissa bits round each value by up to 2^-3 relative: twice e4m3's bound.
    fp8_error, fp16_error = fp8_against_fp16(heads_q, heads_kv, device, e5m2=True)
    print("fp8_e5m2 vs fp16 cache, Hq %d Hkv %d: %.3g (fp16 cache vs float64: %.3g)"
          % (heads_q, heads_kv, fp8_error, fp16_error))
    assert fp8_error < 0.2
    assert fp16_error < fp8_error


# ---- FP8 e5m2 caches (vLLM's kv_cache_dtype="fp8_e5m2") ---------------------------------------
# A float8_e5m2 cache, or a uint8 one with fp8_e5m2=True, holds OCP e5m2 bytes (5 exponent bits,
# 2 mantissa bits, largest finite 57344, infinities and NaNs at exponent 31): reshape_and_cache
# writes sat(rne(x / scale)), bit for bit torch's (x / scale).clamp(-57344, 57344) cast to
# float8_e5m2 (reference.fp8_quantise(.., e5m2=True)); the attention operators read byte * scale.

E5M2_CACHE_DTYPES = [torch.uint8, torch.float8_e5m2]


def e5m2_rows(tokens, heads_kv, dim, dtype, device, scale):
    """Rows whose x / scale spans e5m2's range, subnormals (below 2^-14) included."""
    magnitude = torch.exp2(torch.empty(tokens, heads_kv, dim).uniform_(-17, 15.5))
    sign = torch.randint(0, 2, (tokens, heads_kv, dim)) * 2 - 1
    x = (sign * magnitude).to(device) * (1 if scale is None else scale.cpu()[:, None].to(device))
    return x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scales", ["none", "tensor", "head"])
@pytest.mark.parametrize("cache_dtype", E5M2_CACHE_DTYPES)
@pytest.mark.parametrize("dim", [64, 7])
def test_fp8_e5m2_reshape_and_cache_matches_torch_cast(device, dtype, scales, cache_dtype, dim):
    heads_kv, tokens, block_size = 3, 37, 8
    k_scale, v_scale = fp8_scales(scales, heads_kv, device)
    key = e5m2_rows(tokens, heads_kv, dim, dtype, device, k_scale)
    value = e5m2_rows(tokens, heads_kv, dim, dtype, device, v_scale)
    key_cache = fp8_cache(6, block_size, heads_kv, dim, cache_dtype, device)
    value_cache = fp8_cache(6, block_size, heads_kv, dim, cache_dtype, device)
    slots = torch.randperm(6 * block_size)[:tokens]
    slots[5] = -1  # skipped: the slot keeps its poison
    reshape_and_cache(key, value, key_cache, value_cache, slots.to(device), True, k_scale, v_scale,
                      fp8_e5m2=cache_dtype == torch.uint8)
    kc = as_bytes(key_cache).reshape(-1, heads_kv, dim).cpu()
    vc = as_bytes(value_cache).reshape(-1, heads_kv, dim).cpu()
    written = slots >= 0
    assert torch.equal(kc[slots[written]], reference.fp8_quantise(key, k_scale, True).cpu()[written])
    assert torch.equal(vc[slots[written]],
                       reference.fp8_quantise(value, v_scale, True).cpu()[written])
    untouched = torch.ones(kc.shape[0], dtype=torch.bool)
    untouched[slots[written]] = False
    assert (kc[untouched] == FP8_NAN_BYTE).all() and (vc[untouched] == FP8_NAN_BYTE).all()


def test_fp8_e5m2_every_value_and_every_tie(device):
    # The finite e5m2 values round-trip, and each midpoint between neighbours rounds to the one
    # with the even mantissa, as torch's cast does.
    values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e5m2).float()
    values = values[values.isfinite()]
    ordered = values.unique()
    ties = (ordered[1:] + ordered[:-1]) / 2
    x = torch.cat([values, ties]).reshape(-1, 1, 1)
    cache = fp8_cache(x.shape[0], 1, 1, 1, torch.uint8, device)
    other = fp8_cache(x.shape[0], 1, 1, 1, torch.uint8, device)
    slots = torch.arange(x.shape[0], device=device)
    reshape_and_cache(x.to(device), x.to(device), cache, other, slots, fp8_e5m2=True)
    got = cache.reshape(-1).cpu()
    assert torch.equal(got, reference.fp8_quantise(x, None, True).reshape(-1))
    assert torch.equal(got[: values.shape[0]], values.to(torch.float8_e5m2).view(torch.uint8))
    # Ties between neighbours of one binade go to the even mantissa (checked by value, not only
    # against torch): the result is one of the two neighbours, and its mantissa bit 0 is 0.
    tie_bytes = got[values.shape[0]:]
    assert ((tie_bytes & 1) == 0).all()


def test_fp8_e5m2_saturation_and_nan(device):
    # Beyond +-57344 (after the scale), infinities included: +-57344, where torch's cast alone
    # gives infinity from 61440 on. NaN stays NaN.
    x = torch.tensor([57344.0, 60000.0, 61440.0, 1e6, float("inf"), -61440.0, -float("inf"),
                      20.0, float("nan")], device=device).reshape(-1, 1, 1)
    scale = torch.tensor([0.25], device=device)  # 20 / 0.25 = 80: in range
    cache = fp8_cache(x.shape[0], 1, 1, 1, torch.float8_e5m2, device)
    other = fp8_cache(x.shape[0], 1, 1, 1, torch.float8_e5m2, device)
    slots = torch.arange(x.shape[0], device=device)
    reshape_and_cache(x, x, cache, other, slots, True, scale, scale)
    got = cache.reshape(-1).float().cpu()
    expected = torch.tensor([57344.0] * 5 + [-57344.0] * 2 + [80.0])
    expected[:5] = torch.tensor([57344.0 / 0.25, 60000.0 / 0.25, 61440.0 / 0.25, 1e6 / 0.25,
                                 float("inf")]).clamp(max=57344.0)
    assert torch.equal(got[:-1], expected)
    assert got[-1].isnan()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [64, 80, 128])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_fp8_e5m2_decode_grid(device, variant, dtype, dim, block_size):
    check_decode_fp8(MIXED_CONTEXTS, block_size, 4, 2, dim, dtype, device, e5m2=True)


@pytest.mark.parametrize("scales", ["none", "tensor", "head"])
@pytest.mark.parametrize("cache_dtype", E5M2_CACHE_DTYPES)
# Groups of 1, 4 (the fp8 tensor-core kernel), 6 (ALiBi: v1/v2) and 32 (v1/v2).
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (8, 2), (12, 2), (32, 1)])
def test_fp8_e5m2_decode_scales_groups_features(device, variant, scales, cache_dtype, heads_q,
                                                heads_kv):
    check_decode_fp8([113, 7, 1, 1000, 0], 16, heads_q, heads_kv, 128, torch.float16, device,
                     scales, cache_dtype, alibi=heads_q == 12, window_left=37, softcap=3.0,
                     e5m2=True)


def test_fp8_e5m2_decode_long_contexts_odd_head_dim(device, variant):
    # v1/v2's run-time block size past their 4 x 32 x 32-token reloads, D = 80, bfloat16.
    check_decode_fp8([4097, 1, 2100, 33], 8, 5, 1, 80, torch.bfloat16, device, "head", e5m2=True)


@pytest.mark.parametrize("op", ["reshape_and_cache", "paged_attention", "paged_prefill"])
@pytest.mark.parametrize("cache_dtype,match", [
    (torch.float16, "fp8_e5m2: expected False for a float16 cache"),
    (torch.float8_e4m3fn, "fp8_e5m2: expected False for a float8_e4m3fn cache"),
])
def test_fp8_e5m2_flag_refused_with_other_caches(device, op, cache_dtype, match):
    paged = Paged([5], 16, 2, 64, torch.float16, device)
    key_cache = paged.key_cache if cache_dtype == torch.float16 else fp8_cache(
        *paged.key_cache.shape, cache_dtype, device)
    value_cache = torch.empty_like(key_cache)
    query = torch.randn(1, 4, 64, dtype=torch.float16, device=device)
    cu = torch.tensor([0, 1], dtype=torch.int32, device=device)
    calls = {
        "reshape_and_cache": lambda: reshape_and_cache(
            query[:, :2], query[:, :2], key_cache, value_cache,
            torch.zeros(1, dtype=torch.int64, device=device), fp8_e5m2=True),
        "paged_attention": lambda: paged_attention(
            query, key_cache, value_cache, paged.block_tables, paged.context_lens, 0.1, 5, None,
            fp8_e5m2=True),
        "paged_prefill": lambda: paged_prefill(
            query, key_cache, value_cache, paged.block_tables, cu, paged.context_lens, 0.1, 1,
            None, fp8_e5m2=True),
    }
    with pytest.raises(ValueError, match=match):
        calls[op]()

# ---- every head dim ---------------------------------------------------------------------------
# Between and below the compiled head dims: on CUDA, rows of whole 16-byte vectors run v1/v2 on the
# next compiled head dim (float16 8, 24, 40, 72, 200; float32 4, 12, 100; fp8 16, 32, 48, 112,
# 240), the others the element-load kernel (1, 7, 33, 255; float16 20; fp8 40).
ODD_HEAD_DIMS = [1, 4, 7, 8, 12, 20, 24, 32, 33, 40, 48, 72, 100, 112, 200, 240, 255]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", ODD_HEAD_DIMS)
def test_decode_every_head_dim(device, variant, dtype, dim):
    check_decode(MIXED_CONTEXTS, 16, 6, 2, dim, dtype, device)


@pytest.mark.parametrize("dim", ODD_HEAD_DIMS)
def test_fp8_decode_every_head_dim(device, variant, dim):
    check_decode_fp8(MIXED_CONTEXTS, 8, 6, 2, dim, torch.bfloat16, device, "head")


@pytest.mark.parametrize("dim", [1, 7, 24, 33, 200])
def test_prefill_every_head_dim(device, dim):
    qs, keys, values, outs, scale = run_chunked_prefill([33, 70], [33, 25], 16, 4, 2, dim,
                                                        torch.float32, device)
    for q, k, v, out in zip(qs, keys, values, outs):
        expected, _ = reference.flash_attention(q[None], k[None], v[None], None, scale, True)
        assert_close(out.cpu(), expected[0].cpu(), torch.float32, "chunked prefill vs dense")


# ---- sliding window and soft-cap ----------------------------------------------------------------
# window_left and softcap as flash_attention has them: the query at position p sees keys
# p - window_left <= j <= p (window_left -1: no left edge) and scores s = scale * q.k become
# softcap * tanh(s / softcap) before the ALiBi term. Windows of 0 (the query's own key only), 1,
# smaller than a block, one ending exactly on a block edge and one past it, and wider than every
# context (the same as none), on contexts of 0, 1, whole and partial blocks and past a v2
# partition.
WINDOWS = [0, 1, 5, 15, 16, 17, 100, 5000]


@pytest.mark.parametrize("window_left", WINDOWS)
@pytest.mark.parametrize("softcap", [0.0, 5.0])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_decode_window_softcap(device, variant, window_left, softcap, block_size):
    if device == "cuda" and variant == "flash":
        # The forced flash variant runs these on the flash kernel itself, not a fallback.
        assert planned_kernel(len(MIXED_CONTEXTS), max(MIXED_CONTEXTS), 4, 2, 128, block_size,
                              torch.float16, variant, window_left, softcap) == "flash"
    check_decode(MIXED_CONTEXTS, block_size, 4, 2, 128, torch.float16, device,
                 window_left=window_left, softcap=softcap)


def planned_kernel(num_seqs, max_context_len, heads_q, heads_kv, dim, block_size, dtype, kernel,
                   window_left, softcap, alibi=False):
    """The kernel paged_attention's plan (cuda/paged/paged_plan.h, through
    libdjl_attn_plans.so) runs for a contiguous query and aligned caches of these shapes on this
    GPU with DJL_ATTN_PAGED_KERNEL=`kernel`: what the tests below check ran, not assume."""
    from test_plans_paged import decode_plan  # the plan's ctypes wrapper (CPU-only library)
    props = torch.cuda.get_device_properties(0)
    gpu = (props.multi_processor_count,
           getattr(props, "shared_memory_per_block_optin", 48 * 1024), props.major, props.minor)
    return decode_plan(num_seqs, max_context_len, kernel, heads_q=heads_q, heads_kv=heads_kv,
                       dim=dim, block_size=block_size, element_size=dtype.itemsize,
                       alibi=alibi, gpu=gpu, window_left=window_left,
                       softcap=softcap)["kernel"]


# The flash decode kernel's features instantiation (float16/bfloat16 caches, D 64/128/256, groups
# up to 16; ALiBi runs in its own, test_paged_kvcache.py) under auto and a forced flash: windows
# inside one 64-key tile, on a tile's edge and across many tiles and split ranges of long
# contexts, keys before the window poisoned (check_decode), soft-cap alone and with a window,
# every block size.
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [64, 128, 256])
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (32, 8), (16, 1)])
@pytest.mark.parametrize("window_left,softcap", [(0, 0.0), (1, 0.0), (63, 0.0), (64, 5.0),
                                                 (200, 0.0), (-1, 5.0), (4095, 30.0)])
def test_decode_window_softcap_flash_kernel(device, variant, dtype, dim, heads_q, heads_kv,
                                            window_left, softcap):
    if variant not in ("auto", "flash"):
        pytest.skip("the flash kernel's cases; v1/v2 have their own above")
    if device == "cpu" and (dtype != torch.float16 or dim != 128 or heads_q != 32):
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    lens = [1, 0, 77, 300, 4097, 9000] if device == "cuda" else [1, 0, 77, 300, 700]
    block_size = 16
    if device == "cuda":
        assert planned_kernel(len(lens), max(lens), heads_q, heads_kv, dim, block_size, dtype,
                              variant, window_left, softcap) == "flash"
    check_decode(lens, block_size, heads_q, heads_kv, dim, dtype, device,
                 window_left=window_left, softcap=softcap, scale=0.5)


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("window_left", [0, 5, 16, 100])
def test_decode_window_flash_kernel_block_sizes(device, variant, block_size, window_left):
    # A warp's 16 keys span two cache blocks of 8: the window's first key inside either.
    if variant not in ("auto", "flash"):
        pytest.skip("the flash kernel's cases; v1/v2 have their own above")
    lens = [1, 9, 17, 130, 1000]
    if device == "cuda":
        assert planned_kernel(len(lens), max(lens), 8, 2, 128, block_size, torch.float16,
                              variant, window_left, 2.0) == "flash"
    check_decode(lens, block_size, 8, 2, 128, torch.float16, device, window_left=window_left,
                 softcap=2.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", HEAD_DIMS + [8, 33])
def test_decode_window_softcap_every_dtype_and_head_dim(device, variant, dtype, dim):
    # A scale large enough that the cap changes the scores (|s| of several softcap).
    if device == "cuda" and variant == "flash" and dtype != torch.float32 and dim in (64, 128, 256):
        # The forced flash variant runs these on the flash kernel itself, not a fallback.
        assert planned_kernel(4, 300, 6, 2, dim, 16, dtype, variant, 40, 2.0) == "flash"
    check_decode([1, 0, 77, 300], 16, 6, 2, dim, dtype, device, window_left=40, softcap=2.0,
                 scale=1.0)


@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (8, 2), (12, 2), (5, 1), (16, 1), (32, 2)])
@pytest.mark.parametrize("alibi", [False, True])
def test_decode_window_softcap_alibi_groups(device, variant, config, heads_q, heads_kv, alibi):
    # Window, soft-cap and ALiBi together, every group shape the CUDA kernels tile differently.
    check_decode([113, 7, 1, 1000], 16, heads_q, heads_kv, 128, torch.float16, device,
                 alibi=alibi, window_left=50, softcap=10.0, scale=0.5)


@pytest.mark.parametrize("window_left", [0, 3, 64, 511, 512, 700])
def test_decode_window_long_contexts(device, variant, config, window_left):
    # Contexts of many v2 partitions (512 tokens, 64 in small grids) with a small window: every
    # partition left of the window is empty and must not disturb the combine.
    lens = [3000, 1500, 5000, 2] if device == "cuda" else [3000, 1500, 2]
    check_decode(lens, 16, 8, 2, 128, torch.float16, device, alibi=True,
                 window_left=window_left, softcap=20.0, max_context_len=5100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 2), (12, 2), (16, 1)])
@pytest.mark.parametrize("window_left,softcap", [(0, 0.0), (37, 0.0), (-1, 3.0), (200, 3.0)])
def test_fp8_decode_window_softcap(device, variant, dtype, heads_q, heads_kv, window_left,
                                   softcap):
    if dtype == torch.float32 and heads_q != 8:
        pytest.skip("float32 runs v1/v2 only: one group shape suffices")
    check_decode_fp8([113, 7, 1, 1000, 0], 16, heads_q, heads_kv, 128, dtype, device, "head",
                     window_left=window_left, softcap=softcap)


@pytest.mark.parametrize("dim", [7, 80])
def test_fp8_decode_window_softcap_odd_head_dims(device, variant, dim):
    check_decode_fp8(MIXED_CONTEXTS, 8, 6, 2, dim, torch.bfloat16, device, "tensor",
                     alibi=True, window_left=20, softcap=4.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window_left", [0, 1, 7, 16, 40, 1000])
@pytest.mark.parametrize("softcap", [0.0, 2.5])
def test_chunked_prefill_window_softcap_equals_dense(device, dtype, window_left, softcap):
    # Chunked prefill with a window against the dense float64 reference of the whole sequence
    # (causal, the same window and cap): chunks of 1, 3, 50 and 128 rows, GQA, D = 80.
    lengths = [1, 7, 113, 300]
    qs, keys, values, outs, scale = run_chunked_prefill(lengths, [1, 3, 50, 128], 16, 4, 2, 80,
                                                        dtype, device, window_left=window_left,
                                                        softcap=softcap)
    for q, k, v, out in zip(qs, keys, values, outs):
        expected, _ = reference.flash_attention(q[None], k[None], v[None], None, scale, True,
                                                window_left=window_left, softcap=softcap)
        assert_close(out.cpu(), expected[0].cpu(), dtype, "chunked prefill vs dense")


def test_prefill_window_softcap_alibi(device):
    slopes = torch.rand(4, device=device)
    run_chunked_prefill([40, 90, 1], [17, 90, 1], 8, 4, 2, 64, torch.float32, device,
                        alibi=slopes, window_left=9, softcap=1.5)


@pytest.mark.parametrize("window_left,softcap", [(0, 0.0), (6, 2.0), (-1, 2.0)])
def test_prefill_of_one_token_equals_decode_with_features(device, variant, window_left, softcap):
    lens = [1, 5, 77, 400, 0]
    paged = Paged(lens, 16, 2, 128, torch.float16, device)
    keys, values = random_kv(lens, 2, 128, torch.float16, device)
    paged.fill(keys, values)
    query = torch.randn(5, 8, 128, dtype=torch.float16, device=device)
    slopes = torch.rand(8, device=device)
    # Sequence 4 has context 0 and no new token.
    cu = torch.tensor([0, 1, 2, 3, 4, 4], dtype=torch.int32, device=device)
    prefill = paged_prefill(query[:4], paged.key_cache, paged.value_cache, paged.block_tables, cu,
                            paged.context_lens, 0.3, 1, slopes, window_left=window_left,
                            softcap=softcap)
    decode = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                             paged.context_lens, 0.3, 400, slopes, window_left=window_left,
                             softcap=softcap)
    expected = reference.paged_attention(query, paged.key_cache, paged.value_cache,
                                         paged.block_tables, paged.context_lens, 0.3, slopes,
                                         window_left, softcap)
    assert_close(decode.cpu(), expected.cpu(), torch.float16)
    assert_close(prefill.cpu(), decode[:4].cpu().double(), torch.float16)
    assert torch.equal(decode[4].cpu(), torch.zeros(8, 128, dtype=torch.float16))


@pytest.mark.parametrize("dim", [64, 128])
def test_fp8_prefill_window_softcap(device, dim):
    lens, chunks, heads_q, heads_kv = [1, 37, 200, 16], [1, 5, 64, 0], 6, 2
    paged = PagedFp8(lens, 16, heads_kv, dim, device, "head")
    keys, values = random_kv(lens, heads_kv, dim, torch.float16, device)
    keys = [k * paged.k_scale.half()[:, None] * 16 for k in keys]
    values = [v * paged.v_scale.half()[:, None] * 16 for v in values]
    paged.fill(keys, values)
    key_values, value_values = paged.dequantised()
    cu = torch.tensor([0] + chunks).cumsum(0).to(torch.int32)
    query = torch.randn(int(cu[-1]), heads_q, dim, dtype=torch.float16, device=device)
    slopes = torch.rand(heads_q, device=device) * 0.5
    scale = 1.0 / (math.sqrt(dim) * 16 * paged.k_scale.max().item())
    out = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables,
                        cu.to(device), paged.context_lens, scale, max(chunks), slopes, True,
                        paged.k_scale, paged.v_scale, 30, 1.5)
    expected = reference.paged_prefill_attention(query, key_values, value_values,
                                                 paged.block_tables, cu, paged.context_lens,
                                                 scale, slopes, 30, 1.5)
    size = 16 * paged.v_scale.max().item()
    assert_close(out.cpu().double() / size, expected.cpu() / size, torch.float16)


def test_reference_window_is_flash_attention_reference(device):
    # The paged reference's window and cap against the dense one's (two independent codings of
    # the same rule): one sequence, every row.
    lens = [50]
    paged = Paged(lens, 8, 1, 16, torch.float32, device)
    keys, values = random_kv(lens, 1, 16, torch.float32, device)
    paged.fill(keys, values)
    query = torch.randn(50, 2, 16, device=device)
    cu = torch.tensor([0, 50], dtype=torch.int32)
    got = reference.paged_prefill_attention(query, paged.key_cache, paged.value_cache,
                                            paged.block_tables, cu, paged.context_lens, 0.7,
                                            None, 4, 1.25)
    expected, _ = reference.flash_attention(query[None], keys[0][None], values[0][None], None,
                                            0.7, True, window_left=4, softcap=1.25)
    assert torch.allclose(got.cpu(), expected[0].cpu(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("op", ["decode", "prefill"])
@pytest.mark.parametrize("window_left,softcap,match", [
    (-2, 0.0, r"window_left: expected -1 \(unbounded\) or a value >= 0, got -2"),
    (-1, -1.0, r"softcap: expected a finite value >= 0 \(0: none\), got -1"),
    (-1, float("nan"), r"softcap: expected a finite value >= 0 \(0: none\), got nan"),
    (3, float("inf"), r"softcap: expected a finite value >= 0 \(0: none\), got inf"),
])
def test_validation_window_softcap(device, op, window_left, softcap, match):
    args = decode_args(device)
    if op == "decode":
        expect_error("paged_attention: " + match, paged_attention, args["query"],
                     args["key_cache"], args["value_cache"], args["block_tables"],
                     args["context_lens"], 0.125, args["max_context_len"], None, True, None, None,
                     window_left, softcap)
    else:
        cu = torch.arange(3, dtype=torch.int32, device=device)
        expect_error("paged_prefill_attention: " + match, paged_prefill, args["query"],
                     args["key_cache"], args["value_cache"], args["block_tables"], cu,
                     args["context_lens"], 0.125, 1, None, True, None, None, window_left,
                     softcap)


def test_window_softcap_empty_batches(device, variant):
    # No sequences (decode) and no query rows (prefill of sequences without new tokens).
    paged = Paged([], 16, 2, 64, torch.float16, device)
    query = torch.randn(0, 4, 64, dtype=torch.float16, device=device)
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, 1.0, 0, None, window_left=3, softcap=2.0)
    assert out.shape == (0, 4, 64)
    paged = Paged([5, 0], 16, 2, 64, torch.float16, device)
    cu = torch.zeros(3, dtype=torch.int32, device=device)
    out = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                        paged.context_lens, 1.0, 0, None, window_left=0, softcap=1.0)
    assert out.shape == (0, 4, 64)
