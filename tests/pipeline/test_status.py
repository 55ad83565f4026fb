"""`esopt status` reads progress from the results files of the current config's runs."""

import json
import subprocess
import sys

import pytest

from esopt.pipeline.config import run_specs
from esopt.pipeline.status import load_config, parse_overrides, run_status
from tests.support.records import reward_table, update_manifest
from tests.workflow.conftest import REPO


def _write_generation(spec, run, g, rewards, fanout_s, update_s):
    gen = run / f"gen{g:03d}"
    gen.mkdir(parents=True, exist_ok=True)
    reward_table(spec, g, rewards, ["w"]).write(gen / "rewards.parquet", spec)
    (gen / "directions.done.json").write_text(json.dumps({"wall_s": fanout_s}))
    update_manifest(generation=g + 1, update_wall_s=update_s).write(
        run / f"gen{g + 1:03d}" / "update.json")


def test_status_counts_generations_and_measures_their_time(tmp_path):
    config = load_config(REPO, overrides={"scale": "smoke"})
    specs = {s.method: s for s in run_specs(config)}
    esopt = specs["esopt"]
    assert esopt.generations == 2  # smoke.yaml, merged over config.yaml
    run = tmp_path / "results" / "sudoku/h1/esopt/seed0"
    _write_generation(esopt, run, 0, [0.0, 1.0, 0.5, 0.5], fanout_s=10.0, update_s=2.0)
    row = run_status(esopt, tmp_path / "results")
    assert row["done"] == 1 and row["planned"] == 2
    assert row["last_reward"] == pytest.approx(0.5) and row["s_per_gen"] == pytest.approx(12.0)
    (run / "gen001" / "update.json").unlink()
    _write_generation(esopt, run, 1, [0.25, 0.25, 0.0, 0.0], fanout_s=20.0, update_s=4.0)
    assert run_status(esopt, tmp_path / "results")["done"] == 0  # gen 1 lost its update
    update_manifest(update_wall_s=2.0).write(run / "gen001" / "update.json")
    row = run_status(esopt, tmp_path / "results")
    assert row["done"] == 2 and row["last_reward"] == pytest.approx(0.125)
    assert row["s_per_gen"] == pytest.approx((12.0 + 24.0) / 2)
    assert run_status(specs["vanilla_es"], tmp_path / "results")["done"] == 0


def test_status_command_lists_every_run_of_the_config(tmp_path):
    out = subprocess.run([sys.executable, "-m", "esopt.cli", "status", "--directory", str(REPO),
                          "--results", str(tmp_path), "--config", "scale=smoke"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    runs = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert runs == [f"sudoku/h1/{m}/seed0" for m in
                    ("base", "vanilla_es", "esopt", "grpo", "grpo_b", "ppo")]
    assert "0/2" in out and out.splitlines()[-1].startswith("6 runs, 0/10 generations done")


def test_config_overrides_read_as_snakemake_does():
    assert parse_overrides(["scale=smoke", "x=3", "y=[1, 2]"]) == {
        "scale": "smoke", "x": 3, "y": [1, 2]}
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(["scale"])
