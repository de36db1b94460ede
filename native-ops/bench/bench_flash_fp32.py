"""float32 flash attention on the GPU against stock DJL's float32 attention, in one process.

Stock = what a DJL model runs in float32: q @ k^T (cuBLAS, TF32 off, as PyTorch and DJL default),
scale, additive causal mask, softmax, @ v, on [B, H, S, D] tensors (GQA: k/v expanded beforehand,
outside the timing, which favours stock). Ours: djl_attn.flash_attention on [B, S, H, D] in each
float32 mode of DJL_ATTN_FLASH_FP32: auto (3xTF32, float32 accuracy, the default), tf32 (the
opt-in 1xTF32), 4w/8w (auto with a tile shape forced, for tuning), simple (the one-warp-per-row
kernel, on shapes where it finishes in reasonable time). BERT rows time bert_attention (bias,
padding mask) against the stock sequence from the same fused projection.

Errors: max |out - ref| / max(1, |ref|) against a float64 reference on the first batch row (the
suite's float32 rule, 1e-5). Times: medians of CUDA-event timings after warm-up, each call after
an L2 flush (bench_flash.bench).

    python3 bench/bench_flash_fp32.py --device cuda --out fp32.md
    BENCH=flash_fp32 bash scripts/gpu-check.sh          # the same through the GPU script
"""

import argparse
import math
import pathlib

import torch

from bench_flash import bench, load_libraries
from switches import switches

SWITCH = "DJL_ATTN_FLASH_FP32"
MODES = ["auto", "tf32", "4w", "8w", "simple"]
# The simple kernel takes tens of ms beyond this many score elements per call.
SIMPLE_MAX_SCORES = 2 * 1024 * 1024 * 16

# [B, Sq, Sk, Hq, Hkv, D]: the Java GPU table of issue 12 (docs/benchmarks.md), then S 512..4096 at
# D 64/128 and batch 1..8.
SHAPES = [
    (8, 128, 128, 12, 12, 64),
    (1, 512, 512, 16, 16, 64),
    (2, 1024, 1024, 16, 16, 64),
    (4, 2048, 2048, 16, 16, 128),
    (1, 4096, 4096, 32, 8, 128),
    (16, 1, 2048, 32, 8, 128),
    (32, 512, 512, 12, 12, 64),
    (8, 512, 512, 16, 16, 128),
    (1, 2048, 2048, 16, 16, 64),
    (8, 2048, 2048, 16, 16, 64),
    (2, 4096, 4096, 16, 16, 128),
    (1, 1000, 1000, 8, 8, 80),
    (4, 1024, 1024, 8, 8, 256),
]
# bert_attention: (batch, S, heads, D, padded): padded batches mask a quarter of the keys.
BERT = [(8, 128, 12, 64, False), (8, 128, 12, 64, True), (32, 512, 12, 64, False), (32, 512, 12, 64, True)]


def rel_error(out, ref):
    return ((out.double() - ref).abs() / ref.abs().clamp(min=1.0)).max().item()


def reference_row(q, k, v, scale, causal, kv_len=None):
    """float64 attention of batch row 0: [Sq, Hq, D]."""
    group = q.shape[2] // k.shape[2]
    qd = q[0].double().transpose(0, 1)
    kd = k[0].double().transpose(0, 1).repeat_interleave(group, 0)
    vd = v[0].double().transpose(0, 1).repeat_interleave(group, 0)
    s = qd @ kd.transpose(-1, -2) * scale
    sq, sk = s.shape[-2:]
    valid = sk if kv_len is None else kv_len
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    mask = j < valid
    if causal:
        mask = mask & (j <= i + valid - sq)
    s = s.masked_fill(~mask, -math.inf)
    return (torch.softmax(s, -1).nan_to_num(0.0) @ vd).transpose(0, 1)


def stock_fn(q, k, v, scale, causal, kv_lens=None):
    """DJL's float32 sequence on [B, H, S, D]; the mask is a precomputed additive float tensor."""
    group = q.shape[2] // k.shape[2]
    qt = q.transpose(1, 2).contiguous()
    kt = k.transpose(1, 2).repeat_interleave(group, 1).contiguous()
    vt = v.transpose(1, 2).repeat_interleave(group, 1).contiguous()
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal or kv_lens is not None:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        lens = kv_lens.long()[:, None, None, None] if kv_lens is not None else sk
        visible = j[None, None] < lens
        if causal:
            visible = visible & (j <= i + lens - sq)
        mask = torch.zeros(visible.shape, device=q.device).masked_fill(~visible, -math.inf)

    def run():
        s = torch.matmul(qt, kt.transpose(-1, -2)) * scale
        if mask is not None:
            s = s + mask
        return torch.matmul(torch.softmax(s, dim=-1), vt).transpose(1, 2)

    return run


