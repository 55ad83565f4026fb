"""The AHD experiment in the pipeline: resolved runs, the search stage, the reference rows.

Methods pair a scaffold with its Agentic ESOpt counterpart: `sample` / `esopt_sample`
and `eoh` / `esopt_eoh`. A run directory holds candidates.parquet (every proposal, its
code, outcome and objective), updates.parquet (each ES update's seeds and shaped weights:
the fine-tuned policy can be replayed from the base model and these rows) and
summary.json (the best heuristic, its test objectives, counts, timings, resolved config).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import pyarrow as pa

from esopt.ahd.instances import describe
from esopt.ahd.problems import evaluate, get_problem
from esopt.context.search import SearchConfig, config_from_dict, config_to_dict, run_search
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ESConfig
from esopt.pipeline.schema import ConfigError, parse
from esopt.pipeline.sections import AHDSection
from esopt.runtime.atomic import write_json_atomic, write_parquet_atomic
from esopt.runtime.memory import peak_rss_mb
from esopt.runtime.sandbox import SandboxLimits, sandbox_mode

log = logging.getLogger(__name__)

AHD_METHODS = {"sample": ("sample", False), "esopt_sample": ("sample", True),
               "eoh": ("eoh", False), "esopt_eoh": ("eoh", True)}
BASELINE_OF = {"esopt_sample": "sample", "esopt_eoh": "eoh"}


class AHDConfigError(ConfigError):
    """A bad `ahd:` config section; the message names the key."""


@dataclass(frozen=True)
class AHDRun:
    problem: str
    method: str
    seed: int
    model: str
    search: dict
    """SearchConfig as a dict (the resolved config recorded beside the results)."""
    backend: str = "hf"
    """The config's backend: the proposer (and the policy ES updates) serves on it."""
    serving_dtype: str = "float32"
    serving: dict = field(default_factory=dict)
    """Where the model is served: the runtime's `device` and `vllm` engine arguments only
    (not workers, partitions or timeouts)."""

    @property
    def run_dir(self) -> str:
        return f"results/ahd/{self.problem}/{self.method}/seed{self.seed}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AHDRun:
        return cls(**json.loads(text))

    def search_config(self) -> SearchConfig:
        return config_from_dict(self.search)


def ahd_runs(section: dict | AHDSection, model: str, *, backend: str = "hf",
             serving_dtype: str = "float32", runtime: dict | None = None) -> list[AHDRun]:
    """One run per (problem, method, seed) of the config's `ahd` section, validated; the
    model is served on `backend` in `serving_dtype` (runtime: its device, vllm args)."""
    if isinstance(section, dict):
        if not section:
            return []
        try:
            section = parse(AHDSection, section, "ahd")
        except ConfigError as e:
            raise AHDConfigError(str(e)) from None
    if not section.enabled:
        return []
    for key in ("problems", "methods", "seeds"):
        if not getattr(section, key):
            raise AHDConfigError(f"ahd.{key}: at least one entry is needed")
    root = section.instances
    if root is not None and not Path(root).is_dir():
        raise AHDConfigError(f"ahd.instances: {root!r} is not a directory (the benchmark "
                             f"instance files; null for the generators)")
    runs = []
    for problem in section.problems:
        for method in section.methods:
            for seed in section.seeds:
                cfg = _search_config(section, problem, method, int(seed))
                search = json.loads(json.dumps(config_to_dict(cfg)))  # JSON-normal form
                runs.append(AHDRun(problem, method, int(seed), model, search, backend,
                                   serving_dtype, serving_runtime(runtime)))
    return runs


def serving_runtime(runtime: dict | None) -> dict:
    """The part of the runtime section that says where a model is served."""
    return {k: runtime[k] for k in ("device", "vllm") if runtime and k in runtime}


def _search_config(section: AHDSection, problem: str, method: str, seed: int) -> SearchConfig:
    scaffold, coevolve = AHD_METHODS[method]
    limits = section.limits
    try:
        cfg = SearchConfig(
            problem=problem, scaffold=scaffold, budget=section.budget,
            batch_size=section.batch_size, pop_size=section.pop_size,
            parents=section.parents, mutation_factor=section.mutation_factor,
            instances=section.instances,
            init_size=section.init_size or 2 * section.pop_size,
            prefill=section.prefill, show_seed=section.show_seed,
            sampling=section.decoder.sampling(),
            limits=SandboxLimits(**{f.name: getattr(limits, f.name) for f in fields(limits)}),
            seed=seed,
        )
        if not coevolve:
            return cfg
        es = section.es
        directions = cfg.directions
        # The sigma schedule spans the ES updates the budget allows (Table 13).
        updates = replace(cfg, es=ESConfig(population_size=directions)).es_updates
        return replace(cfg, es=ESConfig(
            population_size=directions, alpha=es.alpha,
            sigma=SigmaSchedule(kind=es.schedule, sigma_0=es.sigma_0, sigma_T=es.sigma_T,
                                generations=max(1, updates)),
            run_seed=seed))
    except (ValueError, TypeError) as e:
        raise AHDConfigError(f"ahd ({problem}/{method}): {e}") from None


