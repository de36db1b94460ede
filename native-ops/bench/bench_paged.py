"""Benchmark of djl_attn.paged_attention (decode) and reshape_and_cache.

For batch in {1, 8, 32, 128} and context in {1k, 4k, 16k} (Hq = 32, Hkv = 8, D = 128, float16,
block size 16, every sequence's blocks shuffled over the pool) it measures, in one run:
  - paged_attention under the launcher's choice (auto) and with each kernel forced through
    DJL_ATTN_PAGED_KERNEL=v1|v2|flash (flash: the tensor-core split-KV decode kernel of
    cuda/flash/flash_decode.h, plus its combine pass when it splits), as GB/s of K/V bytes read (num_seqs * ctx * Hkv * D * 2 bytes *
    2 for K and V). "op" times the whole call: it includes the binding's validation, which
    copies block_tables and context_lens to the host (one pinned copy, one stream wait);
    "kernel" is the device time of the kernels alone (torch.profiler), what the memory system
    achieves;
  - the device-to-device copy bandwidth of a large tensor (bytes read + written), the ceiling;
  - dense decode on the same data through torch.nn.functional.scaled_dot_product_attention:
    K/V gathered once (before timing) into contiguous [B, Hkv, ctx, D], and the query's Hq / Hkv
    heads per kv head folded into query rows ([B, Hkv, Hq/Hkv, D]), so SDPA reads each K/V byte
    once, as the paged kernel does.
It also times reshape_and_cache for a decode step (one token per sequence) and a prefill chunk,
and (--fp8, on by default) compares an fp8 (e4m3fn, per-head scales) cache with the float16
cache at batch 32/64 x context 4k/8k: time per call (op and kernel), GB/s of the bytes each cache
actually holds, and the speed-up t(fp16) / t(fp8), i.e. K/V values per second (the issue's
target: >= 1.8). Both caches run auto (the flash kernel; for fp8 the fp8 tensor-core kernel,
flash_fp8) and forced v2 (the CUDA-core kernel).

With --window (default on) it times a sliding window (Mistral's): batch 1/8/32 at context 32k
with a 4096-key window against context 4k and 32k without one (op and kernel time, kernel
chosen). The kernels start each sequence at its window, so the windowed call reads what the 4k
context reads. Since the flash decode kernel took the window and soft-cap (its features
instantiation, flash_decode_kernel.cuh) the windowed call runs on it, as the 4k call does; the
table of docs/benchmarks.md measured before that ran it on the CUDA-core v1/v2 kernels.

With --configs (default: all) it also times, kernel-only and through v2 (what auto chose at
these shapes before the flash kernel existed; v1 up to context 2k), every kernel configuration DJL_ATTN_PAGED_CONFIG offers (and a few v2 partition lengths,
DJL_ATTN_PAGED_PARTITION) at batch 32/128 x context 4k/16k, on the same data, in a second table;
"none" skips them, or name some: --configs default,smem4/p1024.

Usage: python3 bench_paged.py --device cuda --out paged.md   (H100: about 1.5 minutes)
Times are medians of CUDA-event timings after warm-up, with L2 flushed before every call.
"""

import argparse
import os
import pathlib
import statistics
import sys
import time

import torch

