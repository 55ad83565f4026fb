"""The ES strategy as immutable state + pure ask/tell (evosax style).

    es = ES(ESConfig(population_size=8, ...))
    state = es.init()
    directions = es.ask(state)            # G seeds, never vectors
    rewards_n = [evaluate(policy, d) for d in directions]
    update, state = es.tell(state, rewards_n)
    policy.apply(update)                  # theta += alpha/G * sum_i w_i eps_i

The update has no 1/sigma factor (the paper's form): alpha is a step in weight units
per unit of shaped reward.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from esopt.es.schedules import SigmaSchedule
from esopt.es.seeds import direction_seed
from esopt.es.shaping import get_shaping

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ESConfig:
    """Hyper-parameters of one ES run."""

    population_size: int = 8
    """G: directions per generation (with antithetic sampling, G/2 seeds, each used +-)."""
    alpha: float = 5e-4
    """Update scale: theta += alpha/G * sum_i w_i eps_i (paper Table 19)."""
    sigma: SigmaSchedule = field(default_factory=SigmaSchedule)
    """Perturbation-scale schedule; its `generations` is the run length T."""
    shaping: str = "zscore"
    """Reward shaping: `zscore` (the paper) or `centered_rank`."""
    antithetic: bool = False
    """Mirrored pairs theta +- sigma eps (the paper is one-sided: False)."""
    run_seed: int = 0
    """Root of every direction seed of the run."""

    def __post_init__(self) -> None:
        if self.population_size < 2:
            raise ValueError(f"population_size (G) must be >= 2, got {self.population_size}")
        if self.antithetic and self.population_size % 2:
            raise ValueError(f"population_size must be even with antithetic=True, "
                             f"got {self.population_size}")
        if not (self.alpha >= 0 and math.isfinite(self.alpha)):
            raise ValueError(f"alpha must be a finite number >= 0, got {self.alpha}")
        get_shaping(self.shaping)
        if not isinstance(self.sigma, SigmaSchedule):
            raise TypeError(f"sigma must be a SigmaSchedule, got {type(self.sigma).__name__}")

    @property
    def generations(self) -> int:
        return self.sigma.generations

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ESConfig:
        d = dict(d)
        d["sigma"] = SigmaSchedule(**d.get("sigma", {}))
        return cls(**d)


@dataclass(frozen=True)
class Direction:
    """One perturbation: theta + sign * sigma * eps(seed)."""

    index: int
    seed: int
    sign: int
    sigma: float

    def __post_init__(self) -> None:
        if self.sign not in (1, -1):
            raise ValueError(f"sign must be +1 or -1, got {self.sign}")
        if not self.sigma > 0:
            raise ValueError(f"sigma must be > 0, got {self.sigma}")


@dataclass(frozen=True)
class ESState:
    """Where the run is: the next generation to ask for, and its sigma."""

    generation: int
    sigma: float
    run_seed: int


@dataclass(frozen=True)
class Update:
    """A parameter update defined by seeds: theta += scale * sum_i weight_i * sign_i eps(seed_i).

    `scale` is alpha / G_valid where G_valid counts the directions whose reward was finite.
    """

    generation: int
    sigma: float
    alpha: float
    seeds: tuple[int, ...]
    signs: tuple[int, ...]
    weights: tuple[float, ...]
    excluded: tuple[int, ...] = ()
    """Indices of directions dropped for non-finite rewards."""

    @property
    def scale(self) -> float:
        return self.alpha / len(self.seeds) if self.seeds else 0.0

    @property
    def is_zero(self) -> bool:
        return self.alpha == 0 or not any(self.weights)

    @property
    def coeffs(self) -> list[float]:
        """weight_i * sign_i: the coefficient of each direction's noise in the sum."""
        return [w * s for w, s in zip(self.weights, self.signs, strict=True)]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Update:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


class ES:
    """OpenAI-ES with the paper's choices: one-sided perturbation, z-score shaping,
    update alpha/G * sum w_i eps_i, and a sigma schedule."""

    def __init__(self, config: ESConfig):
        self.config = config
        self._shape = get_shaping(config.shaping)

    def init(self) -> ESState:
        """State of generation 0."""
        return ESState(generation=0, sigma=self.config.sigma(0), run_seed=self.config.run_seed)

    def state_at(self, generation: int) -> ESState:
        """State of any generation, recomputed (the run is a pure function of its config)."""
        return ESState(generation=generation, sigma=self.config.sigma(generation),
                       run_seed=self.config.run_seed)

    def ask(self, state: ESState) -> tuple[Direction, ...]:
        """The G directions of this generation."""
        g = self.config.population_size
        if self.config.antithetic:
            return tuple(
                Direction(i, direction_seed(state.run_seed, state.generation, i // 2),
                          1 if i % 2 == 0 else -1, state.sigma)
                for i in range(g)
            )
        return tuple(
            Direction(i, direction_seed(state.run_seed, state.generation, i), 1, state.sigma)
            for i in range(g)
        )

    def tell(self, state: ESState, rewards_n) -> tuple[Update, ESState]:
        """Shape the rewards of ask(state) and return the update and the next state."""
        rewards_n = np.asarray(rewards_n, dtype=np.float64)
        g = self.config.population_size
        if rewards_n.shape != (g,):
            raise ValueError(f"rewards must have shape ({g},), got {rewards_n.shape}")
        directions = self.ask(state)
        finite = np.isfinite(rewards_n)
        excluded = tuple(int(i) for i in np.flatnonzero(~finite))
        if excluded:
            log.warning("generation %d: %d direction(s) excluded for non-finite rewards: %s",
                        state.generation, len(excluded), list(excluded))
        kept = [d for d, ok in zip(directions, finite, strict=True) if ok]
        weights = self._shape(rewards_n[finite]) if kept else np.zeros(0)
        if not np.any(weights):
            log.warning("generation %d: rewards carry no signal (all equal or < 2 valid); "
                        "zero update", state.generation)
            weights = np.zeros_like(weights)
        update = Update(
            generation=state.generation,
            sigma=state.sigma,
            alpha=self.config.alpha,
            seeds=tuple(d.seed for d in kept),
            signs=tuple(d.sign for d in kept),
            weights=tuple(float(w) for w in weights),
            excluded=excluded,
        )
        nxt = state.generation + 1
        next_sigma = self.config.sigma(nxt) if nxt < self.config.generations else state.sigma
        return update, replace(state, generation=nxt, sigma=next_sigma)
