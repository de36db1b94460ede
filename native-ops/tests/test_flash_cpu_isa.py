"""The CPU flash kernel's instruction-set paths, each forced in turn with DJL_ATTN_CPU_ISA.

The kernel is compiled for AVX-512, AVX2+FMA and baseline x86-64 and picks the widest the CPU
has; the switch DJL_ATTN_CPU_ISA=generic|avx2 lowers the choice (set per test). The other test
files run the default path; these run every path on the shapes that reach each branch of the
kernel: register-block remainders (rows not a multiple of 6 or 8, keys not a multiple of the
16/32-key block), the direct path of tiles under 4 rows (decode), head dims padded to the
vector pair (33, 80), causal bottom-right, kv_lens, GQA, bias on load, varlen and low precision.
A path the CPU lacks falls back to the next one down, so the cases still run there.
"""

import pytest
import torch

import test_bert_ops
import test_flash_attention as dense
import test_flash_varlen as varlen

ISAS = ["generic", "avx2", "avx512"]


@pytest.fixture(params=ISAS)
def isa(request, options):
    options.set("DJL_ATTN_CPU_ISA", request.param)
    return request.param


@pytest.mark.parametrize(
    "batch,seqlen_q,seqlen_k,heads_q,heads_kv,dim,causal",
    [
        (2, 1, 1000, 4, 4, 64, False),   # decode: direct path, many key tiles
        (1, 3, 70, 2, 1, 33, True),      # direct path, odd D, causal bottom-right, MQA
        (2, 77, 77, 4, 2, 80, True),     # remainders of every block, D padded to 96
        (1, 129, 200, 2, 2, 128, False), # Sq < Sk across tiles
        (1, 70, 7, 2, 2, 32, True),      # rows that see no key
    ],
)
def test_dense_float32(isa, batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, causal):
    q, k, v = dense.make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim, torch.float32, "cpu")
    dense.check(q, k, v, None, causal)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_with_kv_lens(isa, dtype):
    q, k, v = dense.make_inputs(3, 37, 113, 8, 2, 64, dtype, "cpu")
    kv_lens = torch.tensor([113, 1, 0], dtype=torch.int32)
    dense.check(q, k, v, kv_lens, True)


def test_varlen(isa):
    q, k, v, cu_q, cu_k = varlen.make_inputs([1, 7, 130, 0], [1, 9, 130, 5], 4, 2, 80, torch.float32, "cpu")
    varlen.check(q, k, v, cu_q, cu_k, True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bias_on_load(isa, dtype):
    qkv = test_bert_ops.randn(2, 67, 3 * 3 * 64, dtype=dtype, device="cpu")
    bias = test_bert_ops.randn(3 * 3 * 64, dtype=dtype, device="cpu")
    kv_lens = torch.tensor([67, 2], dtype=torch.int32)
    test_bert_ops.check_bert_attention(qkv, bias, kv_lens, 3)
