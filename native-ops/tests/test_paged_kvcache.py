"""paged_attention and paged_prefill_attention with FlashAttention's flash_attn_with_kvcache
semantics through block tables: ALiBi slopes per sequence ([num_seqs, Hq], row s for sequence s),
non-causal query rows (with FlashAttention's two-sided window) and chunks longer than their
context (Sq > Sk, bottom-right aligned: causal rows before the first key give 0).

Every case is checked against FlashAttention's dense float64 reference run on each sequence's own
keys and values (reference.flash_attention: another coding of the rules than the paged
reference, which these tests check too), on CPU and CUDA, where each decode kernel
(DJL_ATTN_PAGED_KERNEL) runs. Keys no query row of a sequence sees are overwritten with NaN after
the reference is taken: a kernel that lets one reach the output, even as 0 * value, fails."""

import math

import pytest
import torch

import reference
from reference import assert_close
from test_paged import BLOCK_SIZES, Paged, planned_kernel, random_kv, variant  # noqa: F401

paged_attention = torch.ops.djl_attn.paged_attention
paged_prefill = torch.ops.djl_attn.paged_prefill_attention

CUDA = torch.cuda.is_available()


def slopes_of(kind, num_seqs, heads_q, device):
    """ALiBi slopes: None, one row for every sequence [Hq], or a different row per sequence
    [num_seqs, Hq] (rows far apart, so that a kernel reading another sequence's row fails)."""
    if kind is None:
        return None
    if kind == "heads":
        return torch.rand(heads_q, device=device) * 0.5 + 0.05
    rows = torch.rand(num_seqs, heads_q) * 0.25 + torch.arange(num_seqs)[:, None] * 0.3 + 0.05
    return rows.to(device)


def visible(position, context, causal, window_left, window_right):
    """The keys [first, end) a query at `position` sees (FlashAttention's rules)."""
    first = max(position - window_left, 0) if window_left >= 0 else 0
    last = position if causal else (position + window_right if window_right >= 0 else context - 1)
    return first, max(min(last + 1, context), first)


def poison_unseen_keys(paged, lens, chunks, causal, window_left, window_right):
    """NaN in every cached key and value of a sequence that none of its query rows sees."""
    for s, (ctx, n) in enumerate(zip(lens, chunks)):
        spans = [visible(ctx - n + t, ctx, causal, window_left, window_right) for t in range(n)]
        seen = set()
        for first, end in spans:
            seen.update(range(first, end))
        hidden = [j for j in range(ctx) if j not in seen]
        if not hidden:
            continue
        slots = paged.slots(s, torch.tensor(hidden)).to(paged.key_cache.device)
        for cache in (paged.key_cache, paged.value_cache):
            cache.view(-1, *cache.shape[2:])[slots] = float("nan")


def flash_reference(query, keys, values, lens, chunks, scale, causal, window_left=-1,
                    window_right=-1, softcap=0.0, slopes=None):
    """[T, Hq, D] float64: FlashAttention's dense reference of each sequence's chunk of query rows
    against its own keys and values (bottom-right aligned), slopes row s for sequence s."""
    rows = []
    at = 0
    for s, (ctx, n) in enumerate(zip(lens, chunks)):
        q = query[at:at + n]
        at += n
        if n == 0:
            continue
        slope = None
        if slopes is not None:
            slope = slopes[s] if slopes.dim() == 2 else slopes
        out, _ = reference.flash_attention(q[None], keys[s][None, :ctx], values[s][None, :ctx],
                                           None, scale, causal, window_left, window_right, softcap,
                                           slope)
        rows.append(out[0])
    return torch.cat(rows) if rows else torch.zeros(query.shape, dtype=torch.float64)


