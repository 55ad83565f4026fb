"""The ES ledger from crafted generation files: the spread of the directions' rewards."""

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from esopt.pipeline.config import run_specs
from esopt.pipeline.ledgers import es_ledger
from esopt.pipeline.records import RewardRow, RewardTable, UpdateManifest
from esopt.runtime.ledger import reward_spread
from tests.pipeline.test_config import base_config

NAN = float("nan")


def _table(rewards: list[float], tasks: list[int], workers=None, loads=None, walls=None
           ) -> RewardTable:
    g = len(rewards)
    workers, loads, walls = workers or ["w0"] * g, loads or [2.0] * g, walls or [1.5] * g
    return RewardTable(tuple(RewardRow(
        generation=0, direction=i, direction_seed=i, sign=1, sigma=1e-3, fitness=r,
        failed=math.isnan(r), failed_episodes=int(math.isnan(r)), success=0.0,
        task_seeds=list(range(n)), task_rewards=[0.0] * n, task_failed=[False] * n,
        turns=1.0, prompt_tokens=10, completion_tokens=8, wall_s=walls[i], worker=workers[i],
        worker_load_s=loads[i], worker_shard=[0], peak_rss_mb=100.0, peak_memory_mb=100.0,
        generate_s=1.0, flops=1e9, noise_fingerprint="fp")
        for i, (r, n) in enumerate(zip(rewards, tasks, strict=True))))


def _rewards_file(path: Path, spec, rewards: list[float], tasks: list[int]) -> None:
    _table(rewards, tasks).write(path, spec)


def _update(excluded: list[int]) -> UpdateManifest:
    return UpdateManifest(
        generation=1, parent_sha256="p", seeds=[], signs=[], weights=[], excluded=excluded,
        sigma=1e-3, alpha=1e-3, scale=0.0, subspaces=[], rank=None, rewards=[],
        failed_directions=[], config={}, identity="", update_wall_s=3.0, load_s=1.0,
        peak_rss_mb=50.0, peak_memory_mb=50.0)


def _update_record(path: Path, spec, excluded: list[int]) -> None:
    _update(excluded).write(path)


def _esopt_spec():
    """ESOpt on 4x4 Sudoku at H*=1: 2 generations of G=4."""
    cfg = base_config()
    cfg["sudoku"].update(horizons=[1], methods=["esopt"])
    cfg["sudoku"]["es"].update(population_size=4, generations=2)
    (spec,) = run_specs(cfg)
    return spec


@pytest.fixture()
def spec(tmp_path, monkeypatch):
    spec = _esopt_spec()
    monkeypatch.chdir(tmp_path)
    run = Path(spec.run_dir)
    # Generation 0: direction 2 excluded (NaN); direction 3 played 6 tasks, the others 2.
    _rewards_file(run / "gen000/rewards.parquet", spec, [0.0, 0.5, NAN, 1.0], [2, 2, 2, 6])
    # Generation 1: every direction excluded.
    _rewards_file(run / "gen001/rewards.parquet", spec, [NAN] * 4, [2] * 4)
    for g, excluded in ((1, [2]), (2, [0, 1, 2, 3])):
        _update_record(run / f"gen{g:03d}/update.json", spec, excluded)
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
    from esopt.pipeline.ledgers import generation_wall_s

    # Two shards in parallel: w0 loads 2 s and scores 1.5 + 1.5 s, w1 loads 4 s and scores
    # 0.5 s; the update takes 3 s. Worker-seconds would be 2 + 3 + 4 + 0.5 + 3 = 12.5.
    rewards = _table([0.0] * 3, [1] * 3, ["w0", "w0", "w1"], [2.0, 2.0, 4.0], [1.5, 1.5, 0.5])
    assert generation_wall_s(rewards, _update([])) == 5.0 + 3.0


def test_es_ledger_records_each_generations_wall_clock(spec):
    ledger = pq.read_table(es_ledger(spec, Path(spec.run_dir) / "ledger.parquet")).to_pydict()
    # One shard (w0): load 2 s + 4 directions x 1.5 s, then the 3 s update.
    assert ledger["wall_s"] == [2.0 + 4 * 1.5 + 3.0] * 2


def test_es_ledger_writes_the_generation_diagnostics(tmp_path, monkeypatch):
    """Issue 36: per generation the ledger has the ties on fitness, whether the update had
    signal, the realised update the update stage measured, the reward's parts and the
    diversity of the directions' outputs."""
    from dataclasses import replace

    spec = _esopt_spec()
    monkeypatch.chdir(tmp_path)
    run = Path(spec.run_dir)
    parts = [{"format": 0.1, "correct": 1.0}, {"format": 0.1}, {}, {"format": 0.0}]
    digests = [["a", "b"], ["a", "c"], ["a", "b"], ["d", "b"]]
    rows = [replace(r, reward_components=json.dumps(p), completion_digests=d)
            for r, p, d in zip(_table([0.5, 0.5, 0.2, 0.5], [2] * 4).rows, parts, digests,
                               strict=True)]
    RewardTable(tuple(rows)).write(run / "gen000/rewards.parquet", spec)
    _rewards_file(run / "gen001/rewards.parquet", spec, [0.3] * 4, [2] * 4)  # all tied
    replace(_update([]), weights=[1.0, -1.0, 0.5, -0.5], intended_norm=2.0, realised_norm=1.0,
            realised_cosine=0.5, unchanged_fraction=0.9).write(run / "gen001/update.json")
    replace(_update([]), weights=[0.0] * 4, intended_norm=0.0, realised_norm=0.0,
            realised_cosine=None, unchanged_fraction=1.0).write(run / "gen002/update.json")
    ledger = pq.read_table(es_ledger(spec, run / "ledger.parquet")).to_pydict()
    assert ledger["tied_fraction"] == [0.75, 1.0]
    assert ledger["zero_signal"] == [False, True]
    assert ledger["realised_cosine"] == [0.5, None]
    assert ledger["unchanged_fraction"] == [0.9, 1.0]
    assert ledger["intended_norm"] == [2.0, 0.0] and ledger["realised_norm"] == [1.0, 0.0]
    assert json.loads(ledger["reward_components"][0]) == pytest.approx(
        {"format": 0.05, "correct": 0.25})
    assert json.loads(ledger["reward_components"][1]) == {}  # no parts recorded
    assert ledger["distinct_completions"][0] == 0.5
    assert math.isnan(ledger["distinct_completions"][1])  # files without digests
