"""Our operators against the anchors a user weighs them against, in one process on one GPU.

Issue 15's tables, with its shapes kept exactly so that runs compare across turns:

  prefill   flash_attention forward against SDPA's cuDNN backend (and FlashAttention-2, SDPA's
            flash backend): {fp16, bf16} x D {64, 128, 256} x S {1k, 4k, 16k} x {causal, not},
            B * S = 16k tokens, Hq * D = 2048; GQA 32:8 at D = 128; a varlen BERT-like batch
            (lengths 32..512, 12 heads of 64) against torch's FlashAttention-2 varlen forward.
            TFLOP/s = 4 * B * H * Sq * Sk * D / time (halved for causal; varlen sums per sequence).
  decode    dense decode (Sq = 1, Hq 32 / Hkv 8, D 128, fp16) at batch {1, 8, 64} x context
            {4k, 32k}: microseconds per call and K/V bytes read as a share of the device's copy
            bandwidth; the fastest SDPA backend on the same tensors.
  paged     paged_attention decode at batch {32, 64} x context {4k, 8k} (Hq 32, Hkv 8, D 128,
            block 16) with a float16 cache and, where the library takes one, an FP8 (e4m3, uint8)
            cache: K/V-bytes throughput of the fp16 cache's logical bytes, so that the ratio is
            the speed-up a user sees for the same tokens.
  encoder   BERT-base (12 layers, hidden 768, 12 heads, FFN 3072, fp16) on the same random
            weights: Hugging Face transformers' BertModel encoder eager (sdpa), the same under
            torch.compile, and our fused layer sequence (bench_bert.fused_layer: 4 GEMMs and 4
            djl_attn kernels per layer), at B32*S128, B8*S512, B1*S128, unpadded; max |diff|
            against HF eager.

    python3 bench/bench_anchors.py --out anchors.md [--only prefill,decode,paged,encoder]

Medians of CUDA-event timings after warm-up, each call after an L2 flush (bench_flash.bench),
except the encoder, timed as 10 back-to-back calls between events (bench_bert.median_ms), the
way a server issues layers.
"""

import argparse
import datetime

import torch
import torch.nn.functional as F

import bench_bert
import bench_flash
from bench_flash import BACKENDS, bench, copy_bandwidth, sdpa_fn, try_time

TOTAL_TOKENS = 16384
HIDDEN = 2048
PREFILL_DIMS = (64, 128, 256)
PREFILL_SEQLENS = (1024, 4096, 16384)
DECODE_HEADS_Q, DECODE_HEADS_KV, DECODE_DIM = 32, 8, 128
DECODE_BATCHES = (1, 8, 64)
DECODE_CONTEXTS = (4096, 32768)
PAGED_BATCHES = (32, 64)
PAGED_CONTEXTS = (4096, 8192)
PAGED_BLOCK = 16
ENCODER_SHAPES = ((32, 128), (8, 512), (1, 128))
ENCODER_LAYERS = 12
SDPA_BY_NAME = dict(BACKENDS)


def ops():
    return torch.ops.djl_attn


def prefill_cell(dtype, batch, seqlen, heads_q, heads_kv, dim, causal):
    q = torch.randn(batch, seqlen, heads_q, dim, dtype=dtype, device="cuda")
    k = torch.randn(batch, seqlen, heads_kv, dim, dtype=dtype, device="cuda")
    v = torch.randn(batch, seqlen, heads_kv, dim, dtype=dtype, device="cuda")
    scale = dim ** -0.5
    flops = 4 * batch * heads_q * seqlen * seqlen * dim / (2 if causal else 1)
    ours = lambda: ops().flash_attention(q, k, v, None, scale, causal)
    row = {"ours": flops / bench(ours) / 1e9}
    # SDPA wants [B, H, S, D] and, for cuDNN, equal heads: grouped K/V are expanded before timing
    # (the anchor then reads more bytes, but prefill is compute-bound).
    group = heads_q // heads_kv
    k_sdpa = k if group == 1 else k.repeat_interleave(group, dim=2)
    v_sdpa = v if group == 1 else v.repeat_interleave(group, dim=2)
    reference = None
    for name in ("cudnn", "flash"):
        fn = sdpa_fn(SDPA_BY_NAME[name], q, k_sdpa, v_sdpa, causal)
        t = try_time(fn)
        row[name] = None if t is None else flops / t / 1e9
        if t is not None and reference is None:
            reference = fn().transpose(1, 2)
    row["maxdiff"] = None if reference is None else (ours()[0].float() - reference.float()).abs().max().item()
    return row


