"""Multi-turn Agentic GRPO on the project's environments and HF policy.

Per step: each task is played `group_size` times with the training decoder; episode
rewards are z-scored within each task's group (a group whose rewards are all equal has
zero advantage and so no gradient); every policy-generated token of an episode gets its
episode's advantage (trajectory-level credit, as ES gets); prompt and environment tokens
(system, user, tool output: everything the policy did not write) are masked from the
loss. Loss per generated token: the clipped surrogate min(r A, clip(r, 1-e, 1+e) A) with
r = pi / pi_old, plus beta * KL(pi || pi_ref) by the k3 estimator; AdamW. The per-token
losses are aggregated as one of TRL's named `loss_type`s (LOSS_TYPES; default "grpo",
the GRPO objective the paper names: each trajectory's mean over its tokens, averaged
over trajectories), where TRL's "sequence" is an episode: all its policy turns, as TRL's
multi-turn tool calling puts every turn of an episode into one completion (tool output
masked). tests/baselines/test_trl_loss.py checks each type against TRL's own
GRPOTrainer._compute_loss on the same batch. Written here rather than with TRL's trainer:
TRL's GRPOTrainer scores single completions from a dataset, while these episodes are
multi-turn and environment-driven; its loss is a method of that Trainer (not a function
to import), and the one free helper that would apply, `selective_log_softmax`, is the
gather of esopt.baselines.scoring.

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
from esopt.runtime.ledger import (
    GRPO_PASSES,
    TRAIN_FORWARDS,
    ModelShape,
    RLPasses,
    forward_flops,
    rollout_flops,
)

# TRL's GRPOConfig.loss_type values whose aggregation is implemented here (TRL 1.16):
#   grpo:    per sequence, sum over its tokens / its tokens; mean over sequences
#   bnpo:    sum over the micro-batch's tokens / its tokens; mean over micro-batches
#   dr_grpo: sum over all tokens / (sequences x max_completion_length)
#   dapo:    sum over all tokens / all tokens of the accumulated batch
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


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
    loss_type: str = "grpo"
    """How per-token losses are aggregated: one of TRL's loss types (LOSS_TYPES)."""
    max_completion_length: int | None = None
    """dr_grpo's constant: the policy tokens an episode may write at most (every turn's
    max_new_tokens); None: train_decoder.max_new_tokens (a single turn)."""

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {list(LOSS_TYPES)}, got "
                             f"{self.loss_type!r}")
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise ValueError(f"max_completion_length must be >= 1, got "
                             f"{self.max_completion_length}")
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


def loss_row_weights(loss_type: str, row_tokens, owners, micro_batch: int,
                     max_completion_length: int | None = None) -> np.ndarray:
    """Per-row weights w (B,) such that sum_r w_r sum_t loss[r, t] is the step's loss under
    TRL's `loss_type`, for rows (policy turns) of episodes `owners[r]` with `row_tokens[r]`
    policy tokens each, forwarded in micro-batches of `micro_batch` rows. A TRL sequence is
    an episode (all its turns); token counts are clamped at 1, as TRL does."""
    tokens = np.asarray(row_tokens, dtype=np.float64)
    owners = np.asarray(owners)
    assert tokens.ndim == 1 and tokens.shape == owners.shape, (tokens.shape, owners.shape)
    episodes = np.unique(owners)
    if loss_type == "dapo":
        return np.full(tokens.shape, 1.0 / max(tokens.sum(), 1.0))
    if loss_type == "bnpo":
        chunks = range(0, tokens.size, micro_batch)
        per = [1.0 / (max(tokens[i:i + micro_batch].sum(), 1.0) * len(chunks)) for i in chunks]
        return np.repeat(per, [min(micro_batch, tokens.size - i) for i in chunks])
    if loss_type == "grpo":
        per_episode = {k: max(tokens[owners == k].sum(), 1.0) for k in episodes}
        return np.array([1.0 / (per_episode[k] * episodes.size) for k in owners])
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("dr_grpo needs max_completion_length")
        return np.full(tokens.shape, 1.0 / (episodes.size * max_completion_length))
    raise ValueError(f"loss_type must be one of {list(LOSS_TYPES)}, got {loss_type!r}")


