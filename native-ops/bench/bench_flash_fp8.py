"""FP8 prefill (flash_attention_fp8, the Hopper e4m3 kernel) against our float16/bfloat16
flash_attention and SDPA's cuDNN backend, on the prefill grid's D = 128 cells (16k tokens,
hidden 2048: 16 heads of 128; S = 1k, 4k, 16k; causal or not). Every column is the whole call
as a caller times it: ours fp8 includes its transpose of v into scratch; "fp8 + cast" adds
torch's casts of bfloat16 q, k and v to e4m3 with scales known in advance (what a caller without
FP8 activations pays); the anchors run on the same values in bfloat16 and float16.

Usage: DJL_ATTN_LIB_DIR=... python3 bench/bench_flash_fp8.py [--out table.md] [--seqlens ...]
"""

import argparse
import datetime
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_flash  # noqa: E402  (load_libraries, bench, sdpa_fn, the grid's constants)
from bench_flash import HIDDEN, TOTAL_TOKENS, bench, sdpa_fn  # noqa: E402

DIM = 128  # the e4m3 kernel's head dim


def tflops(ms, batch, seqlen, heads, causal):
    flops = 4.0 * batch * heads * seqlen * seqlen * DIM * (0.5 if causal else 1.0)
    return flops / (ms * 1e-3) / 1e12


def rows(seqlens):
    from torch.nn.attention import SDPBackend

    fp8 = torch.ops.djl_attn.flash_attention_fp8
    flash = torch.ops.djl_attn.flash_attention
    heads = HIDDEN // DIM
    out = []
    for seqlen in seqlens:
        batch = TOTAL_TOKENS // seqlen
        g = torch.Generator(device="cuda").manual_seed(seqlen)
        q, k, v = (torch.randn(batch, seqlen, heads, DIM, device="cuda", generator=g,
                               dtype=torch.bfloat16) for _ in range(3))
        # Per-tensor scales that map each tensor's largest magnitude to e4m3's 448.
        scales = [(x.abs().amax().float() / 448.0).reshape(1) for x in (q, k, v)]
        q8, k8, v8 = ((x.float() / s).to(torch.float8_e4m3fn) for x, s in zip((q, k, v), scales))
        scale = DIM ** -0.5
        for causal in (False, True):
            def ours_fp8():
                return fp8(q8, k8, v8, None, scale, causal, scales[0], scales[1], scales[2])

            def ours_fp8_cast():
                a, b, c = ((x / s).to(torch.float8_e4m3fn) for x, s in zip((q, k, v), scales))
                return fp8(a, b, c, None, scale, causal, scales[0], scales[1], scales[2])

            q16, k16, v16 = (x.half() for x in (q, k, v))
            row = {"S": seqlen, "causal": causal, "B": batch}
            row["fp8"] = bench(ours_fp8)
            row["fp8+cast"] = bench(ours_fp8_cast)
            row["ours bf16"] = bench(lambda: flash(q, k, v, None, scale, causal))
            row["ours fp16"] = bench(lambda: flash(q16, k16, v16, None, scale, causal))
            row["cuDNN bf16"] = bench(sdpa_fn(SDPBackend.CUDNN_ATTENTION, q, k, v, causal))
            row["cuDNN fp16"] = bench(sdpa_fn(SDPBackend.CUDNN_ATTENTION, q16, k16, v16, causal))
            ref = flash(q, k, v, None, scale, causal)[0].float()
            got = ours_fp8()[0].float()
            row["maxdiff"] = (got - ref).abs().max().item()
            row["ref max"] = ref.abs().max().item()
            out.append(row)
            print(row, flush=True)
    return out


COLUMNS = ["fp8", "fp8+cast", "ours bf16", "ours fp16", "cuDNN bf16", "cuDNN fp16"]


def markdown(device, table):
    lines = [f"{device}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
             f"torch {torch.__version__}; TFLOP/s of the whole call (16k tokens, 16 heads of "
             f"128)", "",
             "| S | causal | " + " | ".join(COLUMNS) + " | fp8/ours bf16 | fp8/cuDNN bf16 |"
             " fp8/cuDNN fp16 | fp8+cast/cuDNN bf16 | max diff (max ref) |",
             "| --- | --- |" + " ---: |" * (len(COLUMNS) + 5)]
    for r in table:
        t = {c: tflops(r[c], r["B"], r["S"], 16, r["causal"]) for c in COLUMNS}
        lines.append(
            f"| {r['S']} | {'yes' if r['causal'] else 'no'} | "
            + " | ".join(f"{t[c]:.0f}" for c in COLUMNS)
            + f" | {t['fp8'] / t['ours bf16']:.2f} | {t['fp8'] / t['cuDNN bf16']:.2f} |"
            f" {t['fp8'] / t['cuDNN fp16']:.2f} | {t['fp8+cast'] / t['cuDNN bf16']:.2f} |"
            f" {r['maxdiff']:.3f} ({r['ref max']:.2f}) |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--seqlens", default="1024,4096,16384")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    bench_flash.load_libraries()
    table = rows([int(s) for s in args.seqlens.split(",")])
    text = markdown(torch.cuda.get_device_name(), table)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
