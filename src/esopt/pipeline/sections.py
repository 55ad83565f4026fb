"""The workflow config as dataclasses: every key, its help text, bounds and default.

This module is the one source of truth of the config: `esopt.pipeline.config` parses
the workflow's config mapping into `Config` (unknown keys, wrong types and bad values
fail with the dotted key), and workflow/schemas/config.schema.yaml is generated from it
(`esopt config schema > workflow/schemas/config.schema.yaml`; a test checks that the
committed file equals the generated one). Library defaults are reused where a library
class has one (ESConfig, SamplingParams, RLConfig, SearchConfig, SandboxLimits).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from esopt.ahd.problems import PROBLEMS
from esopt.chat import SamplingParams
from esopt.context.search import SearchConfig
from esopt.es.async_es import ARRIVALS, AsyncConfig
from esopt.es.schedules import SCHEDULE_KINDS
from esopt.es.shaping import SHAPINGS
from esopt.es.strategy import SUBSPACE_NORMALISATIONS, ESConfig
from esopt.pipeline.schema import option
from esopt.pipeline.spec import (
    ASYNC_METHODS,
    ES_METHODS,
    METHODS,
    PAPER_METHODS,
    RLConfig,
    Trace2SkillConfig,
)
from esopt.runtime.sandbox import SandboxLimits

EXPERIMENTS = ("sudoku", "countdown", "math", "docvqa", "web", "ahd")
# Figure 6's centre: the base model (the paper's figure) or the run's final checkpoint.
LANDSCAPE_CENTRES = ("base", "final")
AHD_PROBLEMS = tuple(PROBLEMS)
AHD_METHODS = ("sample", "esopt_sample", "eoh", "esopt_eoh")


@dataclass(frozen=True)
class Decoder:
    """Decoding settings (SamplingParams without its seed, which the stage sets)."""

    max_new_tokens: int = option(SamplingParams.max_new_tokens, "tokens per turn at most",
                                 minimum=1)
    temperature: float = option(SamplingParams.temperature, "0 = greedy", minimum=0)
    top_p: float = option(SamplingParams.top_p, "nucleus filter; 1 = off",
                          exclusive_minimum=0, maximum=1)
    top_k: int = option(SamplingParams.top_k, "top-k filter; 0 = off", minimum=0)
    stop: list[str] = option(factory=list, help="stop strings (besides the environment's)")

    def sampling(self) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                              top_p=self.top_p, top_k=self.top_k, stop=tuple(self.stop))

    def __post_init__(self) -> None:
        self.sampling()


@dataclass(frozen=True)
class RLDecoder(Decoder):
    """Decoder of grpo and ppo training rollouts (grpo_b uses eval.decoder)."""

    temperature: float = option(1.0, "0 = greedy; GRPO-dagger trains at 1", minimum=0)


@dataclass(frozen=True)
class ProposalDecoder(Decoder):
    """Decoding of AHD proposals."""

    max_new_tokens: int = option(512, "tokens per proposal at most", minimum=1)
    temperature: float = option(1.0, "0 = greedy", minimum=0)


@dataclass(frozen=True)
class Sigma:
    """A sigma schedule: constant sigma_0, or cosine/linear from sigma_0 to exactly
    sigma_T at the last generation."""

    kind: str = option("constant", "constant, cosine or linear", choices=SCHEDULE_KINDS)
    sigma_0: float = option(1e-3, "sigma at the first generation", exclusive_minimum=0)
    sigma_T: float | None = option(None, "sigma at the last generation (null: sigma_0)",
                                   exclusive_minimum=0)

    def as_dict(self) -> dict:
        return {k: v for k, v in (("kind", self.kind), ("sigma_0", self.sigma_0),
                                  ("sigma_T", self.sigma_T)) if v is not None}


@dataclass(frozen=True)
class SigmaOverride:
    """Keys of a method's sigma schedule replaced at one H* (null: keep)."""

    kind: str | None = option(None, "constant, cosine or linear", choices=SCHEDULE_KINDS)
    sigma_0: float | None = option(None, "sigma at the first generation", exclusive_minimum=0)
    sigma_T: float | None = option(None, "sigma at the last generation", exclusive_minimum=0)

    def as_dict(self) -> dict:
        return {k: v for k, v in (("kind", self.kind), ("sigma_0", self.sigma_0),
                                  ("sigma_T", self.sigma_T)) if v is not None}


