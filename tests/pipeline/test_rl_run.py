"""An RL baseline as a pipeline run (esopt.pipeline.rl.train_rl) on Countdown with the tiny
random model: kept checkpoints and a typed ledger whose FLOPs per episode are what the
matched budget (esopt.pipeline.budget) assumes."""

import pytest
import yaml

from esopt.pipeline.config import run_specs
from esopt.pipeline.rl import train_rl
from esopt.runtime.ledger import RL_PASSES, read_ledger
from tests.pipeline.test_config import REPO


@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_rl_run_on_countdown_writes_checkpoints_and_ledger(tiny_dir, tmp_path, monkeypatch,
                                                           method):
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["model"] = str(tiny_dir)
    cfg["experiments"] = ["countdown"]
    cfg["countdown"].update(methods=[method], rl={
        "steps": 2, "tasks_per_step": 1, "group_size": 2,
        "train_decoder": {"max_new_tokens": 6}})
    cfg["countdown"]["es"]["keep_every"] = 1
    (spec,) = run_specs(cfg)
    monkeypatch.chdir(tmp_path)
    ledger_path = train_rl(spec, tmp_path / spec.run_dir / "rl", threads=1)
    rows = read_ledger(ledger_path)
    assert rows["step"] == [1, 2] and rows["episodes"] == [2, 2]
    assert all(m > 0 for m in rows["peak_memory_mb"])
    assert (tmp_path / spec.run_dir / "rl" / "gen001").is_dir()
    assert (tmp_path / spec.run_dir / "rl" / "gen002").is_dir()
    # Single-turn episodes: every scoring and training pass sees the rollout's tokens, so
    # a step costs episode_forwards x its rollouts' FLOPs (GRPO 5, PPO 9).
    passes = RL_PASSES[method]
    for gen, score, train, total in zip(rows["flops_generate"], rows["flops_score"],
                                        rows["flops_train"], rows["flops"], strict=True):
        assert gen > 0
        assert score == pytest.approx(passes.score * gen, rel=1e-9)
        assert train == pytest.approx(3.0 * passes.trained * gen, rel=1e-9)
        assert total == pytest.approx(passes.episode_forwards * gen, rel=1e-9)
