"""CPU flash attention against torch's matmul -> softmax -> matmul, on the shapes of
docs/design/flash-cpu.md. Not one of the bench_*.py files that scripts/gpu-check.sh runs: CPU only.

    OMP_WAIT_POLICY=PASSIVE python3 cpu_flash_compare.py /path/to/libdjl_attn.so

One library per process (every build registers the djl_attn namespace): to compare two
builds, run this once per library, alternating, several rounds, and take medians.
DJL_ATTN_CPU_ISA=generic|avx2 forces a narrower kernel path.
"""

import statistics
import sys
import time

import torch

SHAPES = [  # name, B, Sq, Sk, H, D
    ("B2 S128 H8 D64", 2, 128, 128, 8, 64),
    ("B1 S512 H12 D64", 1, 512, 512, 12, 64),
    ("B1 S2048 H8 D64", 1, 2048, 2048, 8, 64),
    ("decode B2 Sq1 Sk1024 H8 D64", 2, 1, 1024, 8, 64),
]


def median_ms(fn, reps):
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    torch.ops.load_library(sys.argv[1])
    torch.set_num_threads(2)
    for name, batch, seqlen_q, seqlen_k, heads, dim in SHAPES:
        gen = torch.Generator().manual_seed(0)
        q = torch.randn(batch, seqlen_q, heads, dim, generator=gen)
        k = torch.randn(batch, seqlen_k, heads, dim, generator=gen)
        v = torch.randn(batch, seqlen_k, heads, dim, generator=gen)
        scale = dim**-0.5
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))

        def ours():
            return torch.ops.djl_attn.flash_attention(q, k, v, None, scale, False)

        def stock():
            return torch.matmul(torch.softmax(torch.matmul(qt, kt.transpose(-1, -2)) * scale, -1), vt)

        reps = 5 if seqlen_q >= 2048 else 30
        ours_ms, stock_ms = median_ms(ours, reps), median_ms(stock, reps)
        flops = 4 * batch * heads * seqlen_q * seqlen_k * dim
        err = (ours()[0].transpose(1, 2) - stock()).abs().max().item()
        print(
            f"{name:30s} ours {ours_ms:8.3f} ms ({flops / ours_ms / 1e6:6.1f} GF/s)  "
            f"torch {stock_ms:8.3f} ms ({flops / stock_ms / 1e6:6.1f} GF/s)  maxerr {err:.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