def flash_rows(log):
    flash = torch.ops.djl_attn.flash_attention
    rows = []
    for shape in SHAPES:
        b, sq, sk, hq, hkv, d = shape
        for causal in (False, True):
            if sq == 1 and causal:
                continue  # one query row sees every key: the same problem
            q = torch.randn(b, sq, hq, d, device="cuda")
            k = torch.randn(b, sk, hkv, d, device="cuda")
            v = torch.randn(b, sk, hkv, d, device="cuda")
            scale = 1.0 / math.sqrt(d)
            ref = reference_row(q, k, v, scale, causal)
            stock = stock_fn(q, k, v, scale, causal)
            row = {"shape": list(shape), "causal": causal, "stock_ms": bench(stock),
                   "stock_err": rel_error(stock()[0], ref)}
            for mode in MODES:
                if not built(mode) or (mode == "simple" and b * hq * sq * sk > SIMPLE_MAX_SCORES):
                    row[mode + "_ms"] = row[mode + "_err"] = None
                    continue
                switches[SWITCH] = mode
                fn = lambda: flash(q, k, v, None, scale, causal)  # noqa: E731
                row[mode + "_ms"] = bench(fn)
                row[mode + "_err"] = rel_error(fn()[0][0], ref)
            switches.pop(SWITCH, None)
            log(row)
            rows.append(row)
            del q, k, v, ref, stock
            torch.cuda.empty_cache()
    return rows


def accuracy_rows(log):
    """Errors only, against the scale: larger scores multiply every rounding error."""
    flash = torch.ops.djl_attn.flash_attention
    rows = []
    for d in (64, 128):
        q = torch.randn(1, 1024, 8, d, device="cuda")
        k = torch.randn(1, 1024, 8, d, device="cuda")
        v = torch.randn(1, 1024, 8, d, device="cuda")
        for scale in (1.0 / math.sqrt(d), 0.5, 1.0, 2.5):
            ref = reference_row(q, k, v, scale, False)
            row = {"D": d, "scale": scale, "stock_err": rel_error(stock_fn(q, k, v, scale, False)()[0], ref)}
            for mode in ("auto", "tf32", "simple"):
                if not built(mode):
                    row[mode + "_err"] = None
                    continue
                switches[SWITCH] = mode
                row[mode + "_err"] = rel_error(flash(q, k, v, None, scale, False)[0][0], ref)
            switches.pop(SWITCH, None)
            log(row)
            rows.append(row)
    return rows


