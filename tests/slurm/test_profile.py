"""The whole smoke DAG through `--profile profiles/slurm` against the local SLURM."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.slurm.conftest import LOCAL_RUNTIME
from tests.workflow.conftest import BIN, REPO, in_process_sha, make_workdir, snakemake

pytestmark = pytest.mark.slurm
RUN = "results/sudoku/h1/esopt/seed0"
ARGS = ["--profile", "profiles/slurm", "--configfiles", "profiles/slurm/runtime.yaml",
        "local-runtime.yaml", "--config", "scale=smoke"]


def slurm_workdir(dest: Path, smollm2_dir: Path) -> Path:
    wd = make_workdir(dest, smollm2_dir)
    shutil.copytree(REPO / "profiles", wd / "profiles")
    (wd / "local-runtime.yaml").write_text(yaml.safe_dump(LOCAL_RUNTIME))
    return wd


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory, smollm2_dir):
    wd = slurm_workdir(tmp_path_factory.mktemp("slurm") / "wf", smollm2_dir)
    snakemake(wd, "all", *ARGS, timeout=1200)
    return wd


def test_smoke_through_slurm_matches_the_local_computation(slurm_run):
    final = json.loads((slurm_run / RUN / "gen002" / "update.json").read_text())
    assert final["config"]["runtime"]["cluster"] == "slurm"
    assert final["sha256"] == in_process_sha(slurm_run, RUN)
    assert (slurm_run / "results/report.pdf").exists()


def test_one_job_array_per_generation(slurm_run):
    for gen in ("gen000", "gen001"):
        folder = slurm_run / RUN / gen / "submitit"
        arrays = {p.name.split("_")[0] for p in folder.glob("*_submitted.pkl")}
        assert len(arrays) == 1, arrays
        tasks = {p.name.split("_")[1] for p in folder.glob("*_submitted.pkl")}
        assert tasks == {"0", "1"}


def test_killed_workflow_restarts_to_the_same_hash(slurm_run, tmp_path, smollm2_dir):
    wd = slurm_workdir(tmp_path / "wf", smollm2_dir)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    final = f"{RUN}/gen002/update.json"  # the ES run, not `all`: only it has shards to resume
    proc = subprocess.Popen([str(BIN / "snakemake"), final, *ARGS], cwd=wd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    target = wd / RUN / "gen001" / "directions" / "000.parquet"
    deadline = time.monotonic() + 600
    while not target.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert target.exists(), "the run ended before the kill point"
    snakemake(wd, "--unlock", *ARGS)
    snakemake(wd, final, *ARGS, timeout=1200)
    sha = lambda d: json.loads((d / RUN / "gen002" / "update.json").read_text())["sha256"]  # noqa: E731
    assert sha(wd) == sha(slurm_run)
