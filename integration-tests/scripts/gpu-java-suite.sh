#!/usr/bin/env bash
# The Java GPU suite: on the GPU machine, builds the native libraries with CMake, runs the
# project's JUnit suites on the GPU through the JUnit console launcher with the gpu-java kit's
# Java and DJL (libtorch = the machine's torch), runs the Java GPU benchmarks, and prints a
# summary last.
#
# Prepare RUN_DIR first on a build machine (gpu-java-prepare.sh), carry it, then on the GPU
# machine:
#   bash RUN_DIR/src/integration-tests/scripts/gpu-java-suite.sh RUN_DIR
# Environment:
#   OUT     where logs, the JUnit XML report and benchmark tables go (default /tmp/gpu-java-suite)
#   ARCHS   CMAKE_CUDA_ARCHITECTURES (default 90: this machine's; the shipped jar has 80-real;90)
#   TESTS   "all" (default) or a JUnit console selector, e.g. "--select-class io.x.YTest"
#   BENCH   "all" (default), "none", or a comma list of: flash, callcost, bert, decode, captured,
#           llama1b, serve1b, minilm, hf
#   MINILM_DIR  where an earlier call left all-minilm-l6-v2.onnx (default /tmp/minilm); without it
#           the MiniLM tests that read the ONNX file fail and the minilm check is skipped
#   TEST_DEVICE  the parity tests' device (default gpu; cpu runs the same tests on the CPU)
#
# How the tests meet the GPU: DJL's default device is the GPU when the engine sees one, and
# io.djlattention.it.TestDevice (system property djl.attn.test.device) puts the parity tests'
# arrays there; the project's libraries are loaded from the CMake build directory through
# DJL_ATTN_LIBRARY_PATH, the route a GPU user who builds them takes (README, "GPU").
set -uo pipefail
run=$(cd "${1:?usage: gpu-java-suite.sh RUN_DIR}" && pwd)
OUT=${OUT:-/tmp/gpu-java-suite}
ARCHS=${ARCHS:-90}
TESTS=${TESTS:-all}
BENCH=${BENCH:-all}
mkdir -p "$OUT"
build=/tmp/gpu-java-suite-build
java_run=(bash "$run/gpu-java/java-on-gpu.sh")
classpath="$run/lib/*"
# The MiniLM ONNX file (90 MB) cannot travel in one call with the rest: when an earlier call left
# it in MINILM_DIR (as all-minilm-l6-v2.onnx), that directory joins the class path, where MiniLm
# looks for the resource.
MINILM_DIR=${MINILM_DIR:-/tmp/minilm}
minilm=no
if [ -f "$MINILM_DIR/all-minilm-l6-v2.onnx" ]; then
  classpath="$MINILM_DIR:$classpath"
  minilm=yes
fi
for dir in "$run"/test-classes/*; do classpath="$classpath:$dir"; done

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count, 'SMs')"
  nvcc --version | tail -1
  date -u '+%Y-%m-%d %H:%M UTC'
} 2>&1 | tee "$OUT/device.txt"

# 1. Native libraries, as a GPU user builds them (README, "GPU").
status_build=FAIL
start=$(date +%s)
generator=$(command -v ninja >/dev/null && echo "-G Ninja" || true)
# shellcheck disable=SC2086
if cmake -S "$run/src/native-ops" -B "$build" $generator -DCMAKE_BUILD_TYPE=Release \
     -DDJL_ATTN_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$ARCHS" >"$OUT/build.log" 2>&1 &&
   cmake --build "$build" --parallel "$(nproc)" >>"$OUT/build.log" 2>&1; then
  status_build=OK
else
  tail -40 "$OUT/build.log"
fi
build_s=$(( $(date +%s) - start ))
export DJL_ATTN_LIBRARY_PATH=$build
# Passive OpenMP waits, as the Maven build sets for the tests.
export OMP_WAIT_POLICY=PASSIVE
# Absent shared files fail the tests instead of skipping them.
export CI=true
# The checkpoint-loading fixture (175 MB, too large to carry) is made here, with this machine's
# torch and transformers, once per RUN_DIR.
ckl=$run/hf-fixtures/checkpoint_load
if [ ! -f "$ckl/.done" ] && [ -f "$run/src/integration-tests/src/test/python/make_checkpoint_load.py" ]; then
  rm -rf "$ckl"
  python3 "$run/src/integration-tests/src/test/python/make_checkpoint_load.py" "$ckl" \
    >"$OUT/checkpoint_load_fixture.log" 2>&1 && touch "$ckl/.done"
fi
props=(-Ddjl.attn.shared="$run/shared" -Ddjl.attn.hfFixtures="$run/hf-fixtures"
       -Ddjl.attn.test.device="${TEST_DEVICE:-gpu}")

# 2. JUnit, every module's tests, on the GPU.
status_tests="not run"
tests_line=""
if [ "$status_build" = OK ]; then
  start=$(date +%s)
  if [ "$TESTS" = all ]; then
    selector=(--scan-classpath "$(ls -d "$run"/test-classes/* | paste -sd:)")
  else
    # shellcheck disable=SC2206
    selector=($TESTS)
  fi
  "${java_run[@]}" -Xms1g -Xmx1g -XX:+AlwaysPreTouch "${props[@]}" -cp "$classpath" \
    org.junit.platform.console.ConsoleLauncher execute "${selector[@]}" \
    --details=tree --disable-banner --reports-dir "$OUT/junit" >"$OUT/junit.log" 2>&1
  rc=$?
  tests_s=$(( $(date +%s) - start ))
  status_tests=$([ $rc -eq 0 ] && echo OK || echo FAIL)
  tests_line=$(grep -E "tests (found|successful|failed|skipped|aborted)" "$OUT/junit.log" \
    | sed -E 's/^[^0-9]*([0-9]+) tests ([a-z]+).*/\2 \1/' | paste -sd, -)
