# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""References of the checkpoint-loading tests (CheckpointLoadMemoryTest, SafetensorsConversionTest).

    python make_checkpoint_load.py DIR

writes, offline and deterministically:

- DIR/llama: a random `LlamaForCausalLM` of a few hundred MB (hidden 640, 8 layers, 10/2 heads of
  64, intermediate 1792, vocabulary 32000, untied lm_head: 76 M parameters), saved by
  transformers' save_pretrained in bfloat16, sharded (max_shard_size 64MB, so the index json and
  several shards are read); 153 MB on disk, 306 MB as float32;
- DIR/llama/expected_sha256.json: per tensor, the SHA-256 of its values converted by torch to
  float32 and to float16 (`tensor.to(dtype)`, little-endian bytes), the exact values a loader must
  produce;
- DIR/source.safetensors: F32, F16 and BF16 tensors of awkward values: every float16 and every
  bfloat16 bit pattern (NaNs, infinities, subnormals, both zeros), and float32 values around every
  float16 rounding boundary (ties to even, the 65504 / 65520 overflow edge, float16 subnormals,
  float32 subnormals) plus a million log-uniform values of both signs;
- DIR/expected.safetensors: torch's conversions of those: f32_as_f16, f16_as_f32, bf16_as_f32,
  bf16_as_f16 (and the sources as they are).
"""

import hashlib
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM


def write_llama(out):
    torch.manual_seed(20261127)
    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=640,
        intermediate_size=1792,
        num_hidden_layers=8,
        num_attention_heads=10,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(out, max_shard_size="64MB", safe_serialization=True)
    expected = {}
    for name, tensor in model.state_dict().items():
        expected[name] = {
            dtype: hashlib.sha256(
                tensor.to(getattr(torch, dtype)).contiguous().numpy().tobytes()
            ).hexdigest()
            for dtype in ("float32", "float16")
        }
    assert os.path.isfile(os.path.join(out, "model.safetensors.index.json")), "expected shards"
    with open(os.path.join(out, "expected_sha256.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


def float16_edges():
    """float32 values at and beside every float16 rounding boundary."""
    halves = torch.arange(0, 1 << 15, dtype=torch.int32).to(torch.int16).view(torch.float16)
    halves = halves[torch.isfinite(halves)].to(torch.float32)  # every non-negative finite half
    nxt = torch.cat([halves[1:], torch.tensor([65536.0])])
    mid = (halves + nxt) / 2  # exact in float32: the ties
    bits = mid.view(torch.int32)
    edges = torch.cat([halves, mid, (bits - 1).view(torch.float32), (bits + 1).view(torch.float32)])
    specials = torch.tensor(
        [0.0, 65504.0, 65519.996, 65520.0, 65536.0, 1e10, float("inf"), float("nan"),
         2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -26, 2.0 ** -14, 1e-40, 1.4e-45],
        dtype=torch.float32,
    )
    g = torch.Generator().manual_seed(7)
    magnitude = torch.exp2(torch.empty(1 << 20).uniform_(-30, 17, generator=g))
    values = torch.cat([edges, specials, magnitude])
    return torch.cat([values, -values])


def write_conversions(out):
    f16 = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(torch.float16)
    bf16 = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    # Odd sizes on purpose; the 3-D shape checks that only the element count matters.
    f32 = float16_edges()
    f32 = f32[: f32.numel() - f32.numel() % 3].reshape(3, 1, -1).contiguous()
    save_file({"f32": f32, "f16": f16, "bf16": bf16}, os.path.join(out, "source.safetensors"))
    expected = {
        "f32_as_f16": f32.to(torch.float16),
        "f32_as_f32": f32,
        "f16_as_f32": f16.to(torch.float32),
        "f16_as_f16": f16,
        "bf16_as_f32": bf16.to(torch.float32),
        "bf16_as_f16": bf16.to(torch.float16),
    }
    save_file({k: v.contiguous() for k, v in expected.items()},
              os.path.join(out, "expected.safetensors"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write_llama(os.path.join(out, "llama"))
    write_conversions(out)


if __name__ == "__main__":
    main()