@dataclass(frozen=True)
class MethodSigmas:
    """Sigma schedule per ES method (vanilla ES is constant in the paper, ESOpt cosine)."""

    vanilla_es: Sigma = option(factory=Sigma, help="schedule of vanilla_es")
    esopt: Sigma = option(factory=Sigma, help="schedule of esopt")
    copes: Sigma = option(factory=Sigma, help="schedule of copes (directions perturb at "
                                               "sigma * sqrt(K) under the paper's "
                                               "normalisation)")
    async_es: Sigma = option(factory=Sigma, help="schedule of async_es")
    lowrank_es: Sigma = option(factory=Sigma, help="schedule of lowrank_es")


@dataclass(frozen=True)
class MethodSigmaOverrides:
    """Per-method sigma overrides at one H*."""

    vanilla_es: SigmaOverride = option(factory=SigmaOverride, help="override of vanilla_es")
    esopt: SigmaOverride = option(factory=SigmaOverride, help="override of esopt")
    copes: SigmaOverride = option(factory=SigmaOverride, help="override of copes")
    async_es: SigmaOverride = option(factory=SigmaOverride, help="override of async_es")
    lowrank_es: SigmaOverride = option(factory=SigmaOverride, help="override of lowrank_es")


@dataclass(frozen=True)
class CoPESSection:
    """CoPES (Cooperative Parameter-subspace ES): K disjoint random subspaces per
    generation, population_size / K directions each (the paper: N=40, K=4, N/K >= 10)."""

    subspaces: int = option(4, "K: subspaces per generation (must divide population_size)",
                            minimum=1)
    chunk_elements: int = option(ESConfig.subspace_chunk, "elements per parameter chunk, "
                                                          "the unit of the partition",
                                 minimum=1)
    normalisation: str = option(ESConfig.subspace_normalisation,
                                "paper: directions at sigma*sqrt(K), step alpha z / N_k (the "
                                "CoPES paper, arXiv:2608.02391 Eqs. 11, 13: per-element step "
                                "sqrt(K) x ES's); matched: sigma and alpha z / sqrt(G N_k) "
                                "(per-element perturbation and step equal to ES's)",
                                choices=SUBSPACE_NORMALISATIONS)


@dataclass(frozen=True)
class AsyncSection:
    """Bounded-staleness asynchronous ES (one coordinator job per run): update t uses the
    results that have arrived with lag <= L (esopt.es.async_es)."""

    max_lag: int = option(AsyncConfig.max_lag, "L: results with lag <= L are accepted "
                                                "(0: synchronous ES)", minimum=0)
    arrivals: str = option(AsyncConfig.arrivals, "when results arrive: stragglers (the "
                                                  "stress tests: a fraction delayed by "
                                                  "`delay` updates) or natural (N workers "
                                                  "whose completion times vary)",
                           choices=ARRIVALS)
    delayed_fraction: float = option(AsyncConfig.delayed_fraction,
                                     "stragglers: fraction of results delayed (by hash); 1 = "
                                     "every fitness measurement stale", minimum=0, maximum=1)
    delay: int = option(AsyncConfig.delay, "stragglers: updates a delayed result arrives "
                                           "late (accepted when <= max_lag)", minimum=1)
    duration_spread: float = option(AsyncConfig.duration_spread,
                                    "natural: std of the log of an evaluation's duration "
                                    "(update periods, median 1; 0 = synchronous)", minimum=0)

    def async_config(self) -> AsyncConfig:
        return AsyncConfig(max_lag=self.max_lag, delayed_fraction=self.delayed_fraction,
                           delay=self.delay, arrivals=self.arrivals,
                           duration_spread=self.duration_spread)


