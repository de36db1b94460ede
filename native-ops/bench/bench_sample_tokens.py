"""djl_attn.sample_tokens at Llama-3's vocabulary (V = 128,256), against PyTorch anchors in the
same run (issue 22 item 4: sampling on the device, so a captured decode step returns only ids).

Rows: greedy (temperature 0), plain sampling (T 0.8), top-k 50, top-p 0.9, and top-k 50 with
top-p 0.9, for each batch size and logits dtype. Two timings per row:
  - graph: 20 calls captured in one CUDA graph and replayed (what a captured step pays: kernel
    time only; the binding reads nothing back while the stream is captured);
  - eager: one call at a time (the binding copies temperature/top_k/top_p to the host once per
    call to check their values: a device-to-host copy and a wait).
Anchors, captured the same way: torch.argmax (greedy), and a plain PyTorch sampler (softmax of
logits / T, top-k by torch.topk, nucleus by sort + cumsum, torch.multinomial) for the sampling
rows: the op-by-op pipeline a decode step would otherwise run.

Usage: python3 bench_sample_tokens.py --device cuda --out sample_tokens.md [--batches 1,64]
On the CPU (--device cpu) it times eager calls only, for a smoke run.
"""

import argparse
import os
import pathlib
import sys
import time

import torch

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
LIB_DIRS = [os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build",
            NATIVE_OPS / "target" / "classes" / "io" / "djlattention" / "jni" / "linux-x86_64",
            NATIVE_OPS / "target" / "cmake"]
VOCAB = 128256
CALLS_PER_GRAPH = 20
MODES = [  # name, temperature, top_k, top_p
    ("greedy", 0.0, 0, 1.0),
    ("T 0.8", 0.8, 0, 1.0),
    ("top-k 50", 0.8, 50, 1.0),
    ("top-p 0.9", 0.8, 0, 0.9),
    ("top-k 50 + top-p 0.9", 0.8, 50, 0.9),
]


def find_lib(name):
    for d in LIB_DIRS:
        if d and (pathlib.Path(d) / name).is_file():
            return str(pathlib.Path(d) / name)
    sys.exit("%s not found in %s: build native-ops first" % (name, [str(d) for d in LIB_DIRS]))


def torch_sampler(logits, temperature, top_k, top_p):
    """The PyTorch op-by-op anchor (one setting for the whole batch, as a server's often is)."""
    if temperature == 0:
        return logits.argmax(dim=1)
    x = logits.float() / temperature
    if top_k > 0:
        kth = torch.topk(x, top_k, dim=1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=1)
    if top_p < 1:
        sorted_probs, order = torch.sort(probs, dim=1, descending=True)
        cum = torch.cumsum(sorted_probs, dim=1)
        drop = cum - sorted_probs >= top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0)
        probs = torch.zeros_like(probs).scatter_(1, order, sorted_probs)
    return torch.multinomial(probs, 1).squeeze(1)


def time_cuda(fn, replays=20):
    """Microseconds per call of `fn`, captured CALLS_PER_GRAPH times in one graph and replayed."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / (replays * CALLS_PER_GRAPH)


def time_eager(fn, device, calls=50):
    for _ in range(3):
        fn()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) * 1e6 / calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default="sample_tokens.md")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    args = parser.parse_args()
    torch.ops.load_library(find_lib("libdjl_attn.so"))
    cuda = args.device == "cuda"
    if cuda:
        torch.ops.load_library(find_lib("libdjl_attn_cuda.so"))
        name = torch.cuda.get_device_name(0)
    else:
        name = "cpu (%d threads)" % torch.get_num_threads()
    lines = ["sample_tokens, V = %d, %s, torch %s, %s" % (VOCAB, name, torch.__version__,
                                                          time.strftime("%Y-%m-%d")), "",
             "| dtype | B | mode | sample_tokens graph us | eager us | torch anchor graph us |"
             " anchor / sample_tokens |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for batch in [int(b) for b in args.batches.split(",")]:
            logits = (3 * torch.randn(batch, VOCAB, device=args.device)).to(dtype)
            ids = torch.empty(batch, dtype=torch.int64, device=args.device)
            seeds = torch.arange(batch, dtype=torch.int64, device=args.device)
            offsets = torch.zeros(batch, dtype=torch.int64, device=args.device)
            for mode, t, k, p in MODES:
                per_row = (torch.full((batch,), t, device=args.device),
                           torch.full((batch,), k, dtype=torch.int32, device=args.device),
                           torch.full((batch,), p, device=args.device), seeds, offsets)
                op = lambda: torch.ops.djl_attn.sample_tokens(ids, logits, *per_row)
                anchor = lambda: torch_sampler(logits, t, k, p)
                eager = time_eager(op, args.device)
                if cuda:
                    graph, anchor_us = time_cuda(op), time_cuda(anchor)
                    lines.append("| %s | %d | %s | %.1f | %.1f | %.1f | %.1fx |" % (
                        dtype_name, batch, mode, graph, eager, anchor_us, anchor_us / graph))
                else:
                    anchor_us = time_eager(anchor, args.device)
                    lines.append("| %s | %d | %s | - | %.1f | %.1f (eager) | %.1fx |" % (
                        dtype_name, batch, mode, eager, anchor_us, anchor_us / eager))
                print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
