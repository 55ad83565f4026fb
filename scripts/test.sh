#!/usr/bin/env bash
# The test command: install what is needed, start a one-node SLURM on localhost for the
# tests marked `slurm` (stopped again on exit, pass or fail), then run every test tier:
# unit, tiny-model integration, real SmolLM2-135M tests (`slow`), workflow, SLURM.
# ESOPT_SKIP_SLURM=1 skips the cluster (its tests then report themselves skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if [ "${ESOPT_SKIP_SLURM:-0}" != 1 ]; then
  trap 'bash scripts/slurm/stop.sh' EXIT
  timeout -k 10 600 bash scripts/slurm/start.sh
fi
.venv/bin/python -m pytest "$@"
