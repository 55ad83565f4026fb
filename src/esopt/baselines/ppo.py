"""Multi-turn PPO with a value head (GAE), the paper's second RL baseline.

The value head is a linear map of the policy's last hidden state. An episode is the
concatenation of its turns' generated tokens (environment tokens carry no action and are
skipped); the episode reward arrives at its last generated token; GAE(gamma, lambda) runs
over that token sequence, so a turn's last token bootstraps from the next turn's first.
Policy loss: clipped surrogate on whitened advantages plus beta * k3-KL to the reference;
value loss: clipped squared error to the returns; one AdamW optimiser for both. Tokens,
precision and devices as in esopt.baselines.grpo (float32 master when serving in bf16; the
value head float32 on the model's device; GAE on the CPU, its results moved back).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from esopt.baselines.grpo import (
    PolicyTrainer,
    TokenBatch,
    chunked_logprobs,
    episode_stats,
    step_flops,
    turn_samples,
)
from esopt.baselines.scoring import prefix_shared_forward
from esopt.chat import SamplingParams


@dataclass(frozen=True)
class PPOConfig:
    clip_eps: float = 0.2
    value_clip: float = 0.2
    gamma: float = 1.0
    lam: float = 0.95
    beta: float = 1e-3
    value_coef: float = 0.5
    lr: float = 1e-6
    value_lr: float = 1e-4
    max_grad_norm: float = 1.0
    micro_batch: int = 8
    """Sequences per forward/backward (gradients accumulate, as in GRPOConfig)."""
    episodes_per_task: int = 1
    train_decoder: SamplingParams = field(
        default_factory=lambda: SamplingParams(max_new_tokens=64, temperature=1.0))
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.clip_eps < 1:
            raise ValueError(f"clip_eps must be in (0, 1), got {self.clip_eps}")
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ValueError(f"gamma and lam must be in [0, 1], got {self.gamma}, {self.lam}")
        if self.episodes_per_task < 1:
            raise ValueError("episodes_per_task must be >= 1")
        if self.micro_batch < 1:
            raise ValueError(f"micro_batch must be >= 1, got {self.micro_batch}")
        for name in ("beta", "value_coef", "lr", "value_lr", "max_grad_norm"):
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be a finite number >= 0")


def gae(rewards_t: np.ndarray, values_t: np.ndarray, gamma: float, lam: float
        ) -> tuple[np.ndarray, np.ndarray]:
    """(advantages, returns) over one episode's tokens; the value after the last is 0."""
    rewards_t, values_t = np.asarray(rewards_t, float), np.asarray(values_t, float)
    assert rewards_t.shape == values_t.shape and rewards_t.ndim == 1
    adv = np.zeros_like(rewards_t)
    running = 0.0
    for t in range(len(rewards_t) - 1, -1, -1):
        next_value = values_t[t + 1] if t + 1 < len(values_t) else 0.0
        delta = rewards_t[t] + gamma * next_value - values_t[t]
        running = delta + gamma * lam * running
        adv[t] = running
    return adv, adv + values_t


