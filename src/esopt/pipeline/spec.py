"""A run's resolved specification: everything a stage needs, serialisable to JSON.

The Snakefile resolves the user's config into one RunSpec per (experiment, H*, method,
seed) and hands it to every stage as JSON, so each artifact can carry the exact
configuration that produced it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from esopt.chat import SamplingParams
from esopt.es.async_es import AsyncConfig
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ESConfig
from esopt.pipeline.schema import option

# ES methods of the per-generation DAG (directions -> rewards -> update): the paper's two
# and the companions CoPES and low-rank ES; async_es runs as one coordinator job.
ES_METHODS = ("vanilla_es", "esopt", "copes", "lowrank_es")
ASYNC_METHODS = ("async_es",)
COMPANION_METHODS = ("copes", "async_es", "lowrank_es")
# Agentic RL baselines: GRPO-dagger trains at temperature 1 (top-p 1, no top-k) and
# evaluates with the evaluation decoder, as the paper's Figure 7; GRPO-B (double dagger,
# "the stronger GRPO") trains with the evaluation decoder, as ESOpt does: the paper does
# not say what separates its two GRPO rows, this is our choice. PPO trains as GRPO-dagger.
RL_METHODS = ("grpo", "grpo_b", "ppo")
PAPER_METHODS = ("base", "vanilla_es", "esopt", *RL_METHODS)
METHODS = (*PAPER_METHODS, *COMPANION_METHODS)
# The env option a run's horizon sets: Sudoku's H* is its number of blanks; the math and
# DocVQA and web agents' horizon is their turn limit.
HORIZON_OPTION = {"sudoku": "blanks", "math_tool": "max_turns", "docvqa": "max_turns",
                  "web": "max_turns"}
# Environments whose ES runs the training-reward figure and the report's first page show
# (Tables 1, 2, 7 and Figure 3 are Sudoku's; math's runs feed Table 3).
TRAINING_REWARD_ENVS = ("sudoku", "countdown")


def model_slug(name: str) -> str:
    """A model name as a path part: lower case, runs of other characters as one `_`
    (Qwen/Qwen3.5-27B -> qwen_qwen3_5_27b)."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


@dataclass(frozen=True)
class RLConfig:
    """Settings of an RL baseline run; a step's batch is tasks_per_step x group_size
    episodes (GRPO's group; PPO plays each task group_size times too)."""

    steps: int = option(2, "optimiser steps (the RL run's 'generations')", minimum=1)
    tasks_per_step: int = option(2, "tasks per step", minimum=1)
    group_size: int = option(4, "GRPO: rollouts per task (group of the advantage); PPO: "
                                "episodes per task", minimum=2)
    lr: float = option(1e-6, "AdamW learning rate of the policy", exclusive_minimum=0)
    beta: float = option(1e-3, "KL weight to the reference policy", minimum=0)
    clip_eps: float = option(0.2, "ratio clip", exclusive_minimum=0, exclusive_maximum=1)
    micro_batch: int = option(8, "sequences per forward/backward (gradients accumulate)",
                              minimum=1)
    loss_type: str = option("grpo", "GRPO's aggregation of token losses, as TRL's loss_type: "
                                    "grpo (each episode's token mean, averaged over episodes: "
                                    "the GRPO objective), bnpo, dr_grpo or dapo",
                            choices=("grpo", "bnpo", "dr_grpo", "dapo"))

    def __post_init__(self) -> None:
        for name in ("steps", "tasks_per_step", "micro_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (GRPO advantages are within groups), "
                             f"got {self.group_size}")
        if not (self.lr > 0 and self.beta >= 0 and 0 < self.clip_eps < 1):
            raise ValueError(f"need lr > 0, beta >= 0, 0 < clip_eps < 1; got {self}")


