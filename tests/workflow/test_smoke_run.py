"""Real Snakemake runs of the smoke scale: end to end, deterministic, resumable."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.workflow.conftest import BIN, REPO, in_process_sha, make_workdir, snakemake

RUN = "results/sudoku/h1/{method}/seed0"
RL = ("grpo", "grpo_b", "ppo")
DETERMINISTIC_COLUMNS = ["generation", "direction", "direction_seed", "sign", "sigma", "fitness",
                         "success", "task_seeds", "task_rewards", "turns", "prompt_tokens",
                         "completion_tokens"]
pytestmark = pytest.mark.slow


def _final_hashes(wd: Path, methods=("vanilla_es", "esopt", *RL)) -> dict:
    """Final checkpoint sha256 of each method's run (ES: update record; RL: manifest)."""
    out = {}
    for m in methods:
        run = wd / RUN.format(method=m)
        record = run / ("rl/gen002/manifest.json" if m in RL else "gen002/update.json")
        out[m] = json.loads(record.read_text())["sha256"]
    return out


def _reward_tables(wd: Path) -> dict:
    tables = {}
    for p in sorted(wd.glob("results/sudoku/*/*/seed0/gen*/rewards.parquet")):
        # What the run computed; timing, worker ids, memory and sharding vary by design.
        t = pq.read_table(p, columns=DETERMINISTIC_COLUMNS)
        tables[str(p.relative_to(wd))] = t.to_pydict()
    return tables


def _git(wd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=esopt", "-c", "user.email=esopt@localhost",
                           *args], cwd=wd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, smollm2_dir):
    wd = make_workdir(tmp_path_factory.mktemp("smoke") / "wf", smollm2_dir)
    # A clone of the workflow (its tracked files and .gitignore), to see what a run adds.
    shutil.copy(REPO / ".gitignore", wd)
    _git(wd, "init", "-q")
    _git(wd, "add", "-A")
    _git(wd, "commit", "-qm", "the workflow as cloned")
    t0 = time.perf_counter()
    snakemake(wd, "all", "--config", "scale=smoke")
    return wd, time.perf_counter() - t0


def test_smoke_run_writes_every_artifact(smoke_run):
    wd, wall_s = smoke_run
    for name in ("table1", "table7"):
        for ext in ("csv", "md", "tex"):
            assert (wd / f"results/tables/{name}.{ext}").stat().st_size > 0
    assert (wd / "results/figures/fig3.png").stat().st_size > 10_000
    assert (wd / "results/report.pdf").read_bytes().startswith(b"%PDF")
    table1 = (wd / "results/tables/table1.md").read_text()
    assert "Agentic ESOpt" in table1 and "H*=1" in table1 and "GB" in table1
    assert "cosine" in (wd / "results/tables/table7.md").read_text()
    for method in ("base", "vanilla_es", "esopt", *RL):
        assert (wd / RUN.format(method=method) / "final" / "eval.parquet").exists()


def test_table6_measures_every_es_run_against_its_base(smoke_run):
    wd, _ = smoke_run
    for method in ("vanilla_es", "esopt"):
        record = json.loads((wd / RUN.format(method=method) / "final/update_magnitudes.json")
                            .read_text())
        assert record["spec"]["method"] == method
        assert record["final"].endswith("gen002/checkpoint")
        # The random smoke model's rewards may all tie (zero updates): Table 6 must say
        # "moved" exactly when an update had a non-zero weight, and never more than 1.
        run = wd / RUN.format(method=method)
        moved = any(w != 0 for g in (1, 2) for w in
                    json.loads((run / f"gen{g:03d}/update.json").read_text())["weights"])
        assert (record["max_abs"] > 0) == moved and record["max_abs"] < 1
        assert record["fractions"] == sorted(record["fractions"])
        assert (record["fractions"] == [1.0] * 3) == (not moved)
        assert record["parameters"] > 1_000_000
    table6 = (wd / "results/tables/table6.md").read_text()
    assert "Vanilla ES" in table6 and "Agentic ESOpt" in table6 and "83.68%" in table6


def test_a_smoke_run_leaves_git_status_clean(smoke_run):
    wd, _ = smoke_run
    assert (wd / "results/benchmarks/sudoku/h1/esopt/seed0/gen000/directions.tsv").is_file()
    assert any((wd / "logs").rglob("*.log"))
    assert _git(wd, "status", "--porcelain", "--untracked-files=all") == ""


def test_status_reports_the_smoke_runs_from_their_files(smoke_run):
    from esopt.pipeline.status import status

    wd, _ = smoke_run
    rows = {r["run"]: r for r in status(wd / "results", wd, overrides={"scale": "smoke"})}
    for method in ("vanilla_es", "esopt", *RL):
        row = rows[f"sudoku/h1/{method}/seed0"]
        assert row["done"] == row["planned"] == 2 and row["s_per_gen"] > 0
        assert 0 <= row["last_reward"] <= 1 and 0 <= row["final_success"] <= 1
    assert rows["sudoku/h1/base/seed0"]["planned"] == 0


