"""The decoder's GEMMs at a decode step's row counts: the skinny kernel (cuda/gemm/skinny_gemm.cu)
against cuBLASLt, per Llama-3.2-1B weight shape (issue 22).

Harness: djl_attn.decoder_head (RMSNorm of the rows, then the GEMM against a [n, k] weight, then
the product to float32) is the library's one operator whose GEMM takes any weight shape; the
norm and the conversion are the same small kernels under both GEMM kernels, so the difference
between the two columns is the GEMM's. Each timed call reads a different copy of the weights
(together > 2x the GPU's L2), captured in one CUDA graph and replayed, as a decode step reads
its layers.

Usage: python3 bench_decoder_gemm.py --device cuda --out decoder_gemm.md [--rows 1,2,4,8]
"""

import argparse
import os
import pathlib
import statistics
import sys
import time

import torch

from switches import switches

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
LIB_DIRS = [os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build"]

# (name, n, k): Llama-3.2-1B's projections as [out, in] weights (the gated up is timed as its
# plain [2I, C] GEMM: the harness has no activation epilogue) and the tied LM head.
SHAPES = [("qkv", 3072, 2048), ("out", 2048, 2048), ("gate+up", 16384, 2048),
          ("down", 2048, 8192), ("lm head", 128256, 2048)]
KERNELS = ["auto", "cublaslt"]


def find_lib(name):
    for d in LIB_DIRS:
        if d and (pathlib.Path(d) / name).is_file():
            return str(pathlib.Path(d) / name)
    sys.exit("%s not found in %s: build native-ops first" % (name, [str(d) for d in LIB_DIRS]))


def time_cell(n, k, rows, kernel, device, l2_bytes):
    dtype = torch.bfloat16
    copies = max(2, -(-3 * l2_bytes // (n * k * 2)))
    weights = [torch.randn(n, k, dtype=dtype, device=device) * 0.02 for _ in range(copies)]
    hidden = torch.randn(rows, k, dtype=dtype, device=device)
    norm = torch.ones(k, dtype=torch.float32, device=device)
    logits = torch.empty(rows, n, dtype=torch.float32, device=device)
    switches["DJL_ATTN_GEMM_KERNEL"] = kernel

    def calls():
        for w in weights:
            torch.ops.djl_attn.decoder_head(logits, hidden, None, norm, None, w, 0, 1e-5, 0.0,
                                            False)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        calls()  # plans and tuning outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        calls()
    switches.pop("DJL_ATTN_GEMM_KERNEL")
    check = torch.empty_like(logits)
    expected = (hidden.float() * torch.rsqrt(hidden.float().pow(2).mean(-1, keepdim=True) + 1e-5))
    expected = expected.to(dtype).float() @ weights[-1].float().t()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    check.copy_(logits)
    err = ((check - expected).abs().max() / expected.abs().max()).item()
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / copies)
    gemm_us = gemm_device_time(graph)
    del graph, weights
    torch.cuda.empty_cache()
    return statistics.median(times) * 1e6, gemm_us, err


def gemm_device_time(graph, replays=3):
    """The GEMM's own time per call from the kernel timeline (torch.profiler): from the end of the
    norm kernel to the end of the last kernel before the float32 conversion. The skinny kernel
    starts early (a programmatic dependent of the norm) and waits for it, so its kernel duration
    would count the norm too; this measure charges both GEMM kernels only for what they add."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    kernels = sorted(((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                      if "CUDA" in str(getattr(e, "device_type", ""))), key=lambda k: k[0])
    spans, norm_end, last_end = [], None, None
    for start, end, name in kernels:
        if "norm_rows_kernel" in name:
            norm_end, last_end = end, None
        elif "logits_kernel" in name:
            if norm_end is not None and last_end is not None:
                spans.append(last_end - norm_end)
            norm_end = None
        elif norm_end is not None:
            last_end = end if last_end is None else max(last_end, end)
    return statistics.median(spans) if spans else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default="decoder_gemm.md")
    parser.add_argument("--rows", default="1,2,4,8")
    args = parser.parse_args()
    torch.ops.load_library(find_lib("libdjl_attn.so"))
    torch.ops.load_library(find_lib("libdjl_attn_cuda.so"))
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    lines = ["decoder_head GEMMs, bfloat16, %s, torch %s, %s (per call: norm + GEMM + float32 "
             "logits; weights rotated through > 3x L2)" % (props.name, torch.__version__,
                                                          time.strftime("%Y-%m-%d")), "",
             "| weight | n x k | rows | call us, skinny | call us, cuBLASLt | GEMM us, skinny | "
             "GEMM us, cuBLASLt | GEMM weight GB/s, skinny | GEMM weight GB/s, cuBLASLt | "
             "skinny / cuBLASLt GEMM time | max rel err skinny, cuBLASLt |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, n, k in SHAPES:
        for rows in [int(r) for r in args.rows.split(",")]:
            (t_s, g_s, e_s), (t_c, g_c, e_c) = (time_cell(n, k, rows, kern, args.device, l2)
                                                for kern in KERNELS)
            gb = n * k * 2 / 1e3
            lines.append("| %s | %d x %d | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.2f | "
                         "%.1e, %.1e |" % (name, n, k, rows, t_s, t_c, g_s, g_c, gb / g_s,
                                           gb / g_c, g_s / g_c, e_s, e_c))
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
