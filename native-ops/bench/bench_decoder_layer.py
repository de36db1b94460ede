"""The whole decode step of a Llama-3.2-1B-shaped model on djl_attn.decoder_layer (issue 22).

Model: transformers' LlamaForCausalLM with Llama-3.2-1B's config (hidden 2048, 16 layers, 32/8
heads of 64, intermediate 8192, vocab 128,256, tied embeddings, llama3 rope scaling), random
weights, bfloat16. The same weights run three ways, in one run, on the same token ids:
  - "transformers eager": model(next_ids, past_key_values=cache), the anchor (DynamicCache);
  - "fused eager": embedding gather, 16 decoder_layer calls over a paged KV cache (block size
    16), decoder_head (final RMSNorm + LM head, float32 logits, as the Java step), argmax — one
    Python call per layer;
  - "fused graph": that step captured once in a CUDA graph and replayed (inputs written in place),
    once per value of DJL_ATTN_GEMM_KERNEL given (--gemm-kernels; default "auto,cublaslt": the
    skinny GEMM kernel where it applies, and cuBLASLt for every GEMM — the before/after of one
    build), timed in alternating rounds.
Every row is one greedy step that ends with the chosen ids on the host (what a server waits for).
Prompt: 1,024 random ids per sequence, prefilled by each path before timing (the fused path
through decoder_layer's chunked-prefill rows: its time-to-first-token is reported too).
It also reports how far the fused path's logits are from transformers' at the first decode step
and how many of the first greedy ids agree (random bfloat16 weights make near-ties common).

Usage: python3 bench_decoder_layer.py --device cuda --out decoder_layer.md [--batches 1,64]
"""

import argparse
import os
import pathlib
import statistics
import sys
import time

import torch

from switches import switches

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
LIB_DIRS = [os.environ.get("DJL_ATTN_LIB_DIR"), NATIVE_OPS / "build"]
BLOCK = 16
PROMPT = 1024


def find_lib(name):
    for d in LIB_DIRS:
        if d and (pathlib.Path(d) / name).is_file():
            return str(pathlib.Path(d) / name)
    sys.exit("%s not found in %s: build native-ops first" % (name, [str(d) for d in LIB_DIRS]))


def llama_1b_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        head_dim=64, intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})