def test_smoke_run_trains_the_rl_baselines_with_ledgers(smoke_run):
    wd, _ = smoke_run
    for method in RL:
        run = wd / RUN.format(method=method)
        ledger = pq.read_table(run / "ledger.parquet").to_pydict()
        assert ledger["step"] == [1, 2]
        assert all(f > 0 for f in ledger["flops_train"]) and all(f > 0 for f in ledger["flops"])
        assert all(m > 100 for m in ledger["peak_memory_mb"])
        assert all(t >= 1 for t in ledger["turns"]) and all(s > 0 for s in ledger["update_s"])
        # steps kept as ES generations: every keep_every-th and the last
        assert (run / "rl" / "gen002" / "model.safetensors").exists()
        assert not (run / "rl" / "gen001").exists()
        manifest = json.loads((run / "rl" / "gen002" / "manifest.json").read_text())
        assert manifest["config"]["method"] == method and manifest["generation"] == 2
        trajectories = pq.read_table(run / "trajectories.parquet")
        assert trajectories.num_rows == 2 * 2 * 2  # steps x tasks x group
        assert sorted(set(trajectories.column("step").to_pylist())) == [1, 2]
        evals = pq.read_schema(run / "final" / "eval.parquet").metadata
        assert json.loads(evals[b"summary"])["checkpoint_sha256"] == manifest["sha256"]
    es = pq.read_table(wd / RUN.format(method="esopt") / "ledger.parquet").to_pydict()
    assert es["step"] == [1, 2] and all(f > 0 for f in es["flops"])
    assert all(t > 0 for t in es["generate_s"]) and all(f == 0 for f in es["flops_train"])
    # The paper's decoders: GRPO-dagger samples at temperature 1, GRPO-B as it evaluates.
    grpo = json.loads((wd / RUN.format(method="grpo") / "rl/gen002/manifest.json").read_text())
    grpo_b = json.loads((wd / RUN.format(method="grpo_b") / "rl/gen002/manifest.json")
                        .read_text())
    assert grpo["config"]["train_decoder"]["temperature"] == 1.0
    assert grpo_b["config"]["train_decoder"] == grpo_b["config"]["eval_decoder"]


def test_table2_and_figure7_come_from_the_ledgers(smoke_run):
    wd, _ = smoke_run
    header, *rows = (wd / "results/tables/table2.csv").read_text().splitlines()
    assert header == ("Method,H*=1 FLOPs,H*=1 Wall-clock,H*=1 Worker time,H*=1 Episodes,"
                      "H*=1 Failed")
    methods = [r.split(",")[0] for r in rows]
    assert methods == ["Vanilla ES", "Agentic ESOpt", "Agentic GRPO †",
                       "Agentic GRPO ‡ (GRPO-B)", "Agentic PPO"]
    assert all("FLOPs" in r.split(",")[1] for r in rows)
    episodes = {r.split(",")[0]: int(r.split(",")[4]) for r in rows}
    assert episodes["Agentic GRPO †"] == 2 * 2 * 2  # steps x tasks x group
    assert episodes["Agentic ESOpt"] == 2 * 4 * 2  # generations x G x tasks per direction
    # No environment raised: no failed episodes, no excluded directions (issue 16).
    failed = {r.split(",")[0]: r.split(",")[5] for r in rows}
    # Wall-clock of the run and the summed worker time, each a duration
    assert all(r.split(",")[2].endswith("min") and r.split(",")[3].endswith("min")
               for r in rows)
    assert failed["Agentic ESOpt"] == "0 / 0" and failed["Agentic GRPO †"] == "0"
    rewards = pq.read_table(wd / RUN.format(method="esopt") / "gen000" / "rewards.parquet")
    assert rewards.column("failed_episodes").to_pylist() == [0] * 4
    assert (wd / "results/figures/fig7.png").stat().st_size > 10_000
    table1 = (wd / "results/tables/table1.md").read_text()
    assert "Agentic PPO" in table1 and "GRPO-B" in table1


def test_smoke_run_includes_the_ahd_tables_and_runs(smoke_run):
    wd, _ = smoke_run
    table5 = (wd / "results/tables/table5.md").read_text()
    assert "Optimal" in table5 and "20.0369" in table5 and "Greedy Construct" in table5
    assert "Agentic ESOpt + Sample" in table5 and "Δ vs Sample" in table5
    for method in ("sample", "esopt_sample"):
        run = wd / "results/ahd/kp_constructive" / method / "seed0"
        summary = json.loads((run / "summary.json").read_text())
        assert summary["evaluated"] == 4 and summary["config"]["method"] == method
        candidates = pq.read_table(run / "candidates.parquet")
        assert candidates.num_rows == 4 and b"config" in candidates.schema.metadata
    updates = pq.read_table(wd / "results/ahd/kp_constructive/esopt_sample/seed0/updates.parquet")
    assert updates.num_rows == 2  # budget 4 / batch 2


