"""Throughput of djl_attn.flash_attention against torch's scaled_dot_product_attention backends.

One run, the same inputs for every kernel: prefill TFLOP/s (fp16/bf16, D 64/128, S 512..16k,
causal and not, total tokens fixed so that batch * heads fills the GPU) for our kernel and for
SDPA's flash, cuDNN, memory-efficient and math backends; decode (Sq = 1) latency and K/V read
bandwidth with a device-to-device copy as the bandwidth reference.

    python3 bench/bench_flash.py --device cuda --out flash.md
    python3 bench/bench_flash.py --device cuda --out flash.md --configs all
    python3 bench/bench_flash.py --device cuda --quick     # prefill at S 2k/8k, flash and cuDNN only
    DJL_ATTN_BENCH_FLASH_CONFIGS=all bash scripts/gpu-check.sh     # the same through the script

--configs (all, or a comma-separated list of names) adds a tuning table: the tile
configurations of the CUDA kernel that DJL_ATTN_FLASH_CONFIG selects (cuda/flash/flash_shapes.h,
kFwdConfigs) timed one after the other on the same inputs as SDPA's flash backend, for fp16/bf16,
D 64/128, S 2k/8k, causal and not. See docs/design/flash-cuda.md.

Layouts: ours takes q/k/v [B, S, H, D]; SDPA gets transposed views [B, H, S, D] of the same
tensors. "ours" is the launcher's choice; on compute capability 9.0 the prefill table adds the
Hopper kernel (DJL_ATTN_FLASH_HOPPER=on, cuda/flash/hopper) and the sm_80 kernel (=off) timed on
the same inputs. FLOPs = 4 * B * H * Sq * Sk * D, halved for causal. Times are medians of CUDA-event
timings after warm-up, each call after an L2 flush.
"""

import argparse
import datetime
import math
import os
import pathlib
import statistics
import sys

import torch

from switches import switches
import torch.nn.functional as F

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent


def load_libraries():
    """Loads libdjl_attn.so and libdjl_attn_cuda.so from $DJL_ATTN_LIB_DIR or native-ops/build."""
    for d in (os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build"):
        if d and (pathlib.Path(d) / "libdjl_attn.so").is_file():
            torch.ops.load_library(str(pathlib.Path(d) / "libdjl_attn.so"))
            if torch.cuda.is_available():
                torch.ops.load_library(str(pathlib.Path(d) / "libdjl_attn_cuda.so"))
            return
    sys.exit("bench_flash: libdjl_attn.so not found: build native-ops first")

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    BACKENDS = [
        ("flash", SDPBackend.FLASH_ATTENTION),
        ("cudnn", SDPBackend.CUDNN_ATTENTION),
        ("efficient", SDPBackend.EFFICIENT_ATTENTION),
        ("math", SDPBackend.MATH),
    ]
except ImportError:  # torch without torch.nn.attention: SDPA columns read n/a
    BACKENDS = []

flash = None  # torch.ops.djl_attn.flash_attention, once the libraries are loaded
TOTAL_TOKENS = 16384
HIDDEN = 2048  # heads * head dim
# The math backend materialises B * H * S * S scores several times over: above this length it
# takes seconds per call and tens of GiB, so it is skipped (n/a) there.
MATH_MAX_S = 2048


_L2_FLUSH = None


def bench(fn, min_reps=5, max_reps=50, budget_s=0.15):
    """Median milliseconds of fn() over CUDA events, after warm-up.

    Before each timed call a 256 MiB buffer is overwritten: that evicts the inputs from L2 (so
    decode reads K/V from memory, not from the previous call's cache) and keeps the GPU busy
    while the host enqueues the call, so that launch overhead stays outside the events.
    """
    global _L2_FLUSH
    if _L2_FLUSH is None:
        _L2_FLUSH = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    spent = 0.0
    while len(times) < max_reps and (len(times) < min_reps or spent < budget_s * 1e3):
        _L2_FLUSH.fill_(1.0)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        t = start.elapsed_time(end)
        times.append(t)
        spent += t
    return statistics.median(times)


def sdpa_fn(backend, q, k, v, causal, enable_gqa=False):
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def run():
        with sdpa_kernel(backend):
            kwargs = {"enable_gqa": True} if enable_gqa else {}
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, **kwargs)

    return run


