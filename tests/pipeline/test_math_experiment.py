"""The math experiment through the generic ES stages: horizon = turn limit, held-out data
for evaluation, Trace2Skill sources, Table 3 and Figure 8."""

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from esopt.agent.evaluate import evaluate
from esopt.agent.rollout import run_episodes
from esopt.agent.trajectories import episodes_table
from esopt.chat import SamplingParams
from esopt.envs import make_env
from esopt.pipeline.config import ConfigError, run_specs
from esopt.pipeline.skills import episodes_from_parquet
from esopt.pipeline.stages import eval_tasks
from esopt.report.math_report import correct_matrix, figure8, table3
from esopt.runtime.atomic import write_parquet_atomic

MATH = {"env": "math_tool", "skills": True, "horizons": [2], "methods": ["base", "esopt"],
        "env_options": {"data": "generated:20:0", "max_new_tokens": 8},
        "es": {"population_size": 2, "tasks_per_direction": 2, "generations": 1},
        "sigma": {"esopt": {"kind": "cosine", "sigma_0": 1e-3, "sigma_T": 5e-4}},
        "eval": {"tasks": 3, "repeats": 2, "env_options": {"data": "generated:10:7"}}}


def config(**math):
    return {"model": "tiny-random", "experiments": ["math"], "math": {**MATH, **math}}


def test_horizon_is_the_turn_limit_and_evaluation_uses_its_own_data():
    spec = next(s for s in run_specs(config()) if s.method == "esopt")
    assert spec.env_kwargs["max_turns"] == 2 and spec.env_kwargs["data"] == "generated:20:0"
    assert spec.eval_env_kwargs["data"] == "generated:10:7"
    assert spec.eval_env_kwargs["max_turns"] == 2
    # A problem file: the first N problems, each once.
    assert eval_tasks(spec.env, spec.eval_env_kwargs, spec.eval_tasks) == [0, 1, 2]


def test_evaluation_never_repeats_a_problem_when_tasks_exceed_the_file(caplog):
    # 8 held-out tasks asked of a 5-problem file (AIME 2026 has 30, the paper scale asked
    # 100): the 5 problems once each, and a warning; never problems 0..2 a second time.
    with caplog.at_level("WARNING"):
        seeds = eval_tasks("math_tool", {"data": "generated:5:3"}, 8)
    assert seeds == [0, 1, 2, 3, 4]
    env = make_env("math_tool", data="generated:5:3")
    ids = []
    for s in seeds:
        env.reset(s)
        ids.append(env.problem.id)
    assert ids == [f"gen3:{i}" for i in range(5)]
    assert "eval.tasks = 8" in caplog.text and "has 5 tasks" in caplog.text
    assert eval_tasks("math_tool", {"data": "generated:5:3"}, 3) == [0, 1, 2]


def test_bad_math_options_name_the_key():
    with pytest.raises(ConfigError, match="math.eval.env_options"):
        run_specs(config(eval={"tasks": 2, "env_options": {"max_turns": 0}}))


def _episodes(policy, seeds, data="generated:20:0", **options):
    sampling = SamplingParams(max_new_tokens=8, temperature=1.0, seed=3)
    return run_episodes(policy, lambda: make_env("math_tool", data=data, max_turns=1,
                                                 max_new_tokens=8, **options), seeds, sampling)


def test_skill_sources_read_back_from_episode_tables(tiny_policy, tmp_path):
    eps = _episodes(tiny_policy, [0, 1, 2])
    write_parquet_atomic(episodes_table(eps, {"direction": 0}), tmp_path / "d" / "000.parquet")
    back = episodes_from_parquet([tmp_path / "d"])
    assert [e["problem_id"] for e in back] == ["gen0:0", "gen0:1", "gen0:2"]
    assert all(e["gold"] and e["question"].startswith(("Compute", "What")) for e in back)
    assert [e["success"] for e in back] == [ep.success for ep in eps]