@dataclass(frozen=True)
class LowRankSection:
    """Low-rank (EGGROLL-style) ES: matrices get rank-r noise A B^T / sqrt(r). The
    defaults are EGGROLL's reference (ESHyperscale/HyperscaleES, noiser/eggroll.py):
    mirrored pairs, and full-rank noise on the other tensors."""

    rank: int = option(1, "r: rank of every matrix's noise", minimum=1)
    antithetic: bool = option(True, "mirrored pairs theta +- sigma eps (EGGROLL's; replaces "
                                    "es.antithetic for this method; G must be even)")
    full_rank_vectors: bool = option(ESConfig.full_rank_vectors,
                                     "1-D tensors (norms, biases) get full-rank Gaussian "
                                     "noise at sigma (EGGROLL's freeze_nonlora=False); false: "
                                     "only matrices are perturbed")
    population_size: int | None = option(None, "G of this method (null: "
                                               "es.population_size); runtime.population_batch "
                                               "scores its members in batches",
                                         minimum=2)


@dataclass(frozen=True)
class ESSection:
    """ES hyper-parameters shared by the ES methods."""

    population_size: int = option(ESConfig.population_size, "G, directions per generation",
                                  minimum=2)
    tasks_per_direction: int = option(8, "tasks scoring each direction (shared: CRN)",
                                      minimum=1)
    generations: int = option(1, "ES generations (updates)", minimum=1)
    alpha: float = option(ESConfig.alpha, "update scale (theta += alpha/G sum w eps)",
                          minimum=0)
    shaping: str = option(ESConfig.shaping, "reward shaping", choices=tuple(SHAPINGS))
    antithetic: bool = option(ESConfig.antithetic, "mirrored perturbations theta +- sigma eps")
    keep_every: int = option(10, "keep and evaluate every k-th checkpoint (and the last)",
                             minimum=1)
    failed_episode_reward: float | None = option(
        None, "null: a direction with a failed (crashed) episode gets a NaN fitness and is "
              "excluded from the update; a number: failed episodes score this reward")
    copes: CoPESSection = option(factory=CoPESSection, help="the copes method")
    async_es: AsyncSection = option(factory=AsyncSection, help="the async_es method")
    lowrank_es: LowRankSection = option(factory=LowRankSection, help="the lowrank_es method")


@dataclass(frozen=True)
class RLBudget:
    """How many steps an RL run takes: rl.steps as written, or as many as match an ES
    method's training FLOPs (esopt.pipeline.budget.matched_rl_steps)."""

    match_flops_of: str | None = option(
        None, "null: rl.steps; an ES method: the steps whose training FLOPs (rollouts, "
              "reference/critic passes and forward + backward ~3x a forward, as the ledger "
              "counts them) equal one run of that method's (es.generations x "
              "population_size x tasks_per_direction episodes), to within one step; kept "
              "checkpoints at the same FLOPs as its kept generations",
        choices=ES_METHODS)


@dataclass(frozen=True)
class RLSection(RLConfig):
    """Agentic RL baselines (grpo, grpo_b, ppo); a step is tasks_per_step x group_size
    episodes."""

    train_decoder: RLDecoder = option(factory=RLDecoder,
                                      help="decoder of grpo and ppo rollouts (grpo_b uses "
                                           "eval.decoder)")
    budget: RLBudget = option(factory=RLBudget, help="steps as written, or matched to an "
                                                     "ES method's training FLOPs")

    def rl_config(self) -> RLConfig:
        return RLConfig(**{f.name: getattr(self, f.name) for f in fields(RLConfig)})


@dataclass(frozen=True)
class EvalSection:
    """Held-out evaluation."""

    tasks: int = option(32, "held-out tasks", minimum=1)
    repeats: int = option(1, "repeats of every task (mean +- std over them)", minimum=1)
    decoder: Decoder = option(factory=Decoder, help="evaluation decoder")
    env_options: dict = option(factory=dict, help="environment options merged over "
                                                  "env_options for evaluation (e.g. test data)")


