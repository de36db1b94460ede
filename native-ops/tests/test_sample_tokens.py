"""djl_attn.sample_tokens (one token id per row of logits: greedy, or sampled with temperature,
top-k and top-p from a counter-based random number) against independent references: torch.argmax
for greedy rows, the float64 distribution of reference.sampling_probabilities (the zoo's
TokenSampler rules) for sampled ones, a Python Philox4x32-10 checked against Random123's test
vectors for the random number. Rows must not depend on their batch, runs must repeat, and the CPU
and CUDA kernels must choose the same ids.

Every test runs on each device the suite sees (conftest's `device`)."""

import math

import pytest
import torch

import reference
from conftest import DEVICES

sample_tokens = torch.ops.djl_attn.sample_tokens

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LLAMA3_VOCAB = 128256


def settings(batch, device, temperature=1.0, top_k=0, top_p=1.0, seeds=None, offsets=None):
    """The per-row tensors of a call; scalars are repeated over the batch."""

    def row(v, dtype):
        if isinstance(v, torch.Tensor):
            return v.to(dtype=dtype, device=device)
        return torch.full((batch,), v, dtype=dtype, device=device)

    if seeds is None:
        seeds = torch.randint(-2**62, 2**62, (batch,), dtype=torch.int64)
    if offsets is None:
        offsets = torch.randint(0, 2**20, (batch,), dtype=torch.int64)
    return (row(temperature, torch.float32), row(top_k, torch.int32), row(top_p, torch.float32),
            row(seeds, torch.int64), row(offsets, torch.int64))


def sample(logits, *per_row):
    """Runs the operator on poisoned ids and returns them on the CPU."""
    ids = torch.full((logits.shape[0],), -7, dtype=torch.int64, device=logits.device)
    sample_tokens(ids, logits, *per_row)
    return ids.cpu()


