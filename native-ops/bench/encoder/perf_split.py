# Where the samples of a system-wide `perf record -a -g` went (issue 24's profiles), by leaf frame:
# MKL's GEMM kernels, its copies/threading, libgomp (OpenMP spin/wait), our kernels (attention,
# bias+GELU, LayerNorm), libtorch's other code, JVM/JIT, libc, the kernel, ONNX Runtime's MLAS
# SGEMM kernel (its file-offset range in libonnxruntime.so 1.23.2, found by disassembly: AVX-512
# broadcast-FMA loop) and the rest, idle, and other processes; with a second argument, per thread.
# Usage: python perf_split.py perf.data [per-thread]
import collections, subprocess, sys
data = sys.argv[1]
txt = subprocess.run(["perf", "script", "-i", data, "-G", "-F", "comm,pid,tid,cpu,ip,sym,dso"],
                     capture_output=True, text=True).stdout
import re
mm = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events"], capture_output=True, text=True).stdout
ort_base = None
for l in mm.splitlines():
    m = re.search(r"\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+) .*r-xp .*libonnxruntime\.so", l)
    if m: ort_base = int(m.group(1), 16) - int(m.group(3), 16)
cat = collections.Counter(); per_tid = collections.Counter(); per_cpu = collections.Counter()
rows = []
for line in txt.splitlines():
    parts = line.split()
    if len(parts) < 4: continue
    # comm may contain spaces; find the pid/tid token "pid/tid"
    idx = next(i for i, p in enumerate(parts) if '/' in p and p.split('/')[0].isdigit())
    comm = ' '.join(parts[:idx]); pid, tid = parts[idx].split('/'); cpu = parts[idx + 1]
    rest = parts[idx + 2:]
    ip = rest[0]; dso = rest[-1].strip('()'); sym = ' '.join(rest[1:-1])
    rows.append((comm, int(pid), int(tid), cpu, ip, sym, dso))
# The measured process: the pid with most samples in libtorch, ONNX Runtime or the JVM.
java_pid = collections.Counter(r[1] for r in rows if ('libtorch' in r[6] or 'onnxruntime' in r[6] or 'libjvm' in r[6])).most_common(1)[0][0]
def classify(r):
    comm, pid, tid, cpu, ip, sym, dso = r
    if pid == 0: return 'idle'
    if pid != java_pid: return 'other processes'
    if 'libtorch_cpu' in dso:
        if sym.startswith('mkl_blas') and 'kernel' in sym: return 'MKL GEMM kernel'
        if sym.startswith('mkl_') or sym.startswith('MKL') or 'mkl' in sym.lower(): return 'MKL other (copy/threading)'
        return 'libtorch other'
    if 'gomp' in dso: return 'OpenMP runtime (libgomp)'
    if 'libdjl_attn' in dso:
        s = sym.lower()
        if 'flash' in s or 'attend' in s: return 'ours: attention'
        if 'gelu' in s or 'elementwise' in s: return 'ours: bias+GELU'
        if 'norm' in s: return 'ours: LayerNorm'
        if 'quantize' in s or 'rescale' in s: return 'ours: int8 quantize/rescale'
        if 'thread_pool' in s or 'parallel_for' in s or 'Job' in sym: return 'ours: thread pool'
        return 'ours: other (' + sym[:40] + ')'
    if 'onnxruntime' in dso:
        a = int(ip, 16) - (ort_base or 0)
        if 0xe74000 <= a < 0xe7a000: return 'ORT MLAS SGEMM kernel'
        return 'ORT other'
    if 'kernel' in dso: return 'kernel (' + ('sched/idle' if any(k in sym for k in ('schedule', 'switch', 'idle', 'futex', 'wake')) else 'other') + ')'
    if 'libjvm' in dso or 'JIT' in dso or 'perf-' in dso: return 'JVM / JIT Java'
    if 'libc.so' in dso: return 'libc (malloc/memcpy)'
    return 'other: ' + dso.split('/')[-1]
for r in rows:
    c = classify(r); cat[c] += 1
    if r[1] == java_pid: per_tid[(r[2], r[0])] += 1
    per_cpu[(r[3], 'idle' if r[1] == 0 else ('ours' if r[1] == java_pid else 'other'))] += 1
n = len(rows)
print(f"samples {n}; java pid {java_pid}")
for k, v in cat.most_common(): print(f"  {100*v/n:5.1f}%  {k}")
jt = sum(per_tid.values())
print("java threads (share of the process's samples):")
for (tid, comm), v in per_tid.most_common(6): print(f"  {100*v/jt:5.1f}%  tid {tid} {comm}")
print("per cpu:", ', '.join(f"{k[0]} {k[1]} {100*v/n:.1f}%" for k, v in sorted(per_cpu.items())))
if len(sys.argv) > 2:
    by = collections.defaultdict(collections.Counter)
    for r in rows:
        if r[1] == java_pid: by[r[2]][classify(r)] += 1
    for tid, _ in per_tid.most_common(3):
        c = by[tid[0]]; t = sum(c.values())
        print(f"tid {tid[0]}: " + ', '.join(f"{k} {100*v/n:.1f}%" for k, v in c.most_common(7)))