@dataclass(frozen=True)
class LandscapeSection:
    """Figure 6: the training reward on a plane through a centre theta, for one ES run per
    H* (the first seed): theta + x sigma_0 eps_a + y sigma_0 eps_b on a grid x K grid of
    (x, y) in [-span, span]^2, every point on the same tasks and sampling seed; theta is
    the base model (the paper's Figure 6) or the run's final checkpoint."""

    enabled: bool = option(True, "compute the landscapes and Figure 6")
    method: str = option("esopt", "the ES run whose sigma_0, seeds and tasks the landscape "
                                  "uses (nothing is computed when the experiment does not "
                                  "run it)",
                         choices=ES_METHODS + ASYNC_METHODS)
    centre: str = option("base", "the plane's centre: base (the base model, as the paper's "
                                 "Figure 6) or final (the run's final checkpoint)",
                         choices=LANDSCAPE_CENTRES)
    grid: int = option(5, "K: points per axis, odd so that the centre is a grid point "
                          "(K^2 x tasks episodes per H*)", minimum=3)
    span: float = option(2.0, "the grid's half-width in units of the run's sigma_0",
                         exclusive_minimum=0)
    tasks: int = option(8, "training-distribution tasks every grid point plays", minimum=1)

    def __post_init__(self) -> None:
        if self.grid % 2 == 0:
            raise ValueError(f"grid must be odd (the centre is a grid point), got "
                             f"{self.grid}")


@dataclass(frozen=True)
class ExperimentSection:
    """Agentic Sudoku grouped by H* (paper Table 1, Figure 3, Table 7)."""

    env: str = option("sudoku", "registered environment name")
    env_options: dict = option(factory=dict, help="environment options (size, few_shot, "
                                                  "action_format, reward, max_turns, ...)")
    horizons: list[int] = option(factory=lambda: [1, 2], item_minimum=1,
                                 help="H*: minimum successful horizons (Sudoku: blanks per "
                                      "board; math: the turn limit)")
    methods: list[str] = option(factory=lambda: list(PAPER_METHODS), item_choices=METHODS,
                                help="methods to run; base is evaluation only; grpo, grpo_b "
                                     "and ppo are the Agentic RL baselines; copes, async_es "
                                     "and lowrank_es the companion ES methods")
    seeds: list[int] = option(factory=lambda: [0], item_minimum=0, min_items=1,
                              unique_items=True, help="training seeds (distinct)")
    seeds_by_method: dict[str, list[int]] = option(
        factory=dict, help="seeds of the named methods instead of `seeds` ({method: "
                           "[seeds]}); base is evaluated at every seed any method uses, so "
                           "that each trained run has its paired base evaluation")
    es: ESSection = option(factory=ESSection, help="ES hyper-parameters")
    sigma: MethodSigmas = option(factory=MethodSigmas, help="sigma schedule per ES method")
    sigma_by_horizon: dict[int, MethodSigmaOverrides] = option(
        factory=dict, help="per-H* overrides of sigma: {H*: {method: schedule keys}}")
    train_decoder: Decoder = option(factory=Decoder, help="decoding during ES training")
    rl: RLSection = option(factory=RLSection, help="Agentic RL baselines")
    eval: EvalSection = option(factory=EvalSection, help="held-out evaluation")
    skills: bool = option(False, "add the Trace2Skill conditions (Table 3, Figure 8)")
    trace2skill: Trace2SkillConfig = option(factory=Trace2SkillConfig,
                                            help="Trace2Skill's iterations and SKILL.md "
                                                 "bounds (when skills is true)")
    landscape: LandscapeSection = option(factory=LandscapeSection,
                                         help="Figure 6: the reward landscape around the "
                                              "base model (or the final checkpoint)")


