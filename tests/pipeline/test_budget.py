"""Matched training FLOPs (issue 37): the RL steps that spend one ES run's FLOPs, resolved
from the config when the run specs are built."""

import copy

import pytest
import yaml

from esopt.pipeline.budget import es_run_episodes, matched_keep_every, matched_rl_steps
from esopt.pipeline.config import ConfigError, merge_config, run_specs
from esopt.runtime.ledger import GRPO_PASSES, PPO_PASSES, ModelShape, forward_flops
from tests.pipeline.test_config import REPO


def test_an_rl_episode_costs_five_es_episodes_for_grpo_and_nine_for_ppo():
    # Rollout 1 + reference 1 + forward/backward 3 (GRPO); PPO adds the critic's old values
    # and trains the critic: 1 + 2 + 2 x 3.
    assert GRPO_PASSES.episode_forwards == 5.0
    assert PPO_PASSES.episode_forwards == 9.0


def test_matched_steps_are_es_episodes_over_rl_episode_cost_per_step():
    # The tiny Countdown ESOpt run: 20 generations of G=16 x 16 tasks.
    assert es_run_episodes(20, 16, 16) == 5120
    assert matched_rl_steps("grpo", 5120, 16) == 64      # 5120 / (5 x 16) exactly
    assert matched_rl_steps("grpo_b", 5120, 16) == 64
    assert matched_rl_steps("ppo", 5120, 16) == 36       # 35.56 -> 36
    assert matched_rl_steps("ppo", 2560, 16) == 18       # 17.78 -> 18
    assert matched_rl_steps("grpo", 2560, 16) == 32
    assert matched_rl_steps("grpo", 50, 4) == 3          # 2.5 rounds up, not to even
    assert matched_rl_steps("ppo", 10, 16) == 1          # never fewer than one step
    with pytest.raises(ValueError, match="not an RL method"):
        matched_rl_steps("esopt", 5120, 16)
    with pytest.raises(ValueError, match="episodes_per_step"):
        matched_rl_steps("grpo", 5120, 0)


def test_matched_steps_spend_the_es_flops_to_within_one_step():
    """With the ledger's own FLOP functions: an ES run's rollout FLOPs against the RL run's
    generate + score + train FLOPs, episodes of one length (a 200-token prompt, 24 new)."""
    shape = ModelShape(134_515_008, 30, 576)
    episode = forward_flops(shape, 200, 24)
    es_flops = es_run_episodes(10, 16, 16) * episode
    for method, passes in (("grpo", GRPO_PASSES), ("ppo", PPO_PASSES)):
        per_step = 16 * (episode + passes.score * forward_flops(shape, 224, 0)
                         + 3.0 * passes.trained * forward_flops(shape, 224, 0))
        steps = matched_rl_steps(method, es_run_episodes(10, 16, 16), 16)
        assert abs(steps * per_step - es_flops) <= per_step / 2 + 1e-6 * es_flops


def test_kept_steps_sit_at_the_flops_of_the_kept_generations():
    assert matched_keep_every(32, 10, 5) == 16   # kept 16, 32 <-> generations 5, 10
    assert matched_keep_every(18, 10, 5) == 9
    assert matched_keep_every(64, 20, 10) == 32
    assert matched_keep_every(3, 20, 1) == 1


def _tiny_compare():
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    scale = yaml.safe_load((REPO / "config/scales/tiny-compare.yaml").read_text())
    return copy.deepcopy(merge_config(cfg, scale))


