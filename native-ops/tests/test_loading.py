"""Loading and registration of the operator library."""

import shutil

import torch

import conftest

SCHEMA_NAMES = [
    "flash_attention",
    "flash_attention_varlen",
    "bert_attention",
    "add_bias_residual_layernorm",
    "add_bias_gelu",
    "reshape_and_cache",
    "paged_attention",
    "causal_dot_product",
]


def test_every_schema_is_defined():
    for name in SCHEMA_NAMES:
        schemas = torch._C._jit_get_schemas_for_operator("djl_attn::" + name)
        assert len(schemas) == 1, name


def test_reshape_and_cache_declares_its_mutations():
    (schema,) = torch._C._jit_get_schemas_for_operator("djl_attn::reshape_and_cache")
    mutated = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    assert mutated == ["key_cache", "value_cache"]


def test_a_second_copy_of_the_library_registers_nothing(tmp_path):
    # Another path (another class loader, PYTORCH_EXTRA_LIBRARY_PATH) loads a second copy: it
    # must find the namespace taken and leave the first copy's kernels in place, not fail or
    # register everything twice.
    copy = tmp_path / "libdjl_attn_copy.so"
    shutil.copy(conftest._find("libdjl_attn.so"), copy)
    torch.ops.load_library(str(copy))
    q = torch.randn(1, 3, 2, 16)
    out, _ = torch.ops.djl_attn.flash_attention(q, q, q, None, 0.25, False)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2), scale=0.25
    ).transpose(1, 2)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