class ValueHead(torch.nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.linear = torch.nn.Linear(d_model, 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden).squeeze(-1)


def _logprobs_and_values(model, head, batch: TokenBatch):
    # The value of the state before predicting token t+1 sits at position t.
    logp, hidden = prefix_shared_forward(model, batch.input_ids, batch.attention_mask,
                                         batch.loss_mask, hidden=True)
    return logp, head(hidden)


def ppo_loss(logp_new, logp_old, logp_ref, values, old_values, advantages, returns,
             loss_mask, cfg: PPOConfig, normaliser: float) -> tuple[torch.Tensor, dict]:
    """Sum over policy tokens, divided by `normaliser` (the whole batch's policy tokens), of
    the clipped surrogate + beta * k3-KL to the reference + value_coef * 0.5 * the clipped
    squared value error. All (B, T) aligned on predicted tokens; advantages per token."""
    ratio = torch.exp(logp_new - logp_old)
    clip = cfg.clip_eps
    surrogate = -torch.minimum(ratio * advantages,
                               torch.clamp(ratio, 1 - clip, 1 + clip) * advantages)
    log_ref_ratio = logp_ref - logp_new
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    v_clipped = old_values + torch.clamp(values - old_values, -cfg.value_clip, cfg.value_clip)
    v_loss = torch.maximum((values - returns) ** 2, (v_clipped - returns) ** 2)
    per_token = surrogate + cfg.beta * kl + cfg.value_coef * 0.5 * v_loss
    loss = (per_token * loss_mask).sum() / normaliser
    return loss, {"value_loss": float((v_loss.detach() * loss_mask).sum()) / normaliser}


class PPOTrainer(PolicyTrainer):
    """PPO with a value head on the same rollouts machinery as GRPO."""

    def __init__(self, policy, cfg: PPOConfig):
        super().__init__(policy, cfg.train_decoder, cfg.seed)
        self.cfg = cfg
        # float32 on the model's device: it reads the float32 cast of the last hidden state.
        self.head = ValueHead(self.model.config.hidden_size).to(self.device)
        self.optimizer = torch.optim.AdamW([
            {"params": self.train_params, "lr": cfg.lr},
            {"params": self.head.parameters(), "lr": cfg.value_lr}])

    def step(self, env: str, env_kwargs: dict, task_seeds: list[int]) -> dict:
        """One PPO update from fresh rollouts on `task_seeds`."""
        cfg = self.cfg
        t0 = time.perf_counter()
        episodes = self.last_episodes = self.rollouts(env, env_kwargs, task_seeds,
                                                      cfg.episodes_per_task)
        t_gen = time.perf_counter() - t0
        samples = turn_samples(self.policy, episodes, [0.0] * len(episodes))
        owners = [k for k, ep in enumerate(episodes) for _ in ep.turns]
        batch = self.batch(samples)
        t1 = time.perf_counter()
        stats = self.accumulate(batch, owners, [e.reward for e in episodes])
        torch.nn.utils.clip_grad_norm_(self.train_params + list(self.head.parameters()),
                                       cfg.max_grad_norm)
        self.optimizer.step()
        self.finish_step()
        flops = step_flops(self.shape, episodes, batch, score_passes=2)
        return {"step": self.steps, **stats, **episode_stats(episodes),
                "tokens": batch.completion_tokens, "generate_s": t_gen,
                "update_s": time.perf_counter() - t1 - stats["score_s"],
                "flops": sum(flops.values()), **{f"flops_{k}": v for k, v in flops.items()}}

    def accumulate(self, batch: TokenBatch, owners: list[int], rewards: list[float]) -> dict:
        """Old log-probabilities and values, the reference, GAE; then forward/backward in
        micro-batches: the batch's PPO loss gradient lands in the trained parameters'
        .grad. owners[i] is row i's episode, rewards[k] episode k's reward."""
        cfg = self.cfg
        mask = batch.loss_mask[:, 1:]
        n_tokens = max(float(mask.sum()), 1.0)
        t1 = time.perf_counter()
        self.model.eval()
        old = torch.zeros(mask.shape, device=batch.device)
        old_values = torch.zeros(mask.shape, device=batch.device)
        with torch.no_grad():
            for rows, chunk in batch.chunks(cfg.micro_batch):
                lp, v = _logprobs_and_values(self.model, self.head, chunk)
                old[rows, :lp.shape[1]], old_values[rows, :v.shape[1]] = lp, v
        ref = chunked_logprobs(self.reference, batch, cfg.micro_batch)
        adv_t, ret_t = (t.to(batch.device) for t in self._advantages(
            rewards, owners, old_values.cpu(), mask.cpu()))
        t_score = time.perf_counter() - t1
        self.model.train()
        self.zero_grad()
        for p in self.head.parameters():
            p.grad = None
        loss_sum = v_loss_sum = 0.0
        for rows, chunk in batch.chunks(cfg.micro_batch):
            w = chunk.input_ids.shape[1] - 1
            new, values = _logprobs_and_values(self.model, self.head, chunk)
            loss, part = ppo_loss(new, old[rows, :w], ref[rows, :w], values,
                                  old_values[rows, :w], adv_t[rows, :w], ret_t[rows, :w],
                                  chunk.loss_mask[:, 1:], cfg, n_tokens)
            loss.backward()
            self.collect_grads()
            loss_sum += loss.item()
            v_loss_sum += part["value_loss"]
        return {"loss": loss_sum, "value_loss": v_loss_sum, "score_s": t_score}

    def _advantages(self, rewards, owners, values, mask):
        """Per-token GAE advantages (whitened over the batch) and returns, (B, T), on the
        CPU (values and mask given there: the recursion runs element by element)."""
        adv = torch.zeros_like(values)
        ret = torch.zeros_like(values)
        for k, reward in enumerate(rewards):
            rows = [i for i, o in enumerate(owners) if o == k]
            positions = [(i, t) for i in rows for t in torch.nonzero(mask[i]).flatten().tolist()]
            if not positions:
                continue
            v = np.array([float(values[i, t]) for i, t in positions])
            r = np.zeros(len(positions))
            r[-1] = reward
            a, g = gae(r, v, self.cfg.gamma, self.cfg.lam)
            for (i, t), ai, gi in zip(positions, a, g, strict=True):
                adv[i, t], ret[i, t] = ai, gi
        sel = mask.bool()
        if sel.sum() > 1:
            mean, std = adv[sel].mean(), adv[sel].std()
            adv = torch.where(sel, (adv - mean) / (std + 1e-8), adv)
        return adv, ret
