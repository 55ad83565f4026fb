"""Integrity of a run's files, tried as a user who changes the config and reruns, and as one
whose files were truncated or corrupted: stale or broken files are never trusted."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from esopt.pipeline.lineage import direction_path
from esopt.pipeline.records import DirectionResult, RecordError, identity_hash
from esopt.pipeline.stages import evaluate_directions, reduce_rewards, update_checkpoint
from esopt.runtime.checkpoint import MANIFEST_NAME, WEIGHTS_NAME, read_manifest, read_master
from tests.pipeline.test_update_stage import _spec
from tests.support.records import write_reward_table


def _directions(spec, tiny_dir, out: Path, generation: int = 0) -> dict[int, int]:
    """Score a generation; return each direction file's mtime (ns)."""
    evaluate_directions(spec, generation, str(tiny_dir), str(out), str(out) + ".done.json")
    return {i: direction_path(out, i).stat().st_mtime_ns for i in range(4)}


def test_a_direction_file_from_a_changed_config_is_not_reused(tiny_dir, tmp_path, caplog,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    old = _spec(tiny_dir)
    out = tmp_path / "directions"
    first = _directions(old, tiny_dir, out)
    assert _directions(old, tiny_dir, out) == first  # the same config resumes: nothing redone
    # The user changes the decoder and reruns: every direction is scored again, and its
    # file now carries the new identity.
    new = replace(old, train_decoder=replace(old.train_decoder,
                                             max_new_tokens=old.train_decoder.max_new_tokens + 4))
    with caplog.at_level(logging.WARNING, logger="esopt.pipeline.stages"):
        second = _directions(new, tiny_dir, out)
    assert all(second[i] != first[i] for i in range(4))
    assert caplog.text.count("recomputing direction") == 4 and "config changed" in caplog.text
    for i in range(4):
        assert DirectionResult.read(direction_path(out, i), new).direction == i
    # The reduce of the old config refuses the new files (and names one).
    with pytest.raises(RecordError, match="000.parquet.*config changed"):
        reduce_rewards(old, 0, str(out), str(tmp_path / "rewards.parquet"))


def test_truncated_and_empty_direction_files_are_recomputed(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tiny_dir)
    out = tmp_path / "directions"
    first = _directions(spec, tiny_dir, out)
    data = direction_path(out, 2).read_bytes()
    direction_path(out, 2).write_bytes(data[: len(data) // 2])
    direction_path(out, 3).write_bytes(b"")
    again = _directions(spec, tiny_dir, out)
    assert [again[i] == first[i] for i in range(4)] == [True, True, False, False]
    table = reduce_rewards(spec, 0, str(out), str(tmp_path / "rewards.parquet"))
    assert table.column("direction") == [0, 1, 2, 3]


def _first_update(spec, tiny_dir) -> Path:
    """Generation 0's update of the run, at its place in the run's layout."""
    run = Path(spec.run_dir)
    rewards = write_reward_table(spec, run / "gen000" / "rewards.parquet", [0.0, 1.0, 0.5, 0.25],
                                 list(read_master(tiny_dir)))
    ckpt = run / "gen001" / "checkpoint"
    update_checkpoint(spec, 0, str(tiny_dir), rewards, str(ckpt),
                      record=str(run / "gen001" / "update.json"))
    return ckpt


def test_a_flipped_byte_is_caught_before_any_direction_is_scored(tiny_dir, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tiny_dir)
    ckpt = _first_update(spec, tiny_dir)
    weights = ckpt / WEIGHTS_NAME
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one weight
    weights.write_bytes(bytes(data))
    out = tmp_path / "directions"
    with pytest.raises(Exception, match=r"model.safetensors: sha256 .* differs"):
        evaluate_directions(spec, 1, str(ckpt), str(out), str(out) + ".done.json")
    assert not list(out.glob("*.parquet"))
    with pytest.raises(ValueError, match="differs from its manifest"):
        from esopt.pipeline.stages import evaluate_checkpoint

        evaluate_checkpoint(spec, str(ckpt), 1, str(tmp_path / "eval.parquet"))
    assert not (tmp_path / "eval.parquet").exists()


def test_a_checkpoint_that_does_not_chain_to_the_last_update_is_refused(tiny_dir, tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tiny_dir)
    ckpt = _first_update(spec, tiny_dir)
    manifest = read_manifest(ckpt)
    # Another parent (the weights, and so their own sha256, untouched).
    (ckpt / MANIFEST_NAME).write_text(json.dumps({**manifest, "parent_sha256": "0" * 64}))
    out = tmp_path / "directions"
    with pytest.raises(RecordError, match="does not chain to checkpoint 0"):
        evaluate_directions(spec, 1, str(ckpt), str(out), str(out) + ".done.json")
    # A checkpoint of another configuration of the run.
    other = identity_hash(replace(spec, eval_tasks=spec.eval_tasks + 1).identity_json())
    (ckpt / MANIFEST_NAME).write_text(json.dumps({**manifest, "identity": other}))
    with pytest.raises(RecordError, match="config changed"):
        evaluate_directions(spec, 1, str(ckpt), str(out), str(out) + ".done.json")
    assert not list(out.glob("*.parquet"))


def test_a_truncated_manifest_is_an_error_naming_the_file(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tiny_dir)
    ckpt = _first_update(spec, tiny_dir)
    text = (ckpt / MANIFEST_NAME).read_text()
    (ckpt / MANIFEST_NAME).write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"checkpoint/manifest.json: truncated or not JSON"):
        read_manifest(ckpt)
    record = Path(spec.run_dir) / "gen001" / "update.json"
    record.write_text(record.read_text()[:10])
    with pytest.raises(RecordError, match=r"gen001/update.json: update record is truncated"):
        from esopt.pipeline.records import UpdateManifest

        UpdateManifest.read(record)
