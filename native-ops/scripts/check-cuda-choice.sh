#!/usr/bin/env bash
# Checks the CMake build's choice of the CUDA library (configure only, nothing compiled): with
# DJL_ATTN_CUDA=AUTO, no GPU visible means no CUDA library even where nvcc is found, and a
# visible GPU (a stand-in nvidia-smi listing one) means a CUDA library where nvcc is found; OFF
# never builds it. Each case must print its one "djl-attention: CUDA library ..." line.
# CI runs it (.ci/run); it needs CMake and a C++ compiler, and checks the GPU case only where
# nvcc is on the PATH.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# Configures native-ops in a fresh build folder and prints the choice line.
choice() { # PATH-prefix, DJL_ATTN_CUDA
  local log="$work/configure-$RANDOM.log"
  PATH="$1:$PATH" cmake -S "$src" -B "$work/build-$RANDOM" -DDJL_ATTN_CUDA="$2" >"$log" 2>&1 || true
  grep -m1 "djl-attention: CUDA library" "$log" || echo "(no choice line)"
}
expect() { # name, line, pattern
  if [[ "$2" == *"$3"* ]]; then
    echo "ok   $1: $2"
  else
    echo "FAIL $1: expected '$3', got: $2"
    failures=$((failures + 1))
  fi
}

mkdir -p "$work/no-gpu" "$work/gpu"
# No GPU: an nvidia-smi that lists none and fails, as it does on a machine without a driver.
printf '#!/bin/sh\necho "NVIDIA-SMI has failed" >&2\nexit 9\n' >"$work/no-gpu/nvidia-smi"
printf '#!/bin/sh\necho "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"\n' >"$work/gpu/nvidia-smi"
chmod +x "$work/no-gpu/nvidia-smi" "$work/gpu/nvidia-smi"

if [ -e /dev/nvidia0 ]; then
  echo "check-cuda-choice: /dev/nvidia0 exists here: the no-GPU case is not checked"
else
  expect "AUTO, no GPU" "$(choice "$work/no-gpu" AUTO)" "CUDA library skipped:"
fi
expect "OFF" "$(choice "$work/gpu" OFF)" "CUDA library skipped: DJL_ATTN_CUDA=OFF"
if command -v nvcc >/dev/null 2>&1; then
  expect "AUTO, GPU listed" "$(choice "$work/gpu" AUTO)" \
    "CUDA library built: a GPU is visible (nvidia-smi -L lists NVIDIA H100 80GB HBM3)"
  expect "ON, no GPU" "$(choice "$work/no-gpu" ON)" "CUDA library built: DJL_ATTN_CUDA=ON"
else
  expect "AUTO, GPU listed, no nvcc" "$(choice "$work/gpu" AUTO)" "no CUDA compiler (nvcc) was found"
fi
if PATH="$work/gpu:$PATH" cmake -S "$src" -B "$work/build-bad" -DDJL_ATTN_CUDA=yes >"$work/bad.log" 2>&1; then
  echo "FAIL DJL_ATTN_CUDA=yes was accepted"
  failures=$((failures + 1))
else
  expect "DJL_ATTN_CUDA=yes" "$(grep -m1 -A1 'CMake Error' "$work/bad.log" | tail -1)" \
    "DJL_ATTN_CUDA: expected AUTO, ON or OFF, got 'yes'"
fi
[ "$failures" -eq 0 ] && echo "check-cuda-choice: all cases as expected"
exit "$failures"
