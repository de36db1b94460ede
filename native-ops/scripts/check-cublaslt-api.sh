#!/usr/bin/env bash
# Checks cuda/gemm/cublaslt_api.h against the real cublasLt.h (tests/native/cublaslt_api_check.cpp)
# where one can be found: the CUDA toolkit's, or a pip nvidia-cublas package's. Exits 0 with a
# line saying so when none exists (the build machines have nvcc but no cuBLAS).
set -euo pipefail
cd "$(dirname "$0")/.."
header=$( { ls /usr/local/cuda/include/cublasLt.h 2>/dev/null || true;
            python3 -c 'import nvidia, os; print(*[os.path.join(d, "..") for d in nvidia.__path__])' 2>/dev/null |
              xargs -r -I{} find {} -name cublasLt.h 2>/dev/null || true; } | head -1 || true)
if [ -z "$header" ]; then
  echo "check-cublaslt-api: no cublasLt.h here; nothing checked"
  exit 0
fi
include=$(dirname "$header")
cuda_include=$(dirname "$(command -v nvcc)")/../include
g++ -std=c++17 -fsyntax-only -I. -Isrc -I"$include" -I"$cuda_include" tests/native/cublaslt_api_check.cpp
echo "check-cublaslt-api: cuda/gemm/cublaslt_api.h agrees with $header"