def test_tiny_compare_resolves_matched_budgets_and_seeds():
    specs = run_specs(_tiny_compare())
    by = {}
    for s in specs:
        by.setdefault(s.method, []).append(s)
    assert set(by) == {"base", "esopt", "vanilla_es", "grpo", "grpo_b", "ppo", "copes",
                       "async_es", "lowrank_es"}
    assert {m: sorted(s.seed for s in runs) for m, runs in by.items()} == {
        "base": [0, 1], "esopt": [0, 1], "grpo": [0, 1], "grpo_b": [0, 1], "vanilla_es": [0],
        "ppo": [0], "copes": [0], "async_es": [0], "lowrank_es": [0]}
    esopt = by["esopt"][0]
    assert es_run_episodes(esopt.es.generations, esopt.es.population_size,
                           esopt.tasks_per_direction) == 2560
    assert esopt.kept_generations() == [0, 5, 10]
    for s in by["grpo"] + by["grpo_b"]:
        assert (s.rl.steps, s.generations, s.kept_generations()) == (32, 32, [0, 16, 32])
    (ppo,) = by["ppo"]
    assert (ppo.rl.steps, ppo.kept_generations()) == (18, [0, 9, 18])
    # Every method on the tiny Countdown's environment and held-out tasks and decoder.
    tiny = {s.method: s for s in run_specs(yaml.safe_load(
        (REPO / "config/config.yaml").read_text())) if s.experiment == "countdown"}
    for s in specs:
        assert s.env_kwargs == tiny["esopt"].env_kwargs
        assert (s.eval_tasks, s.eval_repeats) == (512, 1)
        assert s.eval_decoder == tiny["esopt"].eval_decoder
    # ES runs keep the steps as written: their identity does not depend on the budget.
    assert esopt.rl.steps == _tiny_compare()["countdown"].get("rl", {}).get("steps", 2)


def test_without_a_budget_rl_steps_are_as_written():
    cfg = _tiny_compare()
    cfg["countdown"]["rl"]["budget"] = {"match_flops_of": None}
    cfg["countdown"]["rl"]["steps"] = 7
    grpo = next(s for s in run_specs(cfg) if s.method == "grpo")
    assert grpo.rl.steps == 7 and grpo.keep_every == 5


def test_budget_and_seeds_refuse_what_cannot_run():
    cfg = _tiny_compare()
    cfg["countdown"]["rl"]["budget"] = {"match_flops_of": "grpo"}
    with pytest.raises(ConfigError, match="countdown.rl.budget.match_flops_of"):
        run_specs(cfg)
    cfg = _tiny_compare()
    cfg["countdown"]["seeds_by_method"] = {"esopt_x": [0]}
    with pytest.raises(ConfigError, match="countdown.seeds_by_method.esopt_x: unknown method"):
        run_specs(cfg)
    cfg["countdown"]["seeds_by_method"] = {"esopt": [1, 1]}
    with pytest.raises(ConfigError, match="countdown.seeds_by_method.esopt: need one or more "
                                          "distinct seeds"):
        run_specs(cfg)


def test_grpo_in_the_tiny_all_would_take_64_steps():
    """The estimate in config.yaml's countdown comment: GRPO at the tiny `all`'s ESOpt
    FLOPs (20 generations of G=16 x 16 tasks) takes 64 steps of 16 episodes, kept at 32."""
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["countdown"]["methods"] = ["base", "esopt", "grpo"]
    cfg["countdown"]["rl"] = {"budget": {"match_flops_of": "esopt"}, "tasks_per_step": 4,
                              "group_size": 4}
    grpo = next(s for s in run_specs(cfg) if (s.experiment, s.method) == ("countdown", "grpo"))
    assert (grpo.rl.steps, grpo.kept_generations()) == (64, [0, 32, 64])
    assert grpo.rl.steps * 16 == 1024


def test_tiny_compare_async_es_uses_stale_results():
    """The scale's async ES is natural asynchrony whose updates do use stale results (the
    numbers its config comment quotes: 174 dispatched, 160 used, 103 stale, 14 discarded)."""
    from esopt.es.async_es import schedule

    (spec,) = [s for s in run_specs(_tiny_compare()) if s.method == "async_es"]
    steps = schedule(spec.es, spec.asynchrony, spec.generations)
    assert spec.asynchrony.arrivals == "natural" and spec.asynchrony.max_lag == 1
    assert sum(len(s.dispatched) for s in steps) == 174
    assert sum(len(s.accepted) for s in steps) == 160
    assert sum(s.stale for s in steps) == 103
    assert sum(len(s.discarded) for s in steps) == 14
