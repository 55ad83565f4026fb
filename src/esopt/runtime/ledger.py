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
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa


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


@dataclass
class Ledger:
    """Rows of (step, phase seconds, tokens, FLOPs, peak memory); one row per step."""

    run: str
    method: str
    rows: list[dict] = field(default_factory=list)
    _current: dict = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str):
        """Time a phase of the current step (generation, scoring, update, noise, ...)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            key = f"{name}_s"
            self._current[key] = self._current.get(key, 0.0) + time.perf_counter() - t0

    def end_step(self, step: int, *, peak_memory_mb: float, flops: float, **extra) -> dict:
        row = {"run": self.run, "method": self.method, "step": step,
               "peak_memory_mb": float(peak_memory_mb), "flops": float(flops),
               **self._current, **extra}
        self.rows.append(row)
        self._current = {}
        return row

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows)

    def write(self, path: str | Path) -> Path:
        from esopt.agent.trajectories import write_parquet_atomic

        return write_parquet_atomic(self.table(), path)
