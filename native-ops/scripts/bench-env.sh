#!/usr/bin/env bash
# Creates (or reuses) the virtual environment EncoderVsOrtBenchmark runs make_bench_models.py in:
# torch 2.13 CPU and transformers (the random BERT-base checkpoint and its ONNX export), onnx and
# onnxruntime (ONNX Runtime's own int8 MiniLM). bash native-ops/scripts/bench-env.sh DIR
# Like python-env.sh, it reads pip's first local index when pip's configuration names one.
set -euo pipefail
venv=${1:-.venv-bench}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch, transformers, onnx, onnxruntime" 2>/dev/null; then
  exit 0
fi
echo "bench-env: installing torch 2.13 (CPU), transformers, onnx and onnxruntime into $venv" >&2
python3 -m venv "$venv"
index_args=()
extra=$(python3 -m pip config get global.extra-index-url 2>/dev/null || true)
first_local=$(printf '%s\n' $extra | grep '^file://' | head -1 || true)
if [ -n "$first_local" ]; then
  index_args=(--index-url "$first_local")
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${index_args[@]}" \
  torch==2.13.0 transformers==5.18.0 safetensors==0.8.0 onnx==1.23.1 onnxruntime==1.30.0