def run_prefill(lens, chunks, block_size, heads_q, heads_kv, dim, dtype, device, causal=True,
                window_left=-1, window_right=-1, softcap=0.0, slopes_kind=None, scale=None):
    """One paged_prefill_attention call (chunk n of sequence s = the last n positions of its
    context, n > context allowed) against flash_reference and the paged reference."""
    paged = Paged(lens, block_size, heads_kv, dim, dtype, device)
    keys, values = random_kv(lens, heads_kv, dim, dtype, device)
    paged.fill(keys, values)
    query = torch.randn(sum(chunks), heads_q, dim, dtype=dtype, device=device)
    cu = torch.tensor([0] + list(chunks)).cumsum(0).to(torch.int32)
    slopes = slopes_of(slopes_kind, len(lens), heads_q, device)
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    expected = flash_reference(query, keys, values, lens, chunks, scale, causal, window_left,
                               window_right, softcap, slopes)
    # The paged reference codes the same rules another way: they must agree (float64).
    paged_expected = reference.paged_prefill_attention(
        query, paged.key_cache, paged.value_cache, paged.block_tables, cu, paged.context_lens,
        scale, slopes, window_left, softcap, causal, window_right)
    assert torch.allclose(paged_expected.cpu(), expected.cpu(), rtol=0, atol=1e-9)
    poison_unseen_keys(paged, lens, chunks, causal, window_left, window_right)
    out = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables,
                        cu.to(device), paged.context_lens, scale, max(chunks, default=0), slopes,
                        window_left=window_left, softcap=softcap, causal=causal,
                        window_right=window_right)
    assert out.dtype == dtype and out.shape == query.shape
    assert_close(out.cpu(), expected.cpu(), dtype, "prefill")
    return out, cu


def run_decode(lens, block_size, heads_q, heads_kv, dim, dtype, device, slopes_kind,
               window_left=-1, softcap=0.0, scale=None, max_context_len=None):
    """One paged_attention call (one query row per sequence at its last position) against
    flash_reference; returns (out, query, paged, slopes, scale)."""
    paged = Paged(lens, block_size, heads_kv, dim, dtype, device)
    keys, values = random_kv(lens, heads_kv, dim, dtype, device)
    paged.fill(keys, values)
    query = torch.randn(len(lens), heads_q, dim, dtype=dtype, device=device)
    slopes = slopes_of(slopes_kind, len(lens), heads_q, device)
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    ones = [1] * len(lens)
    # A context of 0 has a query row that sees nothing: 0, as the paged operators define it.
    expected = flash_reference(query, keys, values, lens, ones, scale, True, window_left, -1,
                               softcap, slopes)
    poison_unseen_keys(paged, lens, ones, True, window_left, -1)
    max_len = max(lens + [0]) if max_context_len is None else max_context_len
    out = paged_attention(query, paged.key_cache, paged.value_cache, paged.block_tables,
                          paged.context_lens, scale, max_len, slopes, window_left=window_left,
                          softcap=softcap)
    assert out.dtype == dtype and out.shape == query.shape
    assert_close(out.cpu(), expected.cpu(), dtype, "decode")
    return out, query, paged, slopes, scale


# ---- ALiBi slopes per sequence: decode ----------------------------------------------------------
# Contexts of 1, 0, whole and partial blocks, past a v2 partition (and, on CUDA, several of the
# flash kernel's split ranges).
LENS = [1, 0, 96, 37, 600]
CUDA_LENS = [1, 0, 96, 37, 600, 5000]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [64, 128, 80])
@pytest.mark.parametrize("heads_q,heads_kv", [(8, 8), (8, 2), (12, 2), (16, 1)])
def test_decode_alibi_per_sequence(device, variant, dtype, dim, heads_q, heads_kv):
    if device == "cpu" and (dtype != torch.float16 or dim != 64):
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    lens = CUDA_LENS if device == "cuda" else LENS
    if device == "cuda" and variant == "flash" and dtype != torch.float32 and dim != 80:
        # A forced flash runs ALiBi on the flash decode kernel itself, not on a fallback.
        assert planned_kernel(len(lens), max(lens), heads_q, heads_kv, dim, 16, dtype, variant,
                              -1, 0.0, alibi=True) == "flash"
    run_decode(lens, 16, heads_q, heads_kv, dim, dtype, device, "sequences")


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("slopes_kind", ["heads", "sequences"])
@pytest.mark.parametrize("window_left,softcap", [(-1, 0.0), (0, 0.0), (17, 0.0), (100, 5.0),
                                                 (-1, 5.0)])
def test_decode_alibi_window_softcap(device, variant, block_size, slopes_kind, window_left,
                                     softcap):
    if device == "cpu" and block_size != 16 and slopes_kind == "heads":
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    run_decode(LENS, block_size, 8, 2, 128, torch.float16, device, slopes_kind,
               window_left=window_left, softcap=softcap, scale=0.5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [64, 128, 256])
