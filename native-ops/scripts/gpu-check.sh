#!/usr/bin/env bash
# The GPU machine's one script: builds libdjl_attn.so and libdjl_attn_cuda.so with CMake, runs
# the pytest suite on CPU and CUDA, runs the GPU benchmarks, and prints a summary last.
#
# Usage (from the repository root, on a machine with nvcc, a GPU and a CUDA PyTorch):
#   bash native-ops/scripts/gpu-check.sh [pytest args...]   (the whole suite, or the tests/...
#   files and folders the arguments name)
# Environment:
#   OUT        where logs and benchmark tables go (default /tmp/gpu-check)
#   ARCHS      CMAKE_CUDA_ARCHITECTURES (default: 80-real;90, as shipped)
#   TUNING     ON to compile the CUDA tuning variants too (DJL_ATTN_TUNING; default OFF, as
#              shipped), for bench_flash.py --configs and bench_paged.py's configuration table
#   BENCH      which benchmarks to run: a glob over bench/bench_*.py names (default: all),
#              or "none"
#   PYTHON     the interpreter holding torch (default python3)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
ARCHS=${ARCHS:-80-real;90}
TUNING=${TUNING:-OFF}
BENCH=${BENCH:-*}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

# pytest may be missing on the GPU machine: wheels carried in .whl/ at the repository root.
if ! "$PYTHON" -c "import pytest" 2>/dev/null && ls ../.whl/*.whl >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ../.whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

status_build=FAIL status_tests=FAIL
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count, 'SMs')"
  nvcc --version | tail -1
} 2>&1 | tee "$OUT/device.txt"

start=$(date +%s)
generator=$(command -v ninja >/dev/null && echo "-G Ninja" || true)
if cmake -S . -B build $generator -DCMAKE_BUILD_TYPE=Release -DDJL_ATTN_CUDA=ON \
     "-DCMAKE_CUDA_ARCHITECTURES=$ARCHS" "-DDJL_ATTN_TUNING=$TUNING" >"$OUT/build.log" 2>&1 &&
   cmake --build build --parallel "$(nproc)" >>"$OUT/build.log" 2>&1; then
  status_build=OK
else
  tail -40 "$OUT/build.log"
fi
build_s=$(( $(date +%s) - start ))

tests_line="not run"
if [ "$status_build" = OK ]; then
  # The whole suite, unless the arguments name test files or folders (tests/...) themselves.
  paths=(tests)
  for arg in "$@"; do case $arg in tests/*) paths=() ;; esac; done
  DJL_ATTN_LIB_DIR=$PWD/build "$PYTHON" -m pytest -q -p no:cacheprovider "${paths[@]}" "$@" 2>&1 | tee "$OUT/pytest.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] && status_tests=OK
  tests_line=$(grep -E "passed|failed|error" "$OUT/pytest.log" | tail -1)
fi

bench_ran=()
if [ "$status_build" = OK ] && [ "$BENCH" != none ]; then
  for script in bench/bench_$BENCH.py; do
    [ -f "$script" ] || continue
    name=$(basename "$script" .py)
    # One shared log: the device tool returns at most 8 files.
    echo "== $name" >>"$OUT/bench.log"
    DJL_ATTN_LIB_DIR=$PWD/build "$PYTHON" "$script" --device cuda --out "$OUT/$name.md" \
      >>"$OUT/bench.log" 2>&1 && bench_ran+=("$name") || { echo "== $name FAILED"; tail -20 "$OUT/bench.log"; }
  done
fi

echo
echo "================ gpu-check summary ================"
cat "$OUT/device.txt"
echo "build ($ARCHS, tuning $TUNING): $status_build in ${build_s}s"
[ -f build/libdjl_attn_cuda.so ] && echo "libdjl_attn_cuda.so: $(stat -c %s build/libdjl_attn_cuda.so) bytes"
echo "pytest: $status_tests ($tests_line)"
for name in "${bench_ran[@]}"; do
  echo
  cat "$OUT/$name.md"
done
[ "$status_build" = OK ] && [ "$status_tests" = OK ]
