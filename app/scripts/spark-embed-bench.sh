#!/usr/bin/env bash
# Rows/s of spark-embed in local[2] against the single-JVM embed job on the same sentences
# (issue 26; docs/benchmarks.md). Needs the app jar: mvn -B -Ddjl.attn.cuda=OFF -DskipTests package
#   app/scripts/spark-embed-bench.sh [sentences] [rounds]
# Both jobs: all-MiniLM-L6-v2 through Criteria, fused path, float32, batches of 32, 2 cores of
# PyTorch (embed: one predictor with 2 intra-op threads; spark-embed: 2 tasks of 1 thread). embed's
# figure is its fused sentences/s (a warm model, repeated passes over the sentences in memory);
# spark-embed's is rows over read + embed + Parquet write (the model loaded before, Spark's start
# not counted). Rounds alternate the two, so both see the same machine load.
set -euo pipefail
n=${1:-8000}
rounds=${2:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
jar="$here/target/djl-attention-app.jar"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Short sentences of 2 to 13 words, seeded (awk's srand), one per line.
awk -v n="$n" 'BEGIN {
  srand(26);
  split("the a cat dog sleeps runs quickly market bank raised rates guitar plays music on under warm cold window river city night morning reads book children laugh loudly rain falls softly over", w, " ");
  for (i = 0; i < n; ++i) {
    k = 2 + int(rand() * 12); s = "";
    for (j = 0; j < k; ++j) s = s (j ? " " : "") w[1 + int(rand() * 31)];
    print s ".";
  }
}' > "$work/sentences.txt"
export OMP_WAIT_POLICY=PASSIVE
for r in $(seq 1 "$rounds"); do
  java -jar "$jar" embed --sentences "$work/sentences.txt" --threads 2 --batch-size 32 \
      > "$work/embed.out" 2>/dev/null
  single=$(grep -m1 '^| fused DJL' "$work/embed.out" | awk -F'|' '{gsub(/ /, "", $3); print $3}')
  rm -rf "$work/out.parquet"
  java -jar "$jar" spark-embed --master 'local[2]' --input "$work/sentences.txt" --column text \
      --output "$work/out.parquet" --batch-size 32 > "$work/spark.out" 2>/dev/null
  spark=$(grep -o '[0-9.]* rows/s' "$work/spark.out" | awk '{print $1}')
  parts=$(grep -o '([0-9]* partitions' "$work/spark.out" | tr -d '(')
  echo "round $r: $n sentences: embed (1 JVM, 2 threads) $single sentences/s;" \
      "spark-embed local[2] ($parts) $spark rows/s; spark / embed = $(awk -v a="$spark" -v b="$single" 'BEGIN {printf "%.3f", a / b}')"
done
