"""One BERT encoder layer: the fused djl_attn operator sequence against the eager op sequence of
stock DJL, same weights and inputs, in one run.

    python3 bench/bench_bert.py --device cuda --out bert.md            # fp16, 32x128 and 8x512
    python3 bench/bench_bert.py --device cpu --out bert-cpu.md         # float32

Fused (4 GEMMs + 4 fused kernels, no transpose), as FusedTransformerEncoderBlock issues it: QKV
GEMM with its bias (one [3*hidden, hidden] weight) -> bert_attention (head split, padding mask,
attention, head merge) ->
output GEMM -> add_bias_residual_layernorm -> FFN GEMM 1 -> add_bias_gelu -> FFN GEMM 2 ->
add_bias_residual_layernorm.

Eager (what stock DJL issues): three Q/K/V linear layers, reshape and transpose to heads, matmul,
scale, mask add (-100000 offset), softmax, matmul, transpose back, output linear, residual add,
norm, linear, GELU (erf), linear, residual add, norm. "DJL layer" is stock DJL's
TransformerEncoderBlock exactly: BatchNorm over the hidden axis (DJL's PyTorch engine swaps the
axis, runs batch_norm and swaps back) and the second residual adding the layer's input; the fused
side runs add_bias_residual_affine there, as FusedBertBlock does. "layer" is the same layer with
LayerNorm and the usual second residual (standard BERT), against add_bias_residual_layernorm.

Times are medians after warm-up (CUDA events on the GPU, perf_counter on the CPU), eager and
fused runs alternating. The fused output is checked against the eager one before timing.
"""

import argparse
import datetime
import math
import os
import pathlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
HIDDEN, HEADS, INTERMEDIATE, EPS = 768, 12, 3072, 1e-12
# Layer sizes by model (--model): BERT-base, and all-MiniLM-L6-v2 (the model zoo's default
# embedding model: hidden 384, 12 heads of 32, FFN 1536).
MODELS = {"bert-base": (768, 12, 3072), "minilm": (384, 12, 1536)}
BN_EPS = 1e-5  # DJL BatchNorm's default


