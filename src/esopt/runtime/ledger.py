"""Resource ledger: wall time per phase, peak memory and FLOPs of a training run.

FLOPs follow the usual dense-transformer accounting (Kaplan et al. 2020; Hoffmann et al.
2022): a forward pass costs 2N per token for the weights plus 4 * layers * d_model per
token per attended position for the attention scores and values; training (forward +
backward) costs three times the forward (esopt.baselines.grpo.step_flops). With a KV
cache each prompt token and each generated token is processed once, attending to the
positions before it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from esopt.runtime.atomic import write_parquet_atomic


@dataclass(frozen=True)
class ModelShape:
    """What the FLOP count needs from a model: parameters, layers, hidden size."""

    n_params: int
    n_layers: int
    d_model: int

    @classmethod
    def of(cls, model) -> ModelShape:
        cfg = model.config
        n = sum(p.numel() for p in model.parameters())
        return cls(n, int(cfg.num_hidden_layers), int(cfg.hidden_size))

    @classmethod
    def of_policy(cls, policy) -> ModelShape:
        """From any backend's policy (its parameter count and model config)."""
        cfg = policy.config
        return cls(int(policy.num_parameters), int(cfg.num_hidden_layers), int(cfg.hidden_size))


def forward_flops(shape: ModelShape, prompt_tokens: int, completion_tokens: int) -> float:
    """FLOPs of one sequence's forward pass with a KV cache (prompt then generation)."""
    tokens = prompt_tokens + completion_tokens
    # Token i (0-based) attends to i + 1 positions: sum over the sequence = T (T + 1) / 2.
    attended = tokens * (tokens + 1) / 2
    return 2.0 * shape.n_params * tokens + 4.0 * shape.n_layers * shape.d_model * attended


# Training FLOPs of a token, as multiples of its forward pass: forward + backward (the
# backward ~2x the forward: gradients of activations and of weights).
TRAIN_FORWARDS = 3.0


@dataclass(frozen=True)
class RLPasses:
    """What an RL step runs over each rollout's tokens besides generating them: no-gradient
    scoring passes, and models trained (one forward + backward each)."""

    score: int
    trained: int

    @property
    def episode_forwards(self) -> float:
        """An RL episode's FLOPs in forward passes of its tokens: its rollout (1), the
        scoring passes, and TRAIN_FORWARDS per trained model. Every pass sees the same
        tokens with the same attention (ledger accounting), so this is exact for equal
        token counts."""
        return 1.0 + self.score + TRAIN_FORWARDS * self.trained


# GRPO scores the reference and trains the policy; PPO also the critic's old values, and
# trains the critic (counted as the model's size).
GRPO_PASSES = RLPasses(score=1, trained=1)
PPO_PASSES = RLPasses(score=2, trained=2)
RL_PASSES = {"grpo": GRPO_PASSES, "grpo_b": GRPO_PASSES, "ppo": PPO_PASSES}


def rollout_flops(shape: ModelShape, episodes) -> float:
    """FLOPs of playing `episodes`: each turn's prompt and completion through the model."""
    return sum(forward_flops(shape, t.prompt_tokens, t.completion_tokens)
               for e in episodes for t in e.turns)


# The ledger's reward columns; an RL step has no population: its spread columns are NaN.
REWARD_SPREAD = ("reward_mean", "reward_std", "reward_min", "reward_max")
NO_SPREAD = {"reward_std": math.nan, "reward_min": math.nan, "reward_max": math.nan}


