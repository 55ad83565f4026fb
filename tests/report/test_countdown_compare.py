"""The Countdown comparison (issue 37) from crafted run files: Table 1's paired differences
and memory, Table 2's FLOPs, episodes and times, the FLOPs curve of the figure."""

import pyarrow as pa
import pytest

from esopt.pipeline.config import run_specs
from esopt.report.countdown_compare import (
    countdown_table1,
    countdown_table2,
    flops_curve,
    write_countdown_compare,
)
from esopt.report.registry import ReportContext, get_part
from esopt.runtime.atomic import write_parquet_atomic
from tests.pipeline.test_config import base_config
from tests.support.records import write_eval_file

TASKS = list(range(8))
# Tasks solved (the first k of the 8) by the final checkpoint, per (method, seed); the
# intermediate kept checkpoints solve `MID`.
FINAL = {("base", 0): 2, ("base", 1): 2, ("esopt", 0): 5, ("esopt", 1): 5,
         ("grpo", 0): 3, ("grpo", 1): 4, ("ppo", 0): 2}
MID = 3
# Ledger per run: FLOPs per update, and the peak memory of its training jobs (MB).
FLOPS = {("esopt", 0): [1e12, 1e12], ("esopt", 1): [1e12, 1e12],
         ("grpo", 0): [0.6e12, 0.6e12, 0.7e12], ("grpo", 1): [0.7e12, 0.7e12, 0.7e12],
         ("ppo", 0): [1.2e12, 1.2e12]}
MEMORY = {"esopt": 1024.0, "grpo": 3072.0, "ppo": 4096.0}


def _eval(path, generation, solved, seed, method):
    write_eval_file(path, {"task_seed": TASKS, "success": [t < solved for t in TASKS]},
                    generation=generation, seed=seed, method=method,
                    experiment="countdown", per_repeat=[solved / 8], peak_memory_mb=512.0)


@pytest.fixture()
def specs(tmp_path, monkeypatch):
    cfg = base_config()
    cfg["experiments"] = ["countdown"]
    cd = cfg["countdown"]
    cd["methods"] = ["base", "esopt", "grpo", "ppo"]
    cd["seeds_by_method"] = {"esopt": [0, 1], "grpo": [0, 1]}
    cd["es"].update(population_size=4, tasks_per_direction=4, generations=2, keep_every=1)
    # 2 x 4 x 4 = 32 ES episodes: GRPO 32 / (5 x 2) -> 3 steps, PPO 32 / (9 x 2) -> 2.
    cd["rl"] = {"budget": {"match_flops_of": "esopt"}, "tasks_per_step": 1, "group_size": 2}
    specs = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    for s in specs:
        run = tmp_path / s.run_dir
        key = (s.method, s.seed)
        for g in s.kept_generations():
            if g == 0 and s.method != "base":
                continue
            _eval(run / f"eval/gen{g:03d}.parquet", g,
                  FINAL[key] if g == s.generations else MID, s.seed, s.method)
        _eval(run / "final/eval.parquet", s.generations, FINAL[key], s.seed, s.method)
        if s.method != "base":
            flops = FLOPS[key]
            assert len(flops) == s.generations
            n = len(flops)
            peak = MEMORY[s.method] + 1024 * s.seed  # seed 1's jobs peak 1 GB higher
            write_parquet_atomic(pa.table({
                "step": list(range(1, n + 1)), "flops": flops,
                "episodes": [16 if s.method == "esopt" else 2] * n,
                "wall_s": [30.0] * n, "load_s": [5.0] + [0.0] * (n - 1),
                "generate_s": [20.0] * n, "noise_s": [0.0] * n, "score_s": [1.0] * n,
                "update_s": [2.0] * n, "save_s": [0.0] * n,
                "peak_memory_mb": [peak - 100] + [peak] * (n - 1),
                "reward_mean": [0.1] * n}),
                run / "ledger.parquet")
    return specs


def _ci(cell: str) -> tuple[str, float, float]:
    mean, ci = cell.split(" [")
    lo, hi = (float(x) for x in ci.split("]")[0].split(", "))
    return mean, lo, hi


def test_budgets_resolved_as_matched_flops(specs):
    steps = {s.method: s.generations for s in specs if s.seed == 0}
    assert steps == {"base": 0, "esopt": 2, "grpo": 3, "ppo": 2}