def try_time(fn):
    try:
        fn()
        torch.cuda.synchronize()
    except RuntimeError:
        return None  # backend not available for this shape, dtype or GPU
    return bench(fn)


def copy_bandwidth(device):
    """GB/s of a 1 GiB device-to-device copy, counting bytes read plus bytes written."""
    src = torch.randn(1 << 28, device=device)  # 1 GiB of float32
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e9


HOPPER_ENV = "DJL_ATTN_FLASH_HOPPER"


def with_env(name, value, fn):
    saved = switches.get(name)
    switches[name] = value
    try:
        return fn()
    finally:
        if saved is None:
            switches.pop(name, None)
        else:
            switches[name] = saved


def prefill_rows(device, log, quick=False, seqlens=None, dims=None):
    rows = []
    hopper = torch.cuda.get_device_capability(device) == (9, 0)
    backends = [(n, b) for n, b in BACKENDS if not quick or n in ("flash", "cudnn")]
    for dtype in (torch.float16, torch.bfloat16):
        for dim in dims or ((128, 64) if quick else (64, 128)):
            heads = HIDDEN // dim
            for seqlen in seqlens or ((2048, 8192) if quick else (512, 1024, 2048, 4096, 8192, 16384)):
                batch = TOTAL_TOKENS // seqlen
                shape = (batch, seqlen, heads, dim)
                q = torch.randn(shape, dtype=dtype, device=device)
                k = torch.randn(shape, dtype=dtype, device=device)
                v = torch.randn(shape, dtype=dtype, device=device)
                scale = dim ** -0.5
                for causal in (False, True):
                    flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
                    ours_out = flash(q, k, v, None, scale, causal)[0]
                    ms = bench(lambda: flash(q, k, v, None, scale, causal))
                    row = {"dtype": str(dtype).split(".")[1], "D": dim, "S": seqlen, "causal": causal,
                           "B": batch, "H": heads, "ours": flops / ms / 1e9}
                    if hopper:
                        fn = lambda: flash(q, k, v, None, scale, causal)
                        for col, mode in (("hopper", "on"), ("sm80", "off")):
                            row[col] = flops / with_env(HOPPER_ENV, mode, lambda: bench(fn)) / 1e9
                        row["h-diff"] = (with_env(HOPPER_ENV, "on", fn)[0].float()
                                         - with_env(HOPPER_ENV, "off", fn)[0].float()).abs().max().item()
                    diff = None
                    for name, backend in backends:
                        if name == "math" and seqlen > MATH_MAX_S:
                            row[name] = None
                            continue
                        fn = sdpa_fn(backend, q, k, v, causal)
                        t = try_time(fn)
                        row[name] = None if t is None else flops / t / 1e9
                        if t is not None and diff is None:
                            diff = (fn().transpose(1, 2).float() - ours_out.float()).abs().max().item()
                    row["maxdiff"] = diff
                    rows.append(row)
                    log(row)
                del q, k, v
    return rows


