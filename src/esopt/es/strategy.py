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
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from esopt.es.schedules import SigmaSchedule
from esopt.es.seeds import direction_seed, mix
from esopt.es.shaping import get_shaping

log = logging.getLogger(__name__)


SUBSPACE_NORMALISATIONS = ("paper", "matched")


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
    subspaces: int | None = None
    """CoPES: K disjoint parameter subspaces per generation, G/K directions each, at
    sigma * sqrt(K) (None: plain ES; K=1 runs the CoPES path and equals plain ES)."""
    subspace_chunk: int = 1 << 16
    """CoPES: elements per parameter chunk, the unit of the partition."""
    subspace_normalisation: str = "paper"
    """CoPES: `paper` perturbs at sigma * sqrt(K) and steps alpha z_i / N_k (the CoPES
    paper, Wang et al. 2026, arXiv:2608.02391, Eqs. 11 and 13: the perturbation's expected
    squared norm matches plain ES's; the per-element step is sqrt(K) times plain ES's);
    `matched` perturbs at sigma and steps alpha z_i / sqrt(G N_k), so the per-element
    perturbation and step equal plain ES's at the same alpha and sigma (only the subspace
    structure differs). Both are plain ES bit for bit at K=1."""
    rank: int | None = None
    """Low-rank (EGGROLL) ES: every matrix gets noise A B^T / sqrt(rank) (None: full rank)."""
    full_rank_vectors: bool = True
    """Low-rank ES: the other tensors (1-D: norms, biases) get full-rank Gaussian noise at
    sigma, as EGGROLL's reference does unless told otherwise (its `freeze_nonlora=False`);
    False: only matrices are perturbed."""

    def __post_init__(self) -> None:
        if self.population_size < 2:
            raise ValueError(f"population_size (G) must be >= 2, got {self.population_size}")
        if self.antithetic and self.population_size % 2:
            raise ValueError(f"population_size must be even with antithetic=True, "
                             f"got {self.population_size}")
        if not (self.alpha >= 0 and math.isfinite(self.alpha)):
            raise ValueError(f"alpha must be a finite number >= 0, got {self.alpha}")
        get_shaping(self.shaping)
        if self.subspaces is not None:
            if self.subspaces < 1 or self.population_size % self.subspaces:
                raise ValueError(f"subspaces (K) must be >= 1 and divide population_size "
                                 f"{self.population_size}, got {self.subspaces}")
            if self.antithetic:
                raise ValueError("subspaces: CoPES is one-sided (antithetic must be False)")
            if self.rank is not None:
                raise ValueError("subspaces and rank: CoPES and low-rank ES do not combine")
        if self.subspace_normalisation not in SUBSPACE_NORMALISATIONS:
            raise ValueError(f"subspace_normalisation must be one of "
                             f"{SUBSPACE_NORMALISATIONS}, got {self.subspace_normalisation!r}")
        if self.subspace_chunk < 1:
            raise ValueError(f"subspace_chunk must be >= 1, got {self.subspace_chunk}")
        if self.rank is not None and self.rank < 1:
            raise ValueError(f"rank must be >= 1, got {self.rank}")
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
class Subspace:
    """CoPES: the `k`-th of `num_subspaces` disjoint sets of parameter chunks of one
    generation's partition (esopt.es.copes); a direction perturbs only its chunks."""

    partition_seed: int
    k: int
    num_subspaces: int
    chunk_elements: int

    def __post_init__(self) -> None:
        if not 0 <= self.k < self.num_subspaces or self.chunk_elements < 1:
            raise ValueError(f"bad subspace {self}")


@dataclass(frozen=True)
class Direction:
    """One perturbation: theta + sign * sigma * eps(seed), eps restricted to `subspace`
    (CoPES) or of rank `rank` on matrices (low-rank ES)."""

    index: int
    seed: int
    sign: int
    sigma: float
    subspace: Subspace | None = None
    rank: int | None = None
    full_rank_vectors: bool = False
    """Low-rank ES: the non-matrix tensors get full-rank noise (else they are unperturbed)."""

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
    subspaces: tuple[Subspace, ...] = ()
    """CoPES: each direction's subspace (empty: every direction spans all parameters)."""
    rank: int | None = None
    """Low-rank ES: the rank of every direction's matrix noise."""
    full_rank_vectors: bool = False
    """Low-rank ES: whether the non-matrix tensors got full-rank noise (False in manifests
    written before the option: their vectors were never perturbed)."""

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
        d = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        d["subspaces"] = tuple(s if isinstance(s, Subspace) else Subspace(**s)
                               for s in d.get("subspaces", ()))
        return cls(**d)