def test_table1_success_paired_differences_and_memory(specs):
    header, rows = countdown_table1(specs)
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert list(by) == ["Base model", "Agentic ESOpt", "Agentic GRPO †", "Agentic PPO"]
    assert by["Agentic ESOpt"]["Seeds x tasks"] == "2 x 8"
    assert by["Agentic PPO"]["Seeds x tasks"] == "1 x 8"
    assert by["Agentic ESOpt"]["Held-out success [95% CI]"].startswith("62.5 [")
    assert by["Agentic GRPO †"]["Held-out success [95% CI]"].startswith("43.8 [")
    # Final - base, paired by seed and task: ESOpt +3/8 on every seed, GRPO +1/8 and +2/8.
    mean, lo, hi = _ci(by["Agentic ESOpt"]["Final - base [95% CI]"])
    assert mean == "+37.5" and 0 < lo < 37.5 < hi <= 100
    assert by["Agentic ESOpt"]["Final - base [95% CI]"].endswith("*")
    mean, lo, hi = _ci(by["Agentic GRPO †"]["Final - base [95% CI]"])
    assert mean == "+18.8" and 0 <= lo < 18.75 < hi
    assert by["Agentic PPO"]["Final - base [95% CI]"] == "+0.0 [+0.0, +0.0]"
    assert by["Base model"]["Final - base [95% CI]"] == "–"
    # ESOpt - method: GRPO over seeds 0 and 1 (+2/8, +1/8), PPO over seed 0 (+3/8).
    mean, lo, hi = _ci(by["Agentic GRPO †"]["ESOpt - method [95% CI]"])
    assert mean == "+18.8" and 0 <= lo < 18.75 < hi
    mean, lo, hi = _ci(by["Agentic PPO"]["ESOpt - method [95% CI]"])
    assert mean == "+37.5" and lo > 0
    assert _ci(by["Base model"]["ESOpt - method [95% CI]"])[0] == "+37.5"
    assert by["Agentic ESOpt"]["ESOpt - method [95% CI]"] == "–"
    # Peak memory: the largest peak of the training jobs of any seed; base: its evaluation.
    assert by["Agentic ESOpt"]["Peak memory (training, measured)"] == "2.00 GB"
    assert by["Agentic GRPO †"]["Peak memory (training, measured)"] == "4.00 GB"
    assert by["Agentic PPO"]["Peak memory (training, measured)"] == "4.00 GB"
    assert by["Base model"]["Peak memory (training, measured)"] == "0.50 GB (evaluation)"


def test_esopt_minus_a_method_with_fewer_common_seeds_says_so(specs):
    """PPO ran seed 0 only: ESOpt - PPO pairs that seed; a method with seeds ESOpt lacks
    is paired over the common ones and the cell names how many."""
    # Make ESOpt's seed 1 vanish: GRPO (seeds 0, 1) is then paired over seed 0 alone.
    no_seed1 = [s for s in specs if not (s.method == "esopt" and s.seed == 1)]
    header, rows = countdown_table1(no_seed1)
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    cell = by["Agentic GRPO †"]["ESOpt - method [95% CI]"]
    assert cell.startswith("+25.0 [") and cell.endswith("(1 of 2 seeds)")


def test_table2_flops_episodes_and_times(specs):
    header, rows = countdown_table2(specs)
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert list(by) == ["Agentic ESOpt", "Agentic GRPO †", "Agentic PPO"]
    assert [by["Agentic ESOpt"][c] for c in ("Seeds", "Updates", "Episodes")] == ["2", "2", "32"]
    assert [by["Agentic GRPO †"][c] for c in ("Seeds", "Updates", "Episodes")] == ["2", "3", "6"]
    assert by["Agentic ESOpt"]["Training FLOPs"] == "2.00 TFLOPs"
    # GRPO: 1.9e12 and 2.1e12 -> mean 2.0e12; PPO 2.4e12.
    assert by["Agentic GRPO †"]["Training FLOPs"] == "2.00 TFLOPs"
    assert by["Agentic GRPO †"]["FLOPs / ESOpt's"] == "1.00"
    assert by["Agentic PPO"]["FLOPs / ESOpt's"] == "1.20"
    assert by["Agentic ESOpt"]["FLOPs / ESOpt's"] == "1.00"
    # Wall 30 s per update; worker: load 5 + (20 + 1 + 2) per update.
    assert by["Agentic ESOpt"]["Wall-clock"] == "1.0 min"
    assert by["Agentic GRPO †"]["Wall-clock"] == "1.5 min"
    assert by["Agentic ESOpt"]["Worker time"] == "0.8 min"   # 5 + 2 x 23 = 51 s
    assert by["Agentic GRPO †"]["Worker time"] == "1.2 min"  # 5 + 3 x 23 = 74 s


def test_flops_curve_sums_the_ledger_up_to_each_kept_checkpoint(specs):
    grpo0 = next(s for s in specs if (s.method, s.seed) == ("grpo", 0))
    assert grpo0.kept_generations() == [0, 2, 3]
    curve = flops_curve(grpo0, specs)
    assert [f for f, _ in curve] == [0.0, pytest.approx(1.2e12), pytest.approx(1.9e12)]
    assert [m for _, m in curve] == [0.25, MID / 8, 3 / 8]
    esopt1 = next(s for s in specs if (s.method, s.seed) == ("esopt", 1))
    assert flops_curve(esopt1, specs) == [(0.0, 0.25), (1e12, MID / 8), (2e12, 5 / 8)]


def test_the_part_builds_its_tables_and_figure(specs, tmp_path):
    write_countdown_compare(specs, tmp_path / "tables", tmp_path / "figures")
    md = (tmp_path / "tables" / "countdown_table1.md").read_text()
    assert "| Agentic GRPO † | 1 | 2 x 8 |" in md
    assert (tmp_path / "tables" / "countdown_table2.csv").is_file()
    assert (tmp_path / "figures" / "countdown_flops.png").stat().st_size > 1000
    part = get_part("countdown_compare")
    ctx = ReportContext(tuple(specs))
    assert part.is_active(ctx)
    assert not part.is_active(ReportContext(tuple(s for s in specs
                                                  if s.method in ("base", "esopt"))))