def grpo_loss(logp_new, logp_old, logp_ref, advantages, loss_mask, clip_eps: float,
              beta: float, weights=None) -> tuple[torch.Tensor, dict]:
    """sum over rows r and policy tokens t of weights[r] * (the clipped surrogate +
    beta * k3-KL to the reference).

    Shapes: logp_* and loss_mask (B, T) aligned on predicted tokens; advantages and
    weights (B,). `weights`: the rows' aggregation weights (loss_row_weights), so that the
    micro-batches' losses add up to the step's; default: this batch's token mean.
    Stats (kl, clip_frac) are sums over tokens, for the caller to divide by its count.
    """
    assert logp_new.shape == logp_old.shape == logp_ref.shape == loss_mask.shape
    assert advantages.shape == (logp_new.shape[0],)
    if weights is None:
        weights = torch.full_like(advantages, 1.0 / max(float(loss_mask.sum()), 1.0))
    assert weights.shape == advantages.shape
    adv = advantages[:, None]
    ratio = torch.exp(logp_new - logp_old)
    surrogate = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    log_ref_ratio = logp_ref - logp_new
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    per_token = surrogate + beta * kl
    loss = (per_token * loss_mask * weights[:, None]).sum()
    with torch.no_grad():
        clipped = ((ratio - 1).abs() > clip_eps).float()
        stats = {"kl": float((kl * loss_mask).sum()),
                 "clip_frac": float((clipped * loss_mask).sum())}
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

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.optimizer]

    def state_tensors(self):
        """Every tensor the trainer holds for training: the policy's parameters and the
        float32 ones the optimiser steps, their gradients, the reference, the optimisers'
        moments (not the policy's host-side ES master)."""
        params = [*self.params, *self.train_params, *self.reference.parameters()]
        yield from params
        yield from (p.grad for p in params if p.grad is not None)
        for opt in self.optimizers():
            for state in opt.state.values():
                yield from (v for v in state.values() if torch.is_tensor(v) and v.dim() > 0)

    def state_bytes(self) -> int:
        """Measured bytes of state_tensors(), each storage once: the weights and optimiser
        state that runtime.memory.training_state_bytes predicts."""
        storages = {}
        for t in self.state_tensors():
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return sum(storages.values())

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

    def row_weights(self, batch: TokenBatch, owners: Sequence[int]) -> torch.Tensor:
        """The batch rows' loss weights under cfg.loss_type, on the batch's device."""
        cfg = self.cfg
        w = loss_row_weights(cfg.loss_type, batch.loss_mask[:, 1:].sum(dim=1).tolist(), owners,
                             cfg.micro_batch, cfg.max_completion_length
                             or cfg.train_decoder.max_new_tokens)
        return torch.tensor(w, dtype=torch.float32, device=batch.device)

    def step(self, env: str, env_kwargs: dict, task_seeds: list[int]) -> dict:
        """One GRPO update from fresh group rollouts on `task_seeds`."""
        t0 = time.perf_counter()
        episodes = self.last_episodes = self.rollouts(env, env_kwargs, task_seeds,
                                                      self.cfg.group_size)
        t_gen = time.perf_counter() - t0
        samples, rewards = self.samples(episodes)
        batch = self.batch(samples)
        owners = [k for k, ep in enumerate(episodes) for _ in ep.turns]
        t1 = time.perf_counter()
        stats = self.accumulate(batch, owners)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.train_params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.finish_step()
        flops = step_flops(self.shape, episodes, batch, GRPO_PASSES)
        return {"step": self.steps, **stats, "grad_norm": float(grad_norm),
                **episode_stats(episodes), "reward_mean": float(rewards.mean()),
                "tokens": batch.completion_tokens, "generate_s": t_gen,
                "update_s": time.perf_counter() - t1 - stats["score_s"],
                "flops": sum(flops.values()), **{f"flops_{k}": v for k, v in flops.items()}}

    def accumulate(self, batch: TokenBatch, owners: Sequence[int] | None = None) -> dict:
        """Score the reference, then forward/backward the batch in micro-batches: the
        gradient of the batch's GRPO loss (cfg.loss_type) lands in self.train_params'
        .grad. owners[i]: row i's episode (default: every row an episode of its own).

        One optimisation pass per batch of rollouts, so pi_old is the current policy: the
        ratio is 1 in value (its gradient is the policy gradient) and pi_old needs no
        scoring pass of its own; clipping matters only for multi-pass variants.
        """
        cfg = self.cfg
        n_tokens = max(float(batch.loss_mask[:, 1:].sum()), 1.0)
        weights = self.row_weights(batch, range(len(batch.input_ids)) if owners is None
                                   else owners)
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
                                   weights[rows])
            loss.backward()
            self.collect_grads()
            loss_sum += loss.item()
            stats = {k: stats[k] + part[k] / n_tokens for k in stats}  # token means
        return {"loss": loss_sum, "score_s": t_score, **stats}


def step_flops(shape: ModelShape, episodes, batch: TokenBatch, passes: RLPasses) -> dict:
    """FLOPs of an RL step by phase: generating the rollouts, `passes.score` no-gradient
    passes over the batch (the reference; PPO also the critic's old values), and one
    forward + backward (TRAIN_FORWARDS x a forward) of each of `passes.trained` models
    (PPO: the policy and the critic, counted as the model's size). Nominal counts, as the
    paper's: every sequence in full, whatever prefix sharing saves (ES rollouts are counted
    the same way)."""
    forward = sum(forward_flops(shape, n, 0) for n in batch.attention_mask.sum(dim=1).tolist())
    return {
        "generate": rollout_flops(shape, episodes),
        "score": passes.score * forward,
        "train": TRAIN_FORWARDS * passes.trained * forward,
    }


def episode_stats(episodes) -> dict:
    """What the ledger and Figure 7 read from a step's rollouts."""
    return {"episodes": len(episodes),
            "reward_mean": float(np.mean([e.reward for e in episodes])),
            "success": float(np.mean([e.success for e in episodes])),
            "turns": float(np.mean([e.num_turns for e in episodes]))}
