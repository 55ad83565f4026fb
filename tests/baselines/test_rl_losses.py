"""The GRPO and PPO losses (and gradients) of a trainer on a fixed batch equal a plain
computation written here: one unpadded forward per row, token by token, no prefix
sharing, no micro-batches, no masks."""

import copy
import math

import pytest
import torch

from esopt.baselines.grpo import GRPOConfig, GRPOTrainer, RLSample, build_batch
from esopt.baselines.ppo import PPOConfig, PPOTrainer

PREFIX = "You are a careful agent. Read the board, then answer with one move. " * 2


def fixed_samples(tok):
    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    # Three turns sharing a long prefix (the prefix-shared forward runs), of different
    # lengths (padding), the last ending on EOS as a sampled completion would.
    return [RLSample(ids(PREFIX + "Board one?"), ids("r1c2=3"), 1.0),
            RLSample(ids(PREFIX + "Board two, longer?"), ids("r4c4=1 then more"), -0.5),
            RLSample(ids(PREFIX + "Three?"), ids("r2c1=4") + [tok.eos_token_id], 0.25)]


def row_terms(model, sample: RLSample, hidden: bool = False):
    """Per generated token: log pi(token | everything before it) (and the last hidden
    state it was predicted from), from one forward of the unpadded row."""
    ids = list(sample.prompt_ids) + list(sample.completion_ids)
    out = model(input_ids=torch.tensor([ids]), output_hidden_states=hidden)
    logp = torch.log_softmax(out.logits[0].float(), dim=-1)
    terms = []
    for t in range(len(sample.prompt_ids), len(ids)):
        h = out.hidden_states[-1][0, t - 1].float() if hidden else None
        terms.append((logp[t - 1, ids[t]], h))
    return terms


def k3(logp_ref, logp):
    """The k3 estimator of KL(pi || pi_ref) at one token."""
    return torch.exp(logp_ref - logp) - (logp_ref - logp) - 1


def clipped_surrogate(logp, adv, eps):
    ratio = torch.exp(logp - logp.detach())  # pi / pi_old, pi_old = the current policy
    return -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv)


def perturb_reference(trainer):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # so that the KL term is not zero
        for p in trainer.reference.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))


def grads_of(params):
    return torch.cat([p.grad.flatten() for p in params])


@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_grpo_loss_equals_a_token_level_computation(tiny_policy, loss_type):
    """grpo: each episode's token mean (episode 0 has two turns), averaged over episodes;
    dapo: the batch's token mean."""
    tok = tiny_policy.tokenizer
    cfg = GRPOConfig(group_size=2, beta=0.1, micro_batch=2, loss_type=loss_type)
    trainer = GRPOTrainer(tiny_policy, cfg)
    perturb_reference(trainer)
    samples = fixed_samples(tok)
    owners = [0, 0, 1]
    model = copy.deepcopy(trainer.model)  # same weights, its own gradients

    per_episode = {0: [], 1: []}  # the episode's per-token terms
    for s, k in zip(samples, owners, strict=True):
        with torch.no_grad():
            ref = [lp.item() for lp, _ in row_terms(trainer.reference, s)]
        for (lp, _), lr in zip(row_terms(model, s), ref, strict=True):
            per_episode[k].append(clipped_surrogate(lp, s.advantage, cfg.clip_eps)
                                  + cfg.beta * k3(torch.tensor(lr), lp))
    terms = per_episode[0] + per_episode[1]
    n = len(terms)
    if loss_type == "dapo":
        expected = sum(terms) / n
    else:
        expected = sum(sum(t) / len(t) for t in per_episode.values()) / len(per_episode)
    expected.backward()

    stats = trainer.accumulate(build_batch(samples, tok.pad_token_id), owners)
    assert n == sum(len(s.completion_ids) for s in samples)
    assert math.isclose(stats["loss"], expected.item(), rel_tol=1e-5, abs_tol=1e-7)
    assert stats["kl"] > 1e-4
    torch.testing.assert_close(grads_of(trainer.train_params), grads_of(model.parameters()),
                               rtol=1e-4, atol=1e-7)


