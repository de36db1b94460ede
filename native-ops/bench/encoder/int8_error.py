# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""Where the int8 mode's error comes from (docs/design/fused-encoder-layer.md section 10), on
all-MiniLM-L6-v2's real weights and 8 real sentences:
  1. encoder_layer with each GEMM alone in int8 (the others float32): 1 - cos to float32;
  2. a float64 emulation of the whole model with per-row int8 GEMMs, plain and with data-free
     SmoothQuant-style smoothing of the LayerNorm-fed GEMMs (activation proxy |gamma| + |beta|).
    python int8_error.py LIBDJL_ATTN_SO MINILM_ONNX TOKENIZER_JSON
Needs torch, onnx and tokenizers (the .venv-bench of native-ops/scripts/bench-env.sh)."""
import sys, math, torch, onnx, numpy as np
from onnx import numpy_helper
torch.ops.load_library(sys.argv[1])
from tokenizers import Tokenizer
ops = torch.ops.djl_attn
m = onnx.load(sys.argv[2])
init = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in m.graph.initializer}
mm = {}
for n in m.graph.node:
    if n.op_type == "MatMul":
        for i in n.input:
            if i in init: mm[n.name[1:-len("/MatMul")].replace("/", ".") + ".weight"] = init[i].t().contiguous()
W = {**init, **mm}
C, H = 384, 12
def layer(i):
    p = f"encoder.layer.{i}."
    g = lambda k: W[p + k]
    return dict(qkv=torch.cat([g("attention.self.query.weight"), g("attention.self.key.weight"), g("attention.self.value.weight")]),
                qkv_b=torch.cat([g("attention.self.query.bias"), g("attention.self.key.bias"), g("attention.self.value.bias")]),
                out=g("attention.output.dense.weight"), out_b=g("attention.output.dense.bias"),
                g1=g("attention.output.LayerNorm.weight"), b1=g("attention.output.LayerNorm.bias"),
                up=g("intermediate.dense.weight"), up_b=g("intermediate.dense.bias"),
                down=g("output.dense.weight"), down_b=g("output.dense.bias"),
                g2=g("output.LayerNorm.weight"), b2=g("output.LayerNorm.bias"))
layers = [layer(i) for i in range(6)]
tok = Tokenizer.from_file(sys.argv[3])
tok.no_padding(); tok.no_truncation()
sents = ["Hello", "The cat sat on the mat.", "How do I reset my password?", "Attention lets every token look at every other token.",
         "Deep learning frameworks schedule kernels on graphics processing units, and Java programs run on the virtual machine.",
         "A", "Paris is the capital of France.", "what is the weather like tomorrow in new york city"]
def embed(ids, packs):
    t = len(ids)
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.token_type_embeddings.weight"][0] + W["embeddings.position_embeddings.weight"][:t]
    x = torch.nn.functional.layer_norm(x, (C,), W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], 1e-12).contiguous()
    cu = torch.tensor([0, t], dtype=torch.int32)
    for i, w in enumerate(layers):
        g = lambda k: packs[i][k]
        ops.encoder_layer(x, cu, t, g("qkv"), w["qkv_b"], g("out"), w["out_b"], w["g1"], w["b1"], g("up"), w["up_b"], g("down"), w["down_b"], w["g2"], w["b2"], H, 1e-12, 1/math.sqrt(32), False)
    e = x.double().mean(0)
    return e / e.norm()
def packs(modes):
    return [{k: ops.gemm_pack_weight(w[k], modes.get(k, 0)) for k in ("qkv", "out", "up", "down")} for w in layers]
variants = {"f32": packs({}), "int8 all": packs(dict(qkv=2, out=2, up=2, down=2)),
            "int8 qkv only": packs(dict(qkv=2)), "int8 out only": packs(dict(out=2)), "int8 up only": packs(dict(up=2)), "int8 down only": packs(dict(down=2))}
for s in sents:
    ids = torch.tensor(tok.encode(s).ids)
    ref = embed(ids, variants["f32"])
    print(f"{len(ids):3d} tok", " ".join(f"{k}: {1 - float(embed(ids, v) @ ref):.2e}" for k, v in variants.items() if k != "f32"))
# activation stats: max abs per row vs median abs of layer 0 qkv input

# ---- 2. float64 emulation, plain and smoothed ----
def q8(m):
    amax = m.abs().amax(dim=1, keepdim=True); sc = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
    return torch.round(m / sc).clamp(-127, 127) * sc
def lin(x, w, b, mode, smooth=None):
    if mode == "f": return x @ w.T + b
    if smooth is None: return q8(x) @ q8(w).T + b
    return q8(x / smooth) @ q8(w * smooth).T + b
def model(ids, mode, alpha=None):
    t = len(ids); C = 384; d = 32
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.token_type_embeddings.weight"][0] + W["embeddings.position_embeddings.weight"][:t]
    prev_g, prev_b = W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"]
    x = torch.nn.functional.layer_norm(x, (C,), prev_g, prev_b, 1e-12).double()
    for w in layers:
        w = {k: v.double() for k, v in w.items()}
        def sm(g, b, wt):
            if alpha is None: return None
            a = g.double().abs() + b.double().abs(); ww = wt.abs().amax(0)
            return (a ** alpha / ww ** (1 - alpha)).clamp(min=1e-5)
        qkv = lin(x, w["qkv"], w["qkv_b"], mode, sm(prev_g, prev_b, w["qkv"])).view(t, 3, 12, d)
        q, k, v = (qkv[:, i].transpose(0, 1) for i in range(3))
        a = (torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), -1) @ v).transpose(0, 1).reshape(t, C)
        h = torch.nn.functional.layer_norm(lin(a, w["out"], w["out_b"], mode) + x, (C,), w["g1"], w["b1"], 1e-12)
        u = torch.nn.functional.gelu(lin(h, w["up"], w["up_b"], mode, sm(w["g1"], w["b1"], w["up"])))
        x = torch.nn.functional.layer_norm(lin(u, w["down"], w["down_b"], mode) + h, (C,), w["g2"], w["b2"], 1e-12)
        prev_g, prev_b = w["g2"], w["b2"]
    e = x.mean(0); return e / e.norm()
for s in sents:
    ids = torch.tensor(tok.encode(s).ids)
    ref = model(ids, "f")
    out = [f"{len(ids):3d} tok  plain {1 - float(model(ids, 'q') @ ref):.2e}"]
    for al in (0.5, 0.75):
        out.append(f"smooth a={al} {1 - float(model(ids, 'q', al) @ ref):.2e}")
    print("  ".join(out), flush=True)
