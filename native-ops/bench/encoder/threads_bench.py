# encoder_layer (MKL-packed float32 weights) with the kernels' loops on libtorch's OpenMP team
# (DJL_ATTN_CPU_THREADS=openmp) or on the library's own pool (own, the default), switched in-process and
# interleaved round by round, at 1 and 2 threads; median ms per forward of L layers.
# Usage: OMP_WAIT_POLICY=... python threads_bench.py [rounds]  (the wait policy is per process)
import ctypes, math, os, statistics, sys, time, torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
import conftest  # loads the library
lib = ctypes.CDLL(str(conftest._find("libdjl_attn.so")))
lib.djl_attn_set_option.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
lib.djl_attn_set_num_threads.argtypes = [ctypes.c_int32]
ops = torch.ops.djl_attn
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
def model(C, H, I, L):
    r = lambda *s: torch.randn(*s) / math.sqrt(s[-1])
    out = []
    for _ in range(L):
        w = dict(qkv_b=torch.randn(3*C)*.1, out_b=torch.randn(C)*.1, g1=torch.ones(C), b1=torch.zeros(C),
                 up_b=torch.randn(I)*.1, down_b=torch.randn(C)*.1, g2=torch.ones(C), b2=torch.zeros(C))
        for k, s in (("qkv", (3*C, C)), ("out", (C, C)), ("up", (I, C)), ("down", (C, I))):
            w[k] = ops.gemm_pack_weight(r(*s), 0)
        out.append(w)
    return C, H, out
def forward(m, x, cu, s):
    C, H, layers = m
    for w in layers:
        ops.encoder_layer(x, cu, s, w["qkv"], w["qkv_b"], w["out"], w["out_b"], w["g1"], w["b1"],
                          w["up"], w["up_b"], w["down"], w["down_b"], w["g2"], w["b2"], H, 1e-12,
                          1 / math.sqrt(C // H), False)
minilm, bert = model(384, 12, 1536, 6), model(768, 12, 3072, 12)
print(f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, {rounds} rounds, load {os.getloadavg()[0]:.2f}")
print("| model | cell | threads | own pool ms | OpenMP team ms | own / team |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for name, m, b, s in [("MiniLM-L6", minilm, 1, 16), ("MiniLM-L6", minilm, 8, 128), ("MiniLM-L6", minilm, 32, 128),
                      ("MiniLM-L6", minilm, 8, 512), ("BERT-base", bert, 8, 128)]:
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32)
    x0 = torch.randn(b * s, m[0])
    reps = max(1, 2048 // (b * s))
    for threads in (1, 2):
        torch.set_num_threads(threads)
        times = {"own": [], "openmp": []}
        for rnd in range(rounds + 1):
            for mode in ("own", "openmp"):
                lib.djl_attn_set_option(b"DJL_ATTN_CPU_THREADS", mode.encode())
                # Both follow torch's setting (0: no override).
                lib.djl_attn_set_num_threads(0)
                x = x0.clone()
                t0 = time.perf_counter()
                for _ in range(reps): forward(m, x, cu, s)
                if rnd > 0: times[mode].append((time.perf_counter() - t0) / reps * 1e3)
        o, a = statistics.median(times["own"]), statistics.median(times["openmp"])
        print(f"| {name} | {b} x {s} | {threads} | {o:.2f} | {a:.2f} | {o / a:.2f}x |", flush=True)
lib.djl_attn_set_option(b"DJL_ATTN_CPU_THREADS", b"")
lib.djl_attn_set_num_threads(0)
print(f"load at end {os.getloadavg()[0]:.2f}")