fi

# 2b. The jar route of the README's "GPU" section: no DJL_ATTN_LIBRARY_PATH; libdjl_attn.so from
# the djl-attention-native jar, libdjl_attn_cuda.so from a linux-x86_64-cu classifier jar (made
# here from the CMake build, as the Maven build makes it with the CUDA library). The loader must
# find libtorch_cuda in the process and load the CUDA library from the class path.
status_jar="not run"
if [ "$status_build" = OK ]; then
  jar_dir=/tmp/gpu-java-suite-cujar
  rm -rf "$jar_dir" && mkdir -p "$jar_dir/io/djlattention/jni/linux-x86_64"
  cp "$build/libdjl_attn_cuda.so" "$jar_dir/io/djlattention/jni/linux-x86_64/"
  (cd "$jar_dir" && python3 -m zipfile -c "$jar_dir.jar" io)
  env -u DJL_ATTN_LIBRARY_PATH "${java_run[@]}" "${props[@]}" -cp "$classpath:$jar_dir.jar" \
    org.junit.platform.console.ConsoleLauncher execute \
    --select-class io.djlattention.it.FlashAttentionParityTest \
    --select-class io.djlattention.it.paged.PagedAttentionParityTest \
    --details=summary --disable-banner >"$OUT/junit-jar-route.log" 2>&1
  rc=$?
  status_jar="$([ $rc -eq 0 ] && echo OK || echo FAIL) ($(grep -E "tests (successful|failed)" \
    "$OUT/junit-jar-route.log" | sed -E 's/^[^0-9]*([0-9]+) tests ([a-z]+).*/\2 \1/' | paste -sd, -))"
fi

# 2c. A build without the CUDA library on a CUDA libtorch: a GPU array must fail with the
# loader's message naming the fix (not a dispatcher error, not a crash).
status_nocuda="not run"
if [ "$status_build" = OK ]; then
  cpu_only=/tmp/gpu-java-suite-cpuonly
  rm -rf "$cpu_only" && mkdir -p "$cpu_only" && cp "$build/libdjl_attn.so" "$cpu_only/"
  DJL_ATTN_LIBRARY_PATH=$cpu_only "${java_run[@]}" "${props[@]}" -cp "$classpath" \
    org.junit.platform.console.ConsoleLauncher execute \
    --select-method io.djlattention.it.FlashAttentionParityTest#customScaleIsApplied \
    --details=summary --disable-banner >"$OUT/junit-no-cuda.log" 2>&1
  if grep -q "a CUDA array was passed but djl-attention's CUDA operators are not loaded" \
       "$OUT/junit-no-cuda.log"; then
    status_nocuda="OK (EngineException: $(grep -o -m1 "a CUDA array was passed[^:]*" \
      "$OUT/junit-no-cuda.log"))"
  else
    status_nocuda="FAIL (see junit-no-cuda.log)"; tail -20 "$OUT/junit-no-cuda.log"
  fi
fi

