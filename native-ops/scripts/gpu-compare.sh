#!/usr/bin/env bash
# Before/after benchmarks of a change, in one session on one GPU: builds this tree's native
# libraries and those of an earlier tree, runs each benchmark script of this tree against both
# (before, then after, script by script, so drift between them stays small), and prints every
# table side by side (bench/compare_tables.py).
#
# Usage (from native-ops/, on the GPU machine):
#   BEFORE=/path/to/earlier/native-ops bash scripts/gpu-compare.sh flash decode_step paged linear bert
# Environment:
#   BEFORE   the earlier tree's native-ops folder (required)
#   OUT      where tables and logs go (default /tmp/gpu-compare)
#   ARCHS    CMAKE_CUDA_ARCHITECTURES for both builds (default 90: the benchmarks' GPU)
#   PYTHON   the interpreter holding torch (default python3)
#   ARGS_<name>  extra arguments for bench_<name>.py (e.g. ARGS_bert="--dtype float16")
set -uo pipefail
cd "$(dirname "$0")/.."
: "${BEFORE:?set BEFORE to the native-ops folder of the earlier tree}"
OUT=${OUT:-/tmp/gpu-compare}
ARCHS=${ARCHS:-90}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
generator=$(command -v ninja >/dev/null && echo "-G Ninja" || true)

build() {  # build <source dir> <build dir>
  local start=$(date +%s)
  cmake -S "$1" -B "$2" $generator -DCMAKE_BUILD_TYPE=Release -DDJL_ATTN_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=$ARCHS" >"$OUT/build-$(basename "$2").log" 2>&1 &&
    cmake --build "$2" --parallel "$(nproc)" >>"$OUT/build-$(basename "$2").log" 2>&1 ||
    { tail -30 "$OUT/build-$(basename "$2").log"; return 1; }
  echo "built $1 in $(( $(date +%s) - start )) s: $(stat -c %s "$2/libdjl_attn_cuda.so") bytes"
}
build "$BEFORE" "$PWD/build-before" || exit 1
build "$PWD" "$PWD/build" || exit 1

status=0
for name in "$@"; do
  args_var="ARGS_$name"
  for side in before after; do
    lib=$PWD/build; [ "$side" = before ] && lib=$PWD/build-before
    echo "== bench_$name ($side)"
    # shellcheck disable=SC2086
    DJL_ATTN_LIB_DIR=$lib "$PYTHON" "bench/bench_$name.py" --device cuda \
      --out "$OUT/$name-$side.md" ${!args_var:-} >>"$OUT/bench.log" 2>&1 ||
      { echo "bench_$name ($side) FAILED"; tail -20 "$OUT/bench.log"; status=1; }
  done
  [ -f "$OUT/$name-before.md" ] && [ -f "$OUT/$name-after.md" ] &&
    "$PYTHON" bench/compare_tables.py "$OUT/$name-before.md" "$OUT/$name-after.md" \
      --title "bench_$name" | tee "$OUT/$name-compare.md"
done
exit $status
