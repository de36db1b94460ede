#!/usr/bin/env bash
# One device-machine call for the Hopper flash kernel (cuda/flash/hopper): build for sm_90
# (which adds the sm_90a object library), show its SASS mix, run the Hopper tests, then the
# whole flash test file under DJL_ATTN_FLASH_HOPPER=on/off, then the quick prefill benchmark.
#   bash native-ops/bench/hopper_check.sh [pytest -k expression]
# Writes logs under $OUT when set. Every step has a time limit, so a hang costs minutes, not
# the call.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/hopper-out}
mkdir -p "$OUT"
if [ -d ../.whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ../.whl/*.whl >/dev/null 2>&1
  export PYTHONPATH=/tmp/site
fi
B=/tmp/build-hopper
t0=$(date +%s)
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DDJL_ATTN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real >/dev/null || exit 1
cmake --build $B --parallel 16 2>&1 | grep -E "error|warning|Error" | head -20
[ -f $B/libdjl_attn_cuda.so ] || { echo "build failed"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
cuobjdump -sass $B/libdjl_attn_cuda.so 2>/dev/null | awk '/Function : .*flash_hopper_kernel/{f=1} /Function : /&&!/flash_hopper/{f=0} f' > $OUT/hopper.sass
echo "SASS: $(grep -c HGMMA $OUT/hopper.sass) HGMMA, $(grep -c 'LDL\|STL' $OUT/hopper.sass) LDL/STL, $(grep -c UTMALDG $OUT/hopper.sass) UTMALDG, $(grep -c USETMAXREG $OUT/hopper.sass) USETMAXREG"
export DJL_ATTN_LIB_DIR=$B PYTHONUNBUFFERED=1
K=${1:-test_hopper}
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_flash_attention.py -k "($K) and not cpu" 2>&1 | tail -25 | tee $OUT/pytest-hopper.log
rc=${PIPESTATUS[0]}
echo "hopper tests rc=$rc at $(( $(date +%s) - t0 )) s"
[ "$rc" = 0 ] || exit 2
if [ "${FULL:-1}" = 1 ]; then
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider ${TESTS:-tests/test_flash_attention.py} -k "not cpu" 2>&1 | tail -15 | tee $OUT/pytest-all.log
  echo "all flash tests rc=${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
fi
for sched in ${SCHEDS:-default}; do
  [ "$sched" = default ] && unset DJL_ATTN_FLASH_HOPPER_SCHED || export DJL_ATTN_FLASH_HOPPER_SCHED=$sched
  timeout 200 python3 bench/bench_flash.py --device cuda --quick ${SEQLENS:+--seqlens $SEQLENS} --out $OUT/bench-$sched.md > $OUT/bench-$sched.log 2>&1
  echo "bench ($sched) rc=$? at $(( $(date +%s) - t0 )) s"
  tail -n +5 $OUT/bench-$sched.md
done
if [ "${PROFILE:-0}" = 1 ]; then
  timeout 120 ncu --clock-control none -k regex:flash_hopper --section SpeedOfLight --section WarpStateStats \
    --section ComputeWorkloadAnalysis python3 bench/hopper_profile.py > $OUT/ncu.txt 2>&1
  echo "ncu rc=$?"
  grep -E "flash_hopper_kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Stall|Issue Slots Busy|Executed Ipc A|One or More|No Eligible|Warp Cycles Per Issued|Tensor|Pipe" $OUT/ncu.txt | head -60
fi
