"""Multi-turn PPO with a separate critic (GAE), the paper's second RL baseline.

The critic is the standard RLHF one (TRL's and OpenRLHF's PPO): a second model initialised
from the same base model, its transformer body with a scalar value head in place of the LM
head (transformers' AutoModelForSequenceClassification with one label, read per token as
TRL's PPOTrainer does), trained on its own loss by its own AdamW; no gradient of the value
loss reaches the policy. An episode is the concatenation of its turns' generated tokens
(environment tokens carry no action and are skipped); the episode reward arrives at its
last generated token; GAE(gamma, lambda) runs over that token sequence, so a turn's last
token bootstraps from the next turn's first.
Policy loss: clipped surrogate on whitened advantages plus beta * k3-KL to the reference,
a token mean over the batch. Critic loss: 0.5 * the clipped squared error to the returns,
a token mean. Tokens, precision and devices of the policy as in esopt.baselines.grpo; the
critic is float32 on the policy's device (its weights from the policy's float32 master; 16
bytes a parameter with its gradients and AdamW moments, what mixed-precision AdamW keeps
too); GAE on the CPU, its results moved back.
One optimisation pass per batch of rollouts (as GRPO here): pi_old is the current policy
(ratio 1 in value), and the old values are the critic's before its step.
"""

from __future__ import annotations

import copy
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
    token_logprobs,
    turn_samples,
)
from esopt.chat import SamplingParams
from esopt.runtime.ledger import PPO_PASSES


@dataclass(frozen=True)
class PPOConfig:
    clip_eps: float = 0.2
    value_clip: float = 0.2
    gamma: float = 1.0
    lam: float = 0.95
    beta: float = 1e-3
    lr: float = 1e-6
    value_lr: float = 1e-5
    """The critic's AdamW learning rate (a whole model now, not a linear head; OpenRLHF's
    default critic rate is 9e-6)."""
    max_grad_norm: float = 1.0
    """Clips the policy's and the critic's gradients, each on its own."""
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
        for name in ("beta", "lr", "value_lr", "max_grad_norm"):
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


class Critic(torch.nn.Module):
    """V(s_t) for every token position: the base model's transformer body and a scalar
    head (transformers' ForSequenceClassification, num_labels=1), float32, initialised
    from `policy`'s float32 master; the head starts at zero (V = 0: the first advantages
    are the Monte Carlo returns)."""

    def __init__(self, policy):
        super().__init__()
        from transformers import AutoModelForSequenceClassification

        config = copy.deepcopy(policy.model.config)
        config.num_labels = 1
        config.pad_token_id = policy.tokenizer.pad_token_id
        with torch.device(policy.model.device):  # built where it trains, not copied there
            self.model = AutoModelForSequenceClassification.from_config(
                config, dtype=torch.float32)
        prefix = self.model.base_model_prefix
        body = getattr(self.model, prefix)
        state = {n: policy.master[f"{prefix}.{n}"] for n, _ in body.named_parameters()}
        missing = body.load_state_dict(state, strict=False).missing_keys
        if any(n in state for n in missing) or len(state) != len(list(body.parameters())):
            raise ValueError(f"critic: the policy's master lacks body weights {missing}")
        with torch.no_grad():
            for p in self.model.score.parameters():
                p.zero_()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, L-1): the value of the state before predicting token t+1, at position t."""
        body = getattr(self.model, self.model.base_model_prefix)
        hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.model.score(hidden[:, :-1]).squeeze(-1)


def critic_values(critic: Critic, batch: TokenBatch, size: int) -> torch.Tensor:
    """The critic's values of every position (no gradient), in row chunks, (B, L-1)."""
    out = torch.zeros(batch.input_ids.shape[0], batch.input_ids.shape[1] - 1,
                      device=batch.device)
    with torch.no_grad():
        for rows, chunk in batch.chunks(size):
            v = critic(chunk.input_ids, chunk.attention_mask)
            out[rows, :v.shape[1]] = v
    return out


def policy_loss(logp_new, logp_old, logp_ref, advantages, loss_mask, cfg: PPOConfig,
                normaliser: float) -> torch.Tensor:
    """Sum over policy tokens, divided by `normaliser` (the whole batch's policy tokens), of
    the clipped surrogate + beta * k3-KL to the reference. All (B, T) aligned on predicted
    tokens; advantages per token."""
    assert logp_new.shape == logp_old.shape == logp_ref.shape == advantages.shape
    ratio = torch.exp(logp_new - logp_old)
    clip = cfg.clip_eps
    surrogate = -torch.minimum(ratio * advantages,
                               torch.clamp(ratio, 1 - clip, 1 + clip) * advantages)
    log_ref_ratio = logp_ref - logp_new
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    return ((surrogate + cfg.beta * kl) * loss_mask).sum() / normaliser