def load_libraries(device):
    """Loads libdjl_attn.so (and libdjl_attn_cuda.so for --device cuda)."""
    for d in (os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build"):
        if d and (pathlib.Path(d) / "libdjl_attn.so").is_file():
            torch.ops.load_library(str(pathlib.Path(d) / "libdjl_attn.so"))
            if device == "cuda":
                torch.ops.load_library(str(pathlib.Path(d) / "libdjl_attn_cuda.so"))
            return
    sys.exit("bench_bert: libdjl_attn.so not found: set DJL_ATTN_LIB_DIR or build native-ops")


def make_weights(dtype, device):
    """Stock-layout weights ([out, in], as DJL's Linear holds them) and their fused forms."""
    g = torch.Generator().manual_seed(0)

    def rand(*shape, std):
        return (torch.randn(*shape, generator=g) * std).to(dtype=dtype, device=device)

    w = {}
    for name in ("q", "k", "v", "o"):
        w["w" + name] = rand(HIDDEN, HIDDEN, std=1 / math.sqrt(HIDDEN))
        w["b" + name] = rand(HIDDEN, std=0.1)
    w["w1"], w["b1"] = rand(INTERMEDIATE, HIDDEN, std=1 / math.sqrt(HIDDEN)), rand(INTERMEDIATE, std=0.1)
    w["w2"], w["b2"] = rand(HIDDEN, INTERMEDIATE, std=1 / math.sqrt(INTERMEDIATE)), rand(HIDDEN, std=0.1)
    for n in ("1", "2"):
        w["gamma" + n] = (1 + rand(HIDDEN, std=0.1)).contiguous()
        w["beta" + n] = rand(HIDDEN, std=0.1)
    # Fused forms, made once at load time by the Java block: one QKV weight and bias.
    # BatchNorm over the hidden axis (stock DJL's norm): running statistics away from 0 and 1, and
    # the per-channel affine FusedBertBlock folds them into at load time.
    for n in ("1", "2"):
        w["mean" + n] = rand(HIDDEN, std=0.2)
        w["var" + n] = (0.5 + torch.rand(HIDDEN, generator=g)).to(dtype=dtype, device=device)
        scale = w["gamma" + n].float() / torch.sqrt(w["var" + n].float() + BN_EPS)
        w["scale" + n] = scale.to(dtype)
        w["shift" + n] = (w["beta" + n].float() - w["mean" + n].float() * scale).to(dtype)
    w["wqkv"] = torch.cat([w["wq"], w["wk"], w["wv"]]).contiguous()
    w["bqkv"] = torch.cat([w["bq"], w["bk"], w["bv"]]).contiguous()
    return w


def eager_layer(x, mask_offset, w):
    """Stock DJL's op sequence. x [B, S, C]; mask_offset [B, 1, 1, S] (0 or -100000)."""
    batch, seqlen, _ = x.shape
    dim = HIDDEN // HEADS

    def heads(t):
        return t.reshape(batch, seqlen, HEADS, dim).transpose(1, 2)

    q = heads(F.linear(x, w["wq"], w["bq"]))
    k = heads(F.linear(x, w["wk"], w["bk"]))
    v = heads(F.linear(x, w["wv"], w["bv"]))
    scores = torch.matmul(q, k.transpose(-1, -2))
    scores = scores * (1.0 / math.sqrt(dim))
    scores = scores + mask_offset
    probs = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(probs, v).transpose(1, 2).reshape(batch, seqlen, HIDDEN)
    h = F.linear(ctx, w["wo"], w["bo"])
    h = h + x
    h = F.layer_norm(h, (HIDDEN,), w["gamma1"], w["beta1"], EPS)
    f = F.linear(h, w["w1"], w["b1"])
    f = F.gelu(f)
    f = F.linear(f, w["w2"], w["b2"])
    y = f + h
    return F.layer_norm(y, (HIDDEN,), w["gamma2"], w["beta2"], EPS)


def fused_projected_attention(x, kv_lens, w):
    """The fused layers' first half: the input as rows [B*S, C] and the attention output
    projected by the output weight, its bias not yet added (the fused norm adds it)."""
    x2 = x.reshape(-1, HIDDEN)
    ctx = fused_attention(x, kv_lens, w)
    return x2, F.linear(ctx.view(-1, HIDDEN), w["wo"])


def fused_layer(x, kv_lens, w):
    """4 GEMMs and 4 djl_attn kernels, as FusedTransformerEncoderBlock issues them: the QKV
    projection adds its bias in the GEMM (Linear.linear, a cuBLASLt bias epilogue on the GPU),
    the other biases go into the fused kernels after it."""
    ops = torch.ops.djl_attn
    x2, o = fused_projected_attention(x, kv_lens, w)
    h = ops.add_bias_residual_layernorm(o, w["bo"], x2, w["gamma1"], w["beta1"], EPS)
    f = ops.add_bias_gelu(F.linear(h, w["w1"]), w["b1"], False)
    f = F.linear(f, w["w2"])
    y = ops.add_bias_residual_layernorm(f, w["b2"], h, w["gamma2"], w["beta2"], EPS)
    return y.view(x.shape)


def djl_batch_norm(t, w, n):
    """DJL's BatchNorm over axis 2 at inference, as its PyTorch engine runs it: swap the axis to
    position 1, batch_norm, swap back."""
    return F.batch_norm(t.transpose(1, 2), w["mean" + n], w["var" + n], w["gamma" + n],
                        w["beta" + n], False, 0.0, BN_EPS).transpose(1, 2)


def eager_djl_layer(x, mask_offset, w):
    """Stock DJL's TransformerEncoderBlock (what BertBlock stacks): post-norm with BatchNorm
    over the hidden axis, and the second residual adds the layer's input, not the first norm's
    output."""
    ctx = eager_attention(x, mask_offset, w)
    h = djl_batch_norm(F.linear(ctx, w["wo"], w["bo"]) + x, w, "1")
    f = F.linear(F.gelu(F.linear(h, w["w1"], w["b1"])), w["w2"], w["b2"])
    return djl_batch_norm(f + x, w, "2")


def fused_djl_layer(x, kv_lens, w):
    """FusedTransformerEncoderBlock's sequence for the same layer: the BatchNorms become the
    per-channel affine fused with bias and residual."""
    ops = torch.ops.djl_attn
    x2, o = fused_projected_attention(x, kv_lens, w)
    h = ops.add_bias_residual_affine(o, w["bo"], x2, w["scale1"], w["shift1"])
    f = F.linear(ops.add_bias_gelu(F.linear(h, w["w1"]), w["b1"], False), w["w2"])
    y = ops.add_bias_residual_affine(f, w["b2"], x2, w["scale2"], w["shift2"])
    return y.view(x.shape)


def eager_attention(x, mask_offset, w):
    """The attention half of the eager layer, up to the merged heads."""
    batch, seqlen, _ = x.shape
    dim = HIDDEN // HEADS
    q, k, v = (F.linear(x, w["w" + n], w["b" + n]).reshape(batch, seqlen, HEADS, dim).transpose(1, 2)
               for n in "qkv")
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(dim)) + mask_offset
    return torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(batch, seqlen, HIDDEN)