def test_decode_alibi_rows_are_the_sequences(device, variant, dtype, dim):
    # [num_seqs, Hq] slopes whose rows are all one [Hq] row give what [Hq] gives, bit for bit
    # (the same kernel); and a batch whose rows differ gives each sequence what a batch of that
    # sequence alone with its own row gives.
    if device == "cpu" and dim != 128:
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    lens = [300, 1, 77, 130]
    out, query, paged, slopes, scale = run_decode(lens, 16, 8, 2, dim, dtype, device, "sequences")
    tiled = slopes[2].expand(len(lens), -1).contiguous()
    args = (query, paged.key_cache, paged.value_cache, paged.block_tables, paged.context_lens,
            scale, max(lens))
    assert torch.equal(paged_attention(*args, tiled), paged_attention(*args, slopes[2]))
    for s in range(len(lens)):
        alone = paged_attention(query[s:s + 1], paged.key_cache, paged.value_cache,
                                paged.block_tables[s:s + 1], paged.context_lens[s:s + 1], scale,
                                lens[s], slopes[s:s + 1])
        assert_close(alone[0].cpu(), out[s].cpu().double(), dtype, "sequence %d alone" % s)


@pytest.mark.skipif(not CUDA, reason="long contexts run on the GPU only")
@pytest.mark.parametrize("window_left", [-1, 4095])
def test_decode_alibi_long_context(device, variant, window_left):
    if device != "cuda":
        pytest.skip("32k keys: the float64 reference would take minutes in CI")
    # The flash kernel's many split ranges (and v2's partitions) with per-sequence slopes: a
    # row's bias grows with the distance, so a range merged under another row's slope shows.
    run_decode([32768, 20001, 1], 16, 32, 8, 128, torch.float16, device, "sequences",
               window_left=window_left)


# ---- non-causal rows and chunks longer than their context: prefill -------------------------------
# (context, chunk) pairs: a chunk inside a longer context, a whole context, a chunk of one, an
# empty sequence, a chunk longer than its context (Sq > Sk: 9 rows, 5 keys), a chunk over an
# empty context (every causal row sees nothing), and one crossing several blocks.
CASES = [(37, 5), (113, 113), (1, 1), (0, 0), (5, 9), (0, 3), (200, 17)]


def lens_chunks(cases):
    return [c for c, _ in cases], [n for _, n in cases]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("window_left,window_right", [(-1, -1), (0, 0), (3, -1), (-1, 2),
                                                      (10, 4), (50, 100)])
def test_prefill_non_causal(device, dtype, block_size, window_left, window_right):
    if device == "cpu" and dtype != torch.float32 and block_size != 16:
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    lens, chunks = lens_chunks(CASES)
    run_prefill(lens, chunks, block_size, 4, 2, 80, dtype, device, causal=False,
                window_left=window_left, window_right=window_right)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("slopes_kind", [None, "heads", "sequences"])
@pytest.mark.parametrize("softcap", [0.0, 3.0])
@pytest.mark.parametrize("heads_q,heads_kv", [(4, 4), (6, 2), (8, 1)])
def test_prefill_alibi_softcap(device, causal, slopes_kind, softcap, heads_q, heads_kv):
    if device == "cpu" and heads_kv != 2 and slopes_kind != "sequences":
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    lens, chunks = lens_chunks(CASES)
    run_prefill(lens, chunks, 16, heads_q, heads_kv, 64, torch.float16, device, causal=causal,
                window_left=20 if softcap else -1, softcap=softcap, slopes_kind=slopes_kind,
                scale=0.5)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window_left", [-1, 0, 4])
def test_prefill_chunk_longer_than_its_context(device, causal, window_left):
    # FlashAttention's Sq > Sk: the chunk's rows are the context's last positions and before it,
    # so a causal row at a negative position sees no key and gives exactly 0; non-causal rows see
    # every key (within the window).
    lens, chunks = [5, 0, 1, 16], [9, 3, 4, 40]
    out, cu = run_prefill(lens, chunks, 8, 4, 2, 64, torch.float32, device, causal=causal,
                          window_left=window_left, slopes_kind="sequences")
    for s, (ctx, n) in enumerate(zip(lens, chunks)):
        rows = out[int(cu[s]):int(cu[s + 1])].cpu()
        for t in range(n):
            first, end = visible(ctx - n + t, ctx, causal, window_left, -1)
            if end <= first:
                assert torch.equal(rows[t], torch.zeros_like(rows[t])), (s, t)
            else:
                assert rows[t].abs().max() > 0, (s, t)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("local", [False, True])
