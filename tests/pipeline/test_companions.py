"""The companion ES methods as pipeline methods: config -> specs, the async coordinator job
(reproducible, L=0 == synchronous ES), and manifests that record what replays an update."""

import json
from dataclasses import replace
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
import torch

from esopt.es.async_es import AsyncConfig
from esopt.pipeline.async_run import train_async
from esopt.pipeline.config import ConfigError, run_specs
from esopt.pipeline.inprocess import train_in_process
from esopt.pipeline.spec import RunSpec
from esopt.runtime.checkpoint import read_manifest
from tests.pipeline.test_config import base_config


def companion_config(**es):
    cfg = base_config()
    cfg["sudoku"]["methods"] = ["vanilla_es", "copes", "async_es", "lowrank_es"]
    cfg["sudoku"]["horizons"] = [1]
    cfg["sudoku"].setdefault("es", {}).update(es)
    return cfg


def test_companion_methods_resolve_to_their_es_configs():
    specs = {s.method: s for s in run_specs(companion_config(
        population_size=8, copes={"subspaces": 4}, lowrank_es={"rank": 2},
        async_es={"max_lag": 2, "delayed_fraction": 0.1, "delay": 8}))}
    assert specs["copes"].es.subspaces == 4 and specs["vanilla_es"].es.subspaces is None
    assert specs["lowrank_es"].es.rank == 2 and specs["copes"].es.rank is None
    assert specs["async_es"].asynchrony == AsyncConfig(2, 0.1, 8)
    assert all(s.generations == s.es.generations for s in specs.values())
    for s in specs.values():
        assert RunSpec.from_json(s.to_json()) == s


def test_lowrank_es_may_have_its_own_population():
    """lowrank_es.population_size sets low-rank ES's G alone (issue 38: the G a
    population batch buys); null keeps es.population_size; G < 2 is refused."""
    specs = {s.method: s for s in run_specs(companion_config(
        population_size=8, lowrank_es={"rank": 1, "population_size": 64}))}
    assert specs["lowrank_es"].es.population_size == 64
    assert {specs[m].es.population_size for m in ("vanilla_es", "copes", "async_es")} == {8}
    same = {s.method: s for s in run_specs(companion_config(population_size=8,
                                                           lowrank_es={"rank": 1}))}
    assert same["lowrank_es"].es.population_size == 8
    with pytest.raises(ConfigError, match="population_size"):
        run_specs(companion_config(population_size=8, lowrank_es={"population_size": 1}))


def test_default_methods_stay_the_papers():
    assert not {s.method for s in run_specs(base_config())} & {"copes", "async_es",
                                                              "lowrank_es"}


def test_copes_k_must_divide_the_population():
    with pytest.raises(ConfigError, match="subspaces"):
        run_specs(companion_config(population_size=8, copes={"subspaces": 3}))


def _async_spec(tiny_dir, **acfg):
    cfg = companion_config(population_size=2, tasks_per_direction=1, generations=3,
                           keep_every=1)
    cfg["model"] = str(tiny_dir)
    cfg["sudoku"]["methods"] = ["async_es"]
    cfg["sudoku"]["train_decoder"] = {"max_new_tokens": 4}
    spec = next(s for s in run_specs(cfg) if s.method == "async_es")
    return replace(spec, asynchrony=AsyncConfig(**acfg))


def _fake_scoring(monkeypatch):
    """Score a direction by a fixed linear function of the served weights: a reward that
    varies with theta and the direction (the tiny random model scores 0 on every
    puzzle), in milliseconds."""
    import esopt.pipeline.async_run as async_run
    import esopt.pipeline.inprocess as inprocess

    def score(policy, spec, generation, direction):
        with policy.perturbed(direction):
            w = next(policy.model.parameters()).detach().view(-1)[:4096]
            value = float((w * torch.arange(4096, dtype=w.dtype).cos()).sum())
        return [SimpleNamespace(reward=value, failed=False, success=False, turns=[])], 0.0

    monkeypatch.setattr(async_run, "score_direction", score)
    monkeypatch.setattr(inprocess, "score_direction", score)


