"""Issue 36's per-generation ES diagnostics: ties on fitness, reward parts, output
diversity, from the directions' episodes to the reward table to the ledger."""

import json
import math

import pytest

from esopt.agent.rollout import Episode, Turn
from esopt.agent.trajectories import episodes_table
from esopt.envs import make_env
from esopt.pipeline.diagnostics import (
    distinct_completions,
    episode_components,
    mean_components,
    tied_fraction,
    trajectory_digest,
)
from esopt.pipeline.records import DirectionResult, RewardRow


def test_tied_fraction_is_the_largest_group_sharing_a_fitness():
    assert tied_fraction([0.5, 0.5, 0.2, 0.5]) == 0.75
    assert tied_fraction([1.0, 1.0, 1.0]) == 1.0  # no signal
    assert tied_fraction([0.1, 0.2, 0.3, 0.4]) == 0.25  # 1/G: all differ
    # discrete rewards: every direction ties with another, yet two groups carry signal
    assert tied_fraction([0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 0.75, 0.75]) == 3 / 8
    assert tied_fraction([0.1, 0.1, float("nan"), 0.3]) == pytest.approx(2 / 3)
    assert math.isnan(tied_fraction([float("nan")]))


def test_distinct_completions_per_task_over_the_population():
    # Two tasks, four directions: task 0 has 2 distinct texts, task 1 has 2.
    assert distinct_completions([["a", "b"], ["a", "c"], ["a", "b"], ["d", "b"]]) == 0.5
    assert distinct_completions([["a"], ["a"], ["a"], ["a"]]) == 0.25  # 1/G: identical
    assert distinct_completions([["a"], ["b"]]) == 1.0
    assert math.isnan(distinct_completions([]))
    assert trajectory_digest(["ab", "c"]) != trajectory_digest(["a", "bc"])
    assert trajectory_digest(["x"]) == trajectory_digest(["x"])


def test_reward_components_sum_over_turns_and_average_over_episodes():
    infos = [{"reward_components": {"format": 0.1}}, {},
             {"reward_components": {"format": 0.1, "correct": 1.0}}]
    assert episode_components(infos) == {"format": pytest.approx(0.2), "correct": 1.0}
    assert mean_components([{"format": 0.1, "correct": 1.0}, {"format": 0.1}]) == {
        "correct": 0.5, "format": pytest.approx(0.1)}
    assert mean_components([{"a": 1.0}, {"a": 0.0}], weights=[3, 1]) == {"a": 0.75}
    assert mean_components([{}, {}]) == {}


@pytest.mark.parametrize("answer, parts", [
    ("3 + 4</answer>", {"format": 0.1, "correct": 1.0}),   # right
    ("3 - 4</answer>", {"format": 0.1, "correct": 0.0}),   # well formed, wrong
    ("seven", {"format": 0.0, "correct": 0.0})])           # no readable expression
def test_countdown_splits_its_reward_into_format_and_correctness(answer, parts,
                                                                 monkeypatch):
    import esopt.envs.countdown as countdown

    env = make_env("countdown")
    monkeypatch.setattr(countdown, "generate_task", lambda seed, count, top: ([3, 4], 7))
    env.reset(0)
    result = env.step(answer)
    assert result.info["reward_components"] == pytest.approx(parts)
    assert sum(parts.values()) == pytest.approx(result.reward)


def test_sudoku_names_its_one_part():
    env = make_env("sudoku", size=4, blanks=1, few_shot=0, action_format="cell")
    env.reset(3)
    result = env.step("r1c1=1")
    assert set(result.info["reward_components"]) == {"solved"}
    assert sum(result.info["reward_components"].values()) == result.reward


def _episode(seed, texts, parts):
    turns = [Turn(t, 5, 2, 0.0, {"reward_components": p}) for t, p in zip(texts, parts,
                                                                         strict=True)]
    return Episode(env="countdown", task_seed=seed, reward=sum(sum(p.values()) for p in parts),
                   turns=turns)


def test_the_reward_table_row_carries_parts_and_trajectory_digests():
    episodes = [_episode(1, ["x"], [{"format": 0.1, "correct": 1.0}]),
                _episode(2, ["y", "z"], [{"format": 0.0}, {"format": 0.1}])]
    d = DirectionResult(
        generation=0, direction=0, direction_seed=1, sign=1, sigma=1e-3,
        checkpoint_sha256="c", noise_spec="n", noise_fingerprint="f", worker="w",
        worker_shard=(0,), worker_load_s=0.0, direction_wall_s=1.0, generate_s=1.0,
        flops=0.0, peak_rss_mb=0.0, peak_memory_mb=0.0, episodes=episodes_table(episodes))
    row = RewardRow.of(d)
    assert json.loads(row.reward_components) == pytest.approx({"format": 0.1,
                                                               "correct": 0.5})
    assert row.completion_digests == [trajectory_digest(["x"]),
                                      trajectory_digest(["y", "z"])]