# 3. Benchmarks (docs/benchmarks.md, "Java on the GPU").
want() { [ "$BENCH" = all ] || [[ ",$BENCH," == *",$1,"* ]]; }
bench_main() { # name, main class, args...
  local name=$1
  shift
  echo "== $name" >>"$OUT/bench.log"
  if "${java_run[@]}" -Xmx32g "${props[@]}" -cp "$classpath" "$@" >"$OUT/$name.md" 2>>"$OUT/bench.log"; then
    bench_ran+=("$name")
  else
    echo "== $name FAILED"; tail -20 "$OUT/bench.log"; tail -5 "$OUT/$name.md"
  fi
}
bench_ran=()
if [ "$status_build" = OK ] && [ "$BENCH" != none ]; then
  want flash && bench_main flash io.djlattention.it.bench.FlashBenchmark
  want callcost && bench_main callcost io.djlattention.it.bench.OperatorCallCostBenchmark
  want bert && bench_main bert io.djlattention.it.bench.BertBenchmark \
    --layers 2,12 --batches 1,8,32 --seqs 128,512 --warmup 3 --runs 10
  want decode && bench_main decode io.djlattention.it.bench.PagedDecodeBenchmark \
    --batches 1,16,64 --contexts 512 --no-waste
  want captured && bench_main captured io.djlattention.it.bench.CapturedStepBenchmark \
    --batches 1,16,64 --context 512 --steps 30
  if want llama1b; then
    # The Llama-3.2-1B-shaped checkpoint (2.5 GB, made here by transformers), transformers'
    # anchors on it, then Java loading it through Criteria.
    l1b=/tmp/llama1b
    [ -f "$l1b/model.safetensors" ] || python3 "$run/src/integration-tests/scripts/llama1b_shape.py" \
      write "$l1b" >>"$OUT/bench.log" 2>&1
    python3 "$run/src/integration-tests/scripts/llama1b_shape.py" bench "$l1b" \
      >"$OUT/llama1b-hf.md" 2>>"$OUT/bench.log" || echo "== llama1b transformers FAILED"
    bench_main llama1b io.djlattention.it.bench.CapturedStepBenchmark --model "$l1b" \
      --dtype float16 --batches 1,16,64 --context 1024 --steps 20 --ttft 2048
  fi
  if want serve1b; then
    # issue 25 item 8: `serve` with the 1B-shaped checkpoint under 1, 16 and 64 clients.
    l1b=/tmp/llama1b
    [ -f "$l1b/model.safetensors" ] || python3 "$run/src/integration-tests/scripts/llama1b_shape.py" \
      write "$l1b" >>"$OUT/bench.log" 2>&1
    bench_main serve1b io.djlattention.it.bench.ServingBenchmark --model "$l1b" --dtype float16 \
      --no-unbatched --no-embeddings --concurrency 1,16,64 --requests 128 --max-tokens 64 \
      --prompt 128..512
  fi
  if want minilm && [ "$minilm" = yes ]; then
    bench_main minilm io.djlattention.it.bench.MiniLmDeviceCheck
  fi
  if want hf; then
    echo "== hf" >>"$OUT/bench.log"
    python3 "$run/src/integration-tests/scripts/hf_generate_bench.py" >"$OUT/hf.md" 2>>"$OUT/bench.log" \
      && bench_ran+=(hf) || { echo "== hf FAILED"; tail -20 "$OUT/bench.log"; }
  fi
fi

echo
echo "================ gpu-java-suite summary ================"
cat "$OUT/device.txt"
echo "MiniLM ONNX file on the class path: $minilm"
echo "native build ($ARCHS): $status_build in ${build_s}s ($(ls "$build"/*.so 2>/dev/null | xargs -n1 basename | paste -sd' ' -))"
if [ "$status_tests" != "not run" ]; then
  echo "JUnit (djl.attn.test.device=${TEST_DEVICE:-gpu}): $status_tests in ${tests_s}s ($tests_line)"
  # Each failure, one line: test and cause.
  sed -n '/^Failures (/,$p' "$OUT/junit.log" | grep -E '^  JUnit|^    =>' \
    | sed -E 's/^  JUnit [A-Za-z]+://; s/^    => /      /' | head -60
else
  echo "JUnit: not run"
fi
echo "jar route (classifier jar on the class path, no DJL_ATTN_LIBRARY_PATH): $status_jar"
echo "GPU array without the CUDA library: $status_nocuda"
for name in "${bench_ran[@]}"; do
  echo
  echo "-- $name"
  grep -v '^\[' "$OUT/$name.md"
done
[ "$status_build" = OK ] && [ "$status_tests" = OK ]
