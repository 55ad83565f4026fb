"""Issue 16: an episode whose environment raises is failed, never a silent reward of 0.

Through the real stages (directions -> reduce -> update -> ledger, and evaluation) on the
tiny random model, with a registered environment that raises in one chosen episode.
"""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from esopt.envs.base import register
from esopt.envs.sudoku import SudokuEnv
from esopt.es.strategy import ES
from esopt.pipeline.config import run_specs
from esopt.pipeline.ledgers import es_ledger
from esopt.pipeline.records import DirectionResult, RecordError, RewardRow
from esopt.pipeline.stages import (
    evaluate_checkpoint,
    evaluate_directions,
    reduce_rewards,
    update_checkpoint,
)


@register("crashing_sudoku")
class CrashingSudoku(SudokuEnv):
    """Sudoku whose `step` raises in the `crash_on`-th episode started in this process
    (episodes are counted by `reset`; the inline fan-out scores directions in order)."""

    started = 0

    def __init__(self, crash_on: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.crash_on = crash_on

    def reset(self, seed):
        self.index = CrashingSudoku.started
        CrashingSudoku.started += 1
        return super().reset(seed)

    def step(self, completion):
        if self.index == self.crash_on:
            raise RuntimeError(f"injected environment bug in episode {self.index}")
        return super().step(completion)


G, TASKS = 4, 2


def _spec(tiny_dir, **es):
    cfg = {"model": str(tiny_dir), "experiments": ["sudoku"],
           "runtime": {"cluster": "inline", "workers": 1},
           "sudoku": {"env": "crashing_sudoku", "horizons": [1], "methods": ["esopt"],
                      # episode 2 = direction 1's first task (2 tasks per direction)
                      "env_options": {"size": 4, "blanks": 1, "few_shot": 0, "crash_on": 2},
                      "es": {"population_size": G, "tasks_per_direction": TASKS,
                             "generations": 2, "keep_every": 1, **es},
                      "sigma": {"esopt": {"kind": "cosine", "sigma_0": 3e-3, "sigma_T": 1e-3}},
                      "train_decoder": {"max_new_tokens": 8, "temperature": 1.0},
                      "eval": {"tasks": 3, "repeats": 1,
                               "decoder": {"max_new_tokens": 8, "temperature": 1.0}}}}
    (spec,) = run_specs(cfg)
    return spec


def _generation(spec, t, checkpoint):
    run = Path(spec.run_dir)
    evaluate_directions(spec, t, str(checkpoint), str(run / f"gen{t:03d}/directions"),
                        str(run / f"gen{t:03d}/directions.done.json"))
    table = reduce_rewards(spec, t, str(run / f"gen{t:03d}/directions"),
                           str(run / f"gen{t:03d}/rewards.parquet"))
    out = run / f"gen{t + 1:03d}"
    manifest = update_checkpoint(spec, t, str(checkpoint), str(run / f"gen{t:03d}/rewards.parquet"),
                                 str(out / "checkpoint"), record=str(out / "update.json"))
    return table, manifest, out / "checkpoint"


def test_a_crashing_episode_excludes_its_direction_and_the_run_goes_on(tiny_dir, tmp_path,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    CrashingSudoku.started = 0
    spec = _spec(tiny_dir)
    table, manifest, ckpt = _generation(spec, 0, tiny_dir)

    # The trajectory marks the crash; the other episode of the direction is intact.
    episodes = pq.read_table(Path(spec.run_dir) / "gen000/directions/001.parquet").to_pydict()
    assert episodes["failed"] == [True, False]
    assert episodes["error"][0] == "RuntimeError: injected environment bug in episode 2"
    assert episodes["success"][0] is False
    # The reward table: direction 1 has no fitness (NaN), counted; the others are means.
    assert table.column("failed") == [False, True, False, False]
    assert table.column("failed_episodes") == [0, 1, 0, 0]
    assert table.rows[1].task_failed == [True, False]
    assert math.isnan(table.fitness[1])
    for i in (0, 2, 3):
        assert table.fitness[i] == pytest.approx(np.mean(table.rows[i].task_rewards))
    # ES.tell excluded it: the update is over the 3 other directions' seeds.
    seeds = [d.seed for d in ES(spec.es).ask(ES(spec.es).state_at(0))]
    assert manifest.excluded == [1] and manifest.failed_directions == [1]
    assert manifest.seeds == [seeds[0], seeds[2], seeds[3]]
    assert len(manifest.weights) == G - 1 and manifest.rewards[1] is None

    # The run goes on: generation 1 (no crash now) scores every direction.
    table1, manifest1, _ = _generation(spec, 1, ckpt)
    assert table1.column("failed") == [False] * G and manifest1.excluded == []
    assert all(math.isfinite(r) for r in table1.fitness)
    assert manifest1.parent_sha256 == manifest.sha256

    ledger = pq.read_table(es_ledger(spec, Path(spec.run_dir) / "ledger.parquet")).to_pydict()
    assert ledger["failed_episodes"] == [1, 0] and ledger["excluded_directions"] == [1, 0]
    assert math.isfinite(ledger["reward_mean"][0])

    # es.failed_episode_reward: failures score the stated value; nothing is excluded.
    # (A reduce under that config would refuse these files, made under another identity:
    # the row of each direction is computed from its record directly.)
    records = [DirectionResult.read(Path(spec.run_dir) / f"gen000/directions/{i:03d}.parquet")
               for i in range(G)]
    again = [RewardRow.of(r, failed_reward=-1.0) for r in records]
    assert again[1].fitness == pytest.approx((-1.0 + table.rows[1].task_rewards[1]) / 2)
    assert again[0].fitness == table.fitness[0] and again[1].failed is True
    scored = replace(spec, failed_episode_reward=-1.0)
    with pytest.raises(RecordError, match="config changed"):
        reduce_rewards(scored, 0, str(Path(spec.run_dir) / "gen000/directions"),
                       str(tmp_path / "scored.parquet"))
    assert scored.failed_episode_reward == _spec(tiny_dir, failed_episode_reward=-1.0
                                                 ).failed_episode_reward


def test_evaluation_counts_failed_episodes_apart_from_unsuccessful_ones(tiny_dir, tmp_path,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tiny_dir)
    CrashingSudoku.started = 0  # the 3 evaluation episodes are numbered 0, 1, 2: crash on 2
    summary = evaluate_checkpoint(spec, str(tiny_dir), 0, "eval.parquet")
    table = pq.read_table("eval.parquet").to_pydict()
    assert table["failed"] == [False, False, True]
    assert table["error"][2].startswith("RuntimeError: injected")
    assert summary.failed == 1
    assert json.loads(pq.read_schema("eval.parquet").metadata[b"summary"])["failed"] == 1
    # A crash is unsuccessful too (the rate is over every episode), but said apart.
    assert summary.success_mean == pytest.approx(np.mean(table["success"]))
