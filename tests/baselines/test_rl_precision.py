"""A bf16-served policy trains float32 parameters: a 1e-6 AdamW step moves them, where
the same step on the bf16 parameters themselves rounds away."""

import pytest
import torch

from esopt.backends.hf import HFPolicy
from esopt.baselines.grpo import GRPOConfig, GRPOTrainer
from esopt.baselines.ppo import PPOConfig, PPOTrainer
from tests.baselines.test_grpo import text_batch

TRIPLES = [("a prompt", "one two three", 1.0), ("another prompt", "four", -1.0)]


def test_bf16_served_grpo_step_at_lr_1e6_changes_the_float32_parameters(tiny_dir):
    policy = HFPolicy.load(tiny_dir, serving_dtype="bfloat16")
    start = {n: t.clone() for n, t in policy.master.items()}
    trainer = GRPOTrainer(policy, GRPOConfig(group_size=2, lr=1e-6))
    trainer.accumulate(text_batch(policy.tokenizer, TRIPLES))
    grads = [m.grad.clone() for m in trainer.train_params]

    # A naive step: AdamW on the bf16 parameters with the same gradients.
    naive = [p.detach().clone().requires_grad_(True) for p in trainer.params]
    for q, g in zip(naive, grads, strict=True):
        q.grad = g.to(torch.bfloat16)
    naive_before = [q.detach().clone() for q in naive]
    torch.optim.AdamW(naive, lr=1e-6).step()

    trainer.optimizer.step()
    trainer.finish_step()
    live = torch.cat([(g != 0).flatten() for g in grads])
    moved = torch.cat([(policy.master[n] != start[n]).flatten() for n in trainer.names])
    naive_moved = torch.cat([(q.detach() != b).flatten()
                             for q, b in zip(naive, naive_before, strict=True)])
    assert live.sum() > 10_000
    assert moved[live].float().mean() > 0.99  # float32: every element with a gradient
    assert naive_moved[live].float().mean() < 0.02  # bf16: rounded away (only near-zeros)
    step = torch.cat([(policy.master[n] - start[n]).abs().flatten() for n in trainer.names])
    assert step.max() < 1.5e-6  # AdamW's first step is ~lr per element: no bf16 rounding
    assert trainer.mixed and all(p.dtype == torch.bfloat16 for p in trainer.params)
    assert all(m.dtype == torch.float32 and m.device == p.device and p.grad is None
               for m, p in zip(trainer.train_params, trainer.params, strict=True))
    # The policy's master (what save() writes) is the stepped float32; serving follows it.
    for n, p in zip(trainer.names, trainer.params, strict=True):
        assert torch.equal(policy.master[n], trainer.train_params[trainer.names.index(n)]
                           .detach())
        assert torch.equal(p.detach(), policy.master[n].to(torch.bfloat16))


def test_bf16_served_ppo_step_trains_float32_parameters_and_critic(tiny_dir):
    policy = HFPolicy.load(tiny_dir, serving_dtype="bfloat16")
    start = {n: t.clone() for n, t in policy.master.items()}
    trainer = PPOTrainer(policy, PPOConfig(lr=1e-6))
    assert trainer.mixed and all(p.dtype == torch.float32 for p in trainer.critic.parameters())
    batch = text_batch(policy.tokenizer, TRIPLES)
    stats = trainer.accumulate(batch, owners=[0, 1], rewards=[1.0, 0.0])
    assert torch.isfinite(torch.tensor(stats["loss"]))
    trainer.optimizer.step()
    trainer.finish_step()
    moved = sum(int((policy.master[n] != start[n]).sum()) for n in trainer.names)
    step = max(float((policy.master[n] - start[n]).abs().max()) for n in trainer.names)
    assert moved > 10_000 and step < 1.5e-6  # lr-sized float32 steps, not bf16 rounding
    trainer.critic_optimizer.step()
    assert torch.count_nonzero(trainer.critic.model.score.weight) > 0  # the head learned


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "bfloat16-weights"])
def test_the_same_seed_steps_to_the_same_weights(tiny_dir, dtype):
    """Same checkpoint, config and seed: bit-identical float32 weights after a step (what
    the run's checkpoint hashes rest on)."""
    from esopt.chat import SamplingParams
    from tests.baselines.test_grpo import VariedReward  # noqa: F401  (registers test_varied)

    def trained():
        policy = HFPolicy.load(tiny_dir, serving_dtype=dtype)
        cfg = GRPOConfig(group_size=2, lr=1e-4, seed=3,
                         train_decoder=SamplingParams(max_new_tokens=6, temperature=1.0))
        GRPOTrainer(policy, cfg).step("test_varied", {}, [0, 1])
        return policy.master

    a, b = trained(), trained()
    assert all(torch.equal(a[n], b[n]) for n in a)
