#!/usr/bin/env bash
# Checkpoint loading benchmark (docs/benchmarks.md, "Checkpoint loading"): CheckpointLoadProbe on
# the fixture checkpoint of make_checkpoint_load.py (a 76 M-parameter LLaMA, bfloat16, 3 shards),
# as float16 and float32, RUNS times each; with BEFORE=<commit>, the same runs interleaved with
# that commit's loader (its SafetensorsReader, HfCheckpoint, HfDecoderLoader and Decoder compiled
# and put first on the class path), so both rows come from one run.
#   mvn -B -Ddjl.attn.cuda=OFF -pl integration-tests -am verify -Dtest=CheckpointLoadMemoryTest
#   BEFORE=390584d bash integration-tests/scripts/checkpoint-load-bench.sh [cpu|gpu0]
# The JVM gets a 1 GB pre-touched heap and 2 GB of direct memory, so that the old loader (which
# copies through both) runs at all; the test runs the new one with 256 MB and 64 MB.
set -euo pipefail
device=${1:-cpu}
RUNS=${RUNS:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
it=$root/integration-tests
dir=$it/target/hf-fixtures/checkpoint_load/llama
test -f "$dir/config.json" || { echo "no $dir: run mvn verify first" >&2; exit 1; }
cp="$it/target/test-classes:$root/model-zoo/target/classes:$it/target/lib/*"
before=""
if [ -n "${BEFORE:-}" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for f in decoder/SafetensorsReader decoder/HfDecoderLoader decoder/Decoder hf/HfCheckpoint; do
    git -C "$root" show "$BEFORE:model-zoo/src/main/java/io/djlattention/zoo/$f.java" \
      > "$work/$(basename $f).java"
  done
  javac -nowarn -d "$work/classes" -cp "$cp" "$work"/*.java 2>&1 | grep -v '^Note' || true
  before=$work/classes
fi
probe() {
  java -Xms1g -Xmx1g -XX:+AlwaysPreTouch -XX:MaxDirectMemorySize=2g -Dai.djl.offline=true \
    -cp "$1$cp" io.djlattention.it.decoder.CheckpointLoadProbe "$dir" "$2" "$device" 2>/dev/null |
    awk -v label="$3" -v dtype="$2" '
      /^rssBeforeKiB/ {b = $2} /^peakKiB/ {p = $2} /^weightBytes/ {w = $2} /^loadMs/ {t = $2}
      END {printf "%-7s %-8s weights %6.1f MB  load %5d ms  peak RSS growth %6.1f MB = %.2fx weights\n",
           label, dtype, w / 1e6, t, (p - b) * 1024 / 1e6, (p - b) * 1024 / w}'
}
date -u '+%Y-%m-%d %H:%M UTC'
for dtype in float16 float32; do
  for ((i = 0; i < RUNS; ++i)); do
    if [ -n "$before" ]; then probe "$before:" "$dtype" before; fi
    probe "" "$dtype" after
  done
done
