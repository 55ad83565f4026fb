"""The miniature paper scale (scale=paper-mini: the paper's DAG, a random 2-layer model,
tiny sizes) through `--profile slurm` against the local SLURM: every heavy rule a SLURM
job, one submitit array per generation, the local computation's final sha256, and a
change of runtime settings that reruns nothing."""

import json
import os
import shutil
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from tests.slurm.conftest import LOCAL_RUNTIME
from tests.workflow.conftest import BIN, in_process_sha, make_workdir, snakemake

pytestmark = pytest.mark.slurm
RUN = "results/sudoku/h1/{method}/seed0"
ES = ("esopt",)
RL = ("grpo", "ppo")
# This one-node cluster over the paper profile (a later --profile replaces top-level keys):
# its partition, no GPUs, small jobs, fast status checks. The jobs yield to the direction
# arrays (--nice): on 2 CPUs the ES generations, the run's critical path, would otherwise
# queue behind every evaluation and RL job.
LOCALHOST_PROFILE = {
    "configfiles": ["profiles/slurm/runtime.yaml", "local-runtime.yaml"],
    "default-resources": {"slurm_partition": "debug", "runtime": 10, "mem_mb": 1500,
                          "cpus_per_task": 1, "gpu": 0, "slurm_extra": "--nice=1000"},
    "set-resources": {"rl_train": {"mem_mb": 2000}},
    "slurm-no-account": True,
    "slurm-init-seconds-before-status-checks": 1,
    "seconds-between-status-checks": 1,
    "latency-wait": 5,
    "local-cores": 2,
}
ARGS = ["--profile", "slurm", "--profile", "localhost", "--config", "scale=paper-mini"]
# The SLURM jobs of the miniature paper DAG, by rule: held-out evaluations (base at gen 0,
# every trained run at its last kept step), RL training, AHD searches and references,
# the landscape, Table 6's update magnitudes (two float32 checkpoints read in full). Everything
# else is a localrule.
HEAVY_JOBS = {"evaluate_checkpoint": 4, "rl_train": 2, "ahd_search": 2, "ahd_references": 1,
              "landscape": 1, "update_magnitudes": 1}


def slurm_workdir(dest: Path, smollm2_dir: Path) -> Path:
    wd = make_workdir(dest, smollm2_dir)
    (wd / "localhost").mkdir()
    (wd / "localhost" / "config.yaml").write_text(yaml.safe_dump(LOCALHOST_PROFILE))
    (wd / "local-runtime.yaml").write_text(yaml.safe_dump(LOCAL_RUNTIME))
    return wd


def _sacct(since: str) -> list[dict]:
    """This cluster's jobs (allocations, not steps) started since `since`."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-S", since, "--format",
                          "JobID,JobName,State,Comment,WorkDir"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    keys = ("id", "name", "state", "comment", "workdir")
    return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines()]


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory, smollm2_dir):
    wd = slurm_workdir(tmp_path_factory.mktemp("slurm") / "wf", smollm2_dir)
    since = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    snakemake(wd, "all", *ARGS, timeout=1200)
    time.sleep(1)  # slurmdbd records the last job's end asynchronously
    return wd, [j for j in _sacct(since) if j["workdir"].startswith(str(wd))]


def _final_sha(wd: Path, method: str) -> str:
    run = wd / RUN.format(method=method)
    record = run / ("rl/gen002/manifest.json" if method in RL else "gen002/update.json")
    return json.loads(record.read_text())["sha256"]


def test_paper_mini_through_slurm_matches_the_local_computation(slurm_run):
    wd, _ = slurm_run
    final = json.loads((wd / RUN.format(method="esopt") / "gen002" / "update.json").read_text())
    assert final["config"]["runtime"]["cluster"] == "slurm"
    for method in ES:
        assert _final_sha(wd, method) == in_process_sha(wd, RUN.format(method=method))
    assert (wd / "results/report.pdf").read_bytes().startswith(b"%PDF")
    assert (wd / "results/tables/table5.md").exists()  # the AHD searches reached the report


def test_every_heavy_job_is_a_slurm_job_and_light_ones_are_local(slurm_run):
    _, jobs = slurm_run
    rules = [j["comment"].removeprefix("rule_").split("_wildcards_")[0]
             for j in jobs if j["comment"].startswith("rule_")]
    assert {r: rules.count(r) for r in set(rules)} == HEAVY_JOBS, jobs
    assert all(j["state"] == "COMPLETED" for j in jobs), jobs


def test_one_job_array_per_generation(slurm_run):
    wd, jobs = slurm_run
    tasks = {j["id"]: j for j in jobs if "_" in j["id"]}  # array tasks: <array>_<task>
    for method in ES:
        for gen in ("gen000", "gen001"):
            folder = wd / RUN.format(method=method) / gen / "submitit"
            submitted = [p.name.split("_submitted")[0] for p in folder.glob("*_submitted.pkl")]
            assert len({s.split("_")[0] for s in submitted}) == 1, submitted
            assert sorted(s.split("_")[1] for s in submitted) == ["0", "1"]
            # ...and SLURM ran those two array tasks (sacct: <array>_0, <array>_1).
            assert all(tasks[s]["state"] == "COMPLETED" for s in submitted), (submitted, tasks)
    assert len(tasks) == 2 * 2  # 2 generations x 2 tasks, nothing else


def test_changing_the_runtime_reruns_nothing(slurm_run):
    wd, _ = slurm_run
    # Another partition (the arrays' and the jobs'), worker count, poll interval and
    # timeout on SLURM; then this machine's local executor (no profile, cluster local).
    (wd / "other-runtime.yaml").write_text(yaml.safe_dump({"runtime": {
        "workers": 3, "poll_s": 30, "timeout_min": 5, "eval_threads": 2,
        "slurm": {"partition": "other", "cpus_per_task": 2}}}))
    other = ["--configfiles", "profiles/slurm/runtime.yaml", "local-runtime.yaml",
             "other-runtime.yaml", "--default-resources", "slurm_partition=other",
             "runtime=30", "mem_mb=1000", "cpus_per_task=2"]
    for args in ([*ARGS, *other], ["--config", "scale=paper-mini"]):
        out = snakemake(wd, "-n", "all", *args).stdout
        assert "Nothing to be done" in out, out[-3000:]


def test_killed_workflow_restarts_to_the_same_hash(slurm_run):
    # Last in this module: it redoes the ES run's generations 1 and 2 in the run's own
    # workdir (generation 0 and the model stay), killing Snakemake while generation 1's
    # array is scoring, then restarting it.
    wd, _ = slurm_run
    run = RUN.format(method="esopt")
    uninterrupted = _final_sha(wd, "esopt")
    for gen in ("gen001", "gen002"):
        shutil.rmtree(wd / run / gen)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    # The profile by its path this time (--profile profiles/slurm keeps working).
    args = ["--profile", "profiles/slurm", *ARGS[2:]]
    final = f"{run}/gen002/update.json"  # the ES run, not `all`: only it has shards to resume
    proc = subprocess.Popen([str(BIN / "snakemake"), final, *args], cwd=wd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    target = wd / run / "gen001" / "directions" / "000.parquet"
    deadline = time.monotonic() + 600
    while not target.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert target.exists(), "the run ended before the kill point"
    assert not (wd / final).exists()
    snakemake(wd, "--unlock", *args)
    snakemake(wd, final, *args, timeout=1200)
    assert _final_sha(wd, "esopt") == uninterrupted
