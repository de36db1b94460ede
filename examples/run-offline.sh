#!/usr/bin/env bash
# Builds and runs the example project (examples/) as a user does after the README's install step,
# offline, without writing to ~/.m2:
#   1. `mvn install` of the library modules into a local repository of its own (EXAMPLE_M2,
#      default target/example-m2), whose third-party jars and plugins come from ~/.m2 read as a
#      file mirror of Maven Central (read only; nothing reaches the network);
#   2. `mvn -o package exec:exec` of examples/pom.xml against that repository alone (offline:
#      a coordinate the install did not put there fails the build);
#   3. checks what the example printed, and that the zoo's warning reached it through SLF4J.
# Usage: bash examples/run-offline.sh [HF_CHECKPOINT_DIR] [-- extra Maven arguments for step 1]
# CI runs it with the Hugging Face fixture `mvn verify` wrote (.ci/run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hf_dir=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  hf_dir=$(cd "$1" && pwd)
  shift
fi
[ "${1:-}" = "--" ] && shift
repo=${EXAMPLE_M2:-$root/target/example-m2}
mkdir -p "$root/target"
settings=$root/target/example-settings.xml
# The mirror's id is central's, so that the copied jars count as Central's in the offline build.
cat >"$settings" <<XML
<settings>
  <mirrors>
    <mirror><id>central</id><mirrorOf>*</mirrorOf><url>file://$HOME/.m2/repository</url></mirror>
  </mirrors>
</settings>
XML

# `mvn verify` does not fetch the install plugin; a machine whose ~/.m2 lacks it gets it from
# Central first (the only step that may use the network).
install_plugin=org/apache/maven/plugins/maven-install-plugin/3.1.3/maven-install-plugin-3.1.3.jar
if [ ! -f "$HOME/.m2/repository/$install_plugin" ]; then
  mvn -B -ntp -q org.apache.maven.plugins:maven-dependency-plugin:3.9.0:get \
    -Dartifact=org.apache.maven.plugins:maven-install-plugin:3.1.3
fi

echo "== examples: mvn install of the library modules into $repo"
start=$(date +%s)
mvn -B -ntp -q -o -Daether.offline.protocols=file -s "$settings" -Dmaven.repo.local="$repo" \
  -DskipTests install -pl model-zoo -am "$@"
echo "installed in $(( $(date +%s) - start )) s: $(cd "$repo" && ls -d io/djlattention/*/0.1.0-SNAPSHOT | paste -sd' ')"

echo "== examples: mvn -o package exec:exec (the user's project, offline)"
log=$root/target/example-run.log
mvn -B -ntp -o -Dmaven.repo.local="$repo" -f examples/pom.xml package exec:exec \
  -Dexample.args="$hf_dir" 2>&1 | tee "$log" | grep -v '^\[INFO\]' || true
grep -q "BUILD SUCCESS" "$log" || { echo "examples: the build or the run failed (log: $log)"; exit 1; }

# What the example must have printed: 4 embeddings of 384 floats, the cat sentences nearer the
# query than the stock-market one, 16 new tokens for each stories260K prompt, and the zoo's
# truncation warning through slf4j-simple.
fail() { echo "examples: $1 (log: $log)"; exit 1; }
grep -q "^embeddings: 4 x 384 floats" "$log" || fail "no embeddings line"
cosine() { grep -F "$1" "$log" | head -1 | awk '{print $2}'; }
awk -v cat="$(cosine 'A cat sleeps')" -v kitten="$(cosine 'Kittens like')" \
    -v stock="$(cosine 'stock market')" 'BEGIN { exit !(cat > stock && kitten > stock) }' \
  || fail "the cat sentences are not nearer the query than the stock-market one"
[ "$(grep -c '^stories260K: \[.*\] -> \[\([0-9]*, \)\{15\}[0-9]*\]$' "$log")" = 2 ] \
  || fail "stories260K did not generate 16 tokens for each of its 2 prompts"
grep -q "WARN io.djlattention.zoo.encoder.SentenceEmbeddingTranslator - 1 of 4 texts had more than 512 tokens" "$log" \
  || fail "the zoo's truncation warning did not reach the application through SLF4J"
if [ -n "$hf_dir" ]; then
  grep -q "^$(basename "$hf_dir"): \"Once upon a time\" -> \"" "$log" || fail "no Hugging Face generation"
fi
echo "examples: built and ran offline against the installed artifacts"