def test_skill_sources_take_the_task_not_the_worked_example(tiny_policy, tmp_path):
    # With `example` the first prompt holds the example's question before the task's.
    eps = _episodes(tiny_policy, [0, 1], example=True)
    write_parquet_atomic(episodes_table(eps, {"direction": 0}), tmp_path / "d" / "000.parquet")
    env = make_env("math_tool", data="generated:20:0")
    questions = [env.reset(s)[-1]["content"] for s in (0, 1)]
    assert [e["question"] for e in episodes_from_parquet([tmp_path / "d"])] == questions


def test_table3_and_figure8_from_evaluation_files(tiny_policy, tmp_path):
    spec = replace(next(s for s in run_specs(config()) if s.method == "base"),
                   eval_repeats=2)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        table, _ = evaluate(tiny_policy, "math_tool", spec.eval_env_kwargs, [0, 1, 2], 2,
                            SamplingParams(max_new_tokens=8, temperature=1.0))
        write_parquet_atomic(table, Path(spec.run_dir) / "final" / "eval.parquet")
        assert correct_matrix(Path(spec.run_dir) / "final" / "eval.parquet").shape == (3, 2)
        header, rows = table3([spec])
        assert header == ["Condition", "math H2 Mean@2 (%)", "math H2 Pass@2 (%)"]
        assert [r[0] for r in rows] == ["No Skill", "Held-out tasks x samples"]
        assert rows[1][1:] == ["3x2", "3x2"]
        # An evaluation-only model (config eval_models): a No Skill row of its own, first.
        big = replace(spec, eval_model="Qwen/Qwen3.5-27B")
        write_parquet_atomic(table, Path(big.run_dir) / "final" / "eval.parquet")
        _, rows = table3([spec, big])
        assert [r[0] for r in rows] == ["Qwen/Qwen3.5-27B (evaluation only) + No Skill",
                                        "No Skill", "Held-out tasks x samples"]
        paths = figure8([spec, big], tmp_path / "fig")
        assert all(p.stat().st_size > 1000 for p in paths)
    finally:
        os.chdir(cwd)
    assert json.loads(spec.to_json())["eval_env_options"] == {"data": "generated:10:7"}


def test_grpo_trains_an_epoch_each_problem_once_in_a_seeded_order():
    """Issue 36, item 11: 20 steps x 20 problems over the 400-record file is one epoch,
    not 400 draws with replacement; the next epoch is another order; the seed decides."""
    from esopt.pipeline.rl import rl_tasks

    cfg = config(methods=["base", "grpo"], seeds=[0, 1],
                 rl={"steps": 30, "tasks_per_step": 20, "group_size": 2})
    grpo = [s for s in run_specs(cfg) if s.method == "grpo"]
    for spec in grpo:
        epoch = [t for k in range(20) for t in rl_tasks(spec, k, 400)]
        assert sorted(epoch) == list(range(400)) and epoch != sorted(epoch)
        second = [t for k in range(20, 30) for t in rl_tasks(spec, k, 400)]
        assert len(set(second)) == 200 and second != epoch[:200]
        assert epoch == [t for k in range(20) for t in rl_tasks(spec, k, 400)]
    a, b = ([t for k in range(20) for t in rl_tasks(s, k, 400)] for s in grpo)
    assert a != b  # seeds 0 and 1: two orders
    # An epoch boundary inside a step: 3 problems, 2 per step -> [x, y], [z | x', ...].
    spec = replace(grpo[0], rl=replace(grpo[0].rl, tasks_per_step=2))
    steps = [rl_tasks(spec, k, 3) for k in range(3)]
    flat = [t for s in steps for t in s]
    assert sorted(flat[:3]) == [0, 1, 2] and sorted(flat[3:]) == [0, 1, 2]