def run_ahd(run: AHDRun, out_dir: str | Path, threads: int = 1) -> dict:
    """The search stage: load the policy, search, score the best heuristic on the tests."""
    import torch

    from esopt.backends.factory import load_policy

    torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    cfg = run.search_config()
    problem = get_problem(cfg.problem)
    policy, _ = load_policy(run.model, run.backend, run.serving_dtype, run.serving)
    load_s = time.perf_counter() - t0
    result = run_search(policy, cfg)
    best = result.best(problem)
    tests = {}
    if best is not None:
        for split in problem.test_splits:
            ev = evaluate(problem, best.code, split, cfg.limits, cfg.instances)
            tests[split] = ev.objective if ev.ok else None
    counts: dict[str, int] = {}
    for c in result.candidates:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    n = max(1, len(result.candidates))
    summary = {
        "problem": run.problem, "method": run.method, "seed": run.seed,
        "best": None if best is None else {"index": best.index, "code": best.code,
                                            "description": best.description,
                                            "train_objective": best.objective},
        "test_objectives": tests,
        "evaluated": len(result.candidates), "es_updates": len(result.updates),
        "outcomes": counts,
        "valid_rate": counts.get("ok", 0) / n,
        "wall_s": time.perf_counter() - t0, "search_s": result.wall_s, "load_s": load_s,
        "generate_s_per_proposal": sum(c.generate_s for c in result.candidates) / n,
        "evaluate_s_per_proposal": sum(c.evaluate_s for c in result.candidates) / n,
        "peak_rss_mb": peak_rss_mb(),
        "sandbox": sandbox_mode(),  # isolated or guard-only: how the candidates ran
        "config": json.loads(run.to_json()),
    }
    cand_table = pa.Table.from_pylist([asdict(c) for c in result.candidates]) if (
        result.candidates) else pa.table({"index": pa.array([], pa.int64())})
    upd_table = pa.Table.from_pylist(result.updates) if result.updates else pa.table(
        {"update": pa.array([], pa.int64())})
    meta = {"config": run.to_json()}
    write_parquet_atomic(cand_table, out_dir / "candidates.parquet", meta)
    write_parquet_atomic(upd_table, out_dir / "updates.parquet", meta)
    write_json_atomic(out_dir / "summary.json", summary, default=str)
    log.info("%s/%s seed %d: best train %s, tests %s, %d evaluated, %d ES updates, %.0f s",
             run.problem, run.method, run.seed,
             None if best is None else round(best.objective, 4), tests,
             len(result.candidates), len(result.updates), summary["wall_s"])
    return summary


def compute_references(problems: list[str], out: str | Path,
                       instances: str | None = None) -> dict:
    """Reference rows on each problem's test splits, on the instances the runs use:
    Optimal and Greedy Construct (Table 5), the ACO baseline with ReEvo's seed heuristic
    (Table 14). `instances` is the benchmark-file directory (None: the generators)."""
    refs: dict = {"instances": describe(instances)}
    for name in problems:
        problem = get_problem(name)
        refs[name] = {}
        for split in problem.test_splits:
            t0 = time.perf_counter()
            baseline = evaluate(problem, problem.greedy_source, split,
                                SandboxLimits(wall_s=600, cpu_s=600, memory_mb=4096),
                                instances)
            if not baseline.ok:
                raise RuntimeError(f"{name}/{split}: baseline failed: {baseline.detail}")
            data = problem.data(split, instances)
            row = {"baseline": baseline.objective,
                   "n_instances": len(data) if problem.kind != "constructive" or
                   name != "asp_constructive" else 1}
            if problem.kind == "constructive":
                row["greedy"] = baseline.objective
                row["optimum"] = problem.optimum(data)
            row["seconds"] = time.perf_counter() - t0
            refs[name][split] = row
            log.info("%s %s: %s", name, split, row)
    write_json_atomic(Path(out), refs, default=str)
    return refs