class FusedLlama:
    """The fused path's weights, made once from the transformers model, and its paged caches."""

    def __init__(self, model, batch, max_len, device):
        cfg = model.config
        self.cfg, self.device, self.batch = cfg, device, batch
        self.hq, self.hkv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        f32 = lambda t: t.detach().float().contiguous()
        self.layers = []
        for layer in model.model.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append(dict(
                attn_norm=f32(layer.input_layernorm.weight),
                qkv=torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).contiguous(),
                out=a.o_proj.weight.detach().contiguous(),
                mlp_norm=f32(layer.post_attention_layernorm.weight),
                up=torch.cat([m.gate_proj.weight, m.up_proj.weight]).contiguous(),
                down=m.down_proj.weight.detach().contiguous()))
        self.embed = model.model.embed_tokens.weight.detach()
        self.final_norm = f32(model.model.norm.weight)
        self.eps = cfg.rms_norm_eps
        # The rotary table from transformers' own rotary embedding (llama3 scaling included).
        positions = torch.arange(max_len, device=device)[None]
        probe = torch.zeros(1, dtype=torch.float32, device=device)
        cos, sin = model.model.rotary_emb(probe, positions)
        half = self.d // 2
        self.rope = torch.cat([cos[0, :, :half], sin[0, :, :half]], dim=1).float().contiguous()
        blocks_per_seq = (max_len + BLOCK - 1) // BLOCK
        num_blocks = batch * blocks_per_seq
        shape = (num_blocks, BLOCK, self.hkv, self.d)
        dtype = self.embed.dtype
        self.k_caches = [torch.zeros(shape, dtype=dtype, device=device) for _ in self.layers]
        self.v_caches = [torch.zeros(shape, dtype=dtype, device=device) for _ in self.layers]
        self.block_tables = torch.arange(num_blocks, dtype=torch.int32, device=device).view(
            batch, blocks_per_seq).contiguous()

    def layers_forward(self, hidden, positions, cu_seqlens, context_lens, slots, check,
                       max_seqlen_q, block_tables=None, fresh=False):
        tables = self.block_tables if block_tables is None else block_tables
        for w, kc, vc in zip(self.layers, self.k_caches, self.v_caches):
            torch.ops.djl_attn.decoder_layer(
                hidden, positions, kc, vc, tables, cu_seqlens, context_lens, slots,
                None, None, w["attn_norm"], None, w["qkv"], None, self.rope, w["out"], None, None,
                w["mlp_norm"], None, w["up"], None, w["down"], None, None,
                self.hq, 0, 0, self.eps, self.d ** -0.5, -1, 0.0, False, check, max_seqlen_q,
                fresh)
        return hidden

    def logits(self, hidden):
        h = hidden.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = (h * self.final_norm).to(self.embed.dtype)
        return h @ self.embed.t()

    def head(self, hidden, logits):
        """The Java step's head: decoder_head (final RMSNorm + LM head GEMM, float32 logits)."""
        torch.ops.djl_attn.decoder_head(logits, hidden, None, self.final_norm, None, self.embed,
                                        0, self.eps, 0.0, False)
        return logits

    def prefill(self, ids):
        """Every sequence's prompt as one chunk of its own; returns the last rows' logits."""
        last = []
        n = ids.shape[1]
        positions = torch.arange(n, device=self.device)
        cu = torch.tensor([0, n], dtype=torch.int32, device=self.device)
        ctx = torch.tensor([n], dtype=torch.int32, device=self.device)
        for s in range(ids.shape[0]):
            table = self.block_tables[s:s + 1].contiguous()
            slots = table[0].long()[positions // BLOCK] * BLOCK + positions % BLOCK
            hidden = self.embed[ids[s]].contiguous()
            # A prompt's only chunk: nothing cached before it (flash varlen on CUDA).
            self.layers_forward(hidden, positions, cu, ctx, slots, True, n, table, fresh=True)
            last.append(hidden[-1:])
        return self.logits(torch.cat(last))


def time_steps(step, steps, sync):
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


# Kernel families of a decode step, by the first key found in the (lower-cased) kernel name.
FAMILIES = (("skinny_gemm", "GEMM (skinny)"), ("nvjet", "GEMM (cuBLASLt)"),
            ("gemm", "GEMM (cuBLASLt)"), ("flash_combine", "attention combine"),
            ("reshape_and_cache", "cache write"), ("flash_decode", "attention"),
            ("paged", "attention"), ("flash", "attention"), ("norm_rows", "norms"),
            ("residual", "residual, activation, bias + RoPE"),
            ("activation", "residual, activation, bias + RoPE"),
            ("bias_rope", "residual, activation, bias + RoPE"), ("argmax", "token choice"),
            ("sample", "token choice"), ("logits", "LM head epilogue"))


def family(name):
    low = name.lower()
    return next((f for key, f in FAMILIES if key in low), "other")


def kernel_table(replay, wall_ms, replays=5):
    """Where a captured step's time goes (torch.profiler over `replays` back-to-back replays):
    device time per kernel and per kernel family, the GPU's span per step, the idle time
    between kernels inside it, and what is left of the step's wall time (`wall_ms`, the timed
    step with the ids on the host) outside the GPU's span: the host's share."""
    from torch.profiler import ProfilerActivity, profile

    replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            replay()
        torch.cuda.synchronize()
    totals, families, spans = {}, {}, []
    for evt in prof.events():
        if getattr(evt, "device_type", None) is None or "CUDA" not in str(evt.device_type):
            continue
        us = getattr(evt, "device_time", None) or getattr(evt, "cuda_time", 0.0)
        spans.append((evt.time_range.start, evt.time_range.end))
        fam = family(evt.name)
        calls, total = families.get(fam, (0, 0.0))
        families[fam] = (calls + 1, total + us)
        # A long name keeps its kernel and template arguments (a skinny GEMM's epilogue and norm).
        name = evt.name.split(">(")[0] + ">" if ">(" in evt.name else evt.name
        lt = name.find("<")
        cut = name.rfind("::", 0, lt if lt >= 0 else len(name))
        name = name[cut + 2:] if cut >= 0 else name
        name = name if len(name) < 90 else name[:87] + "..."
        calls, total = totals.get(name, (0, 0.0))
        totals[name] = (calls + 1, total + us)
    spans.sort()
    busy, cur = 0.0, None
    for s, e in spans:
        if cur is None or s > cur[1]:
            busy += 0.0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    busy += 0.0 if cur is None else cur[1] - cur[0]
    span = (spans[-1][1] - spans[0][0]) / replays if spans else 0.0
    busy /= replays
    lines = ["| kernel | calls/step | us/step |", "| --- | ---: | ---: |"]
    for name, (calls, total) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:12]:
        lines.append("| `%s` | %.0f | %.1f |" % (name.replace("|", "/"), calls / replays,
                                                 total / replays))
    lines.append("| all kernels | %.0f | %.1f |" % (sum(c for c, _ in totals.values()) / replays,
                                                     sum(t for _, t in totals.values()) / replays))
    lines += ["", "| family | kernels/step | us/step |", "| --- | ---: | ---: |"]
    for fam, (calls, total) in sorted(families.items(), key=lambda kv: -kv[1][1]):
        lines.append("| %s | %.0f | %.1f |" % (fam, calls / replays, total / replays))
    lines += ["", "Per step: wall %.1f us (ids on the host); the GPU's span %.1f us, of which "
              "kernels run %.1f us and the GPU idles %.1f us between kernels; outside the span "
              "(replay launch, the ids' copy and the host's wait) %.1f us."
              % (wall_ms * 1e3, span, busy, span - busy, wall_ms * 1e3 - span)]
    return "\n".join(lines)