@pytest.mark.parametrize("scale", ["math-paper"])
def test_math_scales_evaluate_dapo_and_aime(scale):
    """Both held-out sets of Table 3 (DAPO and AIME 2026) in the paper scale's evaluation,
    interleaved: its 130 tasks are all of both. (The tiny scale evaluates held-out
    generated problems since issue 37: tests/pipeline/test_tiny_families.py.)"""
    import yaml

    shared = Path(__file__).resolve().parents[3] / "shared" / "data" / "math"
    if not shared.is_dir():
        pytest.skip(f"needs {shared}")
    repo = Path(__file__).resolve().parents[2]
    math = yaml.safe_load((repo / "config" / "scales" / f"{scale}.yaml").read_text())["math"]
    data = math["eval"]["env_options"]["data"]
    assert [Path(d).name for d in data] == ["dapo_test.jsonl", "aime_2026.jsonl"]
    env = make_env("math_tool", data=[str(shared / Path(d).name) for d in data])
    tasks = eval_tasks("math_tool", {"data": [str(shared / Path(d).name) for d in data]},
                       math["eval"]["tasks"])
    sources = [env.problems[t].source for t in tasks]
    dapo, aime = sources.count("BytedTsinghua-SIA/DAPO-Math-17k"), sources.count(
        "MathArena/aime_2026")
    assert (dapo, aime) == (100, 30)
    assert sources[:2] == ["BytedTsinghua-SIA/DAPO-Math-17k", "MathArena/aime_2026"]


def test_trace2skill_settings_reach_the_distillation_not_the_runs_identity():
    from esopt.pipeline.config import trace2skill_json

    a = config(trace2skill={"iterations": 3, "tasks": 4, "rollouts": 2})
    b = config(trace2skill={"iterations": 70, "tasks": 8, "rollouts": 8})
    settings = json.loads(trace2skill_json(a, "math"))
    assert (settings["iterations"], settings["tasks"], settings["rollouts"]) == (3, 4, 2)
    # The ES run (and every other) keeps its identity: only the distillation reruns.
    assert [s.identity_json() for s in run_specs(a)] == [s.identity_json()
                                                         for s in run_specs(b)]


@pytest.mark.parametrize("scale, iterations, per", [("math", 2, 2), ("math-paper", 70, 8),
                                                    ("web", 2, 2), ("web-paper", 70, 8)])
def test_scales_run_the_papers_iterations_at_paper_scale(scale, iterations, per):
    """Table 12: the Trace2Skill baseline's 70 iterations of 8 tasks x 8 rollouts at the
    paper's scale; a few at the tiny scales."""
    import yaml

    repo = Path(__file__).resolve().parents[2]
    cfg = yaml.safe_load((repo / "config" / "scales" / f"{scale}.yaml").read_text())
    section = cfg["experiments"][0]
    t2s = cfg[section]["trace2skill"]
    assert cfg[section]["skills"] and (t2s["iterations"], t2s["tasks"], t2s["rollouts"]) == (
        iterations, per, per)


def test_the_baseline_iterates_playing_with_its_skill(tiny_dir, tmp_path, monkeypatch):
    """distill_stage of method base: every iteration plays tasks x rollouts training
    episodes with the SKILL.md so far in the system prompt, and records its pass."""
    from esopt.backends.hf import HFPolicy
    from esopt.pipeline import skills as stage
    from esopt.pipeline.spec import Trace2SkillConfig

    settings = Trace2SkillConfig(iterations=2, tasks=2, rollouts=2)
    spec = next(s for s in run_specs(config()) if s.method == "base")
    spec = replace(spec, model=str(tiny_dir), train_decoder=replace(
        spec.train_decoder, max_new_tokens=8))
    policy = HFPolicy.load(tiny_dir)
    skill = "# Skills (lessons from earlier attempts)\n- print the value before answering\n"
    played = stage.play_iteration(policy, spec, settings, skill, 1)
    assert len(played) == 4 and all(skill.strip() in ep.first_prompt[0]["content"]
                                    for ep in played)
    assert stage.iteration_tasks(spec, settings, 0) != stage.iteration_tasks(spec, settings, 1)
    monkeypatch.chdir(tmp_path)
    record = stage.distill_stage(spec, str(tiny_dir), [], str(tmp_path / "SKILL.md"),
                                 settings)
    assert record["iterations"] == 2 and record["episodes"] == 8
    assert [p["iteration"] for p in record["passes"]] == [0, 1]
    assert (tmp_path / "SKILL.md").read_text().startswith("# Skills")
    assert json.loads((tmp_path / "SKILL.json").read_text())["passes"][1]["episodes"] == 4