@dataclass(frozen=True)
class Trace2SkillConfig:
    """Trace2Skill (esopt.context.skills): the baseline's iterations (each plays tasks x
    rollouts with the current SKILL.md, analyses successes and failures and consolidates;
    the paper's Table 12: 70 iterations of 8 tasks x 8 rollouts) and the SKILL.md bounds,
    which the post-hoc ESOpt + Trace2Skill distillation shares. Not part of any run's
    identity (the ES run's would rerun with it): the distillation job gets it on its own
    (`esopt stage distill --trace2skill`, a param of its rule)."""

    iterations: int = option(2, "iterations of the Trace2Skill baseline (the paper: 70)",
                             minimum=1)
    tasks: int = option(2, "training tasks played per iteration (the paper: 8)", minimum=1)
    rollouts: int = option(2, "rollouts of each task per iteration (the paper: 8)",
                           minimum=1)
    max_rules: int = option(8, "rules in SKILL.md at most", minimum=1)
    max_chars: int = option(2000, "characters of SKILL.md at most", minimum=100)
    merge_batch: int = option(8, "lessons merged by one consolidation call", minimum=2)

    def __post_init__(self) -> None:
        for name in ("iterations", "tasks", "rollouts", "max_rules"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class RunSpec:
    """One training (or evaluation-only) run."""

    experiment: str
    env: str
    env_options: dict
    horizon: int
    method: str
    seed: int
    model: str
    """Checkpoint directory of the base model (generation 0)."""
    es: ESConfig
    tasks_per_direction: int
    train_decoder: SamplingParams
    eval_decoder: SamplingParams
    eval_tasks: int
    eval_repeats: int
    keep_every: int
    serving_dtype: str = "float32"
    backend: str = "hf"
    """Rollout engine of ES directions and evaluations: hf (transformers) or vllm. RL
    training always runs on hf (it needs gradients)."""
    eval_env_options: dict = field(default_factory=dict)
    """Options merged over env_options for held-out evaluation (e.g. the test data file)."""
    failed_episode_reward: float | None = None
    """None: a direction with a failed (crashed) episode gets a NaN fitness, excluded from
    the update; a number: failed episodes score it (es.failed_episode_reward)."""
    asynchrony: AsyncConfig = field(default_factory=AsyncConfig)
    """Used by async_es only: the staleness bound and the stress-test delays."""
    rl: RLConfig = field(default_factory=RLConfig)
    """Used by the RL methods only (train_decoder is then the RL training decoder)."""
    runtime: dict = field(default_factory=dict)
    """Fan-out settings (cluster, workers, threads_per_worker, timeout_min); not part of
    the experiment's identity, but recorded."""
    eval_model: str = ""
    """An evaluation-only model's name as the config lists it (`eval_models`; method base,
    `model` its checkpoint): a row of its own in Tables 1 and 3 (the paper's Qwen3.5-27B).
    Empty for every other run (and then left out of the JSON, so no run changes)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method: unknown {self.method!r}; choose from {list(METHODS)}")
        if self.tasks_per_direction < 1:
            raise ValueError(f"tasks_per_direction must be >= 1, got {self.tasks_per_direction}")
        if self.eval_tasks < 1 or self.eval_repeats < 1:
            raise ValueError("eval.tasks and eval.repeats must be >= 1")
        if self.keep_every < 1:
            raise ValueError(f"keep_every must be >= 1, got {self.keep_every}")
        if self.backend not in ("hf", "vllm"):
            raise ValueError(f"backend: unknown {self.backend!r}; choose hf or vllm")
        if self.eval_model and self.method != "base":
            raise ValueError(f"eval_model: an evaluation-only model runs as base, not "
                             f"{self.method!r}")
        if self.backend == "vllm" and self.method in ("copes", "lowrank_es"):
            raise ValueError(f"backend: {self.method} runs on hf only (the vLLM workers "
                             "draw full-rank noise over all parameters)")

    @property
    def generations(self) -> int:
        """Updates of the run: ES generations, RL steps, none for the base model."""
        if self.method in RL_METHODS:
            return self.rl.steps
        return self.es.generations if self.method in ES_METHODS + ASYNC_METHODS else 0

    @property
    def run_method(self) -> str:
        """The run directory's method part: the method, or base_<slug> of an
        evaluation-only model."""
        return f"base_{model_slug(self.eval_model)}" if self.eval_model else self.method

    @property
    def run_dir(self) -> str:
        return f"results/{self.experiment}/h{self.horizon}/{self.run_method}/seed{self.seed}"

    @property
    def env_kwargs(self) -> dict:
        return horizon_kwargs(self.env, self.env_options, self.horizon)

    @property
    def eval_env_kwargs(self) -> dict:
        return {**self.env_kwargs, **self.eval_env_options}

    def kept_generations(self) -> list[int]:
        """Checkpoints kept and evaluated: 0, every keep_every-th, and the last."""
        last = self.generations
        return sorted({0, last, *range(0, last + 1, self.keep_every)})

    def to_json(self) -> str:
        d = asdict(self)
        if not d["eval_model"]:
            del d["eval_model"]  # the JSON of every trained and base run stays as it was
        return json.dumps(d, sort_keys=True)

    def config_dict(self) -> dict:
        """The resolved spec as a JSON object (what every artifact carries)."""
        return json.loads(self.to_json())

    def identity_json(self) -> str:
        """The spec without its runtime settings: what the run computes, and so what the
        workflow compares to decide a rerun (the runtime travels apart, `--runtime`)."""
        d = asdict(self)
        d.pop("runtime")
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        d = json.loads(text)
        d["es"] = ESConfig.from_dict(d["es"])
        d["rl"] = RLConfig(**d.get("rl", {}))
        d["asynchrony"] = AsyncConfig(**d.get("asynchrony", {}))
        d["train_decoder"] = SamplingParams(**{**d["train_decoder"],
                                               "stop": tuple(d["train_decoder"]["stop"])})
        d["eval_decoder"] = SamplingParams(**{**d["eval_decoder"],
                                              "stop": tuple(d["eval_decoder"]["stop"])})
        return cls(**d)


def horizon_kwargs(env: str, env_options: dict, horizon: int) -> dict:
    """Environment options with the run's horizon set (when the environment has one)."""
    option = HORIZON_OPTION.get(env)
    return {**env_options, option: horizon} if option else dict(env_options)


def sigma_schedule(d: dict, generations: int) -> SigmaSchedule:
    """A SigmaSchedule from a config mapping (kind, sigma_0, sigma_T)."""
    return SigmaSchedule(kind=d.get("kind", "constant"), sigma_0=float(d["sigma_0"]),
                         sigma_T=float(d.get("sigma_T", d["sigma_0"])), generations=generations)
