# MKL's packed-B GEMM (cblas_sgemm_compute of DJL's libtorch 2.7.1, loaded with ctypes) at the
# encoder's shapes, 1 and 2 threads interleaved in one process (omp_set_num_threads of libtorch's
# libgomp), median of 9 rounds: GFLOP/s and % of the FMA peak (argument; peak.c of gemm-layer.md).
# Usage: OMP_WAIT_POLICY=PASSIVE|(unset) python mkl_threads.py [peak GFLOP/s]
import ctypes, os, sys, time
lib = ctypes.CDLL(os.path.expanduser("~/.djl.ai/pytorch/2.7.1-20250812-cpu-linux-x86_64/libtorch_cpu.so"), mode=ctypes.RTLD_GLOBAL)
import numpy as np
RowMajor, NoTrans, Trans, Packed, BMatrix = 101, 111, 112, 151, 162
lib.cblas_sgemm_pack_get_size.restype = ctypes.c_size_t
lib.cblas_sgemm_pack_get_size.argtypes = [ctypes.c_int]*4
lib.cblas_sgemm_pack.argtypes = [ctypes.c_int]*6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
lib.cblas_sgemm_compute.argtypes = [ctypes.c_int]*6 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
import glob
gomp = ctypes.CDLL(glob.glob(os.path.expanduser("~/.djl.ai/pytorch/2.7.1-20250812-cpu-linux-x86_64/libgomp*"))[0])
setth = gomp.omp_set_num_threads
peak = float(sys.argv[1]) if len(sys.argv) > 1 else 176.7
shapes = []
for m in (16, 1024, 4096):
    for nm, k, n in (("qkv", 384, 1152), ("out", 384, 384), ("up", 384, 1536), ("down", 1536, 384)):
        shapes.append((f"MiniLM {nm}", m, k, n))
for nm, k, n in (("qkv", 768, 2304), ("out", 768, 768), ("up", 768, 3072), ("down", 3072, 768)):
    shapes.append((f"BERT-base {nm}", 1024, k, n))
print("| shape | M x K x N | 1 thread GFLOP/s | % peak | 2 threads GFLOP/s | % of 2 x peak | scaling |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for name, m, k, n in shapes:
    flops = 2.0 * m * k * n
    x = np.random.randn(m, k).astype(np.float32); w = np.random.randn(n, k).astype(np.float32)
    c = np.empty((m, n), np.float32)
    size = lib.cblas_sgemm_pack_get_size(BMatrix, 1, n, k)
    buf = np.empty(size // 4 + 16, np.float32)
    lib.cblas_sgemm_pack(RowMajor, BMatrix, Trans, 1, n, k, 1.0, w.ctypes.data, k, buf.ctypes.data)
    f = lambda: lib.cblas_sgemm_compute(RowMajor, NoTrans, Packed, m, n, k, x.ctypes.data, k, buf.ctypes.data, n, 0.0, c.ctypes.data, n)
    reps = max(5, int(1e8 / flops))
    res = {1: [], 2: []}
    for t in (1, 2):
        setth(t); f(); f()
    for rnd in range(9):
        for t in (1, 2):
            setth(t)
            s = time.perf_counter()
            for _ in range(reps): f()
            res[t].append((time.perf_counter() - s) / reps)
    g = {t: flops / sorted(v)[len(v) // 2] / 1e9 for t, v in res.items()}
    print(f"| {name} | {m} x {k} x {n} | {g[1]:.1f} | {100*g[1]/peak:.0f}% | {g[2]:.1f} | {100*g[2]/(2*peak):.0f}% | {g[2]/g[1]:.2f}x |", flush=True)