def _members(state: ESState, g: int, antithetic: bool):
    """(index, seed, sign) of the G members: independent seeds, or mirrored pairs
    (2j, 2j+1) sharing seed j with signs +1, -1."""
    if antithetic:
        return [(i, direction_seed(state.run_seed, state.generation, i // 2),
                 1 if i % 2 == 0 else -1) for i in range(g)]
    return [(i, direction_seed(state.run_seed, state.generation, i), 1) for i in range(g)]


def full_rank_directions(state: ESState, config: ESConfig) -> tuple[Direction, ...]:
    """Plain ES: G full-rank Gaussian directions over every parameter (the paper)."""
    return tuple(Direction(i, seed, sign, state.sigma)
                 for i, seed, sign in _members(state, config.population_size, config.antithetic))


def lowrank_directions(state: ESState, config: ESConfig) -> tuple[Direction, ...]:
    """Low-rank (EGGROLL) ES: each matrix's noise is A B^T / sqrt(rank); the other tensors'
    full rank (config.full_rank_vectors) or none; mirrored pairs with config.antithetic."""
    return tuple(Direction(i, seed, sign, state.sigma, rank=config.rank,
                           full_rank_vectors=config.full_rank_vectors)
                 for i, seed, sign in _members(state, config.population_size, config.antithetic))


def copes_directions(state: ESState, config: ESConfig) -> tuple[Direction, ...]:
    """CoPES: directions k*G/K .. (k+1)*G/K - 1 perturb subspace k of the generation's
    partition, at sigma * sqrt(K) (the paper's normalisation) or sigma (matched)."""
    k_total = config.subspaces
    per = config.population_size // k_total
    pseed = partition_seed(state.run_seed, state.generation)
    sigma = state.sigma * (math.sqrt(k_total) if config.subspace_normalisation == "paper"
                           else 1.0)
    return tuple(
        Direction(i, seed, sign, sigma,
                  subspace=Subspace(pseed, i // per, k_total, config.subspace_chunk))
        for i, seed, sign in _members(state, config.population_size, False))


DirectionSampler = Callable[[ESState, ESConfig], tuple[Direction, ...]]


def direction_sampler(config: ESConfig) -> DirectionSampler:
    """The sampler of a configuration's method: CoPES subspaces, low rank, or full rank."""
    if config.subspaces is not None:
        return copes_directions
    if config.rank is not None:
        return lowrank_directions
    return full_rank_directions


class ES:
    """OpenAI-ES with the paper's choices: one-sided perturbation, z-score shaping,
    update alpha/G * sum w_i eps_i, and a sigma schedule. Which directions a generation
    asks for is the configuration's `direction_sampler`."""

    def __init__(self, config: ESConfig):
        self.config = config
        self._shape = get_shaping(config.shaping)
        self._sample = direction_sampler(config)

    def init(self) -> ESState:
        """State of generation 0."""
        return ESState(generation=0, sigma=self.config.sigma(0), run_seed=self.config.run_seed)

    def state_at(self, generation: int) -> ESState:
        """State of any generation, recomputed (the run is a pure function of its config)."""
        return ESState(generation=generation, sigma=self.config.sigma(generation),
                       run_seed=self.config.run_seed)

    def ask(self, state: ESState) -> tuple[Direction, ...]:
        """The G directions of this generation."""
        return self._sample(state, self.config)

    def tell(self, state: ESState, rewards_n) -> tuple[Update, ESState]:
        """Shape the rewards of ask(state) and return the update and the next state."""
        rewards_n = np.asarray(rewards_n, dtype=np.float64)
        g = self.config.population_size
        if rewards_n.shape != (g,):
            raise ValueError(f"rewards must have shape ({g},), got {rewards_n.shape}")
        update = shaped_update(self.ask(state), rewards_n, state.generation, state.sigma,
                               self.config.alpha, self._shape,
                               self.config.subspace_normalisation)
        nxt = state.generation + 1
        next_sigma = self.config.sigma(nxt) if nxt < self.config.generations else state.sigma
        return update, replace(state, generation=nxt, sigma=next_sigma)


def partition_seed(run_seed: int, generation: int) -> int:
    """CoPES: the seed of generation `generation`'s partition into subspaces."""
    return mix("partition", run_seed, generation)


def shaped_update(directions, rewards_n, generation: int, sigma: float, alpha: float,
                  shape, subspace_normalisation: str = "paper") -> Update:
    """The update of scored directions: shape the finite rewards jointly (one z-score over
    the whole population), drop the others (logged).

    CoPES: a direction of subspace k gets weight z_i * G_valid / N_k (N_k: valid
    directions of subspace k), so that scale * weight = alpha * z_i / N_k (`paper`), or
    z_i * sqrt(G_valid / N_k), so that scale * weight = alpha * z_i / sqrt(G_valid N_k)
    (`matched`: per element, summed over the N_k directions of its subspace, the step's
    variance is alpha^2 / G_valid, plain ES's)."""
    rewards_n = np.asarray(rewards_n, dtype=np.float64)
    finite = np.isfinite(rewards_n)
    excluded = tuple(int(i) for i in np.flatnonzero(~finite))
    if excluded:
        log.warning("generation %d: %d direction(s) excluded for non-finite rewards: %s",
                    generation, len(excluded), list(excluded))
    kept = [d for d, ok in zip(directions, finite, strict=True) if ok]
    weights = shape(rewards_n[finite]) if kept else np.zeros(0)
    if not np.any(weights):
        log.warning("generation %d: rewards carry no signal (all equal or < 2 valid); "
                    "zero update", generation)
        weights = np.zeros_like(weights)
    subspaces = tuple(d.subspace for d in kept) if any(d.subspace for d in kept) else ()
    if subspaces:
        counts = Counter(s.k for s in subspaces)
        # G_valid / N_k is exactly 1.0 when K = 1 (and so is its square root): then CoPES
        # is plain ES bit for bit.
        factor = ((lambda k: len(kept) / counts[k]) if subspace_normalisation == "paper"
                  else (lambda k: math.sqrt(len(kept) / counts[k])))
        weights = np.array([w * factor(s.k) for w, s in zip(weights, subspaces, strict=True)])
    return Update(
        generation=generation,
        sigma=sigma,
        alpha=alpha,
        seeds=tuple(d.seed for d in kept),
        signs=tuple(d.sign for d in kept),
        weights=tuple(float(w) for w in weights),
        excluded=excluded,
        subspaces=subspaces,
        rank=kept[0].rank if kept else None,
        full_rank_vectors=kept[0].full_rank_vectors if kept else False,
    )
