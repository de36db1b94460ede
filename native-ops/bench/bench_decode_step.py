"""A Decoder-shaped decode step through the PyTorch path: per layer, reshape_and_cache of each
sequence's new key/value token, then paged_attention, as the Java Decoder runs them.

It compares, in one run and on the same data:
  - "checked": the default calls (check_slots / check_indices True): each binding copies the
    index tensors to the host and waits for the stream, two synchronisations per layer;
  - "vouched": check_slots / check_indices False, as the Java PagedKvCache passes them for a
    PagedBatch it checked once for the step: no device-to-host copy, no synchronisation;
  - "graph": the vouched step captured once in a CUDA graph and replayed (capture refuses any
    synchronisation, so that it succeeds is the proof that the vouched step has none).
Shapes: 32 layers, Hq = 32, Hkv = 8, D = 128, float16, block size 16, contexts of 1k and 4k
tokens, 1 to 64 sequences. Times are medians of wall-clock steps after warm-up (the host waits at
the end of each step, as a decoder does before sampling).

Usage: python3 bench_decode_step.py --device cuda --out decode_step.md
"""

import argparse
import os
import pathlib
import statistics
import sys
import time

import torch

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
LIB_DIRS = [os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build"]

LAYERS, HEADS_Q, HEADS_KV, DIM, BLOCK = 32, 32, 8, 128, 16
DTYPE = torch.float16
BATCHES = [1, 8, 32, 64]
CONTEXTS = [1024, 4096]


def find_lib(name):
    for d in LIB_DIRS:
        if d and (pathlib.Path(d) / name).is_file():
            return str(pathlib.Path(d) / name)
    sys.exit("%s not found in %s: build native-ops first" % (name, [str(d) for d in LIB_DIRS]))


def make_step(batch, context, device):
    """Caches of LAYERS layers and a step's batch tensors, as PagedKvCache.prepare builds them."""
    blocks_per_seq = (context + 1 + BLOCK - 1) // BLOCK
    num_blocks = batch * blocks_per_seq + 4
    perm = torch.randperm(num_blocks)[: batch * blocks_per_seq].view(batch, blocks_per_seq)
    tables = perm.to(torch.int32).to(device)
    lens = torch.full((batch,), context + 1, dtype=torch.int32, device=device)
    pos = context  # the new token
    slots = (perm[:, pos // BLOCK].long() * BLOCK + pos % BLOCK).to(device)
    shape = (num_blocks, BLOCK, HEADS_KV, DIM)
    caches = [(torch.randn(shape, dtype=DTYPE, device=device),
               torch.randn(shape, dtype=DTYPE, device=device)) for _ in range(LAYERS)]
    query = torch.randn(batch, HEADS_Q, DIM, dtype=DTYPE, device=device)
    key = torch.randn(batch, HEADS_KV, DIM, dtype=DTYPE, device=device)
    scale = DIM ** -0.5

    def step(check):
        out = None
        for key_cache, value_cache in caches:
            torch.ops.djl_attn.reshape_and_cache(key, key, key_cache, value_cache, slots,
                                                 check_slots=check)
            out = torch.ops.djl_attn.paged_attention(query, key_cache, value_cache, tables, lens,
                                                     scale, context + 1, None,
                                                     check_indices=check)
        return out

    return step


def median_ms(fn, reps, device):
    for _ in range(3):
        fn()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    if args.device != "cuda" or not torch.cuda.is_available():
        sys.exit("bench_decode_step: a CUDA device is required")
    torch.ops.load_library(find_lib("libdjl_attn.so"))
    torch.ops.load_library(find_lib("libdjl_attn_cuda.so"))
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    rows = []
    for batch in BATCHES:
        for context in CONTEXTS:
            step = make_step(batch, context, device)
            checked = median_ms(lambda: step(True), args.reps, device)
            vouched = median_ms(lambda: step(False), args.reps, device)
            torch.cuda.synchronize(device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step(False)
            graphed = median_ms(graph.replay, args.reps, device)
            rows.append((batch, context, 2 * LAYERS, 0, checked, vouched, graphed,
                         checked / vouched))
            print("batch %d context %d: checked %.3f ms, vouched %.3f ms, graph %.3f ms"
                  % (batch, context, checked, vouched, graphed), flush=True)
    lines = [
        "Decode step on %s: %d layers x (reshape_and_cache + paged_attention), Hq %d, Hkv %d, "
        "D %d, float16, block %d. Command: `python3 bench/bench_decode_step.py --device cuda`."
        % (name, LAYERS, HEADS_Q, HEADS_KV, DIM, BLOCK),
        "",
        "| batch | context | host syncs, checked | host syncs, vouched | checked ms | vouched ms "
        "| vouched, CUDA graph ms | checked / vouched |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| %d | %d | %d | %d | %.3f | %.3f | %.3f | %.2fx |" % r for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
