"""The operators around the fused layers in a device decode step (docs/design/captured-decode-step.md):
embed_tokens and decoder_head against float64 references on awkward shapes and every dtype,
copy_from_host, and the cuda_graph_* operators — a step of these operators captured once and
replayed with new inputs gives what the same calls give eagerly, and bad graph calls are named.

Runs on every device the suite sees (conftest's `device`); the graph tests need a GPU."""

import math

import pytest
import torch

from conftest import DEVICES
from reference import TOLERANCE, assert_close

ops = torch.ops.djl_attn
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def embed_reference(ids, table, scale, positions=None, pos_table=None):
    x = table.cpu().double()[ids.cpu()] * float(torch.tensor(scale, dtype=torch.float32))
    if pos_table is not None:
        x = x + pos_table.cpu().double()[positions.cpu()]
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,c,vocab", [(0, 8, 5), (1, 7, 3), (5, 33, 17), (9, 300, 1000)])
@pytest.mark.parametrize("learned_positions", [False, True])
def test_embed_tokens(device, dtype, tokens, c, vocab, learned_positions):
    table = torch.randn(vocab, c, device=device).to(dtype)
    ids = torch.randint(0, vocab, (tokens,), device=device)
    hidden = torch.full((tokens, c), float("nan"), device=device).to(dtype)
    scale = math.sqrt(c) if not learned_positions else 1.0
    positions = pos_table = None
    if learned_positions:
        pos_table = torch.randn(11, c, device=device).to(dtype)
        positions = torch.randint(0, 11, (tokens,), device=device)
    ops.embed_tokens(hidden, ids, table, positions, pos_table, scale)
    expected = embed_reference(ids, table, scale, positions, pos_table)
    # One rounding of a float32 value: half an ulp of the dtype.
    assert_close(hidden.cpu(), expected, dtype)


def head_reference(hidden, rows, weight, bias, head, norm_type, eps, softcap):
    """float64 norm of the rows, rounded to the dtype as the model rounds its stream; the product
    in float64, rounded to the dtype; the soft-cap in float64."""
    dtype = hidden.dtype
    x = hidden.cpu().double()
    if rows is not None:
        x = x[rows.cpu()]
    if norm_type == 1:
        x = x - x.mean(-1, keepdim=True)
    x = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight.cpu().double()
    if bias is not None:
        x = x + bias.cpu().double()
    y = (x.to(dtype).double() @ head.cpu().double().T).to(dtype).double()
    if softcap:
        y = softcap * torch.tanh(y / softcap)
    return y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_type", [0, 1])
@pytest.mark.parametrize("tokens,c,vocab,rows", [(1, 8, 5, None), (6, 40, 97, None),
                                                 (7, 64, 513, [6, 0, 3]), (3, 24, 31, [])])
@pytest.mark.parametrize("softcap", [0.0, 2.5])
def test_decoder_head(device, dtype, norm_type, tokens, c, vocab, rows, softcap):
    hidden = torch.randn(tokens, c, device=device).to(dtype)
    weight = (1 + 0.1 * torch.randn(c, device=device))
    bias = 0.1 * torch.randn(c, device=device) if norm_type == 1 else None
    head = (torch.randn(vocab, c, device=device) / math.sqrt(c)).to(dtype)
    rows_t = None if rows is None else torch.tensor(rows, dtype=torch.int64, device=device)
    r = tokens if rows is None else len(rows)
    logits = torch.full((r, vocab), float("nan"), device=device)
    ops.decoder_head(logits, hidden, rows_t, weight, bias, head, norm_type, 1e-5, softcap)
    expected = head_reference(hidden, rows_t, weight, bias, head, norm_type, 1e-5, softcap)
    # The rounded norm and product may each land on the other side of a rounding boundary: twice
    # the dtype's tolerance.
    tol = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 2e-2}[dtype]
    assert logits.shape == expected.shape
    assert not torch.isnan(logits).any()
    err = (logits.cpu().double() - expected).abs().max().item() if r else 0.0
    assert err <= tol * max(1.0, expected.abs().max().item() if r else 1.0), err


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.float16])
def test_copy_from_host(device, dtype):
    src = torch.randint(-1000, 1000, (37,)).to(dtype)
    dst = torch.zeros(37, dtype=dtype, device=device)
    before = dst.data_ptr()
    ops.copy_from_host(dst, src)
    assert torch.equal(dst.cpu(), src)
    assert dst.data_ptr() == before


