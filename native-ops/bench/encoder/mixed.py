# One batch of the mixed set's lengths (32 sentences, 8-262 tokens), one thread: the op-by-op path
# against encoder_layer with plain and with packed weights (layer_bench.py's functions); seconds.
import sys, math, time, torch
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "..", "tests"))
import conftest
src = open(__file__.replace("mixed.py", "layer_bench.py")).read().split("print(f\"threads")[0].replace("threads = int(sys.argv[1]); torch.set_num_threads(threads)", "torch.set_num_threads(1)")
exec(src)
g = torch.Generator().manual_seed(1)
lens = [int(x) for x in torch.randint(8, 262, (32,), generator=g)]
cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32); m = max(lens); x0 = torch.randn(int(cu[-1]), C)
fns = {"opbyop": lambda: opbyop(x0, cu, m), "plain": lambda: fused(x0.clone(), cu, m, None), "packed": lambda: fused(x0.clone(), cu, m, False)}
best = {k: 1e9 for k in fns}
for r in range(4):
    for k, f in fns.items():
        t = time.perf_counter(); f(); best[k] = min(best[k], time.perf_counter() - t)
print(int(cu[-1]), {k: round(v * 1e3, 1) for k, v in best.items()})
