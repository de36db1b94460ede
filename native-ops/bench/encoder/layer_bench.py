# encoder_layer x 6 (MiniLM-L6 shapes) with plain float32 weights (MKL sgemm_), MKL-packed weights,
# bfloat16-mode and int8-mode weights, and the op-by-op path (torch.mm + djl_attn ops), interleaved; ms per forward.
import sys, time, math, torch
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "..", "tests"))
import conftest  # loads the library
threads = int(sys.argv[1]); torch.set_num_threads(threads)
ops = torch.ops.djl_attn
C, H, I, L = 384, 12, 1536, 6
def layer_weights():
    r = lambda *s: torch.randn(*s) / math.sqrt(s[-1])
    return dict(qkv=r(3*C, C), qkv_b=torch.randn(3*C)*.1, out=r(C, C), out_b=torch.randn(C)*.1,
                g1=torch.ones(C), b1=torch.zeros(C), up=r(I, C), up_b=torch.randn(I)*.1,
                down=r(C, I), down_b=torch.randn(C)*.1, g2=torch.ones(C), b2=torch.zeros(C))
layers = [layer_weights() for _ in range(L)]
packs = {mode: [{k: ops.gemm_pack_weight(w[k], mode) for k in ("qkv", "out", "up", "down")} for w in layers] for mode in (0, 1, 2)}
def fused(x, cu, m, form):
    for i, w in enumerate(layers):
        p = packs[form] if form is not None else None
        g = (lambda k: p[i][k]) if p is not None else (lambda k: w[k])
        ops.encoder_layer(x, cu, m, g("qkv"), w["qkv_b"], g("out"), w["out_b"], w["g1"], w["b1"],
                          g("up"), w["up_b"], g("down"), w["down_b"], w["g2"], w["b2"], H, 1e-12, 1/math.sqrt(32), False)
def opbyop(x, cu, m):
    t = x.shape[0]
    for w in layers:
        qkv = torch.mm(x, w["qkv"].t()).view(t, 3, H, 32)
        a, _ = ops.flash_attention_varlen(qkv[:, 0] + w["qkv_b"][:C].view(H, 32), qkv[:, 1] + w["qkv_b"][C:2*C].view(H, 32), qkv[:, 2] + w["qkv_b"][2*C:].view(H, 32), cu, cu, m, m, 1/math.sqrt(32), False)
        h = ops.add_bias_residual_layernorm(torch.mm(a.reshape(t, C), w["out"].t()), w["out_b"], x, w["g1"], w["b1"], 1e-12)
        u = ops.add_bias_gelu(torch.mm(h, w["up"].t()), w["up_b"], False)
        x = ops.add_bias_residual_layernorm(torch.mm(u, w["down"].t()), w["down_b"], h, w["g2"], w["b2"], 1e-12)
    return x
print(f"threads {threads}")
print("| cell | op by op | fused, plain f32 (sgemm_) | fused, MKL packed | fused, bf16 mode | fused, int8 mode |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for b, s in [(1, 16), (8, 128), (32, 128), (8, 512)]:
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32); x0 = torch.randn(b * s, C)
    fns = [lambda: opbyop(x0, cu, s), lambda: fused(x0.clone(), cu, s, None), lambda: fused(x0.clone(), cu, s, 0), lambda: fused(x0.clone(), cu, s, 1), lambda: fused(x0.clone(), cu, s, 2)]
    best = [1e9] * 5
    reps = max(1, int(2000 / (b * s)))
    for f in fns: f()
    for rnd in range(6):
        for j, f in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(reps): f()
            best[j] = min(best[j], (time.perf_counter() - t0) / reps)
    print(f"| {b}x{s} | " + " | ".join(f"{v*1e3:.2f}" for v in best) + " |", flush=True)