@pytest.mark.parametrize("slopes_kind", [None, "heads", "sequences"])
@pytest.mark.parametrize("seqlen_q", [1, 3, 64])
@pytest.mark.parametrize("heads_q,heads_kv", [(6, 6), (6, 2), (6, 1)])
def test_flash_attn_with_kvcache_grid(device, causal, local, slopes_kind, seqlen_q, heads_q,
                                      heads_kv):
    # FlashAttention's test_flash_attn_kvcache through block tables: a batch of Sq query rows
    # per sequence against cache_seqlens drawn from [0, Sk] (Sq > cache_seqlens for some rows),
    # a random (left, right) window when local, ALiBi of either shape, MHA, GQA and MQA.
    if device == "cpu" and heads_kv != 2 and seqlen_q != 3:
        pytest.skip("the CPU kernel has one path; a slice of the grid suffices there")
    gen = torch.Generator().manual_seed(seqlen_q * 131 + heads_kv * 7 + int(causal) + 2 * local)
    seqlen_k = 339 if device == "cuda" else 129
    lens = torch.randint(0, seqlen_k + 1, (4,), generator=gen).tolist()
    window_left, window_right = (-1, -1)
    if local:
        window_left, window_right = torch.randint(0, seqlen_k, (2,), generator=gen).tolist()
    run_prefill(lens, [seqlen_q] * 4, 16, heads_q, heads_kv, 128, torch.float16, device,
                causal=causal, window_left=window_left,
                window_right=-1 if causal else window_right, slopes_kind=slopes_kind)


def test_prefill_non_causal_single_rows_equal_decode(device, variant):
    # One query row per sequence at its last position sees every key either way: non-causal
    # prefill, causal prefill and decode agree (per-sequence slopes).
    lens = [1, 77, 300, 16]
    out, query, paged, slopes, scale = run_decode(lens, 16, 8, 2, 128, torch.float16, device,
                                                  "sequences")
    cu = torch.arange(len(lens) + 1, dtype=torch.int32, device=device)
    for causal in (True, False):
        prefill = paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                                paged.context_lens, scale, 1, slopes, causal=causal)
        assert_close(prefill.cpu(), out.cpu().double(), torch.float16, "causal=%s" % causal)


def test_features_change_the_result(device):
    # Guards the cases above against a kernel and a reference that both ignore an argument:
    # per-sequence slopes, causal=False and window_right each move a prefill's output.
    lens, chunks = [40, 60], [8, 8]
    paged = Paged(lens, 16, 2, 64, torch.float32, device)
    keys, values = random_kv(lens, 2, 64, torch.float32, device)
    paged.fill(keys, values)
    query = torch.randn(16, 4, 64, device=device)
    cu = torch.tensor([0, 8, 16], dtype=torch.int32, device=device)
    args = (query, paged.key_cache, paged.value_cache, paged.block_tables, cu, paged.context_lens,
            0.3, 8)
    heads = slopes_of("heads", 2, 4, device)
    plain = paged_prefill(*args, heads)
    per_seq = torch.stack([heads, heads * 3])
    changed = [paged_prefill(*args, per_seq)[8:], paged_prefill(*args, heads, causal=False),
               paged_prefill(*args, heads, causal=False, window_right=1)]
    assert (changed[0] - plain[8:]).abs().max() > 1e-3
    assert (changed[1] - plain).abs().max() > 1e-3
    assert (changed[2] - changed[1]).abs().max() > 1e-3


def test_validation_window_right(device):
    lens = [20, 9]
    paged = Paged(lens, 16, 2, 64, torch.float32, device)
    query = torch.randn(3, 4, 64, device=device)
    cu = torch.tensor([0, 2, 3], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match=r"paged_prefill_attention: window_right: expected -1 "
                                         r"\(unbounded\) or a value >= 0, got -2"):
        paged_prefill(query, paged.key_cache, paged.value_cache, paged.block_tables, cu,
                      paged.context_lens, 0.125, 2, None, causal=False, window_right=-2)
