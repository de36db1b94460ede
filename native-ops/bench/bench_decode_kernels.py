"""Dense decode at batch 1 and 8 split into its kernels: what the split-KV decode kernel and the
combine pass take on the GPU (torch.profiler, K/V read from memory: a 256 MiB fill before each
call evicts them from L2), and the call end to end (bench_flash.bench, as bench_anchors.py's
decode table measures it). Shapes as issue 15's decode rows: Sq = 1, Hq 32 / Hkv 8, D 128, fp16.

With the combine launched as a programmatic dependent (sm_90), its profiled time includes the
wait for the decode kernel it overlaps: compare the end-to-end figures.

Usage (from native-ops): DJL_ATTN_LIB_DIR=$PWD/build python3 bench/bench_decode_kernels.py
"""

import torch
from torch.profiler import ProfilerActivity, profile

import bench_flash

SHAPES = ((1, 4096), (1, 32768), (8, 4096))
HEADS_Q, HEADS_KV, DIM = 32, 8, 128
CALLS = 20


def main():
    bench_flash.load_libraries()
    flash = torch.ops.djl_attn.flash_attention
    scale = DIM ** -0.5
    print("device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    flush = torch.empty(64 << 20, device="cuda")
    for batch, context in SHAPES:
        q = torch.randn(batch, 1, HEADS_Q, DIM, dtype=torch.float16, device="cuda")
        k = torch.randn(batch, context, HEADS_KV, DIM, dtype=torch.float16, device="cuda")
        v = torch.randn_like(k)
        call = lambda: flash(q, k, v, None, scale, False)  # noqa: E731
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(CALLS):
                flush.fill_(1.0)
                call()
            torch.cuda.synchronize()
        print("B %d, context %d" % (batch, context))
        for e in prof.key_averages():
            if e.device_time_total > 0 and "fill" not in e.key and "elementwise" not in e.key:
                print("   %-60s %8.2f us x %d" % (e.key[:60], e.device_time_total / e.count,
                                                  e.count))
        print("   end to end (L2 flushed): %.2f us" % (1e3 * bench_flash.bench(call)))


if __name__ == "__main__":
    main()