@dataclass(frozen=True)
class CountdownSection(ExperimentSection):
    """Countdown (the task of Qiu et al., ES at scale): single-turn arithmetic, the tiny
    scale's second demonstration (SmolLM2-135M is at chance on Sudoku's moves); runs are
    grouped like Sudoku's, the horizon only labels them (h1)."""

    env: str = option("countdown", "registered environment name")
    horizons: list[int] = option(factory=lambda: [1], item_minimum=1,
                                 help="labels of the runs (Countdown is single-turn)")
    landscape: LandscapeSection = option(factory=lambda: LandscapeSection(enabled=False),
                                         help="the reward landscape around the base "
                                              "model (off by default: Figure 6 is "
                                              "Sudoku's)")


@dataclass(frozen=True)
class MathSection(ExperimentSection):
    """Math with a Python tool (Table 3 math rows, Figure 8); the horizon is the turn
    limit."""

    env: str = option("math_tool", "registered environment name")
    landscape: LandscapeSection = option(factory=lambda: LandscapeSection(enabled=False),
                                         help="the reward landscape around the base "
                                              "model (Figure 6 is the paper's Sudoku "
                                              "figure: off here by default)")


@dataclass(frozen=True)
class DocVQASection(ExperimentSection):
    """DocVQA with an OCR tool (Table 3's DocVQA columns, Figure 8's DocVQA panels, Figure
    9); the horizon is the turn limit; the reward is ANLS (0 without a tool use)."""

    env: str = option("docvqa", "registered environment name")
    horizons: list[int] = option(factory=lambda: [3], item_minimum=1,
                                 help="turn limits (an OCR call, a look, the answer)")
    methods: list[str] = option(factory=lambda: ["base", "esopt", "grpo"],
                                item_choices=METHODS,
                                help="methods to run: No Skill (base), Agentic ESOpt, "
                                     "Agentic GRPO")
    landscape: LandscapeSection = option(factory=lambda: LandscapeSection(enabled=False),
                                         help="the reward landscape around the base "
                                              "model (Figure 6 is the paper's Sudoku "
                                              "figure: off here by default)")

@dataclass(frozen=True)
class WebSection(ExperimentSection):
    """WebArena-Lite-style web tasks on the local mini-sites (Table 4, Figure 10, Table 12):
    ES trains on the tasks' train split and is evaluated on the test split; the horizon is
    the turn budget (WebArena's step limit)."""

    env: str = option("web", "registered environment name")
    env_options: dict = option(factory=lambda: {"split": "train"},
                               help="environment options (sites, split, data_seed, "
                                    "viewport_lines, max_chars, max_new_tokens, browser)")
    horizons: list[int] = option(factory=lambda: [15], item_minimum=1,
                                 help="the turn budget of an episode")
    eval: EvalSection = option(factory=lambda: EvalSection(env_options={"split": "test"}),
                               help="held-out evaluation (the test split by default)")
    landscape: LandscapeSection = option(factory=lambda: LandscapeSection(enabled=False),
                                         help="the reward landscape around the base "
                                              "model (off by default: Figure 6 is "
                                              "Sudoku's)")


@dataclass(frozen=True)
class AHDES:
    """ES of the esopt_* AHD methods."""

    alpha: float = option(ESConfig.alpha, "update scale", minimum=0)
    schedule: str = option("cosine", "sigma schedule", choices=SCHEDULE_KINDS)
    sigma_0: float = option(1e-3, "sigma at the first update", exclusive_minimum=0)
    sigma_T: float = option(1e-5, "sigma at the last update (> 0: the last update is not "
                                  "noise)", exclusive_minimum=0)


@dataclass(frozen=True)
class Limits:
    """Sandbox limits of one evaluation of generated code."""

    wall_s: float = option(SandboxLimits.wall_s, "wall-clock seconds", exclusive_minimum=0)
    cpu_s: int = option(SandboxLimits.cpu_s, "CPU seconds", minimum=1)
    memory_mb: int = option(SandboxLimits.memory_mb, "address space (MB)", minimum=1)
    file_mb: int = option(SandboxLimits.file_mb, "largest file written (MB)", minimum=1)
    output_chars: int = option(SandboxLimits.output_chars, "stdout/stderr kept (chars)",
                               minimum=1)
    result_mb: int = option(SandboxLimits.result_mb, "largest result read back (MB)",
                            minimum=1)


