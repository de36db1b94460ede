"""The tuning configurations of the CUDA flash forward (DJL_ATTN_FLASH_CONFIG) against the float64
reference: every configuration, on the head dims it is compiled for, with the shapes that stress
tile edges (odd lengths, Sk != Sq), causal masks, kv_lens (rows with one and with no valid key),
GQA and varlen batches. One GPU run proves each configuration correct before the benchmark
compares them. The configurations and their head dims are read from the one table in
cuda/flash/flash_shapes.h.
"""

import math
import pathlib
import re

import pytest
import torch

import reference
from conftest import option_values
from reference import assert_close

flash = torch.ops.djl_attn.flash_attention
varlen = torch.ops.djl_attn.flash_attention_varlen

LOW_PRECISION = [torch.float16, torch.bfloat16]
CUDA = torch.cuda.is_available()
cuda_only = pytest.mark.skipif(not CUDA, reason="the configurations are CUDA kernels")
ENV = "DJL_ATTN_FLASH_CONFIG"


def compiled_configs():
    """[(index, name, [head dims], (block_m, block_n, stages))] from kFwdConfigs, the base tiles
    (index 0) included."""
    header = pathlib.Path(__file__).resolve().parent.parent / "cuda" / "flash" / "flash_shapes.h"
    table = re.search(r"kFwdConfigs\[\] = \{(.*?)\n\};", header.read_text(), re.S).group(1)
    configs = []
    for i, m in enumerate(re.finditer(r'\{"(\w+)",([^}]*)\}', table)):
        mask = m.group(2)
        dims = [d for d in (64, 128) if i == 0 or "kCfgD%d" % d in mask]
        numbers = [int(x) for x in re.findall(r"\b\d+\b", mask)[:4]]  # block_m, block_n, warps, stages
        configs.append((i, m.group(1), dims, (numbers[0], numbers[1], numbers[3])))
    return configs


# The configurations of kFwdConfigs this build compiled (DJL_ATTN_FLASH_CONFIG's values: all in a
# DJL_ATTN_TUNING build, the base tiles and the two measured defaults otherwise).
BUILT = set(option_values(ENV) or []) if CUDA else set()
CONFIGS = [c for c in compiled_configs() if c[1] in BUILT] if CUDA else compiled_configs()
# (name, head dim) for every compiled instantiation; the base tiles at both.
CASES = [(name, dim) for _, name, dims, _ in CONFIGS for dim in dims]


def test_config_table_parses():
    assert CONFIGS[0][1] == "base" and len(CONFIGS) > 1
    assert all(dims for _, _, dims, _ in CONFIGS)
    assert all(min(shape) > 0 for _, _, _, shape in CONFIGS[1:])


def check(q, k, v, kv_lens, causal):
    scale = 1.0 / math.sqrt(q.shape[-1])
    batch, seqlen_q, heads_q, _ = q.shape
    reference.poison_allocator(q.device, (q.shape, q.dtype), ((batch, heads_q, seqlen_q), torch.float32))
    out, lse = flash(q, k, v, kv_lens, scale, causal)
    ref_out, ref_lse = reference.flash_attention(q, k, v, kv_lens, scale, causal)
    assert_close(out.cpu(), ref_out.cpu(), q.dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), q.dtype, "lse")


def inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, dtype):
    q = torch.randn(batch, seqlen_q, heads_q, dim, dtype=dtype, device="cuda")
    k = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device="cuda")
    v = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device="cuda")
    return q, k, v


# Query lengths above 64 (shorter ones take the 64-row base tiles whatever is asked).
SHAPES = [
    # batch, Sq, Sk, Hq, Hkv
    (2, 1000, 1000, 4, 4),  # odd length: partial last query and key tiles
    (1, 65, 300, 2, 2),  # one row past the short-query cut, Sk not a tile multiple
    (2, 257, 129, 8, 2),  # Sk < Sq: causal rows that see nothing; GQA 4:1
    (1, 2048, 2048, 2, 1),  # many key tiles: the cp.async ring wraps; MQA
]


@cuda_only
@pytest.mark.parametrize("config,dim", CASES)
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_config_dense(options, config, dim, dtype, shape, causal):
    options.set(ENV, config)
    batch, seqlen_q, seqlen_k, heads_q, heads_kv = shape
    check(*inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, dtype), None, causal)


@cuda_only
@pytest.mark.parametrize("config,dim", CASES)
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("causal", [False, True])
def test_config_kv_lens_gqa(options, config, dim, dtype, causal):
    # Rows with every key, one key, none, a tile edge and one past it; GQA 8:1; padded head dim
    # (dim - 8 runs the same instantiation with the last chunk zero-filled).
    options.set(ENV, config)
    for d in (dim, dim - 8):
        q, k, v = inputs(5, 131, 300, 8, 1, d, dtype)
        kv_lens = torch.tensor([300, 1, 0, 128, 129], dtype=torch.int32, device="cuda")
        check(q, k, v, kv_lens, causal)


