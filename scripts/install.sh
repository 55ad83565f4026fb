#!/usr/bin/env bash
# Create .venv (once) and install esopt's locked environment into it, then esopt itself
# (editable) on top. The locks under envs/ pin every package with its sha256
# (docs/install.md; regenerate with `bash scripts/lock.sh`):
#   envs/cpu.txt   the default: the extras dev, workflow, docvqa, math and web, and torch's
#                  CPU build (torch 2.13.0+cpu lies on disk on these machines; elsewhere set
#                  ESOPT_TORCH_INDEX to PyTorch's CPU wheel index), because a plain `torch`
#                  requirement pulls a multi-GB CUDA build;
#   envs/gpu.txt   the same packages with PyPI's CUDA torch, taken where `nvidia-smi -L`
#                  finds a GPU.
# ESOPT_LOCK=envs/cpu-optional.txt picks another lock (that one adds the hub and browser
# extras).
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
if [ -z "${ESOPT_LOCK:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    ESOPT_LOCK=envs/gpu.txt
  else
    ESOPT_LOCK=envs/cpu.txt
  fi
fi
"${PIP[@]}" install --require-hashes -r "$ESOPT_LOCK" \
  ${ESOPT_TORCH_INDEX:+--extra-index-url "$ESOPT_TORCH_INDEX"}
# The build backend (setuptools) comes from the lock too: no unpinned build environment.
"${PIP[@]}" install --no-deps --no-build-isolation -e .