@dataclass(frozen=True)
class AHDSection:
    """Automatic heuristic design (paper Table 5, 13, 17, 18); runs when listed in
    experiments."""

    enabled: bool = option(True, "false: no AHD runs even when listed")
    problems: list[str] = option(factory=lambda: ["tsp_constructive", "kp_constructive"],
                                 item_choices=AHD_PROBLEMS,
                                 help="problems whose heuristic the LLM writes: constructive "
                                      "(Table 5) or ACO heuristic matrices (Table 14)")
    methods: list[str] = option(factory=lambda: ["sample", "esopt_sample"],
                                item_choices=AHD_METHODS,
                                help="outer loops, each paired with its ESOpt counterpart")
    seeds: list[int] = option(factory=lambda: [0], item_minimum=0, min_items=1,
                              unique_items=True,
                              help="independent runs per (problem, method); distinct")
    budget: int = option(SearchConfig.budget, "T: proposals evaluated per run, failures "
                                              "included", minimum=1)
    batch_size: int = option(SearchConfig.batch_size, "Sample: proposals per batch = ES "
                                                      "directions per update", minimum=2)
    pop_size: int = option(SearchConfig.pop_size, "EoH: population, offspring per operator, "
                                                  "ES directions per m1/m2 batch", minimum=2)
    parents: int = option(SearchConfig.parents, "EoH: parents shown to e1/e2", minimum=1)
    mutation_factor: int = option(SearchConfig.mutation_factor, "EoH: k, m1/m2 offspring = "
                                  "k x pop_size (Table 13: k=3 at T=2000)", minimum=1)
    instances: str | None = option(None, "directory of the benchmarks' instance files "
                                         "({problem}/{split}{N}_dataset.npy|npz, MCTS-AHD/"
                                         "ReEvo); null: the project's generators, which are "
                                         "not the benchmarks' test sets")
    init_size: int | None = option(None, "EoH: i1 proposals seeding the population "
                                         "(null: 2 x pop_size)", minimum=1)
    prefill: bool = option(SearchConfig.prefill, "start the answer at the function header")
    show_seed: bool = option(SearchConfig.show_seed, "i1 prompts show the greedy heuristic")
    decoder: ProposalDecoder = option(factory=ProposalDecoder, help="proposal decoding")
    es: AHDES = option(factory=AHDES, help="ES of the esopt_* methods")
    limits: Limits = option(factory=Limits, help="sandbox limits per evaluation")


@dataclass(frozen=True)
class RuntimeSection:
    """Fan-out settings (runtime, not experiment: never part of a run's identity);
    profiles override them."""

    cluster: str = option("local", "where perturb-and-evaluate shards run",
                          choices=("local", "slurm", "debug", "inline"))
    workers: int = option(1, "shards per generation", minimum=1)
    threads_per_worker: int = option(1, "torch threads per worker", minimum=1)
    eval_threads: int = option(2, "torch threads of evaluation jobs", minimum=1)
    device: str = option("auto", "torch device of the served model (auto: cuda if "
                                 "available)")
    timeout_min: int = option(60, "time limit of a shard (minutes of running time; queue "
                                  "wait does not count)", minimum=1)
    poll_s: float = option(20.0, "seconds between status queries of a SLURM array (one "
                                 "squeue of that array); local processes: 1 s", minimum=0.1)
    population_batch: int = option(1, "directions a worker scores together in one batched "
                                      "forward (hf backend on the CPU; full rank: float32 "
                                      "serving; 1 = one at a time); "
                                      "rewards equal the one-at-a-time path (low-rank ES: "
                                      "one EGGROLL forward, equal up to float rounding)",
                                      minimum=1)
    population_memory_mb: float = option(0.0, "caps population_batch at the float32 weight "
                                              "sets (one per direction) that fit in this many "
                                              "MB (0: no cap)", minimum=0)
    slurm: dict = option(factory=dict, help="submitit slurm_* parameters (partition, "
                                            "gpus_per_node, mem_gb, ...)")
    vllm: dict = option(factory=dict, help="extra vllm.LLM arguments when backend is vllm")
    sandbox: str = option("isolated", "how generated code runs (docs/sandbox.md): isolated "
                                      "(a bubblewrap jail per call; refused where the "
                                      "machine cannot jail) or guard-only (resource limits, "
                                      "seccomp and an audit-hook tripwire, no namespaces: "
                                      "for nodes without unprivileged user namespaces)",
                          choices=("isolated", "guard-only"))