from switches import switches
import torch.nn.functional as F

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
LIB_DIRS = [os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build"]

BATCHES = [1, 8, 32, 128]
CONTEXTS = [1024, 4096, 16384]
HEADS_Q, HEADS_KV, DIM, BLOCK = 32, 8, 128, 16
DTYPE = torch.float16
VARIANTS = ["auto", "v1", "v2", "flash"]
# Kernel names of every variant, for the kernel-only times.
KERNELS = ("paged_attention_kernel", "paged_attention_reduce_kernel", "flash_decode_kernel",
           "flash_combine_kernel", "paged_fp8_mma_kernel")
# Kernel configurations (DJL_ATTN_PAGED_CONFIG), optionally "/pN" for a v2 partition length of
# N tokens (DJL_ATTN_PAGED_PARTITION), and the shapes they are compared on.
CONFIGS = ["default", "default/p1024", "default/p2048", "pf", "pf/p1024", "w8l2", "w8l2pf",
           "smem4", "smem4/p1024", "smem8", "smem8/p1024"]
CONFIG_SHAPES = [(32, 4096), (32, 16384), (128, 4096), (128, 16384)]
# The fp8 cache table's shapes (batch, context).
FP8_SHAPES = [(32, 4096), (32, 8192), (64, 4096), (64, 8192)]


def find_lib(name):
    for d in LIB_DIRS:
        if d and (pathlib.Path(d) / name).is_file():
            return str(pathlib.Path(d) / name)
    sys.exit("%s not found in %s: build native-ops first" % (name, [str(d) for d in LIB_DIRS]))


_FLUSH = []


def flush_l2():
    """Overwrites more than the L2 cache (50 MiB on H100) so that small caches (batch 1 at 1k is
    4 MB of K/V) are read from memory, not from L2, in every timed call."""
    if not _FLUSH:
        _FLUSH.append(torch.empty(256 << 20, dtype=torch.int8, device="cuda"))
    _FLUSH[0].zero_()


def time_ms(fn, budget_ms=150.0, min_reps=10, max_reps=200):
    """Median milliseconds of fn() over CUDA events, after warm-up, L2 flushed before each."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush_l2()
    start.record()
    fn()
    end.record()
    end.synchronize()
    first = max(start.elapsed_time(end), 1e-3)
    reps = int(min(max_reps, max(min_reps, budget_ms / first)))
    times = []
    for _ in range(reps):
        flush_l2()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def kernel_ms(fn, match, reps=10):
    """(mean device milliseconds per call, names seen) of the CUDA kernels whose names contain
    one of `match` (kernel names, never the operator's own name, whose device time would count
    them twice). NaN when the profiler cannot see the kernels."""
    fn()
    torch.cuda.synchronize()
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                flush_l2()
                fn()
            torch.cuda.synchronize()
        events = prof.key_averages()
    except Exception as e:  # no CUPTI: report op times only
        print("profiler unavailable: %s" % e, flush=True)
        return float("nan"), set()
    total_us, seen = 0.0, set()
    for event in events:
        hits = [m for m in match if m in event.key]
        if hits:
            total_us += getattr(event, "device_time_total", None) or event.cuda_time_total
            seen.update(hits)
    return (total_us / reps / 1e3 if total_us > 0 else float("nan")), seen


def copy_bandwidth():
    """GB/s of a device-to-device tensor copy, counting bytes read plus bytes written."""
    src = torch.randn(1 << 28, dtype=DTYPE, device="cuda")  # 512 MiB
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / ms / 1e6


def set_variant(variant):
    if variant == "auto":
        switches.pop("DJL_ATTN_PAGED_KERNEL", None)
    else:
        switches["DJL_ATTN_PAGED_KERNEL"] = variant


def set_config(config):
    name, _, partition = config.partition("/p")
    switches["DJL_ATTN_PAGED_CONFIG"] = name
    if partition:
        switches["DJL_ATTN_PAGED_PARTITION"] = partition
    else:
        switches.pop("DJL_ATTN_PAGED_PARTITION", None)


def clear_config():
    switches.pop("DJL_ATTN_PAGED_CONFIG", None)
    switches.pop("DJL_ATTN_PAGED_PARTITION", None)


def bench_decode(batch, context, copy_gbs, configs=()):
    blocks_per_seq = context // BLOCK
    num_blocks = batch * blocks_per_seq
    shape = (num_blocks, BLOCK, HEADS_KV, DIM)
    key_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    value_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    tables = torch.randperm(num_blocks, device="cuda").to(torch.int32).view(batch, blocks_per_seq)
    lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    query = torch.randn(batch, HEADS_Q, DIM, dtype=DTYPE, device="cuda")
    scale = DIM**-0.5
    kv_bytes = 2 * batch * context * HEADS_KV * DIM * key_cache.element_size()
    op = torch.ops.djl_attn.paged_attention

    def paged():
        return op(query, key_cache, value_cache, tables, lens, scale, context, None)

    row = {"batch": batch, "context": context, "MB": kv_bytes / 1e6}
    outs = {}
    for variant in VARIANTS:
        set_variant(variant)
        ms = time_ms(paged)
        kms, seen = kernel_ms(paged, KERNELS)
        if variant == "auto":
            row["chose"] = chosen(seen)
        row[variant] = (kv_bytes / ms / 1e6, kv_bytes / kms / 1e6)
        outs[variant] = paged()
    set_variant("auto")

    # Kernel-only GB/s of each configuration of v1/v2 (the launcher's choice between them), on
    # the same data.
    row["configs"] = {}
    if configs:
        # auto would take the flash kernel, which the configurations do not touch.
        switches["DJL_ATTN_PAGED_KERNEL"] = "v2" if context > 2048 else "v1"
    for config in configs:
        set_config(config)
        try:
            kms, seen = kernel_ms(paged, ("paged_attention_kernel", "paged_attention_reduce_kernel"))
            chose = chosen(seen)
            row["configs"][config] = (kv_bytes / kms / 1e6, chose)
            outs["config " + config] = paged()
        except Exception as e:  # one broken configuration must not cost the others' numbers
            print("config %s failed: %s" % (config, e), flush=True)
            row["configs"][config] = (float("nan"), "failed")
        finally:
            clear_config()
    set_variant("auto")

    # Dense K/V for SDPA, gathered once: [B, Hkv, ctx, D].
    def dense(cache):
        return cache[tables.long()].view(batch, context, HEADS_KV, DIM).transpose(1, 2).contiguous()

    k_dense, v_dense = dense(key_cache), dense(value_cache)
    del key_cache, value_cache
    group = HEADS_Q // HEADS_KV
    q_rows = query.view(batch, HEADS_KV, group, DIM)

    def sdpa():
        return F.scaled_dot_product_attention(q_rows, k_dense, v_dense, scale=scale)

    ms = time_ms(sdpa)
    row["sdpa"] = kv_bytes / ms / 1e6
    expected = sdpa().reshape(batch, HEADS_Q, DIM)
    err = max((o.float() - expected.float()).abs().max().item() for o in outs.values())
    row["max_err"] = err
    row["auto_pct_copy"] = 100.0 * row["auto"][1] / copy_gbs
    row["flash_pct_copy"] = 100.0 * row["flash"][1] / copy_gbs
    del k_dense, v_dense
    torch.cuda.empty_cache()
    return row


def bench_fp8(batch, context):
    """fp16 cache (auto, forced v2) against an fp8 cache of the same values (auto), one shape."""
    blocks_per_seq = context // BLOCK
    num_blocks = batch * blocks_per_seq
    shape = (num_blocks, BLOCK, HEADS_KV, DIM)
    key_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    value_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    # Per-head scales as a calibration would set them: max |x| / 448.
    k_scale = (key_cache.float().abs().amax(dim=(0, 1, 3)) / 448).contiguous()
    v_scale = (value_cache.float().abs().amax(dim=(0, 1, 3)) / 448).contiguous()
    key_fp8 = torch.empty(shape, dtype=torch.uint8, device="cuda")
    value_fp8 = torch.empty(shape, dtype=torch.uint8, device="cuda")
    slots = torch.arange(num_blocks * BLOCK, device="cuda")
    torch.ops.djl_attn.reshape_and_cache(key_cache.view(-1, HEADS_KV, DIM),
                                         value_cache.view(-1, HEADS_KV, DIM), key_fp8, value_fp8,
                                         slots, True, k_scale, v_scale)
    tables = torch.randperm(num_blocks, device="cuda").to(torch.int32).view(batch, blocks_per_seq)
    lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    query = torch.randn(batch, HEADS_Q, DIM, dtype=DTYPE, device="cuda")
    scale = DIM**-0.5
    op = torch.ops.djl_attn.paged_attention
    values = 2 * batch * context * HEADS_KV * DIM  # K and V elements read per call
    runs = {
        "fp16 auto": (lambda: op(query, key_cache, value_cache, tables, lens, scale, context,
                                 None), "auto", 2),
        "fp16 v2": (lambda: op(query, key_cache, value_cache, tables, lens, scale, context,
                               None), "v2", 2),
        "fp8 auto": (lambda: op(query, key_fp8, value_fp8, tables, lens, scale, context, None,
                                True, k_scale, v_scale), "auto", 1),
        "fp8 v2": (lambda: op(query, key_fp8, value_fp8, tables, lens, scale, context, None,
                              True, k_scale, v_scale), "v2", 1),
    }
    row = {"batch": batch, "context": context}
    outs = {}
    for name, (fn, variant, element_bytes) in runs.items():
        set_variant(variant)
        ms = time_ms(fn)
        kms, seen = kernel_ms(fn, KERNELS)
        row[name] = (ms, kms, chosen(seen), values * element_bytes / kms / 1e6)
        outs[name] = fn().float()
    set_variant("auto")
    row["max_err"] = max((outs[k] - outs["fp16 auto"]).abs().max().item()
                         for k in ("fp8 auto", "fp8 v2"))
    row["max_out"] = outs["fp16 auto"].abs().max().item()
    del key_cache, value_cache, key_fp8, value_fp8
    torch.cuda.empty_cache()
    return row


def fp8_table(rows, device_line):
    lines = [
        "",
        "### FP8 KV cache against the float16 cache (%s)" % device_line,
        "",
        "Hq = %d, Hkv = %d, D = %d, float16 queries, block size %d, shuffled block tables; the "
        "fp8 cache holds the same random K/V as e4m3fn with per-head scales max|x| / 448. Each "
        "cell: op us / kernel us (kernel chosen), kernel GB/s of the bytes the cache holds. "
        "Speed-up: kernel time of the fp16 cache over that of the fp8 cache, i.e. K/V values "
        "per second (target >= 1.8 for auto)." % (HEADS_Q, HEADS_KV, DIM, BLOCK),
        "",
        "| batch | context | fp16 auto | fp16 v2 | fp8 auto | fp8 v2 | speed-up fp8 auto vs "
        "fp16 auto | fp8 v2 vs fp16 v2 | max abs diff fp8 - fp16 (max abs out) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def cell(r):
        ms, kms, chose, gbs = r
        return "%.1f / %.1f (%s), %.0f GB/s" % (ms * 1e3, kms * 1e3, chose, gbs)

    for r in rows:
        lines.append("| %d | %d | %s | %s | %s | %s | %.2fx | %.2fx | %.2g (%.2g) |" % (
            r["batch"], r["context"], cell(r["fp16 auto"]), cell(r["fp16 v2"]),
            cell(r["fp8 auto"]), cell(r["fp8 v2"]), r["fp16 auto"][1] / r["fp8 auto"][1],
            r["fp16 v2"][1] / r["fp8 v2"][1], r["max_err"], r["max_out"]))
    return lines


WINDOW_BATCHES = (1, 8, 32)
WINDOW_LONG, WINDOW = 32768, 4096


def bench_window(batch):
    """One batch: context 32k with a 4096-key window, against 4k and 32k without one."""
    blocks_per_seq = WINDOW_LONG // BLOCK
    num_blocks = batch * blocks_per_seq
    shape = (num_blocks, BLOCK, HEADS_KV, DIM)
    key_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    value_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    tables = torch.randperm(num_blocks, device="cuda").to(torch.int32).view(batch, blocks_per_seq)
    query = torch.randn(batch, HEADS_Q, DIM, dtype=DTYPE, device="cuda")
    op = torch.ops.djl_attn.paged_attention
    row = {"batch": batch}
    for name, context, window in (("4k", WINDOW, -1), ("32k window 4k", WINDOW_LONG, WINDOW - 1),
                                  ("32k", WINDOW_LONG, -1)):
        lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")

        def fn():
            return op(query, key_cache, value_cache, tables, lens, DIM**-0.5, context, None, True,
                      None, None, window, 0.0)

        kms, seen = kernel_ms(fn, KERNELS)
        row[name] = (time_ms(fn), kms, chosen(seen))
    del key_cache, value_cache
    torch.cuda.empty_cache()
    return row


def window_table(rows, device_line):
    lines = [
        "",
        "### Sliding window (%s)" % device_line,
        "",
        "Hq = %d, Hkv = %d, D = %d, float16, block size %d, shuffled block tables. paged_attention "
        "with window_left = %d (a %d-key window, Mistral's sliding_window) at context %d, against "
        "contexts %d and %d without a window. Each cell: op us / kernel us (kernel chosen)." % (
            HEADS_Q, HEADS_KV, DIM, BLOCK, WINDOW - 1, WINDOW, WINDOW_LONG, WINDOW, WINDOW_LONG),
        "",
        "| batch | context 4k | context 32k, window 4k | context 32k |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append("| %d | %s |" % (r["batch"], " | ".join(
            "%.1f / %.1f (%s)" % (r[k][0] * 1e3, r[k][1] * 1e3, r[k][2])
            for k in ("4k", "32k window 4k", "32k"))))
    return lines


def chosen(seen):
    """The variant a call ran, from the kernel names the profiler saw."""
    if "flash_decode_kernel" in seen:
        return "flash"
    if "paged_fp8_mma_kernel" in seen:
        return "flash_fp8"
    return "v2" if "paged_attention_reduce_kernel" in seen else "v1"


def bench_cache_write(tokens):
    num_blocks = max(4096, 2 * tokens // BLOCK)
    shape = (num_blocks, BLOCK, HEADS_KV, DIM)
    key_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    value_cache = torch.randn(shape, dtype=DTYPE, device="cuda")
    key = torch.randn(tokens, HEADS_KV, DIM, dtype=DTYPE, device="cuda")
    value = torch.randn(tokens, HEADS_KV, DIM, dtype=DTYPE, device="cuda")
    slots = torch.randperm(num_blocks * BLOCK, device="cuda")[:tokens]
    op = torch.ops.djl_attn.reshape_and_cache

    def write():
        op(key, value, key_cache, value_cache, slots)

    ms = time_ms(write)
    kms, _ = kernel_ms(write, ("reshape_and_cache_kernel",))
    moved = 4 * tokens * HEADS_KV * DIM * key.element_size()  # K, V read and written
    return {"tokens": tokens, "op_us": ms * 1e3, "kernel_us": kms * 1e3,
            "kernel_gbs": moved / kms / 1e6}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda"])
    parser.add_argument("--out", default=None, help="write the markdown table here")
    parser.add_argument("--configs", default="all",
                        help="kernel configurations to compare: all, none, or a comma-separated "
                             "list of %s" % CONFIGS)
    parser.add_argument("--fp8", default="on", choices=["on", "off", "only"],
                        help="the fp8 cache table: on (default), off, or only it")
    parser.add_argument("--window", default="on", choices=["on", "off", "only"],
                        help="the sliding-window table: on (default), off, or only it")
    args = parser.parse_args()
    if args.configs == "all":
        configs = CONFIGS
    elif args.configs == "none":
        configs = []
    else:
        configs = args.configs.split(",")
    started = time.time()
    if not torch.cuda.is_available():
        sys.exit("bench_paged.py needs a GPU")
    torch.ops.load_library(find_lib("libdjl_attn.so"))
    torch.ops.load_library(find_lib("libdjl_attn_cuda.so"))
    # The switches exist once the libraries are loaded; the tuning configurations only in a
    # DJL_ATTN_TUNING build ("all" means the ones this build has).
    built = switches.values("DJL_ATTN_PAGED_CONFIG")
    if args.configs == "all":
        configs = [c for c in configs if c.split("/")[0] in built]
    clear_config()
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    device_line = "%s, %d SMs, torch %s" % (props.name, props.multi_processor_count, torch.__version__)
    print(device_line, flush=True)

    copy_gbs = copy_bandwidth()
    print("device-to-device copy: %.0f GB/s (read + write)" % copy_gbs, flush=True)

    window_rows = []
    if args.window != "off":
        for batch in WINDOW_BATCHES:
            r = bench_window(batch)
            window_rows.append(r)
            print("window batch %d: kernel us 4k %.1f (%s), 32k window 4k %.1f (%s), 32k %.1f (%s)"
                  % (batch, r["4k"][1] * 1e3, r["4k"][2], r["32k window 4k"][1] * 1e3,
                     r["32k window 4k"][2], r["32k"][1] * 1e3, r["32k"][2]), flush=True)
    if args.window == "only":
        table = "\n".join(window_table(window_rows, device_line)) + "\n"
        print(table)
        if args.out:
            pathlib.Path(args.out).write_text(table)
        return

    fp8_rows = []
    if args.fp8 != "off":
        for batch, context in FP8_SHAPES:
            r = bench_fp8(batch, context)
            fp8_rows.append(r)
            print("fp8 batch %d ctx %d: kernel us fp16 auto %.1f, fp16 v2 %.1f, fp8 %.1f (%s): "
                  "%.2fx" % (batch, context, r["fp16 auto"][1] * 1e3, r["fp16 v2"][1] * 1e3,
                             r["fp8 auto"][1] * 1e3, r["fp8 auto"][2],
                             r["fp16 auto"][1] / r["fp8 auto"][1]), flush=True)
    if args.fp8 == "only":
        table = "\n".join(fp8_table(fp8_rows, device_line) +
                           (window_table(window_rows, device_line) if window_rows else [])) + "\n"
        print(table)
        if args.out:
            pathlib.Path(args.out).write_text(table)
        return

    rows = []
    for batch in BATCHES:
        for context in CONTEXTS:
            wanted = configs if (batch, context) in CONFIG_SHAPES else ()
            row = bench_decode(batch, context, copy_gbs, wanted)
            rows.append(row)
            print("batch %4d ctx %6d: auto(%s) %s v1 %s v2 %s flash %s sdpa %.0f GB/s, "
                  "max |diff| %.2g" % (
                batch, context, row.get("chose", "?"), *("%.0f/%.0f" % row[v] for v in VARIANTS),
                row["sdpa"], row["max_err"]), flush=True)
            if wanted:
                print("  configs (kernel GB/s): " + ", ".join(
                    "%s %.0f" % (c, row["configs"][c][0]) for c in wanted), flush=True)
    writes = [bench_cache_write(t) for t in (128, 16384)]
    for w in writes:
        print("reshape_and_cache %d tokens: op %.1f us, kernel %.1f us (%.0f GB/s)" % (
            w["tokens"], w["op_us"], w["kernel_us"], w["kernel_gbs"]), flush=True)

    lines = [
        "### paged_attention decode (%s)" % device_line,
        "",
        "Hq = %d, Hkv = %d, D = %d, float16, block size %d, shuffled block tables. GB/s of K/V "
        "read; each cell is op / kernel: op times the whole call (validation copies block_tables "
        "and context_lens to the host and waits once), kernel is device time only. Copy bandwidth "
        "(device-to-device, read + write): **%.0f GB/s**. SDPA: dense decode on the same K/V "
        "gathered beforehand, GQA heads folded into query rows." % (
            HEADS_Q, HEADS_KV, DIM, BLOCK, copy_gbs),
        "",
        "| batch | context | K/V MB | auto | v1 | v2 | flash | SDPA dense | auto kernel % of copy "
        "| flash kernel % of copy | max abs diff vs SDPA |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append("| %d | %d | %.0f | %s (%s) | %s | %s | %s | %.0f | %.0f%% | %.0f%% | %.1e |" % (
            r["batch"], r["context"], r["MB"], "%.0f / %.0f" % r["auto"], r.get("chose", "?"),
            *("%.0f / %.0f" % r[v] for v in VARIANTS[1:]),
            r["sdpa"], r["auto_pct_copy"], r["flash_pct_copy"], r["max_err"]))
    config_rows = [r for r in rows if r["configs"]]
    if config_rows:
        lines += [
            "",
            "Kernel configurations of v1/v2 (DJL_ATTN_PAGED_CONFIG; /pN: "
            "DJL_ATTN_PAGED_PARTITION=N), kernel-only TB/s of K/V read (% of copy), v1 up to "
            "context 2k and v2 beyond; same data, "
            "shapes and max abs diff column as above (the max covers every configuration):",
            "",
            "| config | " + " | ".join("%d / %dk" % (r["batch"], r["context"] // 1024)
                                      for r in config_rows) + " |",
            "| --- |" + " ---: |" * len(config_rows),
        ]
        for c in configs:
            cells = []
            for r in config_rows:
                gbs, chose = r["configs"].get(c, (float("nan"), "-"))
                cells.append("%.2f (%.0f%%, %s)" % (gbs / 1e3, 100.0 * gbs / copy_gbs, chose))
            lines.append("| %s | %s |" % (c, " | ".join(cells)))
    lines += [
        "",
        "reshape_and_cache (Hkv = %d, D = %d, float16, random slots):" % (HEADS_KV, DIM),
        "",
        "| tokens | op us | kernel us | kernel GB/s (K/V read + written) |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for w in writes:
        lines.append("| %d | %.1f | %.1f | %.0f |" % (w["tokens"], w["op_us"], w["kernel_us"],
                                                      w["kernel_gbs"]))
    if fp8_rows:
        lines += fp8_table(fp8_rows, device_line)
    lines += window_table(window_rows, device_line) if window_rows else []
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    if args.out:
        pathlib.Path(args.out).write_text(table)
    print("bench_paged.py took %.0f s" % (time.time() - started), flush=True)


if __name__ == "__main__":
    main()