def fused_attention(x, kv_lens, w):
    batch, seqlen, _ = x.shape
    qkv = F.linear(x.reshape(batch * seqlen, HIDDEN), w["wqkv"], w["bqkv"]).view(batch, seqlen, 3 * HIDDEN)
    return torch.ops.djl_attn.bert_attention(qkv, None, kv_lens, HEADS, 1.0 / math.sqrt(HIDDEN // HEADS))


def median_ms(fns, device, reps, warmup, inner=1):
    """Median milliseconds per call of each fn, the fns run in alternation so that a shared
    machine's load changes hit all of them alike. On the GPU each sample times `inner` calls
    queued back to back between two events (as the layers of an encoder run: the host issues
    the next layer while the GPU runs this one), so with inner > 1 the time is the GPU's and not
    the host's launch latency; inner = 1 waits for each call alone."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    if device == "cuda":
        torch.cuda.synchronize()
    for _ in range(reps):
        for fn, out in zip(fns, times):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(inner):
                    fn()
                end.record()
                end.synchronize()
                out.append(start.elapsed_time(end) / inner)
            else:
                t0 = time.perf_counter()
                fn()
                out.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def graph_ms(fns, reps, inner=10):
    """Median milliseconds per replay of each fn captured in a CUDA graph: the GPU's work with
    no host launch cost at all (what a serving stack that captures its forward pass sees).
    None for a fn whose capture fails."""
    graphs = []
    for fn in fns:
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # capture needs warmed-up allocator pools off-stream
                for _ in range(3):
                    fn()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            graphs.append(graph)
        except Exception as e:  # reported, and the cell says n/a
            print("graph capture failed: %s" % e, flush=True)
            graphs.append(None)
    live = [g for g in graphs if g is not None]
    times = median_ms([g.replay for g in live], "cuda", reps, 3, inner) if live else []
    it = iter(times)
    return [next(it) if g is not None else None for g in graphs]


def device_name(device):
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    name = "cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # The CPU may be shared: the load average says how much to trust the numbers.
    return "%s, %d threads, load average %.1f" % (name, torch.get_num_threads(), os.getloadavg()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", required=True, help="markdown table to write")
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], default=None,
                        help="default: float16 on cuda, float32 on cpu")
    parser.add_argument("--configs", default=None,
                        help="comma-separated BATCHxSEQ (default 32x128,8x512; cpu 8x128,2x512)")
    parser.add_argument("--reps", type=int, default=None, help="timed runs per measurement")
    parser.add_argument("--model", choices=sorted(MODELS), default="bert-base",
                        help="layer sizes (default bert-base; minilm = all-MiniLM-L6-v2)")
    args = parser.parse_args()
    global HIDDEN, HEADS, INTERMEDIATE
    HIDDEN, HEADS, INTERMEDIATE = MODELS[args.model]
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_bert: --device cuda but torch sees no GPU")
    load_libraries(args.device)
    dtype = getattr(torch, args.dtype or ("float16" if args.device == "cuda" else "float32"))
    configs = args.configs or ("32x128,8x512" if args.device == "cuda" else "8x128,2x512")
    configs = [tuple(int(v) for v in c.split("x")) for c in configs.split(",")]
    reps = args.reps or (50 if args.device == "cuda" else 5)
    warmup = 5 if args.device == "cuda" else 2
    dev = device_name(args.device)
    print("bench_bert: %s, %s, torch %s" % (dev, dtype, torch.__version__), flush=True)

    w = make_weights(dtype, args.device)
    rows = []
    torch.manual_seed(1)
    with torch.inference_mode():
        for batch, seqlen in configs:
            x = torch.randn(batch, seqlen, HIDDEN, dtype=dtype, device=args.device)
            kv_lens = torch.full((batch,), seqlen, dtype=torch.int32, device=args.device)
            mask_offset = torch.zeros(batch, 1, 1, seqlen, dtype=dtype, device=args.device)
            eager_out = eager_layer(x, mask_offset, w).float()
            diff = max((fused_layer(x, lens, w).float() - eager_out).abs().max().item()
                       for lens in (None, kv_lens))
            eager_out = eager_djl_layer(x, mask_offset, w).float()
            diff = max(diff, (fused_djl_layer(x, None, w).float() - eager_out).abs().max().item())
            # LayerNorm outputs are O(1): the two sequences round differently, nothing more.
            limit = {torch.float32: 1e-3, torch.float16: 1e-1, torch.bfloat16: 2.5e-1}[dtype]
            if not diff <= limit:
                sys.exit("bench_bert: fused and eager layers differ by %g at %dx%d" % (diff, batch, seqlen))
            # FusedBertBlock passes no kv_lens when every row is full (RaggedBatch.allFull), so
            # the kernels need no lengths and the binding copies nothing to the host; the row
            # "layer, kv_lens" passes them anyway and shows what validating them costs (one
            # device-to-host copy and wait per bert_attention call).
            measures = [
                ("DJL layer", lambda: eager_djl_layer(x, mask_offset, w),
                 lambda: fused_djl_layer(x, None, w)),
                ("layer", lambda: eager_layer(x, mask_offset, w), lambda: fused_layer(x, None, w)),
                ("layer, kv_lens", lambda: eager_layer(x, mask_offset, w),
                 lambda: fused_layer(x, kv_lens, w)),
                ("attention", lambda: eager_attention(x, mask_offset, w),
                 lambda: fused_attention(x, None, w)),
            ]
            for what, eager_fn, fused_fn in measures:
                eager_ms, fused_ms = median_ms([eager_fn, fused_fn], args.device, reps, warmup,
                                               inner=10 if args.device == "cuda" else 1)
                sync = ["", ""]
                graph = ["", ""]
                if args.device == "cuda":
                    sync = ["%.3f" % t for t in median_ms([eager_fn, fused_fn], args.device, reps, 1)]
                # Validating kv_lens waits on the host, which a graph cannot capture.
                if args.device == "cuda" and what != "layer, kv_lens":
                    graph = ["n/a" if t is None else "%.3f" % t for t in graph_ms([eager_fn, fused_fn], reps)]
                    if "n/a" not in graph:
                        graph.append("%.2fx" % (float(graph[0]) / float(graph[1])))
                tokens = batch * seqlen
                rows.append((what, batch, seqlen, eager_ms, fused_ms, eager_ms / fused_ms,
                             tokens / fused_ms * 1e3, diff, sync, graph))
                print("%-15s B=%-3d S=%-4d eager %8.3f ms  fused %8.3f ms  x%.2f  (one call alone: %s / %s ms; "
                      "CUDA graph: %s)" % (what, batch, seqlen, eager_ms, fused_ms, eager_ms / fused_ms,
                                           sync[0], sync[1], " / ".join(graph)), flush=True)

    lines = [
        "### %s layer: fused djl_attn sequence vs stock DJL's eager ops"
        % {"bert-base": "BERT-base", "minilm": "all-MiniLM-L6-v2"}[args.model],
        "",
        "%s, %s, torch %s, %s. hidden %d, %d heads, intermediate %d; no padding: the fused sequence passes no kv_lens, as "
        "FusedBertBlock does for full rows (\"layer, kv_lens\": lengths passed and validated). "
        "Median of %d samples after warm-up; on the GPU a sample is 10 calls queued back to back "
        "(per-call time, as consecutive encoder layers run: the host issues the next while the GPU "
        "runs this one, so a sequence of many small ops can still be host-bound); one call alone: "
        "each call waited for (launch latency included); CUDA graph: the sequence captured once "
        "and replayed 10 times per sample (GPU work only). `python3 bench/bench_bert.py --device %s --dtype %s "
        "--model %s --configs %s --reps %d`" % (
            dev, str(dtype).replace("torch.", ""), torch.__version__,
            datetime.date.today().isoformat(), HIDDEN, HEADS, INTERMEDIATE, reps, args.device,
            str(dtype).replace("torch.", ""), args.model, ",".join("%dx%d" % c for c in configs),
            reps),
        "",
        "| part | batch | S | eager ms | fused ms | speed-up | fused tokens/s | one call alone: eager / fused ms | CUDA graph: eager / fused ms, speed-up | max abs diff (layer) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for what, batch, seqlen, eager_ms, fused_ms, ratio, tps, diff, sync, graph in rows:
        lines.append("| %s | %d | %d | %.3f | %.3f | %.2fx | %.0f | %s / %s | %s | %.1e |" %
                     (what, batch, seqlen, eager_ms, fused_ms, ratio, tps, sync[0] or "-",
                      sync[1] or "-", (" / ".join(graph[:2]) + (", " + graph[2] if len(graph) > 2 else "")) if graph[0] else "-", diff))
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
