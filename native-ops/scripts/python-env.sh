#!/usr/bin/env bash
# Creates (or reuses) a virtual environment with torch 2.13 CPU, pytest and numpy for the pytest
# suite, and Hugging Face transformers for the Java tests' reference checkpoints
# (integration-tests/src/test/python): bash native-ops/scripts/python-env.sh DIR
#
# On this project's machines pip's configuration already names local package sources (a wheel
# folder and file:// indexes); pip would still retry the unreachable public index for minutes,
# so the first local index replaces it when there is one.
set -euo pipefail
venv=${1:-.venv}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch, pytest, numpy, transformers, safetensors" 2>/dev/null; then
  exit 0
fi
echo "python-env: installing torch 2.13 (CPU), transformers and pytest into $venv (about a minute, once)" >&2
python3 -m venv "$venv"
index_args=()
extra=$(python3 -m pip config get global.extra-index-url 2>/dev/null || true)
first_local=$(printf '%s\n' $extra | grep '^file://' | head -1 || true)
if [ -n "$first_local" ]; then
  index_args=(--index-url "$first_local")
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${index_args[@]}" \
  torch==2.13.0 pytest==9.1.1 numpy==2.4.6 transformers==5.18.0 safetensors==0.8.0