def test_async_job_l0_equals_synchronous_es_and_stress_run_is_reproducible(tiny_dir,
                                                                          tmp_path,
                                                                          monkeypatch):
    _fake_scoring(monkeypatch)
    sync = train_in_process(_async_spec(tiny_dir, max_lag=0), tmp_path / "sync")
    train_async(_async_spec(tiny_dir, max_lag=0), str(tmp_path / "l0"))
    assert read_manifest(tmp_path / "l0" / "gen003")["sha256"] == sync["sha256"]
    assert sync["sha256"] != read_manifest(tiny_dir)["sha256"]
    # the third update accepts 2 of 3 results: direction (1, 1) is 1 update late, L = 0
    stress = _async_spec(tiny_dir, max_lag=0, delayed_fraction=0.5, delay=1)
    shas = []
    for run in ("a", "b"):
        records = train_async(stress, str(tmp_path / run), ledger_path=str(tmp_path / f"{run}.pq"))
        shas.append(read_manifest(tmp_path / run / "gen003")["sha256"])
    assert shas[0] == shas[1]
    manifest = read_manifest(tmp_path / "a" / "gen003")
    assert {"dispatch_versions", "lags", "discarded", "seeds", "weights"} <= set(manifest)
    assert [r["discarded"] for r in records][2] == [{"version": 1, "index": 1, "lag": 1}]
    assert shas[0] != sync["sha256"]
    assert json.loads((tmp_path / "a" / "schedule.json").read_text()) == records
    # The ledger's reward spread over each version's directions (they score apart here);
    # version 2's straggler would report after the last update: it is not scored.
    ledger = pq.read_table(tmp_path / "a.pq").to_pydict()
    assert ledger["dispatched"] == [2, 2, 1]
    for lo, mean, hi, std, n in zip(ledger["reward_min"], ledger["reward_mean"],
                                    ledger["reward_max"], ledger["reward_std"],
                                    ledger["dispatched"], strict=True):
        assert (lo < mean < hi and std > 0) if n > 1 else (lo == mean == hi and std == 0)
    assert ledger["accepted"] == [2, 1, 1] and ledger["stale_accepted"] == [0, 0, 0]
    # The diagnostics as the ES ledger has them: the updates of one accepted result carry
    # no signal (a z-score of one value), the others move every float32 weight as meant.
    assert ledger["zero_signal"] == [False, True, True]
    assert ledger["realised_cosine"][0] == pytest.approx(1.0, abs=1e-6)
    assert ledger["unchanged_fraction"][0] < 0.01 and ledger["unchanged_fraction"][1:] == [1, 1]
    assert ledger["tied_fraction"] == [0.5, 1.0, 1.0]  # 2 distinct, then one result


@pytest.mark.parametrize("method, es", [("copes", {"copes": {"subspaces": 2}}),
                                        ("lowrank_es", {"lowrank_es": {"rank": 2}})])
def test_update_stage_replays_from_the_manifest(tiny_dir, tmp_path, method, es):
    """The file update of copes / lowrank_es records what replays it: the manifest's
    seeds, weights and subspaces / rank rebuild the same weights (same sha256)."""
    from esopt.es.apply import add_update_
    from esopt.es.strategy import Update
    from esopt.pipeline.stages import update_checkpoint
    from esopt.runtime.checkpoint import read_master, write_checkpoint
    from tests.pipeline.test_update_stage import _rewards

    cfg = companion_config(population_size=4, **es)
    cfg["model"] = str(tiny_dir)
    spec = next(s for s in run_specs(cfg) if s.method == method)
    rewards = _rewards(spec, tmp_path / "rewards.parquet", [0.0, 1.0, 0.5, 0.25])
    manifest = update_checkpoint(spec, 0, str(tiny_dir), rewards,
                                 str(tmp_path / "next")).to_dict()
    assert (len(manifest["subspaces"]) == 4) == (method == "copes")
    assert manifest["rank"] == (2 if method == "lowrank_es" else None)
    assert manifest["full_rank_vectors"] == (method == "lowrank_es")
    assert manifest["signs"] == ([1, -1, 1, -1] if method == "lowrank_es" else [1] * 4)
    update = Update.from_dict({k: manifest[k] for k in (
        "seeds", "signs", "weights", "excluded", "subspaces", "rank", "full_rank_vectors",
        "sigma", "alpha", "generation")} | {"generation": 0})
    master = read_master(tiny_dir)
    add_update_(master, update)
    replayed = write_checkpoint(tmp_path / "replayed", master, manifest={},
                                files_from=tiny_dir)
    assert replayed["sha256"] == manifest["sha256"] != read_manifest(tiny_dir)["sha256"]


def companions_scale() -> dict:
    """config.yaml with the companions scale file merged over it (scale=companions)."""
    import yaml

    from esopt.pipeline.config import merge_config
    from tests.workflow.conftest import REPO

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return merge_config(cfg, yaml.safe_load((REPO / "config/scales/companions.yaml")
                                            .read_text()))


def test_the_companions_async_run_uses_stale_results_up_to_its_bound():
    """Issue 36: the companions' async ES used no stale result (L=1, every delayed result
    4 updates late, so all discarded): it was synchronous ES under another name."""
    from esopt.es.async_es import schedule

    spec = next(s for s in run_specs(companions_scale()) if s.method == "async_es")
    steps = schedule(spec.es, spec.asynchrony)
    lags = [lag for s in steps for lag in s.lags(s.accepted)]
    stale = sum(s.stale for s in steps)
    assert stale > 0 and stale == sum(lag > 0 for lag in lags)
    assert max(lags) == spec.asynchrony.max_lag >= 1
    assert len(lags) == spec.es.population_size * spec.es.generations
