#!/usr/bin/env bash
# Create .venv (once) and install esopt with its test, workflow, DocVQA (OCR), math
# (math-verify) and web extras.
# torch: the project asks for a range; here we pick the build. Without a GPU we take the
# CPU build (torch 2.13.0 lies on disk on these machines; elsewhere set
# ESOPT_TORCH_INDEX to PyTorch's CPU wheel index), because a plain `torch` requirement
# pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
# Generated code runs in a bubblewrap jail (esopt.runtime.sandbox; docs/sandbox.md). As
# root, install it where it is missing; elsewhere the sandbox refuses with a clear error
# naming the package and the weaker `runtime.sandbox: guard-only` mode.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install: bubblewrap (the sandbox's jail)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
  else
    echo "install: bubblewrap (bwrap) is missing and cannot be installed here; generated" \
         "code will refuse to run unless runtime.sandbox is guard-only (docs/sandbox.md)" >&2
  fi
fi
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "${PIP[@]}" install "torch>=2.4,<3"
  else
    "${PIP[@]}" install "torch==2.13.0" ${ESOPT_TORCH_INDEX:+--index-url "$ESOPT_TORCH_INDEX"}
  fi
fi
"${PIP[@]}" install -e ".[dev,workflow,docvqa,math,web]"
