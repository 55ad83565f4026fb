"""Multi-turn Agentic GRPO on the project's environments and HF policy.

Per step: each task is played `group_size` times with the training decoder; episode
rewards are z-scored within each task's group (a group whose rewards are all equal has
zero advantage and so no gradient); every policy-generated token of an episode gets its
episode's advantage (trajectory-level credit, as ES gets); prompt and environment tokens
(system, user, tool output: everything the policy did not write) are masked from the
loss. Loss per generated token: the clipped surrogate min(r A, clip(r, 1-e, 1+e) A) with
r = pi / pi_old, plus beta * KL(pi || pi_ref) by the k3 estimator, averaged over tokens;
AdamW. Written here rather than with TRL: TRL's GRPOTrainer scores single completions
from a dataset, while these episodes are multi-turn and environment-driven; its loss is a
method of that Trainer (not a function to import), and the one free helper that would
apply, `selective_log_softmax`, is the gather of esopt.baselines.scoring.

Tokens: a turn's row is the ids of its rendered prompt (the same encoding the backend fed
to generate) followed by the ids the policy generated (Completion.token_ids): nothing is
re-encoded from decoded text, and an EOS is there only where the policy sampled one (a
turn cut by a stop string or by the length limit ends on its last sampled token).

Precision: the optimiser steps float32 parameters. A float32 model (the tiny scale) is
stepped in place. A model served in bf16 keeps its bf16 weights for the forward and
backward (bf16 compute), while AdamW steps a float32 master of every parameter on the
model's device, started from the policy's exact float32 master and accumulating the
micro-batches' gradients in float32; after the step the policy's master takes the new
float32 values and the serving weights are recomputed from it (rounded once). A bf16
parameter stepped directly would lose a 1e-6 learning-rate step to rounding (tested).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
import torch

from esopt.agent.rollout import run_episodes
from esopt.baselines.scoring import prefix_shared_forward
from esopt.chat import SamplingParams
from esopt.envs.base import make_env
from esopt.runtime.ledger import ModelShape, forward_flops, rollout_flops


@dataclass(frozen=True)
class GRPOConfig:
    """Hyper-parameters of Agentic GRPO (paper: clip 0.2, KL beta 1e-3, temperature 1)."""

    group_size: int = 8
    """n: rollouts per task (the group of the advantage)."""
    clip_eps: float = 0.2
    beta: float = 1e-3
    """Weight of the KL penalty to the reference (initial) policy."""
    lr: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch: int = 8
    """Sequences per forward/backward; gradients accumulate over the step's batch, so the
    update is the same and peak memory stays bounded (full-vocabulary logits dominate)."""
    train_decoder: SamplingParams = field(
        default_factory=lambda: SamplingParams(max_new_tokens=64, temperature=1.0))
    seed: int = 0

    def __post_init__(self) -> None:
        if self.micro_batch < 1:
            raise ValueError(f"micro_batch must be >= 1, got {self.micro_batch}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (advantages are within groups), "
                             f"got {self.group_size}")
        if not 0 < self.clip_eps < 1:
            raise ValueError(f"clip_eps must be in (0, 1), got {self.clip_eps}")
        for name in ("beta", "lr", "weight_decay", "max_grad_norm"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")


def group_advantages(rewards_gn) -> np.ndarray:
    """Within-group z-scores (ddof 0); all-equal groups get exactly zero."""
    rewards_gn = np.asarray(rewards_gn, dtype=np.float64)
    assert rewards_gn.ndim == 2, rewards_gn.shape
    mean = rewards_gn.mean(axis=1, keepdims=True)
    std = rewards_gn.std(axis=1, keepdims=True)
    return np.where(std > 0, (rewards_gn - mean) / np.where(std > 0, std, 1.0), 0.0)


class RLSample(NamedTuple):
    """One policy turn to train on: the prompt's token ids, the ids the policy generated
    for it, and the advantage of its episode."""

    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    advantage: float


@dataclass
class TokenBatch:
    """Right-padded (prompt + completion) sequences; loss_mask marks completion tokens."""

    input_ids: torch.Tensor  # (B, L)
    attention_mask: torch.Tensor  # (B, L)
    loss_mask: torch.Tensor  # (B, L): 1 where the token was written by the policy
    advantages: torch.Tensor  # (B,)

    @property
    def completion_tokens(self) -> int:
        return int(self.loss_mask.sum())

    @property
    def device(self) -> torch.device:
        return self.input_ids.device

    def chunks(self, size: int):
        """Row slices of at most `size` sequences, right padding trimmed to each slice."""
        for start in range(0, self.input_ids.shape[0], size):
            rows = slice(start, start + size)
            length = int(self.attention_mask[rows].sum(dim=1).max())
            yield rows, TokenBatch(self.input_ids[rows, :length],
                                   self.attention_mask[rows, :length],
                                   self.loss_mask[rows, :length], self.advantages[rows])


def build_batch(samples: Sequence[RLSample], pad_id: int, device="cpu") -> TokenBatch:
    """One right-padded batch of (prompt ids + generated ids) rows on `device`; the loss
    mask covers exactly the generated ids (no token added or re-encoded)."""
    rows, masks = [], []
    for s in samples:
        if not len(s.completion_ids):
            raise ValueError("a turn without generated token ids: the backend must return "
                             "Completion.token_ids for RL training")
        rows.append(list(s.prompt_ids) + list(s.completion_ids))
        masks.append([0] * len(s.prompt_ids) + [1] * len(s.completion_ids))
    length = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad_id] * (length - len(r)) for r in rows], dtype=torch.long)
    attn = torch.tensor([[1] * len(r) + [0] * (length - len(r)) for r in rows])
    loss = torch.tensor([m + [0] * (length - len(m)) for m in masks], dtype=torch.float32)
    adv = torch.tensor([float(s.advantage) for s in samples], dtype=torch.float32)
    return TokenBatch(ids.to(device), attn.to(device), loss.to(device), adv.to(device))


def turn_samples(policy, episodes, advantages) -> list[RLSample]:
    """One RLSample per policy turn of `episodes` (advantages: one per episode): the
    prompt encoded as the backend encoded it for generate, the generated ids as sampled."""
    tok = policy.tokenizer
    out = []
    for ep, a in zip(episodes, advantages, strict=True):
        for turn in ep.turns:
            prompt = tok(policy.render(turn.prompt), add_special_tokens=False)["input_ids"]
            out.append(RLSample(prompt, tuple(turn.completion_ids), float(a)))
    return out


def token_logprobs(model, batch: TokenBatch) -> torch.Tensor:
    """log pi(token_t | tokens_<t) for t >= 1, (B, L-1); zero inside the shared prompt
    prefix (see esopt.baselines.scoring)."""
    return prefix_shared_forward(model, batch.input_ids, batch.attention_mask,
                                 batch.loss_mask)[0]


@torch.no_grad()
def chunked_logprobs(model, batch: TokenBatch, size: int) -> torch.Tensor:
    """token_logprobs in row chunks of `size` (no gradient), padded back to (B, L-1)."""
    out = torch.zeros(batch.input_ids.shape[0], batch.input_ids.shape[1] - 1,
                      device=batch.device)
    for rows, chunk in batch.chunks(size):
        lp = token_logprobs(model, chunk)
        out[rows, :lp.shape[1]] = lp
    return out


def grpo_loss(logp_new, logp_old, logp_ref, advantages, loss_mask, clip_eps: float,
              beta: float, normaliser: float | None = None) -> tuple[torch.Tensor, dict]:
    """Mean over policy tokens of the clipped surrogate plus beta * k3-KL to the reference.

    Shapes: logp_* and loss_mask (B, T) aligned on predicted tokens; advantages (B,).
    `normaliser`: the token count to divide by when this is one micro-batch of a larger
    batch (default: this batch's own policy tokens), so accumulated gradients equal the
    whole batch's.
    """
    assert logp_new.shape == logp_old.shape == logp_ref.shape == loss_mask.shape
    assert advantages.shape == (logp_new.shape[0],)
    adv = advantages[:, None]
    ratio = torch.exp(logp_new - logp_old)
    surrogate = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    log_ref_ratio = logp_ref - logp_new
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    per_token = surrogate + beta * kl
    n = loss_mask.sum().clamp(min=1) if normaliser is None else max(float(normaliser), 1.0)
    loss = (per_token * loss_mask).sum() / n
    with torch.no_grad():
        clipped = ((ratio - 1).abs() > clip_eps).float()
        stats = {"kl": float((kl * loss_mask).sum() / n),
                 "clip_frac": float((clipped * loss_mask).sum() / n)}
    return loss, stats


class PolicyTrainer:
    """What the RL baselines share: the policy's model made trainable, a frozen reference
    copy, rollouts with a training decoder, the float32 parameters the optimiser steps,
    and the ES master kept in sync after a step.

    The policy generates the rollouts (its serving model *is* the trained model).
    """

    def __init__(self, policy, decoder: SamplingParams, seed: int):
        self.policy, self.decoder, self.seed = policy, decoder, seed
        self.model = policy.model
        self.reference = copy.deepcopy(self.model).eval()
        for p in self.reference.parameters():
            p.requires_grad_(False)
        self.names = [n for n, _ in policy.model.named_parameters()]
        self.params = [p for _, p in policy.model.named_parameters()]
        for p in self.params:
            p.requires_grad_(True)
        self.device = self.params[0].device
        # float32 model: stepped in place. Lower-precision serving: a float32 master per
        # parameter on the model's device, from the policy's exact float32 master.
        self.mixed = any(p.dtype != torch.float32 for p in self.params)
        self.train_params = [
            policy.master[n].to(self.device, torch.float32, copy=True).requires_grad_(True)
            for n in self.names
        ] if self.mixed else self.params
        self.shape = ModelShape.of(self.model)
        self.steps = 0
        self.last_episodes: list = []
        """The rollouts of the last step (the run's trajectories)."""

    def rollouts(self, env: str, env_kwargs: dict, task_seeds: list[int], repeats: int):
        """Each task played `repeats` times (consecutive), with this step's sampling seed."""
        seeds = [s for s in task_seeds for _ in range(repeats)]
        sampling = replace(self.decoder, seed=(self.seed * 100003 + self.steps) % 2**31)
        with torch.no_grad():
            return run_episodes(self.policy, lambda: make_env(env, **env_kwargs), seeds, sampling)

    def batch(self, samples: Sequence[RLSample]) -> TokenBatch:
        """The samples as one batch on the model's device."""
        return build_batch(samples, self.policy.tokenizer.pad_token_id, self.device)

    def zero_grad(self) -> None:
        for p in {id(p): p for p in [*self.params, *self.train_params]}.values():
            p.grad = None

    def collect_grads(self) -> None:
        """After a micro-batch's backward: move the model's (bf16) gradients into the
        float32 master's, summing in float32 (a no-op for a float32 model)."""
        if not self.mixed:
            return
        for master, p in zip(self.train_params, self.params, strict=True):
            if p.grad is None:
                continue
            g = p.grad.to(torch.float32)
            master.grad = g if master.grad is None else master.grad.add_(g)
            p.grad = None

    def finish_step(self) -> None:
        """After optimizer.step(): the policy's float32 master takes the stepped values and
        the serving weights are recomputed from it."""
        self.model.eval()
        if self.mixed:
            with torch.no_grad():
                for name, master in zip(self.names, self.train_params, strict=True):
                    self.policy.master[name].copy_(master.detach().cpu())
            self.policy.restore()
        else:
            self.policy.sync_master()
        self.steps += 1


class GRPOTrainer(PolicyTrainer):
    """Agentic GRPO: group rollouts, group advantages, clipped surrogate + KL, AdamW."""

    def __init__(self, policy, cfg: GRPOConfig):
        super().__init__(policy, cfg.train_decoder, cfg.seed)
        self.cfg = cfg
        self.optimizer = torch.optim.AdamW(self.train_params, lr=cfg.lr,
                                           weight_decay=cfg.weight_decay)

    def samples(self, episodes) -> tuple[list[RLSample], np.ndarray]:
        """One RLSample per policy turn (its episode's group advantage); the group rewards."""
        rewards = np.array([e.reward for e in episodes]).reshape(-1, self.cfg.group_size)
        adv = group_advantages(rewards).reshape(-1)
        return turn_samples(self.policy, episodes, adv), rewards

    def step(self, env: str, env_kwargs: dict, task_seeds: list[int]) -> dict:
        """One GRPO update from fresh group rollouts on `task_seeds`."""
        t0 = time.perf_counter()
        episodes = self.last_episodes = self.rollouts(env, env_kwargs, task_seeds,
                                                      self.cfg.group_size)
        t_gen = time.perf_counter() - t0
        samples, rewards = self.samples(episodes)
        batch = self.batch(samples)
        t1 = time.perf_counter()
        stats = self.accumulate(batch)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.train_params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.finish_step()
        flops = step_flops(self.shape, episodes, batch, score_passes=1)
        return {"step": self.steps, **stats, "grad_norm": float(grad_norm),
                **episode_stats(episodes), "reward_mean": float(rewards.mean()),
                "tokens": batch.completion_tokens, "generate_s": t_gen,
                "update_s": time.perf_counter() - t1 - stats["score_s"],
                "flops": sum(flops.values()), **{f"flops_{k}": v for k, v in flops.items()}}

    def accumulate(self, batch: TokenBatch) -> dict:
        """Score the reference, then forward/backward the batch in micro-batches: the
        gradient of the batch's GRPO loss lands in self.train_params' .grad.

        One optimisation pass per batch of rollouts, so pi_old is the current policy: the
        ratio is 1 in value (its gradient is the policy gradient) and pi_old needs no
        scoring pass of its own; clipping matters only for multi-pass variants.
        """
        cfg = self.cfg
        n_tokens = float(batch.loss_mask[:, 1:].sum())
        t1 = time.perf_counter()
        ref = chunked_logprobs(self.reference, batch, cfg.micro_batch)
        t_score = time.perf_counter() - t1
        self.model.train()
        self.zero_grad()
        loss_sum, stats = 0.0, {"kl": 0.0, "clip_frac": 0.0}
        for rows, chunk in batch.chunks(cfg.micro_batch):
            width = chunk.input_ids.shape[1] - 1
            new = token_logprobs(self.model, chunk)
            loss, part = grpo_loss(new, new.detach(), ref[rows, :width], chunk.advantages,
                                   chunk.loss_mask[:, 1:], cfg.clip_eps, cfg.beta,
                                   normaliser=n_tokens)
            loss.backward()
            self.collect_grads()
            loss_sum += loss.item()
            stats = {k: stats[k] + part[k] for k in stats}
        return {"loss": loss_sum, "score_s": t_score, **stats}


def step_flops(shape: ModelShape, episodes, batch: TokenBatch, score_passes: int) -> dict:
    """FLOPs of an RL step by phase: generating the rollouts, `score_passes` no-gradient
    passes over the batch (the reference; PPO also the old values), and one forward +
    backward (3x a forward) for the update. Nominal counts, as the paper's: every sequence
    in full, whatever prefix sharing saves (ES rollouts are counted the same way)."""
    forward = sum(forward_flops(shape, n, 0) for n in batch.attention_mask.sum(dim=1).tolist())
    return {
        "generate": rollout_flops(shape, episodes),
        "score": score_passes * forward,
        "train": 3.0 * forward,
    }


def episode_stats(episodes) -> dict:
    """What the ledger and Figure 7 read from a step's rollouts."""
    return {"episodes": len(episodes),
            "reward_mean": float(np.mean([e.reward for e in episodes])),
            "success": float(np.mean([e.success for e in episodes])),
            "turns": float(np.mean([e.num_turns for e in episodes]))}