@dataclass(frozen=True)
class Config:
    """esopt workflow configuration (config/config.yaml, a scale file, --config)."""

    scale: str = option("tiny", "scale file merged from config/scales (smoke, tiny, paper, "
                                "ahd, math, math-paper, docvqa, docvqa-paper, web, web-paper, "
                                "...)")
    model: str = option("smollm2-135m-instruct", "base model: embedded name, local "
                                                 "checkpoint directory or Hub id")
    serving_dtype: str = option("float32", "precision of the served weights; masters stay "
                                           "float32. bfloat16-weights (hf only): bf16 "
                                           "matrices, float32 activations and norms",
                                choices=("float32", "bfloat16", "float16", "bfloat16-weights"))
    backend: str = option("hf", "rollout engine of ES directions and evaluations (RL "
                                "training always uses hf)", choices=("hf", "vllm"))
    experiments: list[str] = option(factory=lambda: ["sudoku"], item_choices=EXPERIMENTS,
                                    help="experiment sections to run")
    eval_models: list[str] = option(
        factory=list, help="evaluation-only models (embedded name, checkpoint directory or "
                           "Hub id): each is evaluated as base on every experiment, H* and "
                           "seed, and gets its own row in Tables 1 and 3 (the paper's "
                           "Qwen3.5-27B rows); never trained")
    sudoku: ExperimentSection = option(factory=ExperimentSection,
                                       help="Agentic Sudoku (Table 1, Figure 3, Table 7)")
    countdown: CountdownSection = option(factory=CountdownSection,
                                         help="Countdown (the tiny scale's second "
                                              "demonstration; training-reward figure)")
    math: MathSection = option(factory=MathSection,
                               help="math with a Python tool (Table 3, Figure 8)")
    docvqa: DocVQASection = option(factory=DocVQASection,
                                   help="DocVQA with an OCR tool (Table 3, Figures 8 and 9)")
    web: WebSection = option(factory=WebSection,
                             help="WebArena-Lite-style web tasks on local sites (Table 4, "
                                  "Figure 10, Table 12)")
    ahd: AHDSection = option(factory=AHDSection, help="automatic heuristic design")
    runtime: RuntimeSection = option(factory=RuntimeSection, help="fan-out settings")

    def __post_init__(self) -> None:
        if self.serving_dtype == "bfloat16-weights" and self.backend != "hf":
            raise ValueError("serving_dtype bfloat16-weights is the hf backend's (vllm serves "
                             "float32, bfloat16 or float16)")


SCHEMA_HEADER = ("# Generated from esopt.pipeline.sections; do not edit. Regenerate with:\n"
                 "#   esopt config schema > workflow/schemas/config.schema.yaml\n")


def config_schema() -> dict:
    """The workflow's JSON schema (workflow/schemas/config.schema.yaml), from Config."""
    from esopt.pipeline.schema import json_schema

    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **json_schema(Config)}


def config_schema_yaml() -> str:
    """The schema file's text: the header, then the schema as YAML."""
    import yaml

    return SCHEMA_HEADER + yaml.safe_dump(config_schema(), sort_keys=False,
                                          default_flow_style=None, width=96)