def bert_rows(log):
    rows = []
    for batch, seqlen, heads, d, padded in BERT:
        hidden = heads * d
        qkv = torch.randn(batch, seqlen, 3 * hidden, device="cuda")
        bias = torch.randn(3 * hidden, device="cuda")
        lens = [seqlen - (seqlen // 4 if padded and i % 2 else 0) for i in range(batch)]
        kv_lens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        scale = 1.0 / math.sqrt(d)
        x = (qkv + bias).view(batch, seqlen, 3, heads, d)
        q, k, v = x[:, :, 0], x[:, :, 1], x[:, :, 2]
        j = torch.arange(seqlen, device="cuda")
        mask = torch.zeros(batch, 1, 1, seqlen, device="cuda").masked_fill(
            (j[None] >= kv_lens.long()[:, None])[:, None, None], -math.inf)

        def stock():
            # What a DJL BERT layer runs: bias add, split into heads, two GEMMs around a softmax.
            y = (qkv + bias).view(batch, seqlen, 3, heads, d).permute(2, 0, 3, 1, 4)
            s = torch.matmul(y[0], y[1].transpose(-1, -2)) * scale + mask
            out = torch.matmul(torch.softmax(s, dim=-1), y[2])
            return out.transpose(1, 2).reshape(batch, seqlen, hidden)

        ours = lambda: torch.ops.djl_attn.bert_attention(qkv, bias, kv_lens, heads, scale)  # noqa: E731
        ref = reference_row(q, k, v, scale, False, lens[0]).reshape(seqlen, hidden)
        row = {"bert": [batch, seqlen, heads, d], "padded": padded, "stock_ms": bench(stock),
               "stock_err": rel_error(stock()[0], ref)}
        for mode in ("auto", "tf32"):
            if not built(mode):
                row[mode + "_ms"] = row[mode + "_err"] = None
                continue
            switches[SWITCH] = mode
            row[mode + "_ms"] = bench(ours)
            row[mode + "_err"] = rel_error(ours()[0], ref)
        switches.pop(SWITCH, None)
        log(row)
        rows.append(row)
    return rows


def built(mode):
    """Whether this build has the mode: tf32 (1xTF32) is compiled in DJL_ATTN_TUNING builds only
    (TUNING=ON bash scripts/gpu-check.sh); its columns read n/a otherwise."""
    return mode in (switches.values(SWITCH) or [])


def fmt(x, spec):
    return "n/a" if x is None else spec % x


def ratio(stock_ms, ms):
    return "n/a" if ms is None else "%.2fx" % (stock_ms / ms)


def markdown(device_name, rows, brows, arows):
    lines = [
        "float32 flash attention vs stock float32 attention (matmul, softmax, matmul; cuBLAS, TF32 "
        "off) on %s. ms = median per call; x = stock ms / ours ms; err = max rel error vs float64 "
        "(batch row 0). auto = 3xTF32 (the default), tf32 = opt-in 1xTF32, simple = the "
        "one-warp-per-row kernel." % device_name,
        "",
        "| shape [B,Sq,Sk,Hq,Hkv,D] | causal | stock ms | auto ms | auto x | auto err | tf32 ms | "
        "tf32 x | tf32 err | 4w ms | 8w ms | simple ms | stock err |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append("| %s | %s | %.3f | %.3f | %.2fx | %.1e | %s | %s | %s | %.3f | %.3f | %s | %.1e |" % (
            r["shape"], "yes" if r["causal"] else "no", r["stock_ms"], r["auto_ms"],
            r["stock_ms"] / r["auto_ms"], r["auto_err"], fmt(r["tf32_ms"], "%.3f"),
            ratio(r["stock_ms"], r["tf32_ms"]), fmt(r["tf32_err"], "%.1e"), r["4w_ms"], r["8w_ms"],
            fmt(r["simple_ms"], "%.3f"), r["stock_err"]))
    lines += [
        "",
        "bert_attention (fused projection [B, S, 3 * H * D] plus bias, padding mask from kv_lens; "
        "padded: every other sequence a quarter shorter) vs the stock sequence from the same "
        "projection:",
        "",
        "| [B, S, H, D] | padded | stock ms | auto ms | auto x | auto err | tf32 ms | tf32 x | tf32 err |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in brows:
        lines.append("| %s | %s | %.3f | %.3f | %.2fx | %.1e | %s | %s | %s |" % (
            r["bert"], "yes" if r["padded"] else "no", r["stock_ms"], r["auto_ms"],
            r["stock_ms"] / r["auto_ms"], r["auto_err"], fmt(r["tf32_ms"], "%.3f"),
            ratio(r["stock_ms"], r["tf32_ms"]), fmt(r["tf32_err"], "%.1e")))
    lines += [
        "",
        "Accuracy against the scale ([1, 1024, 1024, 8, 8, D], not causal; max rel error vs float64):",
        "",
        "| D | scale | auto err | tf32 err | simple err | stock err |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in arows:
        lines.append("| %d | %.3f | %.1e | %s | %.1e | %.1e |" % (
            r["D"], r["scale"], r["auto_err"], fmt(r["tf32_err"], "%.1e"), r["simple_err"],
            r["stock_err"]))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default=None, help="write the markdown tables here")
    args = parser.parse_args()
    if args.device != "cuda" or not torch.cuda.is_available():
        print("bench_flash_fp32: needs a CUDA device; nothing to measure")
        return
    load_libraries()
    # What PyTorch and DJL do by default: float32 GEMMs in float32, not TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    name = "%s (%d SMs), torch %s" % (props.name, props.multi_processor_count, torch.__version__)
    print("device:", name, flush=True)

    def log(row):
        print({k: (("%.2e" % v) if k.endswith("_err") else round(v, 4)) if isinstance(v, float) else v
               for k, v in row.items()}, flush=True)

    rows = flash_rows(log)
    brows = bert_rows(log)
    arows = accuracy_rows(log)
    table = markdown(name, rows, brows, arows)
    print()
    print(table)
    if args.out:
        pathlib.Path(args.out).write_text(table)


if __name__ == "__main__":
    main()
