"""The benchmarks find the model themselves, as the README runs them on a fresh clone."""

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.workflow.conftest import REPO


def _benchmark(name: str):
    """benchmarks/<name>.py as a module (the directory is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / f"benchmarks/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_model_comes_from_the_pipeline_then_the_test_cache(smollm2_dir, tmp_path,
                                                                monkeypatch):
    bench = _benchmark("bench_model")
    monkeypatch.setattr(bench, "REPO", tmp_path)  # a fresh clone: no resources/ yet
    monkeypatch.setenv("ESOPT_TEST_CACHE", str(smollm2_dir.parents[1]))
    assert bench.smollm2_dir() == str(smollm2_dir)  # after `scripts/test.sh`
    pipeline = tmp_path / "resources/models/smollm2-135m-instruct"
    pipeline.parent.mkdir(parents=True)
    pipeline.symlink_to(smollm2_dir)
    assert bench.smollm2_dir() == str(pipeline)  # after `scripts/run.sh`
    assert bench.smollm2_dir("elsewhere") == "elsewhere"


def test_every_benchmark_script_uses_the_shared_helper():
    scripts = sorted(p for p in (REPO / "benchmarks").glob("*.py") if p.name != "bench_model.py")
    assert scripts
    for script in scripts:
        text = script.read_text()
        assert ".cache/esopt" not in text, script.name  # no private copy of the lookup
        if "smollm2" in text.lower() or "--model" in text:
            assert "from bench_model import smollm2_dir" in text, script.name
    out = subprocess.run([sys.executable, REPO / "benchmarks/rollout.py", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "bench_model.py" in out.stdout, out.stderr[-2000:]


def test_the_population_benchmark_runs_and_prints_its_ratios(tiny_dir):
    """benchmarks/population.py --quick on the tiny model (a check that it runs: the
    timings themselves are the benchmark's, never a test's)."""
    out = subprocess.run([sys.executable, REPO / "benchmarks/population.py", "--quick",
                          "--model", str(tiny_dir), "--threads", "1", "--ranks", "2",
                          "--paths", "plain", "plain-prefix-per-member", "lowrank", "fullrank",
                          "plain-bf16w", "lowrank-bf16w"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    paths = {r["path"]: r for r in rows if "path" in r}
    assert set(paths) == {"plain", "plain-prefix-per-member", "lowrank-r2", "fullrank",
                          "plain-bf16w", "lowrank-r2-bf16w"}
    assert {(r["G"], r["tasks"], r["episodes"]) for r in paths.values()} == {(16, 4, 64)}
    # Plain inference encodes the shared prefix once, the population once per member.
    assert paths["plain"]["executed_tokens"] < paths["lowrank-r2"]["executed_tokens"]
    assert paths["plain"]["executed_tokens"] < paths["plain-prefix-per-member"][
        "executed_tokens"]
    # Each served dtype against its own plain inference.
    ratios = {r["plain"]: r["ratios_vs_plain"] for r in rows if "ratios_vs_plain" in r}
    assert {p: set(r) for p, r in ratios.items()} == {
        "plain": {"plain-prefix-per-member", "lowrank-r2", "fullrank"},
        "plain-bf16w": {"lowrank-r2-bf16w"}}
    assert all(v["episodes_per_s"] > 0 for r in ratios.values() for v in r.values())
    # The floor: every forward's at least, plus full rank's G perturb + restore floors.
    kernels = next(r for r in rows if "matmul_gflop_per_s" in r)
    assert kernels["matmul_gflop_per_s"] > 0 and kernels["read_gb_per_s"] > 0
    full = paths["fullrank"]
    assert full["floor_s"] > full["forward_floor_s"] > 0
    # (floor_s and wall_s are printed rounded to 0.01 s)
    assert full["floor_over_measured"] == pytest.approx(full["floor_s"] / full["wall_s"],
                                                        abs=0.01)


def test_sudoku_chance_is_what_random_digits_give_at_one_blank():
    # One blank, 3 turns, only the solution's digit is legal there: 1 - (3/4)^3 = 57.8%.
    chance = _benchmark("sudoku_chance")
    from esopt.agent.evaluate import task_seeds

    p = chance.random_player_success(4, 1, task_seeds("test", 1000))
    assert abs(p - (1 - 0.75 ** 3)) < 0.04, p
    assert chance.random_player_success(4, 2, task_seeds("test", 200)) < p
