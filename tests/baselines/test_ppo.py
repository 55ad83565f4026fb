"""PPO with a value head: GAE against a hand computation, and a real step."""

import numpy as np
import pytest
import torch

from esopt.baselines.ppo import PPOConfig, PPOTrainer, gae
from esopt.chat import SamplingParams
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


def test_a_ppo_step_trains_policy_and_value_head(tiny_policy):
    cfg = PPOConfig(lr=1e-3, value_lr=1e-2, episodes_per_task=2,
                    train_decoder=SamplingParams(max_new_tokens=6, temperature=1.0))
    trainer = PPOTrainer(tiny_policy, cfg)
    before = {n: p.detach().clone() for n, p in tiny_policy.model.named_parameters()}
    stats = trainer.step("test_varied", {}, [0, 1])
    assert np.isfinite(stats["loss"]) and stats["tokens"] > 0
    assert any(not torch.equal(before[n], p.detach())
               for n, p in tiny_policy.model.named_parameters())
    assert torch.count_nonzero(trainer.head.linear.bias) == 1  # the value head learned


def test_config_is_validated():
    with pytest.raises(ValueError, match="gamma"):
        PPOConfig(lam=1.5)
