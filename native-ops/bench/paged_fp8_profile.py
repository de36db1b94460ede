"""One paged decode call on an fp16 cache and one on an FP8 (e4m3) cache, batch 32 · 4k keys
(Hq 32 / Hkv 8, D 128, block 16: issue 28's FP8 cell), for Nsight Compute (bench/profile_targets.sh).

Usage: DJL_ATTN_LIB_DIR=... python3 bench/paged_fp8_profile.py
"""

import torch

import bench_anchors
import bench_flash

bench_flash.load_libraries()
BATCH, CONTEXT, BLOCK, HQ, HKV, D = 32, 4096, 16, 32, 8, 128
blocks = BATCH * CONTEXT // BLOCK
key_cache, value_cache = (torch.randn(blocks, BLOCK, HKV, D, dtype=torch.float16, device="cuda")
                          for _ in range(2))
tables = torch.randperm(blocks, device="cuda").to(torch.int32).view(BATCH, -1)
lens = torch.full((BATCH,), CONTEXT, dtype=torch.int32, device="cuda")
query = torch.randn(BATCH, HQ, D, dtype=torch.float16, device="cuda")
scale = D ** -0.5
k8, v8 = bench_anchors.to_fp8_cache(key_cache, 0.05), bench_anchors.to_fp8_cache(value_cache, 0.05)
s8 = torch.tensor([0.05], device="cuda")
ops = torch.ops.djl_attn
ops.paged_attention(query, key_cache, value_cache, tables, lens, scale, CONTEXT, None)
ops.paged_attention(query, k8, v8, tables, lens, scale, CONTEXT, None, True, s8, s8)
torch.cuda.synchronize()
