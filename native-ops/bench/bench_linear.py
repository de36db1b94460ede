"""Benchmark of djl_attn.causal_dot_product (causal linear attention).

For L in {1k, 4k, 16k, 64k}, E = M in {32, 64, 128} and B*H in {4, 256} it times, in one run:
  - our kernel under the launcher's own choice ("auto", the column names what it chose) and, on
    CUDA, with each variant (per_thread, low_occupancy, chunked) forced through
    DJL_ATTN_LINEAR_KERNEL;
  - a PyTorch reference of the same function: cumsum of the k v^T outer products where that
    fits in memory, otherwise a loop over chunks (masked q k^T v within a chunk plus q times the
    state carried from earlier chunks, each a batched matmul);
  - torch.ops.djl_attn.flash_attention (causal softmax attention) at the same shape, to find the
    length from which linear attention is the faster of the two.

Usage:
  python3 bench_linear.py --device cuda --out linear.md   (float16, H100/H200: about 2 minutes)
  python3 bench_linear.py --device cpu --out linear.md    (float32; the grid is cut by a cost
                                                           limit, cells over it print "-")
Times are medians of CUDA-event (GPU) or wall-clock (CPU) timings after a warm-up call.
"""

import argparse
import ctypes
import os
import pathlib
import statistics
import sys
import time

import torch