def decode_rows(device, log, copy_gbs):
    rows = []
    heads_q, heads_kv, dim = 32, 8, 128
    for dtype in (torch.float16,):
        for batch in (1, 32):
            for seqlen_k in (1024, 8192, 32768):
                q = torch.randn(batch, 1, heads_q, dim, dtype=dtype, device=device)
                k = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
                v = torch.randn(batch, seqlen_k, heads_kv, dim, dtype=dtype, device=device)
                kv_bytes = 2 * k.numel() * k.element_size()
                scale = dim ** -0.5
                # "ours": the launcher's choice (the split-KV decode kernel, flash_decode.h);
                # "tile": the FA2 tile kernel it replaces, forced with DJL_ATTN_FLASH_DECODE=off.
                # ALiBi with FlashAttention's [batch, heads] slopes: the decode kernel's ALiBi
                # instantiation under auto (libraries before it: the tile kernel).
                slopes = torch.rand(batch, heads_q, device=device) * 0.5
                saved = switches.pop("DJL_ATTN_FLASH_DECODE", None)
                try:
                    ms = bench(lambda: flash(q, k, v, None, scale, False))
                    out_decode = flash(q, k, v, None, scale, False)[0]
                    alibi_ms = bench(lambda: flash(q, k, v, None, scale, False, -1, -1, 0.0,
                                                   slopes))
                    switches["DJL_ATTN_FLASH_DECODE"] = "off"
                    tile_ms = bench(lambda: flash(q, k, v, None, scale, False))
                    out_tile = flash(q, k, v, None, scale, False)[0]
                finally:
                    if saved is None:
                        switches.pop("DJL_ATTN_FLASH_DECODE", None)
                    else:
                        switches["DJL_ATTN_FLASH_DECODE"] = saved
                row = {"dtype": str(dtype).split(".")[1], "B": batch, "Sk": seqlen_k, "us": ms * 1e3,
                       "GB/s": kv_bytes / (ms * 1e-3) / 1e9, "tile_us": tile_ms * 1e3,
                       "diff": (out_decode.float() - out_tile.float()).abs().max().item(),
                       "alibi_us": alibi_ms * 1e3}
                row["of_copy"] = row["GB/s"] / copy_gbs
                row["tile_of_copy"] = kv_bytes / (tile_ms * 1e-3) / 1e9 / copy_gbs
                for name, backend in BACKENDS:
                    if name == "math":
                        continue
                    t = try_time(sdpa_fn(backend, q, k, v, False, enable_gqa=True))
                    row[name + "_us"] = None if t is None else t * 1e3
                rows.append(row)
                log(row)
                del q, k, v
    return rows


CONFIG_ENV = "DJL_ATTN_FLASH_CONFIG"


def compiled_configs():
    """[(name, [head dims])] from the kFwdConfigs table in cuda/flash/flash_shapes.h."""
    import re

    header = NATIVE_OPS / "cuda" / "flash" / "flash_shapes.h"
    table = re.search(r"kFwdConfigs\[\] = \{(.*?)\n\};", header.read_text(), re.S).group(1)
    configs = []
    for i, m in enumerate(re.finditer(r'\{"(\w+)",([^}]*)\}', table)):
        configs.append((m.group(1), [d for d in (64, 128) if i == 0 or "kCfgD%d" % d in m.group(2)]))
    return configs


def config_rows(device, log, wanted):
    """TFLOP/s of every configuration in `wanted` that is compiled for the cell's head dim, and
    of SDPA flash, on one set of inputs per cell; maxdiff against the base tiles' output."""
    # Only what this build compiled: all of kFwdConfigs in a DJL_ATTN_TUNING build.
    built = set(switches.values(CONFIG_ENV))
    configs = [(n, dims) for n, dims in compiled_configs()
               if n in built and (n == "base" or n in wanted)]
    flash_backend = dict(BACKENDS).get("flash")
    saved = switches.get(CONFIG_ENV)
    rows = []
    try:
        for dim in (64, 128):
            heads = HIDDEN // dim
            for dtype in (torch.float16, torch.bfloat16):
                for seqlen in (2048, 8192):
                    batch = TOTAL_TOKENS // seqlen
                    shape = (batch, seqlen, heads, dim)
                    q = torch.randn(shape, dtype=dtype, device=device)
                    k = torch.randn(shape, dtype=dtype, device=device)
                    v = torch.randn(shape, dtype=dtype, device=device)
                    scale = dim ** -0.5
                    for causal in (False, True):
                        flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
                        row = {"dtype": str(dtype).split(".")[1], "D": dim, "S": seqlen, "causal": causal,
                               "tf": {}, "maxdiff": 0.0}
                        t = None if flash_backend is None else try_time(sdpa_fn(flash_backend, q, k, v, causal))
                        row["flash"] = None if t is None else flops / t / 1e9
                        base = None
                        for name, dims in configs:
                            if dim not in dims:
                                continue
                            switches[CONFIG_ENV] = name
                            out = flash(q, k, v, None, scale, causal)[0]
                            if base is None:
                                base = out
                            else:
                                row["maxdiff"] = max(row["maxdiff"], (out.float() - base.float()).abs().max().item())
                            row["tf"][name] = flops / bench(lambda: flash(q, k, v, None, scale, causal)) / 1e9
                        rows.append(row)
                        log(row)
                    del q, k, v
    finally:
        if saved is None:
            switches.pop(CONFIG_ENV, None)
        else:
            switches[CONFIG_ENV] = saved
    return rows, [n for n, _ in configs]


