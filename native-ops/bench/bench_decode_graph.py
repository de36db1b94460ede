"""Dense decode inside a CUDA graph (issue 28, item 2): what a captured decode step sees.

One graph holds CALLS decode calls back to back (Sq = 1, Hq 32 / Hkv 8, D 128, fp16, as issue
15's decode rows), replayed and timed with CUDA events; microseconds per call. Two cases:
  - "warm": every call reads the same K/V, which stays in L2 (50 MB on an H100) from the
    previous call wherever it fits — the setting the "8.5 µs at batch 1 · 4k" figure came from;
  - "cold": the calls rotate over enough K/V copies (> 2x L2) that each one reads from HBM, as a
    decoder's layers do (each layer has its own cache).
The anchor is torch's best SDPA backend captured the same way, and the device-to-device copy
rate (bench_flash.copy_bandwidth, bytes read + written) measured in the same run. A profile of
one cold replay splits the time into the split-KV kernel, the combine pass and the idle time
between kernels.

Usage (from native-ops): DJL_ATTN_LIB_DIR=$PWD/build python3 bench/bench_decode_graph.py
    --device cuda --out decode_graph.md
"""

import argparse
import pathlib
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import bench_flash

SHAPES = ((1, 4096), (1, 32768), (8, 4096), (32, 4096))
HEADS_Q, HEADS_KV, DIM = 32, 8, 128
CALLS = 32
L2_BYTES = 50 << 20
SDPA_BACKENDS = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                 ("efficient", SDPBackend.EFFICIENT_ATTENTION))


def graph_us(calls, replays=20):
    """Microseconds per call of `calls` (a list of thunks) captured in one graph and replayed."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in calls:
            c()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2] * 1e3 / len(calls), graph


def split_of(graph, calls):
    """Kernel time per call by kernel family, and the idle time between kernels, over one
    replay (torch.profiler)."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    spans = []
    for evt in prof.events():
        if "CUDA" not in str(getattr(evt, "device_type", "")):
            continue
        spans.append((evt.time_range.start, evt.time_range.end, evt.name))
    spans.sort()
    decode = sum(e - s for s, e, n in spans if "combine" not in n.lower())
    combine = sum(e - s for s, e, n in spans if "combine" in n.lower())
    busy, cur_s, cur_e = 0.0, None, None
    for s, e, _ in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    span = spans[-1][1] - spans[0][0] if spans else 0.0
    return decode / calls, combine / calls, (span - busy) / calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cuda"])
    parser.add_argument("--out", default="decode_graph.md")
    args = parser.parse_args()
    bench_flash.load_libraries()
    flash = torch.ops.djl_attn.flash_attention
    copy_gbs = bench_flash.copy_bandwidth(args.device)
    scale = DIM ** -0.5
    lines = [
        "Dense decode in a CUDA graph (%d calls per graph), %s, torch %s, %s; copy rate %.0f GB/s "
        "(read + write); Sq 1, Hq %d / Hkv %d, D %d, fp16; microseconds per call"
        % (CALLS, torch.cuda.get_device_name(), torch.__version__, time.strftime("%Y-%m-%d %H:%M"),
           copy_gbs, HEADS_Q, HEADS_KV, DIM),
        "",
        "| B · context | K/V MB | warm µs | warm of copy | cold µs | cold of copy | best SDPA cold µs "
        "| split kernel µs | combine µs | idle between kernels µs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for batch, context in SHAPES:
        shape = (batch, context, HEADS_KV, DIM)
        kv_bytes = 2 * batch * context * HEADS_KV * DIM * 2
        copies = max(1, min(CALLS, -(-2 * L2_BYTES // kv_bytes)))
        q = torch.randn(batch, 1, HEADS_Q, DIM, dtype=torch.float16, device=args.device)
        kvs = [(torch.randn(shape, dtype=torch.float16, device=args.device),
                torch.randn(shape, dtype=torch.float16, device=args.device)) for _ in range(copies)]
        out = [None]

        def ours(k, v):
            return lambda: out.__setitem__(0, flash(q, k, v, None, scale, False))

        warm, _ = graph_us([ours(*kvs[0]) for _ in range(CALLS)])
        cold_calls = [ours(*kvs[i % copies]) for i in range(CALLS)]
        cold, graph = graph_us(cold_calls)
        split, combine, idle = split_of(graph, CALLS)
        best = None
        qt = q.transpose(1, 2)
        for _, backend in SDPA_BACKENDS:
            def sdpa(k, v, backend=backend):
                kt, vt = k.transpose(1, 2), v.transpose(1, 2)

                def run():
                    with sdpa_kernel(backend):
                        out[0] = F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
                return run
            try:
                sdpa(*kvs[0])()
                torch.cuda.synchronize()
                t, _ = graph_us([sdpa(*kvs[i % copies]) for i in range(CALLS)])
                best = t if best is None else min(best, t)
            except RuntimeError:
                continue
        rate = lambda us: kv_bytes / (us * 1e-6) / 1e9 / copy_gbs  # noqa: E731
        lines.append("| %d · %d | %.1f | %.2f | %.0f%% | %.2f | %.0f%% | %s | %.2f | %.2f | %.2f |" % (
            batch, context, kv_bytes / 1e6, warm, 100 * rate(warm), cold, 100 * rate(cold),
            "%.2f" % best if best else "n/a", split, combine, idle))
        print(lines[-1], flush=True)
        del kvs, q
        torch.cuda.empty_cache()
    lines += ["", "Warm: the same K/V in every call (L2-resident where it fits); cold: rotating "
              "over copies totalling > 2x L2, so each call reads HBM. The split kernel's and "
              "combine's times are kernel durations in one cold replay (the combine, a "
              "programmatic dependent on sm_90, includes its wait for the split kernel)."]
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