@cuda_only
@pytest.mark.parametrize("config,dim", CASES)
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("causal", [False, True])
def test_config_varlen(options, config, dim, dtype, causal):
    options.set(ENV, config)
    lens_q, lens_k = [1, 200, 0, 129, 77], [5, 333, 17, 64, 77]
    cu_q = torch.tensor([0] + [sum(lens_q[: i + 1]) for i in range(len(lens_q))], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + [sum(lens_k[: i + 1]) for i in range(len(lens_k))], dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens_q), 4, dim, dtype=dtype, device="cuda")
    k = torch.randn(sum(lens_k), 2, dim, dtype=dtype, device="cuda")
    v = torch.randn(sum(lens_k), 2, dim, dtype=dtype, device="cuda")
    scale = 1.0 / math.sqrt(dim)
    reference.poison_allocator(q.device, (q.shape, q.dtype), ((q.shape[1], q.shape[0]), torch.float32))
    out, lse = varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), scale, causal)
    ref_out, ref_lse = reference.flash_attention_varlen(q, k, v, cu_q, cu_k, scale, causal)
    assert_close(out.cpu(), ref_out.cpu(), dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), dtype, "lse")


@cuda_only
@pytest.mark.parametrize("config,dim", CASES)
def test_config_runs_its_kernel(options, config, dim):
    """The profiler sees the instantiation that the name selects (the last template argument of
    flash_fwd_kernel is the configuration's index), so a table/dispatch mismatch cannot pass
    for a measurement of the configuration."""
    index, shape = {name: (i, shape) for i, name, _, shape in CONFIGS}[config]
    block_m, block_n, stages = shape
    optin = getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", 1 << 30)
    if index != 0 and (block_m + 2 * stages * block_n) * dim * 2 > optin:
        index = 0  # does not fit this GPU: the plan takes the base tiles
    options.set(ENV, config)
    q, k, v = inputs(1, 256, 256, 2, 2, dim, torch.float16)
    flash(q, k, v, None, 0.1, False)  # first call: shared-memory opt-in outside the trace
    torch.cuda.synchronize()
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            flash(q, k, v, None, 0.1, False)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if "flash_fwd_kernel" in e.name]
    except Exception as e:  # a torch build without a working CUDA profiler
        pytest.skip("no CUDA profiler: %s" % e)
    if not names:
        pytest.skip("the profiler recorded no kernels")
    # flash_fwd_kernel<T, D, bias, small_m, config, features>: the fifth argument.
    found = [int(m.group(1).split(",")[4]) for n in names
             for m in [re.search(r"flash_fwd_kernel\w*<([^<>]*)>", n)] if m]
    assert found and set(found) == {index}, names


@cuda_only
@pytest.mark.parametrize("config,dim", CASES)
@pytest.mark.parametrize("scale", [-0.3, 0.0])
def test_config_non_positive_scale(options, config, dim, scale):
    # The fused-scale configurations need scale > 0 and run the base tiles otherwise.
    options.set(ENV, config)
    q, k, v = inputs(2, 200, 300, 4, 2, dim, torch.float16)
    reference.poison_allocator(q.device, (q.shape, q.dtype), ((2, 4, 200), torch.float32))
    out, lse = flash(q, k, v, None, scale, True)
    ref_out, ref_lse = reference.flash_attention(q, k, v, None, scale, True)
    assert_close(out.cpu(), ref_out.cpu(), q.dtype, "out")
    assert_close(lse.cpu(), ref_lse.cpu(), q.dtype, "lse")


@cuda_only
@pytest.mark.parametrize("dim,tuned", [(128, "m128n64w4s2for"), (64, "m128n128w4s2for")])
def test_unset_and_empty_select_the_tuned_config(options, dim, tuned):
    # No configuration asked for: the measured best one per head dim (flash_plan.cpp,
    # tuned_config). Same kernel, so bit-identical results; "base" is the original tiles.
    q, k, v = inputs(1, 300, 300, 2, 2, dim, torch.float16)
    options.set(ENV, tuned)
    expected = flash(q, k, v, None, 0.1, True)[0]
    options.set(ENV, "auto")
    assert torch.equal(flash(q, k, v, None, 0.1, True)[0], expected)
    options.set(ENV, "")
    assert torch.equal(flash(q, k, v, None, 0.1, True)[0], expected)
    options.set(ENV, "base")
    original = flash(q, k, v, None, 0.1, True)[0]
    ref_out, _ = reference.flash_attention(q, k, v, None, 0.1, True)
    assert_close(original.cpu(), ref_out.cpu(), q.dtype, "out")


@cuda_only
def test_unknown_config_is_rejected(options):
    q, k, v = inputs(1, 300, 300, 2, 2, 64, torch.float16)
    with pytest.raises(ValueError) as info:
        options.set(ENV, "m999")
    msg = str(info.value)
    assert "DJL_ATTN_FLASH_CONFIG: expected one of auto, base, " in msg and "got 'm999'" in msg
    # Refused where it is set: the switch keeps its value and calls work.
    check(q, k, v, None, False)
