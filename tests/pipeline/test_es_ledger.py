"""The ES ledger from crafted generation files: the spread of the directions' rewards."""

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from esopt.agent.trajectories import write_parquet_atomic
from esopt.pipeline.config import run_specs
from esopt.pipeline.rl import es_ledger
from esopt.runtime.ledger import reward_spread
from tests.pipeline.test_config import base_config

NAN = float("nan")


def _rewards_file(path: Path, rewards: list[float], tasks: list[int]) -> None:
    g = len(rewards)
    write_parquet_atomic(pa.table({
        "direction": list(range(g)), "reward": rewards,
        "task_seeds": [list(range(n)) for n in tasks], "success": [0.0] * g,
        "turns": [1.0] * g, "completion_tokens": [8] * g, "generate_s": [1.0] * g,
        "wall_s": [1.5] * g, "flops": [1e9] * g, "peak_memory_mb": [100.0] * g,
        "worker": ["w0"] * g, "worker_load_s": [2.0] * g,
        "failed_episodes": [int(math.isnan(r)) for r in rewards]}), path)


@pytest.fixture()
def spec(tmp_path, monkeypatch):
    cfg = base_config()
    cfg["sudoku"].update(horizons=[1], methods=["esopt"])
    cfg["sudoku"]["es"].update(population_size=4, generations=2)
    (spec,) = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    run = Path(spec.run_dir)
    # Generation 0: direction 2 excluded (NaN); direction 3 played 6 tasks, the others 2.
    _rewards_file(run / "gen000/rewards.parquet", [0.0, 0.5, NAN, 1.0], [2, 2, 2, 6])
    # Generation 1: every direction excluded.
    _rewards_file(run / "gen001/rewards.parquet", [NAN] * 4, [2] * 4)
    for g, excluded in ((1, [2]), (2, [0, 1, 2, 3])):
        (run / f"gen{g:03d}").mkdir(parents=True, exist_ok=True)
        (run / f"gen{g:03d}/update.json").write_text(json.dumps({
            "peak_memory_mb": 50.0, "load_s": 1.0, "update_wall_s": 3.0,
            "excluded": excluded}))
    return spec


def test_es_ledger_writes_the_spread_of_the_finite_direction_rewards(spec):
    ledger = pq.read_table(es_ledger(spec, Path(spec.run_dir) / "ledger.parquet")).to_pydict()
    # Episode-weighted over directions 0, 1, 3 (2, 2, 6 episodes): mean (0 + 1 + 6) / 10.
    mean = 0.7
    var = (2 * mean**2 + 2 * (0.5 - mean) ** 2 + 6 * (1.0 - mean) ** 2) / 10
    assert ledger["reward_mean"][0] == pytest.approx(mean)
    assert ledger["reward_std"][0] == pytest.approx(math.sqrt(var))
    assert (ledger["reward_min"][0], ledger["reward_max"][0]) == (0.0, 1.0)
    assert ledger["excluded_directions"] == [1, 4]
    # No finite reward: no spread either (NaN, not 0).
    for key in ("reward_mean", "reward_std", "reward_min", "reward_max"):
        assert math.isnan(ledger[key][1]), key


def test_reward_spread_without_weights_is_the_population_std():
    spread = reward_spread([1.0, 3.0, NAN])
    assert spread == {"reward_mean": 2.0, "reward_std": 1.0, "reward_min": 1.0,
                      "reward_max": 3.0}
    with pytest.raises(ValueError, match="3 rewards but 2 weights"):
        reward_spread([1.0, 2.0, 3.0], [1, 1])


def test_generation_wall_clock_is_the_slowest_shard_plus_the_update():
    from esopt.pipeline.rl import generation_wall_s

    # Two shards in parallel: w0 loads 2 s and scores 1.5 + 1.5 s, w1 loads 4 s and scores
    # 0.5 s; the update takes 3 s. Worker-seconds would be 2 + 3 + 4 + 0.5 + 3 = 12.5.
    rewards = {"worker": ["w0", "w0", "w1"], "worker_load_s": [2.0, 2.0, 4.0],
               "wall_s": [1.5, 1.5, 0.5]}
    assert generation_wall_s(rewards, {"update_wall_s": 3.0}) == 5.0 + 3.0


def test_es_ledger_records_each_generations_wall_clock(spec):
    ledger = pq.read_table(es_ledger(spec, Path(spec.run_dir) / "ledger.parquet")).to_pydict()
    # One shard (w0): load 2 s + 4 directions x 1.5 s, then the 3 s update.
    assert ledger["wall_s"] == [2.0 + 4 * 1.5 + 3.0] * 2
