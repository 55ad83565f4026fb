"""PPO with a separate critic: GAE against a hand computation, the critic apart from the
policy, real steps, and the memory the critic adds (formula and measured tensors)."""

import json

import numpy as np
import pytest
import torch

from esopt.backends.hf import HFPolicy
from esopt.baselines.grpo import GRPOConfig, GRPOTrainer
from esopt.baselines.ppo import Critic, PPOConfig, PPOTrainer, gae
from esopt.chat import SamplingParams
from esopt.runtime.checkpoint import read_manifest
from esopt.runtime.memory import critic_parameters, training_state_bytes
from tests.baselines.test_grpo import VariedReward  # noqa: F401  (registers test_varied)


def test_gae_matches_the_recursion_by_hand():
    rewards, values = np.array([0.0, 0.0, 1.0]), np.array([0.5, 0.4, 0.2])
    adv, ret = gae(rewards, values, gamma=1.0, lam=0.5)
    d2 = 1.0 - 0.2
    d1 = 0.0 + 0.2 - 0.4
    d0 = 0.0 + 0.4 - 0.5
    np.testing.assert_allclose(adv, [d0 + 0.5 * (d1 + 0.5 * d2), d1 + 0.5 * d2, d2])
    np.testing.assert_allclose(ret, adv + values)
    # lambda = 1, gamma = 1: advantages are return minus value (Monte Carlo).
    adv1, _ = gae(rewards, values, 1.0, 1.0)
    np.testing.assert_allclose(adv1, 1.0 - values)


def test_the_critic_is_a_model_of_its_own_with_its_own_optimiser(tiny_policy, tiny_dir):
    trainer = PPOTrainer(tiny_policy, PPOConfig())
    critic = list(trainer.critic.parameters())
    policy = {id(p) for p in [*trainer.params, *trainer.train_params,
                              *trainer.reference.parameters()]}
    assert isinstance(trainer.critic, Critic) and not policy & {id(p) for p in critic}
    assert [p for g in trainer.critic_optimizer.param_groups for p in g["params"]] == critic
    assert {id(p) for g in trainer.optimizer.param_groups for p in g["params"]} == {
        id(p) for p in trainer.train_params}
    # Initialised from the same base model: the policy's transformer body, float32.
    body = trainer.critic.model.model
    for name, p in body.named_parameters():
        assert p.dtype == torch.float32 and torch.equal(p, tiny_policy.master[f"model.{name}"])
    assert sum(p.numel() for p in critic) == critic_parameters(
        read_manifest(tiny_dir)["num_parameters"],
        json.loads((tiny_dir / "config.json").read_text()))


def test_ppo_steps_train_the_policy_and_the_critic_apart(tiny_policy):
    cfg = PPOConfig(lr=1e-3, value_lr=1e-2, episodes_per_task=2,
                    train_decoder=SamplingParams(max_new_tokens=6, temperature=1.0))
    trainer = PPOTrainer(tiny_policy, cfg)
    before = {n: p.detach().clone() for n, p in tiny_policy.model.named_parameters()}
    critic_before = {n: p.detach().clone() for n, p in trainer.critic.named_parameters()}
    for _ in range(2):  # the head starts at zero: the body learns from the second step
        stats = trainer.step("test_varied", {}, [0, 1])
    assert np.isfinite(stats["loss"]) and stats["value_loss"] > 0 and stats["tokens"] > 0
    assert any(not torch.equal(before[n], p.detach())
               for n, p in tiny_policy.model.named_parameters())
    moved = {n for n, p in trainer.critic.named_parameters()
             if not torch.equal(critic_before[n], p.detach())}
    assert "model.score.weight" in moved and any(n.startswith("model.model.") for n in moved)
    assert stats["flops_train"] == pytest.approx(2 * 3 * stats["flops_score"] / 2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_critic_is_counted_in_the_formula_and_the_measured_state(tiny_dir, dtype):
    """After a step, the bytes of the tensors each trainer holds (measured) against
    runtime.memory.training_state_bytes (the formula of Table 1's requirement column):
    equal in float32; with bf16 serving the serving gradients of the formula live only
    during a backward, so there the critic's share is compared."""
    decoder = SamplingParams(max_new_tokens=4, temperature=1.0)
    n = read_manifest(tiny_dir)["num_parameters"]
    n_critic = critic_parameters(n, json.loads((tiny_dir / "config.json").read_text()))
    measured = {}
    for name, make in (("grpo", lambda p: GRPOTrainer(p, GRPOConfig(
            group_size=2, train_decoder=decoder))),
                       ("ppo", lambda p: PPOTrainer(p, PPOConfig(
                           episodes_per_task=2, train_decoder=decoder)))):
        trainer = make(HFPolicy.load(tiny_dir, serving_dtype=dtype))
        trainer.step("test_varied", {}, [0])
        measured[name] = trainer.state_bytes()
    grpo = training_state_bytes(n, True, dtype)
    ppo = training_state_bytes(n, True, dtype, critic=n_critic)
    assert ppo - grpo == 16 * n_critic > 0
    assert measured["ppo"] - measured["grpo"] == ppo - grpo
    if dtype == "float32":
        assert (measured["grpo"], measured["ppo"]) == (grpo, ppo)


def test_config_is_validated():
    with pytest.raises(ValueError, match="gamma"):
        PPOConfig(lam=1.5)
