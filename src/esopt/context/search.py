"""Sample and EoH outer loops over LLM-written heuristics, with optional ES co-evolution.

Sample: independent batches of i1 proposals. EoH: a population of `pop_size` heuristics,
evolved by e1/e2 (from several rank-selected parents) and m1/m2 (from one parent), kept
greedily with duplicates (equal objective) removed. Every evaluated proposal counts
against the budget T, whatever its outcome.

Co-evolution (Agentic ESOpt): in each Sample batch, and in EoH's m1 and m2 batches, the
i-th proposal is written by the policy perturbed along direction i of one ES generation;
the proposals' rewards (Sample: the objective, sign-adjusted to "higher is better"; EoH:
improvement over the parent) are z-scored and applied as one ES update.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from esopt.ahd.problems import Evaluation, Problem, evaluate, get_problem
from esopt.chat import SamplingParams
from esopt.context.prompts import Parent, conversation, parse_proposal
from esopt.es.seeds import mix
from esopt.es.strategy import ES, ESConfig
from esopt.runtime.progress import Progress
from esopt.runtime.sandbox import Outcome, SandboxLimits

log = logging.getLogger(__name__)

SCAFFOLDS = ("sample", "eoh")
EOH_OPERATORS = ("e1", "e2", "m1", "m2")
ES_OPERATORS = ("sample", "m1", "m2")  # batches written by perturbed policies


@dataclass(frozen=True)
class SearchConfig:
    """One AHD run: a problem, an outer loop, a budget, and (optionally) ES."""

    problem: str
    scaffold: str = "sample"
    budget: int = 1000
    """T: proposals evaluated in the search, failures included. For EoH, T counts the
    offspring of e1/e2/m1/m2 (Table 13: 25 generations x 40 = 1000); the i1 proposals
    that seed the population come on top."""
    batch_size: int = 20
    """Sample: proposals per batch (= ES directions per update when co-evolving)."""
    pop_size: int = 10
    """EoH: population size, offspring per operator, and ES directions per m1/m2 batch."""
    parents: int = 2
    """EoH: parents shown to e1 and e2."""
    mutation_factor: int = 1
    """EoH: k, the m1 and m2 batches have k x pop_size offspring (Table 13: a generation is
    pop_size (2 + 2k) candidates; k=3 gives 80 with 30 ES directions per update)."""
    init_size: int = 20
    """EoH: i1 proposals that seed the population."""
    prefill: bool = False
    """Start the answer at the function header (small models need it)."""
    show_seed: bool = False
    """i1 prompts show the problem's greedy heuristic as a reference (EoH shows none)."""
    sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(max_new_tokens=384, temperature=1.0))
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    es: ESConfig | None = None
    """None: the matched baseline (the policy never changes)."""
    seed: int = 0
    instances: str | None = None
    """Directory of the benchmark instance files (None: the project's generators)."""

    def __post_init__(self) -> None:
        get_problem(self.problem)
        if self.scaffold not in SCAFFOLDS:
            raise ValueError(f"scaffold must be one of {SCAFFOLDS}, got {self.scaffold!r}")
        for name in ("budget", "batch_size", "pop_size", "parents", "init_size",
                     "mutation_factor"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        directions = self.directions
        if self.es is not None and self.es.population_size != directions:
            raise ValueError(f"es.population_size must equal the proposals per ES batch "
                             f"({directions}), got {self.es.population_size}")

    @property
    def directions(self) -> int:
        """Proposals per ES batch: a Sample batch, or an EoH m1/m2 batch."""
        return self.batch_size if self.scaffold == "sample" else (
            self.mutation_factor * self.pop_size)

    def offspring(self, operator: str) -> int:
        """EoH offspring per operator: pop_size for e1/e2, k x pop_size for m1/m2."""
        return self.pop_size * (self.mutation_factor if operator in ("m1", "m2") else 1)

    @property
    def es_updates(self) -> int:
        """ES updates the budget allows (Table 13's 'ES update batches')."""
        if self.es is None:
            return 0
        if self.scaffold == "sample":
            return self.budget // self.batch_size
        return 2 * (self.budget // (self.pop_size * (2 + 2 * self.mutation_factor)))


@dataclass
class Candidate:
    """One evaluated proposal (a row of candidates.parquet)."""

    index: int
    batch: int
    operator: str
    direction: int  # -1: written by the unperturbed policy
    parent_objective: float
    description: str
    code: str
    outcome: str
    objective: float
    detail: str
    completion_tokens: int
    generate_s: float
    evaluate_s: float
    reward: float = float("nan")


@dataclass
class SearchResult:
    candidates: list[Candidate]
    updates: list[dict]
    population: list[Candidate]
    wall_s: float

    def best(self, problem: Problem) -> Candidate | None:
        top = manage_population(problem, self.candidates, 1)
        return top[0] if top else None


def penalised(values: list[float]) -> np.ndarray:
    """Rewards with failures (NaN) set to min(valid) - std(valid), the paper's penalty.

    With one valid value (std 0) the failures sit one unit below it, so a batch with a
    single success still says which direction wrote it; with none, all rewards are equal
    and the ES update is zero.
    """
    values = np.asarray(values, dtype=np.float64)
    valid = values[np.isfinite(values)]
    if valid.size == 0:
        return np.zeros_like(values)
    spread = float(valid.std()) if valid.size > 1 and valid.std() > 0 else 1.0
    return np.where(np.isfinite(values), values, valid.min() - spread)


def rank_select(population: list[Candidate], k: int, rng: np.random.Generator) -> list[Candidate]:
    """EoH's rank-based parent selection: p(rank r) proportional to 1 / (r + 1 + n)."""
    n = len(population)
    weights = 1.0 / (np.arange(n) + 1 + n)
    idx = rng.choice(n, size=min(k, n), replace=False, p=weights / weights.sum())
    return [population[i] for i in sorted(idx)]


def manage_population(problem: Problem, members: list[Candidate], size: int) -> list[Candidate]:
    """Best `size` valid members, one per objective value (EoH's greedy dedup)."""
    key = (lambda c: (c.objective, c.index)) if problem.sense == "min" else (
        lambda c: (-c.objective, c.index))
    kept, seen = [], set()
    for c in sorted((c for c in members if c.outcome == Outcome.OK.value), key=key):
        if c.objective in seen:
            continue
        seen.add(c.objective)
        kept.append(c)
    return kept[:size]


class _Search:
    def __init__(self, policy, cfg: SearchConfig):
        self.policy, self.cfg = policy, cfg
        self.problem = get_problem(cfg.problem)
        self.es = ES(cfg.es) if cfg.es is not None else None
        self.es_step = 0
        self.candidates: list[Candidate] = []
        self.updates: list[dict] = []
        self.counted = 0  # proposals charged to the budget
        self.rng = np.random.default_rng(mix("eoh-select", cfg.seed) % 2**32)
        self.progress = Progress(cfg.budget, f"{cfg.problem} {cfg.scaffold}", "proposal",
                              min_interval_s=0.0)

    def seed_parents(self) -> list[Parent]:
        if not self.cfg.show_seed:
            return []
        return [Parent("", self.problem.greedy_source, float("nan"))]

    @property
    def left(self) -> int:
        return self.cfg.budget - self.counted

    def _sampling(self, batch: int) -> SamplingParams:
        # Common random numbers: all proposals of a batch share one sampling seed.
        return replace(self.cfg.sampling, seed=mix("ahd", self.cfg.seed, batch) % 2**31)

    def propose(self, batch: int, operator: str, parent_sets: list[list[Parent]],
                perturbed: bool, charged: bool = True) -> list[Candidate]:
        """Generate, parse and evaluate one batch; with `perturbed`, apply one ES update."""
        cfg, problem = self.cfg, self.problem
        convs = [conversation(problem, "i1" if operator == "sample" else operator, ps,
                              prefill=cfg.prefill) for ps in parent_sets]
        sampling = self._sampling(batch)
        t0 = time.perf_counter()
        if perturbed:
            state = self.es.state_at(self.es_step)
            directions = self.es.ask(state)
            completions = []
            for conv, d in zip(convs, directions, strict=True):
                with self.policy.perturbed(d):
                    completions.extend(self.policy.generate([conv], sampling))
        else:
            completions = self.policy.generate(convs, sampling)
        gen_s = (time.perf_counter() - t0) / len(convs)
        out = []
        for i, (comp, ps) in enumerate(zip(completions, parent_sets, strict=True)):
            proposal = parse_proposal(problem, comp.text, prefill=cfg.prefill)
            if proposal.code is None:
                ev = Evaluation(Outcome.SYNTAX_ERROR, detail="no function in the answer")
            else:
                ev = evaluate(problem, proposal.code, problem.train_split, cfg.limits,
                              cfg.instances)
            out.append(Candidate(
                index=len(self.candidates) + i, batch=batch, operator=operator,
                direction=i if perturbed else -1,
                parent_objective=ps[0].objective if operator in ("m1", "m2") else float("nan"),
                description=proposal.description, code=proposal.code or comp.text[:2000],
                outcome=ev.outcome.value, objective=ev.objective, detail=ev.detail[:500],
                completion_tokens=comp.completion_tokens, generate_s=gen_s,
                evaluate_s=ev.wall_s))
        if perturbed:
            self._update(out, state, operator)
        self.candidates.extend(out)
        self.counted += len(out) if charged else 0
        self._progress(batch, operator, out)
        return out

    def _update(self, batch: list[Candidate], state, operator: str) -> None:
        problem = self.problem
        if operator == "sample":
            raw = [c.objective if problem.sense == "max" else -c.objective for c in batch]
        else:
            raw = [problem.improvement(c.parent_objective, c.objective) for c in batch]
        rewards = penalised(raw)
        for c, r in zip(batch, rewards, strict=True):
            c.reward = float(r)
        update, _ = self.es.tell(state, rewards)
        self.policy.apply(update)
        self.updates.append({"update": self.es_step, "operator": operator,
                             "sigma": state.sigma, "alpha": self.cfg.es.alpha,
                             "seeds": list(update.seeds), "weights": list(update.weights),
                             "valid": int(sum(c.outcome == "ok" for c in batch))})
        self.es_step += 1

    def _progress(self, batch: int, operator: str, out: list[Candidate]) -> None:
        valid = [c.objective for c in out if c.outcome == "ok"]
        best = self.best_objective()
        self.progress.done = min(self.counted, self.cfg.budget)
        log.info("%s batch %03d %-6s: %d/%d valid, batch best %s, run best %s; %s",
                 self.problem.name, batch, operator, len(valid), len(out),
                 f"{(min if self.problem.sense == 'min' else max)(valid):.4f}" if valid else "-",
                 f"{best:.4f}" if best is not None else "-", self.progress.line())

    def best_objective(self) -> float | None:
        top = manage_population(self.problem, self.candidates, 1)
        return top[0].objective if top else None


def run_sample(search: _Search) -> list[Candidate]:
    cfg = search.cfg
    batch = 0
    while search.left >= cfg.batch_size:
        search.propose(batch, "sample", [search.seed_parents()] * cfg.batch_size,
                       perturbed=search.es is not None)
        batch += 1
    return manage_population(search.problem, search.candidates, cfg.pop_size)


def run_eoh(search: _Search) -> list[Candidate]:
    cfg, problem = search.cfg, search.problem
    search.propose(0, "i1", [search.seed_parents()] * cfg.init_size, perturbed=False,
                   charged=False)
    population = manage_population(problem, search.candidates, cfg.pop_size)
    batch = 1
    while search.left >= cfg.pop_size:
        for operator in EOH_OPERATORS:
            if search.left < cfg.offspring(operator) or not population:
                break
            k = cfg.parents if operator in ("e1", "e2") else 1
            parent_sets = [
                [Parent(p.description, p.code, p.objective)
                 for p in rank_select(population, k, search.rng)]
                for _ in range(cfg.offspring(operator))
            ]
            perturbed = search.es is not None and operator in ES_OPERATORS
            offspring = search.propose(batch, operator, parent_sets, perturbed)
            population = manage_population(problem, population + offspring, cfg.pop_size)
            batch += 1
        if not population:  # nothing valid yet: reseed from i1 (charged, so the loop ends)
            search.propose(batch, "i1", [search.seed_parents()] * min(cfg.pop_size, search.left),
                           perturbed=False)
            population = manage_population(problem, search.candidates, cfg.pop_size)
            batch += 1
    return population


def run_search(policy, cfg: SearchConfig) -> SearchResult:
    """Run one AHD search with `policy` (updated in place when cfg.es is set)."""
    t0 = time.perf_counter()
    search = _Search(policy, cfg)
    population = run_sample(search) if cfg.scaffold == "sample" else run_eoh(search)
    return SearchResult(search.candidates, search.updates, population, time.perf_counter() - t0)


def config_to_dict(cfg: SearchConfig) -> dict:
    return asdict(cfg)


def config_from_dict(d: dict) -> SearchConfig:
    d = dict(d)
    d["sampling"] = SamplingParams(**{**d.get("sampling", {}),
                                      "stop": tuple(d.get("sampling", {}).get("stop", ()))})
    d["limits"] = SandboxLimits(**d.get("limits", {}))
    d["es"] = ESConfig.from_dict(d["es"]) if d.get("es") else None
    return SearchConfig(**d)
