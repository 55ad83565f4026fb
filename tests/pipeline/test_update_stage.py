"""The update stage works on checkpoint files (no model built) and writes the checkpoint the
backend would have written: same weights sha256, same model files, and a manifest from which
checkpoint t+1 is rebuilt bit for bit out of checkpoint t."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from esopt.es.noise import add_noise_sum_
from esopt.es.strategy import ES
from esopt.pipeline.config import run_specs
from esopt.pipeline.stages import update_checkpoint
from esopt.runtime.checkpoint import (
    MANIFEST_NAME,
    WEIGHTS_NAME,
    file_sha256,
    read_manifest,
    read_master,
    verify_checkpoint,
    write_checkpoint,
)
from tests.conftest import without_manifest
from tests.pipeline.test_config import base_config
from tests.support.records import write_reward_table


def _spec(tiny_dir):
    cfg = base_config()
    cfg["model"] = str(tiny_dir)
    spec = next(s for s in run_specs(cfg) if s.method == "esopt")
    return replace(spec, es=replace(spec.es, population_size=4))


def _rewards(spec, path: Path, rewards, fingerprints=None) -> str:
    """A reward table as reduce writes it: seeds, rewards and the noise fingerprints."""
    return write_reward_table(spec, path, rewards, list(read_master(spec.model)), fingerprints)


def test_file_update_equals_the_backend_update(tiny_arch_dir, tmp_path, monkeypatch):
    import esopt.pipeline.stages as stages

    spec = _spec(tiny_arch_dir)
    rewards = _rewards(spec, tmp_path / "rewards.parquet", [0.0, 1.0, 0.5, 0.25])
    plain = without_manifest(tiny_arch_dir, tmp_path / "plain")
    by_backend = update_checkpoint(spec, 0, str(plain), rewards, str(tmp_path / "hf"))

    def no_model(*a, **k):
        raise AssertionError("the update of an esopt checkpoint must not load a model")

    monkeypatch.setattr(stages, "load_policy", no_model)
    by_file = update_checkpoint(spec, 0, str(tiny_arch_dir), rewards, str(tmp_path / "file"))
    assert by_file.sha256 == by_backend.sha256 != verify_checkpoint(tiny_arch_dir)["sha256"]
    verify_checkpoint(tmp_path / "file")
    for key in ("seeds", "signs", "weights", "scale", "parent_sha256", "generation"):
        assert getattr(by_file, key) == getattr(by_backend, key), key
    # The child loads as a model: the model files came with it.
    names = {p.name for p in (tmp_path / "file").iterdir()}
    assert {"config.json", "tokenizer.json", WEIGHTS_NAME, MANIFEST_NAME} <= names
    cfg = json.loads((tmp_path / "file" / "config.json").read_text())
    assert cfg == json.loads((tiny_arch_dir / "config.json").read_text())
    parent, child = read_master(tiny_arch_dir), read_master(tmp_path / "file")
    assert all(not torch.equal(parent[n], child[n]) for n in parent)  # every tensor moved


def _replay(parent_dir: Path, manifest: dict, out: Path) -> str:
    """Checkpoint t+1 rebuilt from checkpoint t and the child's manifest alone: no config,
    no reward table, no ES object; theta += alpha / G * sum_i weight_i * sign_i * eps(seed_i).
    Returns the sha256 of the rebuilt weights file."""
    master = read_master(parent_dir)
    coeffs = [w * s for w, s in zip(manifest["weights"], manifest["signs"], strict=True)]
    add_noise_sum_(master, manifest["seeds"], coeffs, manifest["alpha"] / len(manifest["seeds"]))
    write_checkpoint(out, master, files_from=parent_dir)
    return file_sha256(out / WEIGHTS_NAME)


def test_checkpoint_t_plus_1_replays_from_checkpoint_t_and_the_manifest(tiny_dir, tmp_path):
    spec = _spec(tiny_dir)
    gen1 = tmp_path / "gen1"
    update_checkpoint(spec, 0, str(tiny_dir), _rewards(spec, tmp_path / "r0.parquet",
                                                       [0.0, 1.0, 0.5, 0.25]), str(gen1))
    # Generation 1 -> 2 (a non-zero generation: its own seeds, sigma and schedule step).
    seeds1 = [d.seed for d in ES(spec.es).ask(ES(spec.es).state_at(1))]
    write_reward_table(spec, tmp_path / "r1.parquet", [3.0, -1.0, 0.0, 2.0],
                       list(read_master(tiny_dir)), generation=1)
    child = tmp_path / "gen2"
    update_checkpoint(spec, 1, str(gen1), str(tmp_path / "r1.parquet"), str(child))
    manifest = read_manifest(child)  # what is on disk, not what the stage returned
    assert manifest["generation"] == 2 and manifest["seeds"] == seeds1
    assert manifest["parent_sha256"] == verify_checkpoint(gen1)["sha256"]
    replayed = _replay(gen1, manifest, tmp_path / "rebuilt")
    assert replayed == manifest["sha256"] == file_sha256(child / WEIGHTS_NAME)
    assert replayed != manifest["parent_sha256"]


def test_zero_update_copies_the_weights(tiny_dir, tmp_path):
    spec = _spec(tiny_dir)
    rewards = _rewards(spec, tmp_path / "rewards.parquet", [1.0, 1.0, 1.0, 1.0])
    manifest = update_checkpoint(spec, 0, str(tiny_dir), rewards, str(tmp_path / "c"))
    assert manifest.sha256 == verify_checkpoint(tiny_dir)["sha256"]
    assert manifest.generation == 1 and not any(manifest.weights)


def test_read_master_refuses_a_corrupted_checkpoint(tiny_dir, tmp_path):
    master = read_master(tiny_dir)
    out = tmp_path / "c"
    write_checkpoint(out, master, files_from=tiny_dir)
    with open(out / WEIGHTS_NAME, "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x00\x80\x7f")
    with pytest.raises(ValueError, match="sha256"):
        read_master(out)


def test_write_checkpoint_needs_exactly_one_source_of_model_files(tiny_dir, tmp_path):
    master = read_master(tiny_dir)
    with pytest.raises(ValueError, match="exactly one"):
        write_checkpoint(tmp_path / "a", master)
    with pytest.raises(ValueError, match="exactly one"):
        write_checkpoint(tmp_path / "b", master, config=object(), files_from=tiny_dir)


def test_the_manifest_records_what_the_served_weights_kept(tiny_dir, tmp_path):
    """Issue 36's diagnostics: the update stage measures the realised update where the
    weights are served. Float32: the intended update (cosine 1); bfloat16: a small step
    mostly rounded away. The master (and so the checkpoint) is the same either way."""
    spec = _spec(tiny_dir)
    spec = replace(spec, es=replace(spec.es, alpha=1e-5))
    rewards = _rewards(spec, tmp_path / "rewards.parquet", [0.0, 1.0, 0.5, 0.25])
    f32 = update_checkpoint(spec, 0, str(tiny_dir), rewards, str(tmp_path / "f32"))
    bf16_spec = replace(spec, serving_dtype="bfloat16")
    bf16_rewards = _rewards(bf16_spec, tmp_path / "bf16.parquet", [0.0, 1.0, 0.5, 0.25])
    bf16 = update_checkpoint(bf16_spec, 0, str(tiny_dir), bf16_rewards,
                             str(tmp_path / "bf16"))
    assert f32.sha256 == bf16.sha256
    assert f32.intended_norm > 0 and f32.intended_norm == pytest.approx(bf16.intended_norm)
    assert f32.realised_cosine == pytest.approx(1.0, abs=1e-6)
    assert f32.realised_norm == pytest.approx(f32.intended_norm, rel=1e-4)
    assert f32.unchanged_fraction < 0.01
    assert bf16.unchanged_fraction > 0.5 and bf16.realised_cosine < 0.9
    stored = json.loads((tmp_path / "f32" / MANIFEST_NAME).read_text())
    assert stored["unchanged_fraction"] == f32.unchanged_fraction
