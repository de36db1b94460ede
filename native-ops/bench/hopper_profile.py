"""One call of the Hopper flash kernel per (head dim, causal) for Nsight Compute (see
bench/hopper_check.sh): D 128 and 64 at S = 4096, bfloat16, the benchmark's token count."""

import os
import pathlib

import torch

# Switches are read when the libraries load (docs/operators.md, "Switches").
os.environ["DJL_ATTN_FLASH_HOPPER"] = "on"
lib = pathlib.Path(os.environ["DJL_ATTN_LIB_DIR"])
torch.ops.load_library(str(lib / "libdjl_attn.so"))
torch.ops.load_library(str(lib / "libdjl_attn_cuda.so"))
for dim in (128, 64):
    heads = 2048 // dim
    q, k, v = (torch.randn(4, 4096, heads, dim, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    for causal in (False,):
        torch.ops.djl_attn.flash_attention(q, k, v, None, dim ** -0.5, causal)
torch.cuda.synchronize()
