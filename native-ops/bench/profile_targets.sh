#!/usr/bin/env bash
# The device-machine call behind the profiles of issues 22 and 28's missed targets
# (docs/benchmarks.md, "Profiles of the missed targets, round three"): builds for sm_90, then runs
# the parts named in PARTS (default: all), each under a time limit, writing under $OUT:
#   step     the Llama-3.2-1B-shaped captured step (bench_decoder_layer.py, batch 1 and 64):
#            kernel families, the GPU's idle time and the host's share of each step
#   graph    dense decode in a CUDA graph, warm and cold (bench_decode_graph.py)
#   paged    fp16 vs FP8 paged decode (bench_anchors.py --only paged)
#   prefill  the 24 prefill cells against cuDNN (bench_flash.py --quick, S 1k/4k/16k, D 64/128)
#   ncu      Nsight Compute: prefill D 128 fp16 (ours and cuDNN, causal and not), the fp16 and
#            FP8 paged decode kernels at batch 32 · 4k, the dense decode at batch 1 · 4k
#   fp8      Nsight Compute: the e4m3 prefill kernel and its v transpose beside the bfloat16
#            kernel, S = 1k causal and 4k not (not in the default PARTS)
# Usage (from the repository root): OUT=... PARTS="step graph" bash native-ops/bench/profile_targets.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/profile-out}
PARTS=${PARTS:-step graph paged prefill ncu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 DJL_ATTN_LIB_DIR=$PWD/build
t0=$(date +%s)
if [ ! -f build/libdjl_attn_cuda.so ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDJL_ATTN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1 &&
    cmake --build build --parallel "$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
echo "build: $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
ncu_sections="--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats"
for part in $PARTS; do
  s=$(date +%s)
  case $part in
    step) timeout 300 python3 bench/bench_decoder_layer.py --device cuda --batches 1,64 \
            --gemm-kernels auto --steps 20 --out "$OUT/step.md" >"$OUT/step.log" 2>&1 ;;
    graph) timeout 180 python3 bench/bench_decode_graph.py --out "$OUT/graph.md" >"$OUT/graph.log" 2>&1 ;;
    paged) timeout 120 python3 bench/bench_anchors.py --only paged --out "$OUT/paged.md" >"$OUT/paged.log" 2>&1 ;;
    prefill) timeout 300 python3 bench/bench_flash.py --device cuda --quick --seqlens 1024,4096,16384 \
               --dims 64,128 --out "$OUT/prefill.md" >"$OUT/prefill.log" 2>&1 ;;
    ncu)
      timeout 200 ncu --clock-control none -k regex:"flash_hopper|sdpa|cudnn" $ncu_sections \
        --section ComputeWorkloadAnalysis python3 bench/hopper_profile.py --dims 128 \
        --causal both --dtype float16 --cudnn >"$OUT/ncu-prefill.txt" 2>&1
      timeout 120 ncu --clock-control none -k regex:"paged|decode" $ncu_sections \
        --section MemoryWorkloadAnalysis python3 bench/paged_fp8_profile.py >"$OUT/ncu-paged.txt" 2>&1
      timeout 120 ncu --clock-control none -k regex:"decode|combine" -c 4 $ncu_sections \
        --section MemoryWorkloadAnalysis python3 bench/bench_decode_kernels.py >"$OUT/ncu-decode.txt" 2>&1
      ;;
    fp8)  # the e4m3 prefill kernel and its v transpose beside the bfloat16 kernel, S = 1k and 4k
      for cell in "1024 yes" "4096 no"; do
        set -- $cell
        timeout 150 ncu --clock-control none -k regex:"flash_hopper|transpose_v" $ncu_sections \
          --section ComputeWorkloadAnalysis python3 bench/hopper_profile.py --dims 128 \
          --seqlen "$1" --causal "$2" --dtype bfloat16 --fp8 >"$OUT/ncu-fp8-$1.txt" 2>&1
      done
      ;;
    *) echo "unknown part $part"; continue ;;
  esac
  echo "$part: rc=$? in $(( $(date +%s) - s )) s"
done
# One summary (the device tool returns few files): tables and the ncu lines that matter.
{
  for f in step graph paged prefill; do [ -f "$OUT/$f.md" ] && { echo "=== $f"; cat "$OUT/$f.md"; }; done
  for f in "$OUT"/ncu-*.txt; do
    [ -f "$f" ] || continue
    echo "=== $(basename "$f")"
    grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occupancy|Block Limit|Registers Per|Shared Memory Config|Stall|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Waves Per SM|==PROF==|ERR" "$f" | head -150
  done
} >"$OUT/summary.md"
echo "total: $(( $(date +%s) - t0 )) s"