def value_loss(values, old_values, returns, loss_mask, cfg: PPOConfig,
               normaliser: float) -> torch.Tensor:
    """The critic's loss: 0.5 * the clipped squared error to the returns, summed over
    policy tokens and divided by `normaliser`. All (B, T)."""
    assert values.shape == old_values.shape == returns.shape == loss_mask.shape
    v_clipped = old_values + torch.clamp(values - old_values, -cfg.value_clip, cfg.value_clip)
    v_loss = torch.maximum((values - returns) ** 2, (v_clipped - returns) ** 2)
    return 0.5 * (v_loss * loss_mask).sum() / normaliser


class PPOTrainer(PolicyTrainer):
    """PPO with a separate critic on the same rollouts machinery as GRPO."""

    def __init__(self, policy, cfg: PPOConfig):
        super().__init__(policy, cfg.train_decoder, cfg.seed)
        self.cfg = cfg
        self.critic = Critic(policy)
        self.optimizer = torch.optim.AdamW(self.train_params, lr=cfg.lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=cfg.value_lr)

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.optimizer, self.critic_optimizer]

    def state_tensors(self):
        """The policy's (PolicyTrainer.state_tensors) and the critic's weights and
        gradients (its optimiser's moments come with optimizers())."""
        yield from super().state_tensors()
        critic = list(self.critic.parameters())
        yield from critic
        yield from (p.grad for p in critic if p.grad is not None)

    def step(self, env: str, env_kwargs: dict, task_seeds: list[int]) -> dict:
        """One PPO update of the policy and the critic from fresh rollouts on `task_seeds`."""
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
        torch.nn.utils.clip_grad_norm_(self.train_params, cfg.max_grad_norm)
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.critic_optimizer.step()
        self.finish_step()
        # Scoring: the critic's old values and the reference; training: the policy's and
        # the critic's forward + backward.
        flops = step_flops(self.shape, episodes, batch, PPO_PASSES)
        return {"step": self.steps, **stats, **episode_stats(episodes),
                "tokens": batch.completion_tokens, "generate_s": t_gen,
                "update_s": time.perf_counter() - t1 - stats["score_s"],
                "flops": sum(flops.values()), **{f"flops_{k}": v for k, v in flops.items()}}

    def accumulate(self, batch: TokenBatch, owners: list[int], rewards: list[float]) -> dict:
        """The critic's old values, the reference, GAE; then forward/backward in
        micro-batches: the policy loss's gradient lands in the trained parameters' .grad,
        the value loss's in the critic's. owners[i] is row i's episode, rewards[k]
        episode k's reward."""
        cfg = self.cfg
        mask = batch.loss_mask[:, 1:]
        n_tokens = max(float(mask.sum()), 1.0)
        t1 = time.perf_counter()
        self.critic.eval()
        old_values = critic_values(self.critic, batch, cfg.micro_batch)
        ref = chunked_logprobs(self.reference, batch, cfg.micro_batch)
        adv_t, ret_t = (t.to(batch.device) for t in self._advantages(
            rewards, owners, old_values.cpu(), mask.cpu()))
        t_score = time.perf_counter() - t1
        self.model.train()
        self.critic.train()
        self.zero_grad()
        self.critic.zero_grad(set_to_none=True)
        loss_sum = v_loss_sum = 0.0
        for rows, chunk in batch.chunks(cfg.micro_batch):
            w = chunk.input_ids.shape[1] - 1
            chunk_mask = chunk.loss_mask[:, 1:]
            new = token_logprobs(self.model, chunk)
            loss = policy_loss(new, new.detach(), ref[rows, :w], adv_t[rows, :w], chunk_mask,
                               cfg, n_tokens)
            loss.backward()
            self.collect_grads()
            v_loss = value_loss(self.critic(chunk.input_ids, chunk.attention_mask),
                                old_values[rows, :w], ret_t[rows, :w], chunk_mask, cfg,
                                n_tokens)
            v_loss.backward()
            loss_sum += loss.item()
            v_loss_sum += v_loss.item()
        self.critic.eval()
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