def prefill_rows(log):
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for dim in PREFILL_DIMS:
            for seqlen in PREFILL_SEQLENS:
                for causal in (False, True):
                    row = {"case": "%s D%d" % (str(dtype)[6:], dim), "S": seqlen, "causal": causal}
                    row.update(prefill_cell(dtype, TOTAL_TOKENS // seqlen, seqlen, HIDDEN // dim,
                                            HIDDEN // dim, dim, causal))
                    rows.append(row)
                    log(row)
    for seqlen in PREFILL_SEQLENS:
        for causal in (False, True):
            row = {"case": "fp16 GQA 32:8 D128", "S": seqlen, "causal": causal}
            row.update(prefill_cell(torch.float16, TOTAL_TOKENS // seqlen, seqlen, 32, 8, 128, causal))
            rows.append(row)
            log(row)
    rows.append(varlen_row())
    log(rows[-1])
    return rows


def varlen_row():
    """A BERT-like packed batch: lengths 32..512 (seeded), 12 heads of 64, fp16, not causal."""
    g = torch.Generator().manual_seed(15)
    lens = []
    while sum(lens) < TOTAL_TOKENS:
        lens.append(int(torch.randint(32, 513, (1,), generator=g)))
    heads, dim = 12, 64
    total = sum(lens)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(total, heads, dim, dtype=torch.float16, device="cuda") for _ in range(3))
    scale = dim ** -0.5
    longest = max(lens)
    flops = sum(4 * heads * n * n * dim for n in lens)
    ours = lambda: ops().flash_attention_varlen(q, k, v, cu, cu, longest, longest, scale, False)
    row = {"case": "fp16 varlen 32..512 H12 D64 (%d seqs)" % len(lens), "S": total, "causal": False,
           "ours": flops / bench(ours) / 1e9, "cudnn": None}
    # torch's FlashAttention-2 varlen forward (what SDPA's flash backend runs for nested tensors).
    fa2 = lambda: torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, longest, longest, 0.0,
                                                          False, False, scale=scale)
    t = try_time(fa2)
    row["flash"] = None if t is None else flops / t / 1e9
    row["maxdiff"] = None if t is None else (ours()[0].float() - fa2()[0].float()).abs().max().item()
    return row


def decode_rows(log, copy_gbs):
    rows = []
    for batch in DECODE_BATCHES:
        for context in DECODE_CONTEXTS:
            q = torch.randn(batch, 1, DECODE_HEADS_Q, DECODE_DIM, dtype=torch.float16, device="cuda")
            k, v = (torch.randn(batch, context, DECODE_HEADS_KV, DECODE_DIM, dtype=torch.float16,
                                device="cuda") for _ in range(2))
            kv_bytes = 2 * k.numel() * k.element_size()
            scale = DECODE_DIM ** -0.5
            ms = bench(lambda: ops().flash_attention(q, k, v, None, scale, False))
            sdpa = [try_time(sdpa_fn(b, q, k, v, False, enable_gqa=True))
                    for n, b in BACKENDS if n != "math"]
            sdpa = [t for t in sdpa if t is not None]
            row = {"B": batch, "context": context, "us": ms * 1e3,
                   "of_copy": kv_bytes / (ms * 1e-3) / 1e9 / copy_gbs,
                   "sdpa_us": min(sdpa) * 1e3 if sdpa else None}
            rows.append(row)
            log(row)
            del q, k, v
    return rows


def to_fp8_cache(cache, scale):
    """e4m3fn bytes of cache / scale, as uint8 (torch's own saturating cast)."""
    return (cache.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)


def paged_rows(log, copy_gbs):
    rows = []
    for batch in PAGED_BATCHES:
        for context in PAGED_CONTEXTS:
            blocks = batch * context // PAGED_BLOCK
            shape = (blocks, PAGED_BLOCK, DECODE_HEADS_KV, DECODE_DIM)
            key_cache, value_cache = (torch.randn(shape, dtype=torch.float16, device="cuda")
                                      for _ in range(2))
            tables = torch.randperm(blocks, device="cuda").to(torch.int32).view(batch, -1)
            lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
            query = torch.randn(batch, DECODE_HEADS_Q, DECODE_DIM, dtype=torch.float16, device="cuda")
            scale = DECODE_DIM ** -0.5
            kv_bytes = 2 * batch * context * DECODE_HEADS_KV * DECODE_DIM * 2  # fp16 bytes
            fp16 = lambda: ops().paged_attention(query, key_cache, value_cache, tables, lens, scale,
                                                 context, None)
            ms16 = bench(fp16)
            row = {"B": batch, "context": context, "fp16_us": ms16 * 1e3,
                   "fp16_of_copy": kv_bytes / (ms16 * 1e-3) / 1e9 / copy_gbs,
                   "fp8_us": None, "speedup": None, "fp8_maxdiff": None}
            k_scale = torch.tensor([0.05], device="cuda")
            v_scale = torch.tensor([0.05], device="cuda")
            k8, v8 = to_fp8_cache(key_cache, 0.05), to_fp8_cache(value_cache, 0.05)
            fp8 = lambda: ops().paged_attention(query, k8, v8, tables, lens, scale, context, None, True,
                                                k_scale, v_scale)
            try:
                fp8()
                torch.cuda.synchronize()
                ms8 = bench(fp8)
                row["fp8_us"] = ms8 * 1e3
                row["speedup"] = ms16 / ms8
                row["fp8_maxdiff"] = (fp8().float() - fp16().float()).abs().max().item()
            except (RuntimeError, ValueError) as e:  # a library without an FP8 cache
                print("paged fp8: %s" % str(e).splitlines()[0], flush=True)
            rows.append(row)
            log(row)
            del key_cache, value_cache, k8, v8
            torch.cuda.empty_cache()
    return rows


def hf_encoder(dtype):
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_size=bench_bert.HIDDEN, num_attention_heads=bench_bert.HEADS,
                        intermediate_size=bench_bert.INTERMEDIATE, num_hidden_layers=ENCODER_LAYERS,
                        layer_norm_eps=bench_bert.EPS, attn_implementation="sdpa")
    torch.manual_seed(15)
    model = BertModel(config).to(dtype=dtype, device="cuda").eval()
    return model.encoder


def layer_weights(layer):
    """bench_bert's weight dict from one HF BertLayer (same tensors, fused QKV concatenated)."""
    a, o = layer.attention, layer.attention.output
    w = {"wq": a.self.query.weight, "bq": a.self.query.bias, "wk": a.self.key.weight,
         "bk": a.self.key.bias, "wv": a.self.value.weight, "bv": a.self.value.bias,
         "wo": o.dense.weight, "bo": o.dense.bias, "gamma1": o.LayerNorm.weight,
         "beta1": o.LayerNorm.bias, "w1": layer.intermediate.dense.weight,
         "b1": layer.intermediate.dense.bias, "w2": layer.output.dense.weight,
         "b2": layer.output.dense.bias, "gamma2": layer.output.LayerNorm.weight,
         "beta2": layer.output.LayerNorm.bias}
    w = {n: t.detach() for n, t in w.items()}
    w["wqkv"] = torch.cat([w["wq"], w["wk"], w["wv"]]).contiguous()
    w["bqkv"] = torch.cat([w["bq"], w["bk"], w["bv"]]).contiguous()
    return w


def encoder_rows(log):
    dtype = torch.float16
    encoder = hf_encoder(dtype)
    weights = [layer_weights(layer) for layer in encoder.layer]
    compiled = torch.compile(encoder)
    rows = []
    with torch.inference_mode():
        for batch, seqlen in ENCODER_SHAPES:
            x = torch.randn(batch, seqlen, bench_bert.HIDDEN, dtype=dtype, device="cuda")

            def ours():
                h = x
                for w in weights:
                    h = bench_bert.fused_layer(h, None, w)
                return h

            rows2 = x.reshape(-1, bench_bert.HIDDEN)
            inner = torch.empty(rows2.shape[0], bench_bert.INTERMEDIATE, dtype=dtype, device="cuda")

            def gemms():
                # The 4 GEMMs of each layer alone, on the shapes ours runs: the floor that any
                # fusion of the rest can approach.
                for w in weights:
                    F.linear(rows2, w["wqkv"], w["bqkv"])
                    F.linear(rows2, w["wo"])
                    F.linear(rows2, w["w1"], out=inner)
                    F.linear(inner, w["w2"])

            eager = lambda: encoder(x).last_hidden_state
            comp = lambda: compiled(x).last_hidden_state
            for _ in range(3):  # compiles this shape before timing
                comp()
            hf, tc, ms, floor = bench_bert.median_ms([eager, comp, ours, gemms], "cuda", reps=20,
                                                     warmup=3, inner=10)
            # The same forwards replayed as CUDA graphs: the GPU's time alone, without Python's
            # launch cost, which dominates the small shapes above.
            g_hf, g_tc, g_ours, g_floor = bench_bert.graph_ms([eager, comp, ours, gemms], reps=20)
            reference = eager().float()
            row = {"shape": "B%d*S%d" % (batch, seqlen), "hf_ms": hf, "compile_ms": tc, "ours_ms": ms,
                   "gemm_ms": floor, "vs_compile": tc / ms, "vs_hf": hf / ms, "graph_hf_ms": g_hf,
                   "graph_compile_ms": g_tc, "graph_ours_ms": g_ours, "graph_gemm_ms": g_floor,
                   "maxdiff": (ours().float() - reference).abs().max().item(),
                   "compile_maxdiff": (comp().float() - reference).abs().max().item()}
            rows.append(row)
            log(row)
    return rows


def fmt(x, spec="%.0f"):
    return "n/a" if x is None else spec % x


def ratio(a, b):
    return None if a is None or b is None else a / b


def markdown(device, copy_gbs, tables):
    out = ["# Ours against the anchors (bench_anchors.py)", "",
           "%s, torch %s, %s, copy bandwidth %.0f GB/s." % (
               device, torch.__version__, datetime.date.today().isoformat(), copy_gbs), ""]
    if "prefill" in tables:
        rows = tables["prefill"]
        out += ["## Prefill, TFLOP/s (B * S = 16k tokens)", "",
                "| case | S | causal | ours | cuDNN | FA2 | ours/cuDNN | ours/FA2 | max diff |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                r["case"], r["S"], "yes" if r["causal"] else "no", fmt(r["ours"]), fmt(r["cudnn"]),
                fmt(r["flash"]), fmt(ratio(r["ours"], r["cudnn"]), "%.2f"),
                fmt(ratio(r["ours"], r["flash"]), "%.2f"), fmt(r["maxdiff"], "%.1e")))
        cells = [ratio(r["ours"], r["cudnn"]) for r in rows if r["cudnn"] is not None]
        out += ["", "Cells where cuDNN runs: %d; ours >= cuDNN in %d; ours/cuDNN %.2f..%.2f." % (
            len(cells), sum(c >= 1.0 for c in cells), min(cells), max(cells)) if cells else "", ""]
    if "decode" in tables:
        out += ["## Dense decode (Sq = 1, Hq 32 / Hkv 8, D 128, fp16)", "",
                "| B | context | ours µs | of copy bandwidth | best SDPA µs |",
                "| --- | --- | --- | --- | --- |"]
        for r in tables["decode"]:
            out.append("| %d | %d | %.1f | %.0f%% | %s |" % (
                r["B"], r["context"], r["us"], 100 * r["of_copy"], fmt(r["sdpa_us"], "%.1f")))
        out.append("")
    if "paged" in tables:
        out += ["## Paged decode, fp16 vs FP8 (e4m3) cache (Hq 32, Hkv 8, D 128, block 16)", "",
                "| B | context | fp16 µs | fp16 of copy bw | fp8 µs | fp8 speed-up | max |fp8 - fp16| |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in tables["paged"]:
            out.append("| %d | %d | %.1f | %.0f%% | %s | %s | %s |" % (
                r["B"], r["context"], r["fp16_us"], 100 * r["fp16_of_copy"], fmt(r["fp8_us"], "%.1f"),
                fmt(r["speedup"], "%.2fx"), fmt(r["fp8_maxdiff"], "%.1e")))
        out.append("")
    if "encoder" in tables:
        out += ["## BERT-base encoder, 12 layers, fp16 (ms per forward, 10 queued)", "",
                "| shape | HF eager | torch.compile | ours | our GEMMs alone | ours vs compile | ours vs HF | max diff | compile max diff |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in tables["encoder"]:
            out.append("| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.1e | %.1e |" % (
                r["shape"], r["hf_ms"], r["compile_ms"], r["ours_ms"], r["gemm_ms"], r["vs_compile"],
                r["vs_hf"], r["maxdiff"], r["compile_maxdiff"]))
        out += ["", "The same, each forward replayed as a CUDA graph (GPU time, no launch cost):", "",
                "| shape | HF eager | torch.compile | ours | our GEMMs alone | ours vs compile | ours vs HF |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in tables["encoder"]:
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                r["shape"], fmt(r["graph_hf_ms"], "%.2f"), fmt(r["graph_compile_ms"], "%.2f"),
                fmt(r["graph_ours_ms"], "%.2f"), fmt(r["graph_gemm_ms"], "%.2f"),
                fmt(ratio(r["graph_compile_ms"], r["graph_ours_ms"]), "%.2fx"),
                fmt(ratio(r["graph_hf_ms"], r["graph_ours_ms"]), "%.2fx")))
        out.append("")
    return "\n".join(out)


SECTIONS = ("prefill", "decode", "paged", "encoder")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="markdown tables to write")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help="comma-separated sections of %s" % (SECTIONS,))
    args = parser.parse_args()
    wanted = args.only.split(",")
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        parser.error("--only: unknown sections %s; expected some of %s" % (unknown, SECTIONS))
    bench_flash.load_libraries()
    device = torch.cuda.get_device_name(0)
    copy_gbs = copy_bandwidth("cuda")
    log = lambda row: print(row, flush=True)
    tables = {}
    if "prefill" in wanted:
        tables["prefill"] = prefill_rows(log)
    if "decode" in wanted:
        tables["decode"] = decode_rows(log, copy_gbs)
    if "paged" in wanted:
        tables["paged"] = paged_rows(log, copy_gbs)
    if "encoder" in wanted:
        tables["encoder"] = encoder_rows(log)
    text = markdown(device, copy_gbs, tables)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
