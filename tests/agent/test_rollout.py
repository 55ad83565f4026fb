"""The rollout engine and evaluation protocol on real (tiny or SmolLM2) models."""

import json

import pyarrow.parquet as pq
import pytest

from esopt.agent.evaluate import EVAL_SAMPLING, evaluate, task_seeds
from esopt.agent.rollout import run_episodes
from esopt.agent.trajectories import episodes_table
from esopt.chat import Completion, SamplingParams
from esopt.envs import make_env
from esopt.runtime.atomic import write_parquet_atomic


def _signature(episodes):
    return [(e.task_seed, e.success, e.reward, [t.completion for t in e.turns]) for e in episodes]


class ScriptedPolicy:
    """A policy stand-in that answers from a script (no model): tests the engine's bookkeeping."""

    def __init__(self, answers):
        self.answers = answers
        self.batch_sizes = []

    def generate(self, conversations, sampling):
        self.batch_sizes.append(len(conversations))
        return [Completion(self.answers(c), 10, 3, "stop") for c in conversations]


def test_finished_episodes_drop_out_of_the_batch():
    # Countdown ends after one turn; Sudoku with oracle-free garbage runs to its budget.
    policy = ScriptedPolicy(lambda conv: "garbage")
    eps = run_episodes(policy, lambda: make_env("sudoku", size=4, blanks=2, few_shot=0),
                       task_seeds("t", 5), SamplingParams())
    assert policy.batch_sizes == [5] * 6  # budget 3 * H* = 6 turns, all live throughout
    assert all(e.num_turns == 6 and not e.success for e in eps)
    assert eps[0].prompt_tokens == 60 and eps[0].completion_tokens == 18


def test_an_environment_error_fails_only_its_episode(monkeypatch):
    from esopt.envs.countdown import CountdownEnv

    calls = {"n": 0}
    original = CountdownEnv.step

    def flaky(self, text):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("env bug")
        return original(self, text)

    monkeypatch.setattr(CountdownEnv, "step", flaky)
    eps = run_episodes(ScriptedPolicy(lambda c: "1</answer>"), lambda: make_env("countdown"),
                       task_seeds("t", 3), SamplingParams())
    assert [e.num_turns for e in eps] == [1, 1, 1]
    assert "env bug" in eps[1].turns[0].info["error"] and eps[1].reward == 0.0
    # ... and is marked failed: its 0 is not a measured reward (issue 16).
    assert [e.failed for e in eps] == [False, True, False]
    assert eps[1].error == "RuntimeError: env bug"


def test_batched_equals_one_at_a_time_on_the_tiny_model(tiny_policy):
    make = lambda: make_env("sudoku", size=4, blanks=2, few_shot=1)  # noqa: E731
    seeds = task_seeds("t", 6)
    batched = run_episodes(tiny_policy, make, seeds, SamplingParams())
    single = [run_episodes(tiny_policy, make, [s], SamplingParams())[0] for s in seeds]
    assert _signature(batched) == _signature(single)


def test_trajectories_roundtrip_through_parquet(tiny_policy, tmp_path):
    eps = run_episodes(tiny_policy, lambda: make_env("countdown"), task_seeds("t", 4),
                       SamplingParams(max_new_tokens=8))
    path = write_parquet_atomic(episodes_table(eps, {"direction": 3}), tmp_path / "x.parquet",
                                metadata={"config": json.dumps({"a": 1})})
    table = pq.read_table(path)
    assert table.num_rows == 4
    assert table.column("direction").to_pylist() == [3] * 4
    assert json.loads(table.schema.metadata[b"config"]) == {"a": 1}
    turns = table.column("turns").to_pylist()
    assert [t[0]["completion"] for t in turns] == [e.turns[0].completion for e in eps]
    assert not list(tmp_path.glob("*.tmp"))


def test_evaluate_reports_mean_and_std_over_repeats(tiny_policy):
    table, summary = evaluate(tiny_policy, "countdown", {}, task_seeds("test", 4), repeats=2,
                              sampling=EVAL_SAMPLING)
    assert table.num_rows == 8
    assert sorted(set(table.column("repeat").to_pylist())) == [0, 1]
    assert summary.episodes == 8 and len(summary.per_repeat) == 2
    with pytest.raises(ValueError, match="repeats"):
        evaluate(tiny_policy, "countdown", {}, [1], repeats=0)


def test_task_splits_do_not_overlap():
    assert not set(task_seeds("test", 500)) & set(task_seeds("train/0/0", 500))
    assert task_seeds("test", 3, start=2)[0] == task_seeds("test", 5)[2]


@pytest.mark.slow
def test_8_sudoku_episodes_in_lockstep_equal_one_at_a_time(smollm2_dir):
    from esopt.backends.hf import HFPolicy

    policy = HFPolicy.load(smollm2_dir)
    # The tiny-scale board and decoder length (4x4, H*=1, budget 3 turns, 8 new tokens):
    # failed moves make it multi-turn.
    make = lambda: make_env("sudoku", size=4, blanks=1, few_shot=1,  # noqa: E731
                            action_format="cell")
    seeds = task_seeds("lockstep", 8)
    batched = run_episodes(policy, make, seeds, SamplingParams(max_new_tokens=8))
    single = [run_episodes(policy, make, [s], SamplingParams(max_new_tokens=8))[0] for s in seeds]
    assert _signature(batched) == _signature(single)
    assert any(e.num_turns > 1 for e in batched) and any(e.success for e in batched)


def test_an_environment_error_fails_only_its_episode_in_reset_or_step():
    from esopt.envs.sudoku import SudokuEnv

    class Broken(SudokuEnv):
        def reset(self, seed):
            if seed == seeds[0]:
                raise ValueError("no such board")
            self.task = seed
            return super().reset(seed)

        def step(self, completion):
            if self.task == seeds[1]:
                raise KeyError("bad cell")
            return super().step(completion)

    seeds = task_seeds("t", 3)
    policy = ScriptedPolicy(lambda conv: "garbage")
    eps = run_episodes(policy, lambda: Broken(size=4, blanks=1, few_shot=0), seeds,
                       SamplingParams())
    assert [e.failed for e in eps] == [True, True, False]
    assert eps[0].error == "ValueError: no such board" and eps[0].num_turns == 0
    assert eps[1].error == "KeyError: 'bad cell'" and eps[1].num_turns == 1
    assert eps[1].turns[0].info == {"error": "KeyError: 'bad cell'"}
    assert not eps[0].success and not eps[1].success and eps[2].num_turns == 3
    assert policy.batch_sizes == [2, 1, 1]  # the failed episodes left the batch
    table = episodes_table(eps).to_pydict()
    assert table["failed"] == [True, True, False] and table["error"][2] == ""