def config_markdown(rows, names):
    """One table per head dim: TFLOP/s and the ratio to SDPA flash; best per row in bold."""
    lines = ["", "Tile configurations (%s), TFLOP/s and ×SDPA flash; same inputs per row; maxdiff: "
             "largest |config - base| over the outputs." % CONFIG_ENV, ""]
    for dim in (64, 128):
        cols = [n for n in names if any(n in r["tf"] for r in rows if r["D"] == dim)]
        lines += ["| D=%d dtype | S | causal | flash | " % dim + " | ".join(cols) + " | maxdiff |",
                  "|" + "---|" * (5 + len(cols))]
        for r in (r for r in rows if r["D"] == dim):
            best = max(r["tf"].values())
            cells = []
            for n in cols:
                tf = r["tf"][n]
                cell = "%.0f" % tf + (" (%.2f)" % (tf / r["flash"]) if r["flash"] else "")
                cells.append("**%s**" % cell if tf == best else cell)
            lines.append("| %s | %d | %s | %s | %s | %.1e |" % (
                r["dtype"], r["S"], "yes" if r["causal"] else "no", fmt(r["flash"]), " | ".join(cells),
                r["maxdiff"]))
        # Geometric mean of each configuration over the rows, relative to the base tiles.
        geo = []
        for n in cols:
            ratios = [r["tf"][n] / r["tf"]["base"] for r in rows if r["D"] == dim]
            geo.append("%.3f" % math.exp(sum(math.log(x) for x in ratios) / len(ratios)))
        lines += ["| geomean ×base | | | | " + " | ".join(geo) + " | |", ""]
    return "\n".join(lines) + "\n"


def fmt(x, spec="%.0f"):
    return "n/a" if x is None else spec % x


