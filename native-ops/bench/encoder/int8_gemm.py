# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""The int8 GEMM candidate reachable from libtorch (aten::_int_mm: oneDNN s8s8s32) against float32
and bfloat16 mm at the encoder shapes (docs/design/fused-encoder-layer.md section 10):
    python int8_gemm.py THREADS"""
import torch, time, sys
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv)>1 else 1)
shapes=[(16,384,1152),(16,384,1536),(16,1536,384),(1024,384,1152),(1024,1536,384),(4096,384,1536),(16,768,2304),(1024,768,3072),(1024,3072,768)]
def bench(fn, flops):
    fn(); fn()
    best=1e9
    for r in range(5):
        n=0; t=time.perf_counter()
        while True:
            fn(); n+=1
            el=time.perf_counter()-t
            if el>0.15: break
        best=min(best, el/n)
    return flops/best/1e9, best*1e3
print(torch.__version__, torch.get_num_threads())
for m,k,n in shapes:
    a=torch.randn(m,k); w=torch.randn(n,k)
    wt=w.t()
    a8=torch.randint(-127,127,(m,k),dtype=torch.int8); w8=torch.randint(-127,127,(n,k),dtype=torch.int8)
    w8t=w8.t()
    w8tc=w8.t().contiguous()
    c32=torch.empty(m,n,dtype=torch.int32); cf=torch.empty(m,n)
    f=2*m*n*k
    r1=bench(lambda: torch.mm(a,wt,out=cf), f)
    r2=bench(lambda: torch._int_mm(a8,w8t,out=c32), f)
    r3=bench(lambda: torch._int_mm(a8,w8tc,out=c32), f)
    ab=a.bfloat16(); wb=w.bfloat16().t()
    r4=bench(lambda: torch.mm(ab,wb), f)
    print(f"{m}x{k}x{n}: f32 {r1[0]:.0f} GF/s ({r1[1]:.3f} ms)  int_mm(wT view) {r2[0]:.0f} ({r2[1]:.3f})  int_mm(contig kxn) {r3[0]:.0f} ({r3[1]:.3f})  bf16 {r4[0]:.0f} ({r4[1]:.3f})", flush=True)