def test_philox_matches_random123_test_vectors():
    # Random123 1.09, examples/kat_vectors: philox4x32 10 rounds.
    assert reference.philox4x32_10([0, 0, 0, 0], [0, 0]) == \
        [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert reference.philox4x32_10([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2) == \
        [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert reference.philox4x32_10([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
                                   [0xA4093822, 0x299F31D0]) == \
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


@pytest.mark.parametrize("vocab", [1, 7, 1000, 50257])
def test_equal_logits_draw_floor_u_times_v(device, vocab):
    # Every token weighs exactly one unit, so the draw is floor(u * V) with u = Philox / 2^64: the
    # operator's random number, seen exactly, on any device.
    batch = 33
    logits = torch.full((batch, vocab), 0.25, device=device)
    per_row = settings(batch, device, temperature=0.9)
    seeds, offsets = per_row[3].cpu().tolist(), per_row[4].cpu().tolist()
    expected = [(reference.sample_uniform_bits(s, o) * vocab) >> 64
                for s, o in zip(seeds, offsets)]
    assert sample(logits, *per_row).tolist() == expected


def greedy_logits(batch, vocab, dtype, device):
    """Random logits with exact ties (a few distinct values), a row holding -inf, +inf and NaN."""
    x = torch.randint(-3, 4, (batch, vocab)).float() + 0.5 * torch.randn(batch, vocab).round()
    if batch >= 3 and vocab >= 5:
        x[1, 2] = float("inf")
        x[1, 4] = float("inf")
        x[2, :] = float("-inf")
        x[0, 3] = float("nan")
        x[0, 1] = float("nan")
    return x.to(dtype).to(device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [1, 7, 1000, LLAMA3_VOCAB])
@pytest.mark.parametrize("batch", [0, 1, 3, 64])
def test_greedy_is_torch_argmax(device, dtype, vocab, batch):
    if vocab == LLAMA3_VOCAB and dtype != torch.float32 and batch == 64:
        batch = 5  # the large case once per dtype is enough on the CPU
    logits = greedy_logits(batch, vocab, dtype, device)
    ids = sample(logits, *settings(batch, device, temperature=0.0, top_k=3, top_p=0.5))
    assert torch.equal(ids, logits.argmax(dim=1).cpu())


def random_settings(batch, vocab, device):
    """Mixed rows: greedy, plain sampling, top-k, top-p, both; temperatures 0.3 to 2."""
    temperature = torch.rand(batch) * 1.7 + 0.3
    temperature[::5] = 0
    top_k = torch.randint(1, max(2, vocab // 3), (batch,), dtype=torch.int32)
    top_k[1::3] = 0
    top_p = torch.rand(batch) * 0.9 + 0.05
    top_p[2::4] = 1
    return settings(batch, device, temperature, top_k, top_p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [2, 7, 1000, LLAMA3_VOCAB])
def test_drawn_ids_are_in_the_float64_kept_set(device, dtype, vocab):
    batch = 8 if vocab == LLAMA3_VOCAB else 40
    draws = 4 if vocab == LLAMA3_VOCAB else 25
    logits = (3 * torch.randn(batch, vocab)).to(dtype).to(device)
    # A few exact ties at the top-k threshold and in the nucleus.
    if vocab >= 7:
        logits[:, 1] = logits[:, 0]
        logits[:, 5] = logits[:, 3]
    temperature, top_k, top_p, seeds, _ = random_settings(batch, vocab, device)
    temperature[-1], top_k[-1], top_p[-1] = 4.0, 0, 1.0  # a flat distribution
    kept, spread = [], []
    for b in range(batch):
        t, k, p = temperature[b].item(), top_k[b].item(), top_p[b].item()
        if t == 0:
            kept.append({int(logits[b].argmax())})
            spread.append(False)
            continue
        # The fixed-point weights are within ~2e-6 of float64: a nucleus a little wider is a
        # superset of the kernel's.
        probs = reference.sampling_probabilities(logits[b], t, k, min(1.0, p + 1e-5))
        kept.append(set(torch.nonzero(probs > 0).flatten().tolist()))
        # No token above 5%: all draws alike has probability below 0.05^(draws - 1).
        spread.append(float(probs.max()) < 0.05)
    seen = [set() for _ in range(batch)]
    for step in range(draws):
        offsets = torch.full((batch,), step, dtype=torch.int64, device=device)
        ids = sample(logits, temperature, top_k, top_p, seeds, offsets)
        for b in range(batch):
            assert ids[b].item() in kept[b], (b, ids[b].item(), sorted(kept[b])[:20])
            seen[b].add(ids[b].item())
    # Rows whose distribution is spread do not always draw the same token.
    assert vocab < 1000 or any(spread)
    assert all(len(seen[b]) > 1 for b in range(batch) if spread[b]), (spread, seen)


def chi_square_bound(df, z=4.753):
    """Wilson-Hilferty's chi-square quantile for df degrees of freedom at z standard deviations
    (4.753: a one-sided 1e-6 tail)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, 0, 1.0), (0.7, 0, 1.0), (1.3, 6, 1.0), (0.8, 0, 0.8), (1.0, 7, 0.9)])
def test_frequencies_match_the_float64_distribution(device, temperature, top_k, top_p):
    vocab, draws = 10, 40000
    row = torch.tensor([1.5, -0.5, 0.3, 2.2, 0.3, -1.0, 1.1, 0.0, 2.2, -2.5])
    probs = reference.sampling_probabilities(row, temperature, top_k, top_p)
    logits = row.expand(draws, vocab).contiguous().to(device)
    # Every draw its own seed, as many requests would have (offset 0: each request's first step).
    per_row = settings(draws, device, temperature, top_k, top_p,
                       seeds=torch.arange(draws, dtype=torch.int64) * 7919 + 11,
                       offsets=torch.zeros(draws, dtype=torch.int64))
    counts = torch.bincount(sample(logits, *per_row), minlength=vocab).double()
    assert counts[probs == 0].sum() == 0, counts
    live = probs > 0
    expected = probs[live] * draws
    chi2 = float(((counts[live] - expected) ** 2 / expected).sum())
    df = int(live.sum()) - 1
    if df > 0:
        assert chi2 < chi_square_bound(df), (chi2, counts.tolist(), expected.tolist())
    # And no probability off by more than Hoeffding's bound at 1e-9 over the tokens.
    tolerance = math.sqrt(math.log(2 * vocab / 1e-9) / (2 * draws))
    assert float((counts / draws - probs).abs().max()) < tolerance


def test_a_row_draws_the_same_id_in_any_batch(device):
    vocab = 3000
    logits = 2 * torch.randn(9, vocab, device=device)
    per_row = random_settings(9, vocab, device)
    together = sample(logits, *per_row)
    # Alone, and reversed inside a larger batch of other rows.
    for b in range(9):
        alone = sample(logits[b:b + 1], *[t[b:b + 1] for t in per_row])
        assert alone.item() == together[b].item(), b
    others = 2 * torch.randn(5, vocab, device=device)
    other_rows = random_settings(5, vocab, device)
    order = torch.arange(8, -1, -1)
    mixed = sample(torch.cat([others, logits[order]]),
                   *[torch.cat([o, t[order.to(t.device)]]) for o, t in zip(other_rows, per_row)])
    assert torch.equal(mixed[5:], together[order])
    # Again: the same ids, run after run.
    assert torch.equal(sample(logits, *per_row), together)


def test_offsets_change_the_draw(device):
    # One row, one seed, 64 steps: the counter moves the draw (a constant u would repeat the id).
    logits = torch.zeros(64, 1000, device=device)
    per_row = settings(64, device, seeds=torch.full((64,), 1234, dtype=torch.int64),
                       offsets=torch.arange(64, dtype=torch.int64))
    assert len(set(sample(logits, *per_row).tolist())) > 50


@pytest.mark.skipif("cuda" not in DEVICES, reason="compares the CPU and CUDA kernels")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [7, 1000, LLAMA3_VOCAB])
def test_cpu_and_cuda_choose_the_same_ids(dtype, vocab):
    batch = 64
    logits = (3 * torch.randn(batch, vocab)).to(dtype)
    logits[:, 2] = logits[:, 0]  # ties
    per_row = random_settings(batch, vocab, "cpu")
    for step in range(3):
        offsets = per_row[4] + step
        cpu = sample(logits, *per_row[:4], offsets)
        cuda = sample(logits.cuda(), *[t.cuda() for t in per_row[:4]], offsets.cuda())
        assert torch.equal(cpu, cuda), torch.nonzero(cpu != cuda).flatten().tolist()
        # Bit-reproducible on the GPU: integer sums, no order-dependent float atomics.
        again = sample(logits.cuda(), *[t.cuda() for t in per_row[:4]], offsets.cuda())
        assert torch.equal(cuda, again)


def test_special_values(device):
    # +inf logits share the draw; NaN logits are never drawn; an all -inf row is uniform over it;
    # an all-NaN row falls back to the first maximum (torch.argmax: the first NaN).
    nan, inf = float("nan"), float("inf")
    logits = torch.tensor([[0.0, inf, 3.0, inf, nan],
                           [nan, 1.0, nan, 1.0, 0.5],
                           [-inf, -inf, -inf, -inf, -inf],
                           [nan, nan, nan, nan, nan]], device=device)
    allowed = [{1, 3}, {1, 3, 4}, {0, 1, 2, 3, 4}, {0}]
    for step in range(20):
        ids = sample(logits, *settings(4, device, temperature=1.0,
                                       offsets=torch.full((4,), step, dtype=torch.int64)))
        for b in range(4):
            assert ids[b].item() in allowed[b], (b, ids[b].item())


@pytest.mark.skipif("cuda" not in DEVICES, reason="captures a CUDA graph")
def test_a_captured_call_replays_the_eager_ids():
    # In a graph the binding reads nothing back; replays with new settings and logits written into
    # the same tensors choose what eager calls choose.
    batch, vocab = 16, 5000
    logits = torch.empty(batch, vocab, device="cuda")
    per_row = [t.cuda() for t in random_settings(batch, vocab, "cpu")]
    ids = torch.full((batch,), -1, dtype=torch.int64, device="cuda")
    logits.copy_(torch.randn(batch, vocab))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        sample_tokens(ids, logits, *per_row)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        sample_tokens(ids, logits, *per_row)
    for step in range(4):
        logits.copy_(2 * torch.randn(batch, vocab))
        for dst, src in zip(per_row, random_settings(batch, vocab, "cpu")):
            dst.copy_(src)
        ids.fill_(-1)
        graph.replay()
        captured = ids.cpu()
        assert torch.equal(captured, sample(logits, *per_row)), step
    # Values the binding would refuse reach a captured kernel unchecked: a negative temperature
    # is greedy there (sampling_rules.h).
    per_row[0].fill_(-1.0)
    graph.replay()
    assert torch.equal(ids.cpu(), logits.argmax(dim=1).cpu())
