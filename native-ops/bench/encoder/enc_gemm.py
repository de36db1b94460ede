# Encoder-shaped GEMMs: MKL sgemm_, MKL packed B, oneDNN packed (torch), MKL bf16bf16f32, torch bf16 mm.
# Interleaved round by round, best of rounds. GFLOP/s.
import ctypes, os, sys, time, numpy as np, torch
threads = int(sys.argv[1]); torch.set_num_threads(threads)
lib = ctypes.CDLL(os.path.dirname(torch.__file__) + "/lib/libtorch_cpu.so", mode=ctypes.RTLD_GLOBAL)
RowMajor, NoTrans, Trans, Packed, BMatrix = 101, 111, 112, 151, 162
lib.cblas_sgemm_pack_get_size.restype = ctypes.c_size_t
lib.cblas_sgemm_pack_get_size.argtypes = [ctypes.c_int]*4
lib.cblas_sgemm_pack.argtypes = [ctypes.c_int]*6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
lib.cblas_sgemm_compute.argtypes = [ctypes.c_int]*6 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
lib.cblas_gemm_bf16bf16f32.argtypes = [ctypes.c_int]*6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
ci, cf = ctypes.c_int, ctypes.c_float
# MiniLM (C 384, I 1536), BERT-base (768, 3072); M = tokens: 16 (1x16), 1024 (8x128), 4096 (32x128)
shapes = []
for name, c, i in [("MiniLM", 384, 1536), ("BERT-base", 768, 3072)]:
    for m in (16, 1024, 4096):
        shapes += [(f"{name} qkv", m, c, 3 * c), (f"{name} up", m, c, i), (f"{name} down", m, i, c)]
names = ["MKL sgemm_", "MKL packed B", "oneDNN packed", "MKL bf16bf16f32", "torch bf16 mm"]
print(f"threads {threads}")
print("| shape | M x K x N | " + " | ".join(names) + " |")
print("| --- | --- |" + " ---: |" * len(names))
for name, m, k, n in shapes:
    flops = 2.0 * m * k * n
    x = torch.randn(m, k); w = torch.randn(n, k)
    wp = torch.ops.mkldnn._reorder_linear_weight(w, m)
    xn = x.numpy(); wr = w.numpy(); o2 = np.empty((m, n), np.float32)
    xb = x.bfloat16(); wb = w.bfloat16(); ob = torch.empty(m, n, dtype=torch.bfloat16); of = torch.empty(m, n)
    size = lib.cblas_sgemm_pack_get_size(BMatrix, m, n, k)
    buf = np.empty(size // 4 + 16, np.float32)
    lib.cblas_sgemm_pack(RowMajor, BMatrix, Trans, m, n, k, 1.0, wr.ctypes.data, k, buf.ctypes.data)
    def sg():
        lib.sgemm_(b"T", b"N", ctypes.byref(ci(n)), ctypes.byref(ci(m)), ctypes.byref(ci(k)), ctypes.byref(cf(1)),
                   ctypes.c_void_p(wr.ctypes.data), ctypes.byref(ci(k)), ctypes.c_void_p(xn.ctypes.data), ctypes.byref(ci(k)),
                   ctypes.byref(cf(0)), ctypes.c_void_p(o2.ctypes.data), ctypes.byref(ci(n)))
    fns = [sg,
           lambda: lib.cblas_sgemm_compute(RowMajor, NoTrans, Packed, m, n, k, xn.ctypes.data, k, buf.ctypes.data, n, 0.0, o2.ctypes.data, n),
           lambda: torch.ops.mkldnn._linear_pointwise(x, wp, None, "none", [], ""),
           lambda: lib.cblas_gemm_bf16bf16f32(RowMajor, NoTrans, Trans, m, n, k, 1.0, xb.data_ptr(), k, wb.data_ptr(), k, 0.0, of.data_ptr(), n),
           lambda: torch.mm(xb, wb.t(), out=ob)]
    best = [1e9] * len(fns)
    reps = max(3, int(1e8 / flops))
    for f in fns: f()
    for rnd in range(8):
        for j, f in enumerate(fns):
            s = time.perf_counter()
            for _ in range(reps): f()
            best[j] = min(best[j], (time.perf_counter() - s) / reps)
    print(f"| {name} | {m} x {k} x {n} | " + " | ".join(f"{flops / b / 1e9:.1f}" for b in best) + " |", flush=True)