def critic_terms(critic, sample: RLSample) -> list[torch.Tensor]:
    """Per generated token: the critic's value of the state it was predicted from, from
    one forward of the unpadded row."""
    ids = torch.tensor([list(sample.prompt_ids) + list(sample.completion_ids)])
    values = critic(ids, torch.ones_like(ids))[0]
    return [values[t - 1] for t in range(len(sample.prompt_ids), ids.shape[1])]


def test_ppo_losses_equal_a_token_level_computation(tiny_policy):
    """The policy's loss and gradient (surrogate on whitened GAE advantages + KL), and the
    critic's own (clipped value error): no gradient crosses between them."""
    tok = tiny_policy.tokenizer
    cfg = PPOConfig(beta=0.1, micro_batch=2, lam=0.9, gamma=0.99)
    trainer = PPOTrainer(tiny_policy, cfg)
    perturb_reference(trainer)
    with torch.no_grad():  # a critic that says something
        torch.nn.init.normal_(trainer.critic.model.score.weight, std=0.3)
    samples = fixed_samples(tok)
    owners, rewards = [0, 0, 1], [1.0, -0.5]  # episode 0 has two turns
    model, critic = copy.deepcopy(trainer.model), copy.deepcopy(trainer.critic)

    # Per episode, its generated tokens in order; the reward arrives at the last one.
    tokens = []  # (episode, logp, value, ref logp)
    for s, k in zip(samples, owners, strict=True):
        with torch.no_grad():
            ref = [lp.item() for lp, _ in row_terms(trainer.reference, s)]
        for (lp, _), v, lr in zip(row_terms(model, s), critic_terms(critic, s), ref,
                                  strict=True):
            tokens.append((k, lp, v, lr))
    adv, ret = [0.0] * len(tokens), [0.0] * len(tokens)
    for k, reward in enumerate(rewards):
        idx = [i for i, tk in enumerate(tokens) if tk[0] == k]
        running = 0.0
        for j in reversed(range(len(idx))):
            v = tokens[idx[j]][2].item()
            v_next = tokens[idx[j + 1]][2].item() if j + 1 < len(idx) else 0.0
            r = reward if j == len(idx) - 1 else 0.0
            running = r + cfg.gamma * v_next - v + cfg.gamma * cfg.lam * running
            adv[idx[j]], ret[idx[j]] = running, running + v
    mean = sum(adv) / len(adv)
    std = math.sqrt(sum((a - mean) ** 2 for a in adv) / (len(adv) - 1))
    policy, value = 0.0, 0.0
    for (_, lp, v, lr), a, g in zip(tokens, adv, ret, strict=True):
        a = (a - mean) / (std + 1e-8)
        old = v.detach()
        v_clip = old + torch.clamp(v - old, -cfg.value_clip, cfg.value_clip)
        value = value + 0.5 * torch.maximum((v - g) ** 2, (v_clip - g) ** 2)
        policy = policy + clipped_surrogate(lp, a, cfg.clip_eps) \
            + cfg.beta * k3(torch.tensor(lr), lp)
    policy, value = policy / len(tokens), value / len(tokens)
    (policy + value).backward()  # one backward: each loss reaches only its own model

    stats = trainer.accumulate(build_batch(samples, tok.pad_token_id), owners, rewards)
    assert math.isclose(stats["loss"], policy.item(), rel_tol=1e-5, abs_tol=1e-7)
    assert math.isclose(stats["value_loss"], value.item(), rel_tol=1e-5, abs_tol=1e-7)
    torch.testing.assert_close(grads_of(trainer.train_params), grads_of(model.parameters()),
                               rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(grads_of(trainer.critic.parameters()),
                               grads_of(critic.parameters()), rtol=1e-4, atol=1e-7)