from switches import switches

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
LIB_DIRS = [os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build"]

LENGTHS = [1024, 4096, 16384, 65536]
DIMS = [32, 64, 128]
HEADS = [(1, 4), (16, 16)]  # (B, H): B*H = 4 and 256
VARIANTS = ["per_thread", "low_occupancy", "chunked"]

# Multiply-adds above which a cell is skipped, per device: keeps the GPU run near 2 minutes and
# the CPU run (2 cores) near 5 minutes. On the CPU that leaves out B*H = 256 at L = 64k for
# E = 32, L >= 16k for E = 64 and L >= 4k for E = 128, and flash attention beyond L = 4k; the
# cumsum reference (memory-bound on B*H*L*E*M floats) is kept to 64 MiB there.
LIMITS = {
    "cuda": {"linear": 2**41, "flash": 2**39, "cumsum_bytes": 2**31},
    "cpu": {"linear": 2**33, "flash": 2**32, "cumsum_bytes": 2**26},
}
# Steps per chunk of the PyTorch chunked reference: its intra-chunk work grows with the chunk,
# its Python loop (8 ops per chunk) with the number of chunks; these balance the two.
REF_CHUNK = {"cuda": 256, "cpu": 128}


def find_lib(name):
    for d in LIB_DIRS:
        if d and (pathlib.Path(d) / name).is_file():
            return pathlib.Path(d) / name
    sys.exit("%s not found in %s: build native-ops first" % (name, [str(d) for d in LIB_DIRS]))


def reference_cumsum(q, k, v):
    kv = torch.einsum("bhle,bhlm->bhlem", k.float(), v.float()).cumsum(2)
    return torch.einsum("bhle,bhlem->bhlm", q.float(), kv).to(q.dtype)


def reference_chunked(q, k, v):
    chunk = REF_CHUNK[q.device.type]
    batch, heads, seqlen, dim_qk = q.shape
    dim_v = v.shape[-1]
    state = torch.zeros(batch, heads, dim_qk, dim_v, dtype=torch.float32, device=q.device)
    out = torch.empty(batch, heads, seqlen, dim_v, dtype=q.dtype, device=q.device)
    mask = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    for c0 in range(0, seqlen, chunk):
        qc, kc, vc = q[:, :, c0 : c0 + chunk], k[:, :, c0 : c0 + chunk], v[:, :, c0 : c0 + chunk]
        n = qc.shape[2]
        scores = (qc @ kc.transpose(-1, -2)).masked_fill(~mask[:n, :n], 0)
        out[:, :, c0 : c0 + n] = (scores @ vc).float().add_(qc.float() @ state).to(q.dtype)
        state += kc.float().transpose(-1, -2) @ vc.float()
    return out


class Timer:
    def __init__(self, device):
        self.device = device

    def __call__(self, fn, budget_s=0.25):
        """Median milliseconds of fn() after one warm-up call."""
        fn()
        first = self._once(fn)
        reps = max(3, min(25, int(budget_s * 1e3 / max(first, 1e-3))))
        if self.device == "cpu":
            reps = 1 if first > 3e3 else min(reps, 5)
        return statistics.median([first] + [self._once(fn) for _ in range(reps - 1)])

    def _once(self, fn):
        if self.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


def with_variant(name, fn):
    def run():
        switches["DJL_ATTN_LINEAR_KERNEL"] = name
        try:
            return fn()
        finally:
            switches.pop("DJL_ATTN_LINEAR_KERNEL", None)

    return run


def fmt(ms):
    return "-" if ms is None else ("%.3f" % ms if ms < 10 else "%.1f" % ms)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", help="markdown file for the table")
    args = parser.parse_args()
    device = args.device

    torch.ops.load_library(str(find_lib("libdjl_attn.so")))
    plan_fn = None
    if device == "cuda":
        cuda_lib_path = find_lib("libdjl_attn_cuda.so")
        torch.ops.load_library(str(cuda_lib_path))
        plan_fn = ctypes.CDLL(str(cuda_lib_path)).djl_attn_causal_dot_product_plan
        plan_fn.restype = ctypes.c_char_p
        plan_fn.argtypes = [ctypes.c_int64] * 4 + [ctypes.c_int32] * 2
        dtype = torch.float16
        name = "%s, %d SMs" % (torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count)
    else:
        cpu_lib = ctypes.CDLL(str(find_lib("libdjl_attn.so")))
        threads = cpu_lib.djl_attn_get_num_threads()
        dtype = torch.float32
        name = "CPU, %d threads of the library pool (torch %d)" % (threads, torch.get_num_threads())
    limits = LIMITS[device]
    timer = Timer(device)
    op = torch.ops.djl_attn.causal_dot_product
    flash = torch.ops.djl_attn.flash_attention
    print("device:", name, "| dtype:", dtype, flush=True)

    header = ["B*H", "E=M", "L", "auto chose", "auto ms"]
    if device == "cuda":
        header += ["%s ms" % v for v in VARIANTS]
    header += ["torch ref", "ref ms", "ref / auto", "flash ms", "flash / auto"]
    rows = []
    crossovers = []
    started = time.time()
    for batch, heads in HEADS:
        bh = batch * heads
        for dim in DIMS:
            crossover = None
            flash_measured = False
            for seqlen in LENGTHS:
                macs = bh * seqlen * dim * dim * 2
                if macs > limits["linear"]:
                    continue
                gen = torch.Generator(device=device).manual_seed(seqlen + dim)
                # Scaled so that outputs stay well inside float16's range at L = 64k.
                shape = (batch, heads, seqlen, dim)
                q = (torch.randn(shape, device=device, generator=gen) * dim**-0.5).to(dtype)
                k = torch.randn(shape, device=device, generator=gen).to(dtype)
                v = (torch.randn(shape, device=device, generator=gen) * seqlen**-0.5).to(dtype)

                if device == "cuda":
                    chose = plan_fn(bh, seqlen, dim, dim, q.element_size(), torch.cuda.current_device()).decode()
                else:
                    chose = "by heads" if bh >= threads else "by segments of L"
                auto_ms = timer(lambda: op(q, k, v))
                row = [bh, dim, seqlen, chose, fmt(auto_ms)]
                if device == "cuda":
                    for variant in VARIANTS:
                        row.append(fmt(timer(with_variant(variant, lambda: op(q, k, v)))))

                if bh * seqlen * dim * dim * 4 <= limits["cumsum_bytes"]:
                    ref_name, ref_fn = "cumsum", reference_cumsum
                else:
                    ref_name, ref_fn = "chunks", reference_chunked
                ref_ms = timer(lambda: ref_fn(q, k, v))
                row += [ref_name, fmt(ref_ms), "%.1fx" % (ref_ms / auto_ms)]

                flash_ms = None
                if bh * seqlen * seqlen * dim <= limits["flash"]:
                    qf, kf, vf = (t.transpose(1, 2) for t in (q, k, v))  # [B, L, H, E] views
                    flash_ms = timer(lambda: flash(qf, kf, vf, None, dim**-0.5, True))
                    flash_measured = True
                    if crossover is None and flash_ms > auto_ms:
                        crossover = seqlen
                row += [fmt(flash_ms), "-" if flash_ms is None else "%.2fx" % (flash_ms / auto_ms)]
                rows.append(row)
                print(" | ".join(str(c) for c in row), flush=True)
                del q, k, v
                if device == "cuda":
                    torch.cuda.empty_cache()
            if flash_measured:
                crossovers.append(
                    "B*H = %d, E = M = %d: linear attention faster than flash attention %s"
                    % (bh, dim, "from L = %d" % crossover if crossover else "at no measured L")
                )

    lines = [
        "### causal_dot_product (%s, %s)" % (name, str(dtype).replace("torch.", "")),
        "",
        "Command: `python3 bench/bench_linear.py --device %s`. Median ms; ratios above 1 mean our"
        " kernel is faster. Cells over the cost limit of this device are left out (-)." % device,
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    lines += [""] + ["- " + c for c in crossovers]
    lines += ["", "Run time: %.0f s." % (time.time() - started)]
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    if args.out:
        pathlib.Path(args.out).write_text(table)


if __name__ == "__main__":
    main()
