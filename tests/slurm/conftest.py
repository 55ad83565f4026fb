"""Tests against the real one-node SLURM that scripts/slurm/start.sh runs on localhost."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import smoke_run_spec

# Small SLURM tasks for this 2-core test node: no GPUs, one CPU, little memory.
LOCAL_RUNTIME = {"runtime": {
    "cluster": "slurm", "workers": 2, "threads_per_worker": 1, "eval_threads": 1,
    "timeout_min": 10, "poll_s": 0.5,
    "slurm": {"partition": "debug", "gpus_per_node": None, "cpus_per_task": 1, "mem_gb": 2},
}}


def slurm_ready() -> bool:
    if shutil.which("srun") is None:
        return False
    try:
        return subprocess.run(["srun", "-N1", "-n1", "-t", "1", "true"], timeout=30,
                              capture_output=True).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="session", autouse=True)
def slurm_cluster():
    if not slurm_ready():
        pytest.skip("no SLURM on this machine: start one with `bash scripts/slurm/start.sh` "
                    "(scripts/test.sh does)")


@pytest.fixture()
def smoke_spec(tiny_dir):
    """The smoke-scale esopt run spec on the tiny random model, fanned out to SLURM."""
    return smoke_run_spec(tiny_dir, LOCAL_RUNTIME["runtime"])