def reward_spread(rewards, weights=None) -> dict[str, float]:
    """reward_mean, reward_std (ddof 0, both weighted by `weights`, e.g. episodes per
    direction), reward_min and reward_max over the finite rewards of a population: NaN
    ones (directions excluded from the update) are left out; all NaN when none is finite."""
    r = np.asarray(rewards, dtype=np.float64)
    w = np.ones_like(r) if weights is None else np.asarray(weights, dtype=np.float64)
    if r.shape != w.shape:
        raise ValueError(f"{r.size} rewards but {w.size} weights")
    ok = np.isfinite(r)
    if not ok.any():
        return dict.fromkeys(REWARD_SPREAD, math.nan)
    r, w = r[ok], w[ok]
    mean = float(np.average(r, weights=w))
    return {"reward_mean": mean,
            "reward_std": float(np.sqrt(np.average((r - mean) ** 2, weights=w))),
            "reward_min": float(r.min()), "reward_max": float(r.max())}


@dataclass(frozen=True)
class LedgerRow:
    """One update of a training run (an ES generation, an RL step, an async update): its
    seconds by phase, FLOPs, peak memory, episodes and rewards. Table 1's memory column,
    Table 2 and Figure 7 read these, for every method alike."""

    run: str
    method: str
    step: int
    peak_memory_mb: float
    flops: float
    wall_s: float
    """Wall-clock of the update (an ES generation: its slowest shard + its update job)."""
    load_s: float
    generate_s: float
    score_s: float
    update_s: float
    noise_s: float
    save_s: float
    flops_generate: float
    flops_score: float
    flops_train: float
    episodes: int
    reward_mean: float
    reward_std: float
    """Over an ES generation's directions (NaN for an RL step: no population)."""
    reward_min: float
    reward_max: float
    success: float
    turns: float
    tokens: int
    failed_episodes: int
    excluded_directions: int
    dispatched: int | None = None
    """async ES: directions dispatched at this update."""
    discarded: int | None = None
    """async ES: results discarded for a lag over the bound."""
    mean_lag: float | None = None
    """async ES: mean lag of the results used (NaN when none was)."""
    accepted: int | None = None
    """async ES: results the update used (at most G)."""
    stale_accepted: int | None = None
    """async ES: results used with lag >= 1 (stale fitness measurements)."""
    max_lag_used: int | None = None
    """async ES: the largest lag among the results used (at most L)."""
    # ES diagnostics (esopt.pipeline.diagnostics, esopt.es.apply.UpdateStats); None for RL.
    tied_fraction: float | None = None
    """The largest group of directions tied on one fitness, over G (1: no signal, 1/G: all
    differ)."""
    zero_signal: bool | None = None
    """The update had no signal (every shaped weight 0): the weights did not move."""
    intended_norm: float | None = None
    """L2 norm of the float32 update."""
    realised_norm: float | None = None
    """L2 norm of what the update changed in the weights as served (serving_dtype)."""
    realised_cosine: float | None = None
    """Cosine of the realised with the intended update (None for a zero update)."""
    unchanged_fraction: float | None = None
    """Fraction of the weights whose served value the update left unchanged."""
    reward_components: str | None = None
    """Mean episode reward split into the environment's named parts (JSON object; {} when
    the environment has none)."""
    distinct_completions: float | None = None
    """Output diversity across directions: distinct trajectories per task over G (1/G: all
    directions wrote the same, 1: all differ), averaged over the generation's tasks."""


LEDGER_KIND = "ledger/2"


@dataclass
class Ledger:
    """The rows of one run's ledger, written as one Parquet file."""

    run: str
    method: str
    rows: list[LedgerRow] = field(default_factory=list)

    def end_step(self, step: int, **columns) -> LedgerRow:
        """Append the row of update `step`."""
        row = LedgerRow(run=self.run, method=self.method, step=step, **columns)
        self.rows.append(row)
        return row

    def table(self) -> pa.Table:
        return pa.Table.from_pylist([asdict(r) for r in self.rows])

    def write(self, path: str | Path, config_json: str | None = None) -> Path:
        meta = {"esopt.record": LEDGER_KIND}
        if config_json is not None:
            meta["config"] = config_json
        return write_parquet_atomic(self.table(), path, meta)


def read_ledger(path: str | Path) -> dict[str, list]:
    """A ledger as columns (one row per update); columns a ledger written by an older esopt
    lacks are absent."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pydict()