def run(batch, model, device, steps, rows, notes, profiles, gemm_kernels):
    from transformers import DynamicCache

    cfg = model.config
    g = torch.Generator(device="cpu").manual_seed(batch)
    ids = torch.randint(0, cfg.vocab_size, (batch, PROMPT), generator=g).to(device)
    # eager and graph steps all advance the sequences
    max_len = PROMPT + (4 + 4 * len(gemm_kernels)) * (steps + 3) + 32

    # transformers eager: prefill, then decode steps with the ids on the host after each.
    with torch.no_grad():
        cache = DynamicCache(config=cfg)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(ids, past_key_values=cache, use_cache=True)
        first_hf = out.logits[:, -1].argmax(-1)
        first_hf.tolist()
        ttft_hf = (time.perf_counter() - t0) * 1e3
        hf_logits0 = out.logits[:, -1].float()
        state = {"next": first_hf[:, None], "cache": out.past_key_values}
        hf_ids = [first_hf.tolist()]

        def hf_step():
            o = model(state["next"], past_key_values=state["cache"], use_cache=True)
            state["next"] = o.logits[:, -1].argmax(-1, keepdim=True)
            hf_ids.append(state["next"][:, 0].tolist())

        hf_ms = time_steps(hf_step, steps, torch.cuda.synchronize)
    del state, cache, out
    torch.cuda.empty_cache()

    fused = FusedLlama(model, batch, max_len, device)
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits0 = fused.prefill(ids)
        first = logits0.argmax(-1)
        first.tolist()
        ttft = (time.perf_counter() - t0) * 1e3
        err = ((logits0.float() - hf_logits0).abs().max() / hf_logits0.abs().max()).item()

        # Static step inputs, written in place so that the graph replays on them.
        tokens = first.clone()
        positions = torch.full((batch,), PROMPT, dtype=torch.long, device=device)
        cu = torch.arange(batch + 1, dtype=torch.int32, device=device)
        ctx = torch.full((batch,), PROMPT + 1, dtype=torch.int32, device=device)
        slots = torch.empty(batch, dtype=torch.long, device=device)
        seqs = torch.arange(batch, device=device)
        hidden = torch.empty(batch, cfg.hidden_size, dtype=fused.embed.dtype, device=device)
        logits = torch.empty(batch, cfg.vocab_size, dtype=torch.float32, device=device)
        chosen = torch.empty(batch, dtype=torch.long, device=device)

        def device_step():
            p = positions
            slots.copy_(fused.block_tables[seqs, p // BLOCK].long() * BLOCK + p % BLOCK)
            hidden.copy_(fused.embed[tokens])
            fused.layers_forward(hidden, positions, cu, ctx, slots, False, 1)
            chosen.copy_(fused.head(hidden, logits).argmax(-1))

        fused_ids = [first.tolist()]

        def advance():
            fused_ids.append(chosen.tolist())
            tokens.copy_(chosen)
            positions.add_(1)
            ctx.add_(1)

        def eager_step():
            device_step()
            advance()

        eager_ms = time_steps(eager_step, steps, torch.cuda.synchronize)

        # One graph per GEMM kernel choice (DJL_ATTN_GEMM_KERNEL; the first is the default),
        # timed in alternating rounds so that both see the same machine.
        graphs = {}
        for kernel in gemm_kernels:
            switches["DJL_ATTN_GEMM_KERNEL"] = kernel
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                device_step()  # warm-up on the capture stream (cuBLASLt plans, allocator)
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(graph):
                device_step()
            graphs[kernel] = graph
        switches.pop("DJL_ATTN_GEMM_KERNEL")

        def graph_step_of(graph):
            def graph_step():
                graph.replay()
                advance()
            return graph_step

        rounds = {kernel: [] for kernel in gemm_kernels}
        for _ in range(3):
            for kernel in gemm_kernels:
                rounds[kernel].append(time_steps(graph_step_of(graphs[kernel]), steps,
                                                 torch.cuda.synchronize))
        graph_ms = {kernel: statistics.median(r) for kernel, r in rounds.items()}
        for kernel in gemm_kernels:
            profiles.append(("%d, GEMMs %s" % (batch, kernel),
                             kernel_table(graphs[kernel].replay, graph_ms[kernel])))

    pairs = [(a, b) for hs, fs in zip(hf_ids[:8], fused_ids[:8]) for a, b in zip(hs, fs)]
    agree = sum(1 for a, b in pairs if a == b)
    notes.append("batch %d (bfloat16): first-step logits max |fused - transformers| / max "
                 "|transformers| = %.2e; greedy ids equal in %d of %d (step, sequence) pairs of "
                 "the first 8 steps (each path rounds bfloat16 differently; near-ties diverge)"
                 % (batch, err, agree, len(pairs)))
    rows.append((batch, hf_ms, eager_ms, graph_ms, ttft_hf, ttft))
    del fused
    torch.cuda.empty_cache()


def parity_float32(device, notes, steps=16):
    """The same architecture in float32 (4 layers, random weights): the fused path's logits
    against transformers' eager ones, and the greedy ids of `steps` decode steps."""
    from transformers import LlamaForCausalLM

    cfg = llama_1b_config()
    cfg.num_hidden_layers = 4
    torch.manual_seed(1)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).float().eval()
    batch, prompt = 2, 64
    ids = torch.randint(0, cfg.vocab_size, (batch, prompt), device=device)
    with torch.no_grad():
        hf = model.generate(ids, attention_mask=torch.ones_like(ids), pad_token_id=0,
                            max_new_tokens=steps, do_sample=False, min_new_tokens=steps)
        hf_logits = model(ids).logits[:, -1].float()
        fused = FusedLlama(model, batch, prompt + steps + 1, device)
        logits = fused.prefill(ids).float()
        err = ((logits - hf_logits).abs().max() / hf_logits.abs().max()).item()
        out = [logits.argmax(-1)]
        for i in range(steps - 1):
            pos = torch.full((batch,), prompt + i, dtype=torch.long, device=device)
            seqs = torch.arange(batch, device=device)
            slots = fused.block_tables[seqs, pos // BLOCK].long() * BLOCK + pos % BLOCK
            hidden = fused.embed[out[-1]].contiguous()
            cu = torch.arange(batch + 1, dtype=torch.int32, device=device)
            ctx = (pos + 1).to(torch.int32)
            fused.layers_forward(hidden, pos, cu, ctx, slots, True, 1)
            out.append(fused.logits(hidden).float().argmax(-1))
    fused_ids = torch.stack(out, 1)
    equal = torch.equal(fused_ids, hf[:, prompt:])
    notes.append("float32 parity (4 layers of the same shape, batch 2, prompt 64): first-step "
                 "logits max |fused - transformers| / max |transformers| = %.2e; %d greedy ids "
                 "per sequence %s transformers' generate" % (err, steps,
                                                            "equal" if equal else "DIFFER from"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default="decoder_layer.md")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--gemm-kernels", default="auto,cublaslt",
                        help="DJL_ATTN_GEMM_KERNEL values to time the captured step with")
    args = parser.parse_args()
    torch.ops.load_library(find_lib("libdjl_attn.so"))
    torch.ops.load_library(find_lib("libdjl_attn_cuda.so"))
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    with torch.device(args.device):
        model = LlamaForCausalLM(llama_1b_config()).to(torch.bfloat16).eval()
    weights_gb = sum(p.numel() * p.element_size() for p in model.parameters()) / 1e9
    rows, notes, profiles = [], [], []
    kernels = args.gemm_kernels.split(",")
    parity_float32(args.device, notes)
    for batch in [int(b) for b in args.batches.split(",")]:
        run(batch, model, args.device, args.steps, rows, notes, profiles, kernels)
    lines = [
        "Llama-3.2-1B shape, random weights, bfloat16 (%.2f GB of weights), prompt %d, %s, "
        "torch %s, %s" % (weights_gb, PROMPT, torch.cuda.get_device_name(0), torch.__version__,
                          time.strftime("%Y-%m-%d")),
        "",
        "| batch | transformers eager ms/step | fused eager ms/step | "
        + " | ".join("fused graph ms/step, GEMMs %s" % k for k in kernels)
        + " | graph vs transformers | TTFT transformers ms | TTFT fused ms |",
        "| ---: | ---: | ---: | " + " | ".join("---:" for _ in kernels) + " | ---: | ---: | ---: |",
    ]
    for b, hf, eager, graph, t_hf, t in rows:
        lines.append("| %d | %.2f | %.2f | %s | %.1fx | %.1f | %.1f |"
                     % (b, hf, eager, " | ".join("%.3f" % graph[k] for k in kernels),
                        hf / graph[kernels[0]], t_hf, t))
    lines.append("")
    lines.extend("- " + n for n in notes)
    for batch, table in profiles:
        lines += ["", "Kernels of one captured step, batch %s (torch.profiler, 5 replays):" % batch,
                  "", table]
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
