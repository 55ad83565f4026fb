"""Workflow fixtures: a scratch copy of the pipeline, run with the project's snakemake."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def snakemake(workdir: Path, *args: str, timeout: int = 900, check: bool = True
              ) -> subprocess.CompletedProcess:
    """Run the project's snakemake in `workdir` (rules find `esopt` on PATH)."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.run([str(BIN / "snakemake"), "--cores", "2", *args], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {args} failed:\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-5000:]}")
    return proc


def make_workdir(dest: Path, smollm2_dir: Path) -> Path:
    """Snakefile, config, workflow and profiles in `dest`; the embedded model linked from the
    cache."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Snakefile", dest)
    for d in ("config", "workflow", "profiles"):
        shutil.copytree(REPO / d, dest / d)
    (dest / "slurm").symlink_to("profiles/slurm")  # as in the repository: --profile slurm
    models = dest / "resources" / "models"
    models.mkdir(parents=True)
    (models / "smollm2-135m-instruct").symlink_to(smollm2_dir)
    return dest


def in_process_sha(wd: Path, run: str) -> str:
    """Final sha256 of `run` (a run dir of the workflow in `wd`) recomputed in one process."""
    from esopt.pipeline.inprocess import train_in_process
    from esopt.pipeline.spec import RunSpec

    meta = pq.read_schema(wd / run / "gen000" / "rewards.parquet").metadata
    spec = RunSpec.from_json(meta[b"config"].decode())
    cwd = os.getcwd()
    os.chdir(wd)  # the spec's model path is relative to the workflow
    try:
        return train_in_process(spec, wd / "results/inprocess")["sha256"]
    finally:
        os.chdir(cwd)


@pytest.fixture()
def workdir(tmp_path, smollm2_dir):
    return make_workdir(tmp_path / "wf", smollm2_dir)
