"""Agentic GRPO: masking, group advantages, and a real step on the tiny model."""

import numpy as np
import pytest
import torch

from esopt.baselines.grpo import (
    GRPOConfig,
    GRPOTrainer,
    RLSample,
    build_batch,
    group_advantages,
    grpo_loss,
    token_logprobs,
)
from esopt.chat import SamplingParams
from esopt.envs.base import Environment, StepResult, register, registered


class VariedReward(Environment):
    """Two turns; the reward is the share of distinct characters the policy wrote, so
    rewards differ within a group of samples of the same task."""

    max_turns = 2
    max_new_tokens = 6

    def reset(self, seed):
        self.seen, self.turn = set(), 0
        return [{"role": "user", "content": f"Say something ({seed})."}]

    def step(self, completion):
        self.turn += 1
        self.seen |= set(completion)
        done = self.turn >= 2
        obs = [{"role": "user", "content": "Say something."},
               {"role": "assistant", "content": completion},
               {"role": "user", "content": "ENVIRONMENT FEEDBACK: more."}]
        return StepResult(obs, len(self.seen) / 20 if done else 0.0, done, {})


if "test_varied" not in registered():
    register("test_varied")(VariedReward)


def text_batch(tokenizer, triples):
    """A batch of (prompt text, completion text, advantage), each encoded on its own."""
    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    return build_batch([RLSample(ids(p), ids(c), a) for p, c, a in triples],
                       tokenizer.pad_token_id)


def test_group_advantages_are_zero_for_equal_rewards():
    adv = group_advantages([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    np.testing.assert_array_equal(adv[0], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(adv[1], [-1.2247449, 0.0, 1.2247449], rtol=1e-6)


def test_loss_gradient_is_zero_on_environment_tokens(tiny_policy):
    batch = text_batch(tiny_policy.tokenizer, [("system and user text", "policy text", 1.0),
                                                ("tool output here", "more", -1.0)])
    mask = batch.loss_mask[:, 1:]
    with torch.no_grad():
        old = token_logprobs(tiny_policy.model, batch)
    new = old.clone().requires_grad_(True)
    loss, _ = grpo_loss(new, old, old.clone(), batch.advantages, mask, 0.2, 1e-3)
    loss.backward()
    assert torch.all(new.grad[mask == 0] == 0)
    assert torch.all(new.grad[mask == 1] != 0)
    # Prompt tokens are exactly the environment's: the mask starts after them.
    n_prompt = len(tiny_policy.tokenizer("system and user text", add_special_tokens=False)
                   ["input_ids"])
    assert batch.loss_mask[0, :n_prompt].sum() == 0 and batch.loss_mask[0, n_prompt] == 1


def test_equal_reward_groups_give_no_gradient(tiny_policy):
    trainer = GRPOTrainer(tiny_policy, GRPOConfig(group_size=2))
    samples = [("prompt a", "x y", 0.0), ("prompt a", "z", 0.0)]  # equal rewards: A = 0
    batch = text_batch(tiny_policy.tokenizer, samples)
    logp = token_logprobs(trainer.model, batch)
    loss, _ = grpo_loss(logp, logp.detach(), logp.detach(), batch.advantages,
                        batch.loss_mask[:, 1:], 0.2, 1e-3)
    loss.backward()
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in trainer.params)


def test_a_grpo_step_changes_the_parameters_and_the_master(tiny_policy):
    cfg = GRPOConfig(group_size=4, lr=1e-3,
                     train_decoder=SamplingParams(max_new_tokens=6, temperature=1.0))
    trainer = GRPOTrainer(tiny_policy, cfg)
    before = {n: p.detach().clone() for n, p in tiny_policy.model.named_parameters()}
    stats = trainer.step("test_varied", {}, [0, 1])
    assert stats["tokens"] > 0 and np.isfinite(stats["loss"]) and stats["grad_norm"] > 0
    assert stats["flops_train"] > stats["flops_score"] > 0 and stats["flops_generate"] > 0
    changed = [n for n, p in tiny_policy.model.named_parameters()
               if not torch.equal(before[n], p.detach())]
    assert changed
    for n, p in tiny_policy.model.named_parameters():  # ES state follows the trained weights
        assert torch.equal(tiny_policy.master[n], p.detach())


def test_config_is_validated():
    with pytest.raises(ValueError, match="group_size"):
        GRPOConfig(group_size=1)
    with pytest.raises(ValueError, match="clip_eps"):
        GRPOConfig(clip_eps=1.5)


def test_micro_batches_accumulate_the_whole_batch_gradient(tiny_policy):
    """Chunked forward/backward with the whole batch's row weights equals one big
    backward."""
    samples = [("a prompt", "one two", 1.0), ("another, longer prompt here", "x", -1.0),
               ("p", "three four five", 0.5)]
    batch = text_batch(tiny_policy.tokenizer, samples)
    model = tiny_policy.model
    params = [p for p in model.parameters()]
    for p in params:
        p.requires_grad_(True)
    with torch.no_grad():
        old = token_logprobs(model, batch)

    def grads():
        return torch.cat([p.grad.flatten() for p in params])

    loss, _ = grpo_loss(token_logprobs(model, batch), old, old, batch.advantages,
                        batch.loss_mask[:, 1:], 0.2, 1e-3)
    loss.backward()
    whole = grads().clone()
    model.zero_grad(set_to_none=True)
    weights = torch.full((3,), 1 / float(batch.loss_mask[:, 1:].sum()))  # the token mean
    for rows, chunk in batch.chunks(2):
        w = chunk.input_ids.shape[1] - 1
        part, _ = grpo_loss(token_logprobs(model, chunk), old[rows, :w], old[rows, :w],
                            chunk.advantages, chunk.loss_mask[:, 1:], 0.2, 1e-3,
                            weights[rows])
        part.backward()
    assert torch.count_nonzero(whole) > 0
    torch.testing.assert_close(grads(), whole, rtol=1e-4, atol=1e-6)