def test_copy_from_host_rejects_a_device_source_and_other_shapes(device):
    dst = torch.zeros(4, device=device)
    with pytest.raises(ValueError, match="copy_from_host: src: expected 4 elements"):
        ops.copy_from_host(dst, torch.zeros(5))
    with pytest.raises(ValueError, match=r"copy_from_host: src: expected the dtype of dst"):
        ops.copy_from_host(dst, torch.zeros(4, dtype=torch.float64))
    if device != "cpu":
        with pytest.raises(ValueError, match="copy_from_host: src: expected a CPU tensor"):
            ops.copy_from_host(dst, torch.zeros(4, device=device))


GRAPH_OPS = [("cuda_graph_measure_begin", 1), ("cuda_graph_measure_end", 1),
             ("cuda_graph_capture_begin", 1), ("cuda_graph_capture_end", 1),
             ("cuda_graph_replay", 2), ("cuda_graph_release", 2)]


@pytest.mark.parametrize("name,args", GRAPH_OPS)
def test_graph_operators_refuse_cpu_tensors_by_name(name, args):
    first = "anchor" if "measure" in name else "arena"
    call = [torch.zeros(8, dtype=torch.uint8)] + ([1] if args == 2 else [])
    with pytest.raises(ValueError, match="%s: %s: expected a CUDA tensor" % (name, first)):
        getattr(ops, name)(*call)


needs_gpu = pytest.mark.skipif("cuda" not in DEVICES, reason="CUDA graphs capture GPU work")


def step_calls(state):
    """A small step of the operators a device step uses: embed, head; into fixed arrays."""
    ops.embed_tokens(state["hidden"], state["ids"], state["table"], None, None, 1.0, False)
    ops.decoder_head(state["logits"], state["hidden"], None, state["gain"], None, state["head"],
                     0, 1e-6, 0.0, False)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_a_captured_step_replays_what_the_eager_calls_compute(dtype):
    d = "cuda"
    c, vocab, rows = 64, 1000, 8
    state = dict(table=torch.randn(vocab, c, device=d).to(dtype),
                 head=(torch.randn(vocab, c, device=d) / 8).to(dtype),
                 gain=torch.rand(c, device=d) + 0.5,
                 ids=torch.zeros(rows, dtype=torch.int64, device=d),
                 hidden=torch.zeros(rows, c, device=d).to(dtype),
                 logits=torch.zeros(rows, vocab, device=d))
    anchor = torch.zeros(1, dtype=torch.uint8, device=d)
    ops.cuda_graph_measure_begin(anchor)
    step_calls(state)
    (need,) = ops.cuda_graph_measure_end(anchor).tolist()
    assert need > 0  # the head's temporaries
    arena = torch.zeros(need, dtype=torch.uint8, device=d)
    ops.cuda_graph_capture_begin(arena)
    step_calls(state)
    graph, nodes = ops.cuda_graph_capture_end(arena).tolist()
    assert nodes >= 3
    for _ in range(3):
        ids = torch.randint(0, vocab, (rows,))
        ops.copy_from_host(state["ids"], ids)
        ops.cuda_graph_replay(arena, graph)
        replayed = state["logits"].clone()
        step_calls(state)  # eagerly, the same calls
        torch.cuda.synchronize()
        assert torch.equal(replayed, state["logits"])
        expected = head_reference(state["table"][ids.to(d)], None, state["gain"], None,
                                  state["head"], 0, 1e-6, 0.0)
        assert (replayed.cpu().double() - expected).abs().max() <= 4 * TOLERANCE[dtype] * max(
            1.0, expected.abs().max().item())
    ops.cuda_graph_release(arena, graph)
    with pytest.raises(ValueError, match="cuda_graph_replay: graph: expected the id of a live graph"):
        ops.cuda_graph_replay(arena, graph)
    other = torch.zeros(need, dtype=torch.uint8, device=d)
    with pytest.raises(ValueError, match="cuda_graph_release: graph: expected the id of a live"):
        ops.cuda_graph_release(other, graph)


@needs_gpu
def test_graph_operators_name_a_bad_arena():
    d = "cuda"
    with pytest.raises(ValueError, match="cuda_graph_capture_begin: arena: expected dtype uint8"):
        ops.cuda_graph_capture_begin(torch.zeros(8, device=d))
    with pytest.raises(ValueError, match=r"cuda_graph_capture_begin: arena: expected 1 dims"):
        ops.cuda_graph_capture_begin(torch.zeros(2, 8, dtype=torch.uint8, device=d))
    with pytest.raises(ValueError, match="cuda_graph_replay: graph: expected the id of a live"):
        ops.cuda_graph_replay(torch.zeros(8, dtype=torch.uint8, device=d), 10**9)