def test_checkpoint_manifest_is_enough_to_replay_the_update(smoke_run):
    wd, _ = smoke_run
    run = wd / RUN.format(method="esopt")
    m1 = json.loads((run / "gen001" / "update.json").read_text())
    m2 = json.loads((run / "gen002" / "update.json").read_text())
    assert m2["parent_sha256"] == m1["sha256"]
    assert m1["generation"] == 1 and len(m1["seeds"]) == len(m1["weights"]) == 4
    for key in ("sigma", "alpha", "config", "rewards"):
        assert key in m1
    # Replay: base weights + the manifest's seeds and weights give the recorded hash.
    from esopt.backends.hf import HFPolicy
    from esopt.es.strategy import Update

    policy = HFPolicy.load(wd / "resources/models/tiny-random")
    policy.apply(Update(generation=0, sigma=m1["sigma"], alpha=m1["alpha"],
                        seeds=tuple(m1["seeds"]), signs=tuple(m1["signs"]),
                        weights=tuple(m1["weights"])))
    assert policy.save(wd / "results/replay")["sha256"] == m1["sha256"]


def test_intermediate_checkpoints_are_temporary_and_kept_ones_stay(smoke_run):
    wd, _ = smoke_run
    # smoke keeps every 2nd checkpoint and the last: gen 1 is deleted once gen 2 exists;
    # the reward tables, direction files and update records stay.
    run = wd / RUN.format(method="vanilla_es")
    assert not (run / "gen001" / "checkpoint").exists()
    assert (run / "gen002" / "checkpoint" / "model.safetensors").exists()
    assert (run / "gen001" / "update.json").exists()
    assert (run / "gen000" / "rewards.parquet").exists()
    assert len(list((run / "gen000" / "directions").glob("*.parquet"))) == 4


def test_dag_equals_the_same_run_in_one_process(smoke_run):
    wd, _ = smoke_run
    assert in_process_sha(wd, RUN.format(method="esopt")) == _final_hashes(wd)["esopt"]


def test_interrupted_run_resumes_to_the_same_hashes(smoke_run, tmp_path, smollm2_dir):
    # ESOpt's final checkpoint as the target (not `all`: the RL, AHD and report jobs have
    # no directions to resume, and rebuilding them doubled this test's time; vanilla ES
    # runs the same stages, so a second ES run would only add time).
    ref, _ = smoke_run
    wd = make_workdir(tmp_path / "wf", smollm2_dir)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    es = ("esopt",)
    targets = [RUN.format(method=m) + "/gen002/update.json" for m in es]
    proc = subprocess.Popen([str(BIN / "snakemake"), "--cores", "2", *targets, "--config",
                             "scale=smoke"], cwd=wd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    target = wd / RUN.format(method="esopt") / "gen001" / "directions" / "000.parquet"
    deadline = time.monotonic() + 600
    while not target.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the workflow and all its jobs, mid-generation
    proc.wait(timeout=30)
    assert target.exists(), "the run ended before the kill point"
    before = target.stat().st_mtime
    snakemake(wd, "--unlock", "--config", "scale=smoke")  # a killed run leaves its lock
    snakemake(wd, *targets, "--config", "scale=smoke", "--rerun-incomplete")
    assert target.stat().st_mtime == before  # finished directions are not redone
    assert {m: _final_hashes(wd, es)[m] for m in es} == {m: _final_hashes(ref)[m] for m in es}
    assert _reward_tables(wd) == {k: v for k, v in _reward_tables(ref).items()
                                  if any(f"/{m}/" in k for m in es)}


def test_rerunning_one_target_works(smoke_run):
    wd, _ = smoke_run
    target = RUN.format(method="esopt") + "/final/eval.parquet"
    (wd / target).unlink()
    proc = snakemake(wd, target, "--config", "scale=smoke")
    assert (wd / target).exists()
    log = proc.stdout + proc.stderr
    assert "rule final_eval" in log and "rule evaluate_directions" not in log


def test_snakemake_report_collects_the_figures(smoke_run):
    wd, _ = smoke_run
    snakemake(wd, "--report", "results/report.html", "--config", "scale=smoke")  # as the README
    html = (wd / "results/report.html").read_text(errors="replace")
    assert "fig3.pdf" in html and "fig7.pdf" in html and "report.pdf" in html
    assert _git(wd, "status", "--porcelain", "--untracked-files=all") == ""