def markdown(device_name, copy_gbs, prefill, decode):
    names = [n for n, _ in BACKENDS if any(n in r for r in prefill)]
    hopper = any("hopper" in r for r in prefill)
    hcols = ["hopper", "sm80"] if hopper else []
    lines = [
        "### flash_attention vs torch SDPA (%s, torch %s, %s)"
        % (device_name, torch.__version__, datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")),
        "",
        "Prefill, TFLOP/s (4·B·H·S²·D, halved for causal), %d tokens per batch, H·D = %d. "
        "math is skipped (n/a) above S = %d. maxdiff: largest |ours - SDPA| over the output."
        % (TOTAL_TOKENS, HIDDEN, MATH_MAX_S)
        + (" hopper: the Hopper kernel (DJL_ATTN_FLASH_HOPPER=on), sm80: the sm_80 kernel (=off), "
           "on the same inputs; h-diff: max |hopper - sm80|." if hopper else ""),
        "",
        "| dtype | D | S | causal | B×H | ours | " + "".join(c + " | " for c in hcols) + " | ".join(names)
        + " | ours/flash | ours/best | maxdiff |" + (" hopper/sm80 | hopper/cudnn | h-diff |" if hopper else ""),
        "|" + "---|" * (9 + len(names) + (5 if hopper else 0)),
    ]
    for r in prefill:
        others = [r[n] for n in names if r.get(n) is not None]
        best = max(others) if others else None
        lines.append(
            "| %s | %d | %d | %s | %d×%d | %s | %s | %s | %s | %s |" % (
                r["dtype"], r["D"], r["S"], "yes" if r["causal"] else "no", r["B"], r["H"], fmt(r["ours"]),
                " | ".join(fmt(r[n]) for n in names),
                fmt(r["ours"] / r["flash"] if r.get("flash") else None, "%.2f"),
                fmt(r["ours"] / best if best else None, "%.2f"),
                fmt(r["maxdiff"], "%.1e"),
            )
        )
        if hopper:
            # The Hopper and sm_80 columns go after "ours"; their ratios and max |hopper - sm80|
            # at the end of the row.
            cells = lines[-1].split(" | ")
            cells[6:6] = [fmt(r["hopper"]), fmt(r["sm80"])]
            lines[-1] = " | ".join(cells) + " %s | %s | %s |" % (
                fmt(r["hopper"] / r["sm80"], "%.2f"),
                fmt(r["hopper"] / r["cudnn"] if r.get("cudnn") else None, "%.2f"),
                fmt(r["h-diff"], "%.1e"))
    if not decode:
        return "\n".join(lines) + "\n"
    sdpa_names = [n for n in names if n != "math"]
    lines += [
        "",
        "Decode (Sq = 1, Hq = 32, Hkv = 8, D = 128): microseconds, K/V bytes read per second, and that "
        "rate as a fraction of a 1 GiB device-to-device copy (%.0f GB/s, read + write). ours: the "
        "split-KV decode kernel (the default); tile: the tile kernel (DJL_ATTN_FLASH_DECODE=off); "
        "diff: max |ours - tile|; alibi: ours with ALiBi slopes [B, Hq] (the launcher's choice). "
        "SDPA with enable_gqa, microseconds." % copy_gbs,
        "",
        "| dtype | B | Sk | ours µs | GB/s | of copy | tile µs | tile of copy | diff | alibi µs | "
        + " | ".join(n + " µs" for n in sdpa_names) + " |",
        "|" + "---|" * (10 + len(sdpa_names)),
    ]
    for r in decode:
        lines.append(
            "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["dtype"], r["B"], r["Sk"], fmt(r["us"], "%.1f"), fmt(r["GB/s"]), fmt(r["of_copy"], "%.2f"),
                fmt(r["tile_us"], "%.1f"), fmt(r["tile_of_copy"], "%.2f"), fmt(r["diff"], "%.1e"),
                fmt(r["alibi_us"], "%.1f"),
                " | ".join(fmt(r[n + "_us"], "%.1f") for n in sdpa_names),
            )
        )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default=None, help="write the markdown table here")
    # The environment variable lets scripts/gpu-check.sh, which passes no arguments, ask for it.
    parser.add_argument("--configs", default=os.environ.get("DJL_ATTN_BENCH_FLASH_CONFIGS") or None,
                        help="also time the kernel's tile configurations: 'all' or a comma-separated "
                        "list (default: $DJL_ATTN_BENCH_FLASH_CONFIGS)")
    parser.add_argument("--quick", action="store_true",
                        help="prefill only, S 2k and 8k, SDPA flash and cuDNN only (a short GPU run)")
    parser.add_argument("--seqlens", default=None,
                        help="comma-separated prefill sequence lengths instead of the default set")
    parser.add_argument("--dims", default=None,
                        help="comma-separated prefill head dims instead of 64 and 128 (e.g. 256)")
    args = parser.parse_args()
    if args.device != "cuda" or not torch.cuda.is_available():
        print("bench_flash: needs a CUDA device; nothing to measure")
        return
    load_libraries()
    global flash
    flash = torch.ops.djl_attn.flash_attention
    device = torch.device(args.device)
    props = torch.cuda.get_device_properties(device)
    name = "%s, %d SMs" % (props.name, props.multi_processor_count)
    print("device:", name, flush=True)

    def log(row):
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)

    copy_gbs = copy_bandwidth(device)
    print("device-to-device copy: %.0f GB/s (read + write)" % copy_gbs, flush=True)
    configs_table = ""
    if args.configs:
        known = [n for n, _ in compiled_configs()]
        wanted = known if args.configs == "all" else args.configs.split(",")
        unknown = [n for n in wanted if n not in known]
        if unknown:
            sys.exit("bench_flash: --configs: unknown %s; known: %s" % (unknown, ", ".join(known)))
        crows, cnames = config_rows(device, log, wanted)
        configs_table = config_markdown(crows, cnames)
        print(configs_table, flush=True)
    decode = [] if args.quick else decode_rows(device, log, copy_gbs)
    seqlens = [int(x) for x in args.seqlens.split(",")] if args.seqlens else None
    dims = [int(x) for x in args.dims.split(",")] if args.dims else None
    prefill = prefill_rows(device, log, args.quick, seqlens, dims)
    table = markdown(name, copy_gbs, prefill, decode) + configs_table
    print()
    print(table)
    if args.out:
        pathlib.Path(args.out).write_text(table)


if __name__ == "__main__":
    main()
