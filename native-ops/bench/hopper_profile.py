"""One call of the Hopper flash kernel per (head dim, causal) for Nsight Compute (see
bench/hopper_check.sh and bench/profile_targets.sh), at S = 4096 and the benchmark's token count
(16k tokens, hidden 2048); with --cudnn, one call of SDPA's cuDNN backend on the same tensors
after each, so that one ncu run profiles both kernels of a cell; with --fp8, one call of
flash_attention_fp8 on e4m3 copies of them (D = 128 only: its v transpose and the e4m3 kernel).

Usage: DJL_ATTN_LIB_DIR=... python3 bench/hopper_profile.py [--dims 128,64] [--causal no]
    [--dtype bfloat16] [--seqlen 4096] [--cudnn] [--fp8]
"""

import argparse
import os
import pathlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

parser = argparse.ArgumentParser()
parser.add_argument("--dims", default="128,64")
parser.add_argument("--causal", default="no", help="no, yes or both")
parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
parser.add_argument("--seqlen", type=int, default=4096)
parser.add_argument("--cudnn", action="store_true")
parser.add_argument("--fp8", action="store_true")
args = parser.parse_args()

# Switches are read when the libraries load (docs/operators.md, "Switches").
os.environ["DJL_ATTN_FLASH_HOPPER"] = "on"
lib = pathlib.Path(os.environ["DJL_ATTN_LIB_DIR"])
torch.ops.load_library(str(lib / "libdjl_attn.so"))
torch.ops.load_library(str(lib / "libdjl_attn_cuda.so"))
dtype = getattr(torch, args.dtype)
causals = {"no": (False,), "yes": (True,), "both": (False, True)}[args.causal]
for dim in (int(d) for d in args.dims.split(",")):
    heads = 2048 // dim
    q, k, v = (torch.randn(16384 // args.seqlen, args.seqlen, heads, dim, dtype=dtype,
                           device="cuda") for _ in range(3))
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    for causal in causals:
        torch.ops.djl_attn.flash_attention(q, k, v, None, dim ** -0.5, causal)
        if args.cudnn:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=causal)
        if args.fp8 and dim == 128:
            torch.ops.djl_attn.flash_attention_fp8(q8, k8, v8, None, dim ** -0.5, causal)
torch.cuda.synchronize()
