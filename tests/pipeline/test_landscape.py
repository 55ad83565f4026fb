"""Figure 6's landscape stage on the tiny random model: the centre is the checkpoint, the
master never moves, and the table is reproducible."""

import json

import pyarrow.parquet as pq
import pytest
import torch

from esopt.agent.rollout import run_episodes
from esopt.cli import main
from esopt.envs.base import make_env
from esopt.pipeline.config import landscape_runs, run_specs
from esopt.pipeline.landscape import (
    grid_axis,
    landscape_sampling,
    landscape_tasks,
    play_grid,
    reward_landscape,
)
from tests.pipeline.test_config import base_config


@pytest.fixture()
def spec(tiny_dir):
    cfg = base_config()
    cfg["model"] = str(tiny_dir)
    cfg["sudoku"].update(horizons=[1], methods=["esopt"])
    cfg["runtime"] = {"eval_threads": 1}
    (spec,) = run_specs(cfg)
    return spec


def _played(episodes):
    return [(e.task_seed, e.reward, [t.completion for t in e.turns]) for e in episodes]


def test_the_grid_centre_is_the_checkpoint_and_the_master_never_moves(tiny_policy, spec):
    master = {n: t.clone() for n, t in tiny_policy.master.items()}
    # A wide span (x 20 sigma_0) so that the perturbed points visibly play otherwise.
    points = play_grid(tiny_policy, spec, grid_axis(3, 20.0), tasks=2)
    assert [(x, y) for x, y, _ in points] == [(x, y) for x in (-20, 0, 20) for y in (-20, 0, 20)]
    for name, p in tiny_policy.model.named_parameters():
        assert torch.equal(tiny_policy.master[name], master[name]), name
        assert torch.equal(p.detach(), master[name]), name
    plain = run_episodes(tiny_policy, lambda: make_env(spec.env, **spec.env_kwargs),
                         landscape_tasks(spec, 2), landscape_sampling(spec))
    centre = points[4][2]
    assert _played(centre) == _played(plain)
    assert any(_played(eps) != _played(plain) for _, _, eps in points[:4] + points[5:])


def test_two_landscapes_of_a_checkpoint_are_identical(tiny_dir, spec, tmp_path):
    table = reward_landscape(spec, str(tiny_dir), tmp_path / "a.parquet", grid=3, span=2.0,
                             tasks=2)
    main(["stage", "landscape", "--spec", spec.to_json(), "--checkpoint", str(tiny_dir),
          "--out", str(tmp_path / "b.parquet"), "--grid", "3", "--span", "2.0", "--tasks", "2",
          "--centre", "final"])
    again = pq.read_table(tmp_path / "b.parquet")
    assert table.num_rows == 9 and again.select(table.column_names).equals(table)
    assert table.column("x").to_pylist() == [-2.0] * 3 + [0.0] * 3 + [2.0] * 3
    meta = pq.read_schema(tmp_path / "b.parquet").metadata
    settings = json.loads(meta[b"landscape"])
    assert settings["sigma"] == spec.es.sigma(0) == spec.es.sigma.sigma_0
    assert settings["grid"] == 3 and settings["task_seeds"] == landscape_tasks(spec, 2)
    assert json.loads(meta[b"config"])["method"] == "esopt"
    assert settings["centre"] == "final"  # which checkpoint the plane goes through
    assert json.loads(pq.read_schema(tmp_path / "a.parquet").metadata[b"landscape"])[
        "centre"] == "base"
    with pytest.raises(ValueError, match="centre"):
        reward_landscape(spec, str(tiny_dir), tmp_path / "c.parquet", grid=3, tasks=1,
                         centre="best")


def test_landscape_runs_are_the_first_seed_of_the_method_at_every_horizon():
    cfg = base_config()
    cfg["sudoku"].update(seeds=[3, 1], landscape={"method": "vanilla_es", "grid": 3})
    runs = landscape_runs(cfg)
    assert [(s.method, s.horizon, s.seed) for s, _ in runs] == [("vanilla_es", 1, 1),
                                                               ("vanilla_es", 2, 1)]
    assert runs[0][1].grid == 3
    assert runs[0][1].centre == "base"  # the paper's Figure 6: around the base model
    cfg["sudoku"]["landscape"]["enabled"] = False
    assert landscape_runs(cfg) == []
    cfg["sudoku"].update(landscape={"method": "copes"})  # not among the methods run
    assert landscape_runs(cfg) == []
