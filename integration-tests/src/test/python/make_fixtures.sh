#!/usr/bin/env bash
# Writes the Java tests' independent references: tiny random Hugging Face checkpoints made with
# transformers' own save_pretrained, and their outputs, into DIR (never committed).
#   bash integration-tests/src/test/python/make_fixtures.sh DIR
# Runs every make_*.py beside this script as `python make_X.py DIR/X`; the checkpoints are made
# again only when a script is newer than its output. Python comes from the repository's .venv
# (native-ops/scripts/python-env.sh: torch 2.13 CPU + transformers from this machine's package
# sources). SKIP_FIXTURES names scripts to leave out (space-separated, e.g. "checkpoint_load": the
# GPU suite's carry cannot hold its 175 MB, so the GPU machine makes that one itself).
set -euo pipefail
out=${1:?usage: make_fixtures.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
venv=${DJL_ATTN_VENV:-$root/.venv}
if ! command -v python3 >/dev/null 2>&1; then
  echo "make_fixtures: python3 is not on the PATH. The reference tests need Python 3.10+ with" \
       "torch and transformers: install python3 and run bash native-ops/scripts/python-env.sh .venv" >&2
  exit 1
fi
if ! bash "$root/native-ops/scripts/python-env.sh" "$venv"; then
  echo "make_fixtures: could not set up $venv (torch 2.13 + transformers). Run" \
       "bash native-ops/scripts/python-env.sh .venv by hand and read its error." >&2
  exit 1
fi
mkdir -p "$out"
for script in "$here"/make_*.py; do
  name=$(basename "$script" .py)
  name=${name#make_}
  case " ${SKIP_FIXTURES:-} " in *" $name "*) continue ;; esac
  stamp="$out/$name/.done"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$script" ]; then
    continue
  fi
  echo "make_fixtures: $name"
  rm -rf "${out:?}/$name"
  "$venv/bin/python" "$script" "$out/$name"
  touch "$stamp"
done
