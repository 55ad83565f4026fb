"""From the workflow's config mapping (config.yaml + scale file + --config) to RunSpecs.

The mapping is parsed into the dataclasses of esopt.pipeline.sections (the schema's
source), then every run is resolved, at DAG-build time, so a bad config fails before any
job starts, with the offending key in the message.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from esopt.envs.base import make_env
from esopt.es.strategy import ESConfig
from esopt.models import EMBEDDED_MODELS
from esopt.pipeline.budget import es_run_episodes, matched_keep_every, matched_rl_steps
from esopt.pipeline.schema import ConfigError, parse, plain
from esopt.pipeline.sections import Config, ExperimentSection, LandscapeSection
from esopt.pipeline.spec import (
    ASYNC_METHODS,
    ES_METHODS,
    METHODS,
    RL_METHODS,
    RunSpec,
    horizon_kwargs,
    model_slug,
    sigma_schedule,
)
from esopt.runtime.checkpoint import MANIFEST_NAME

__all__ = ["ConfigError", "ahd_run_list", "check_config", "landscape_runs", "method_seeds",
           "model_dir", "parse_config", "run_specs", "scale_file", "trace2skill_json"]

TINY_RANDOM = "tiny-random"  # a random small Llama with SmolLM2's tokenizer (smoke scale)


def model_dir(name: str) -> str:
    """Where the base model's checkpoint lives: known names and Hub ids (owner/name) are
    built by rules under resources/models; an existing path must be a checkpoint directory
    (one holding a model manifest) and is used in place."""
    if name in EMBEDDED_MODELS or name == TINY_RANDOM:
        return f"resources/models/{name}"
    if Path(name).exists():
        _check_checkpoint_dir(name)
        return name
    if name.count("/") == 1 and not name.startswith((".", "/")):
        return "resources/models/hub/" + name.replace("/", "--")
    raise ConfigError(f"model: {name!r} is neither a known model "
                      f"({sorted(EMBEDDED_MODELS) + [TINY_RANDOM]}), a checkpoint directory, "
                      "nor a Hub id (owner/name)")


def _check_checkpoint_dir(name: str) -> None:
    """A ConfigError unless `name` is a directory whose manifest is a JSON object with the
    weights' sha256 (what write_checkpoint writes: `esopt model fetch|tiny`, ES updates)."""
    manifest = Path(name) / MANIFEST_NAME
    if not Path(name).is_dir():
        raise ConfigError(f"model: {name!r} is a file, not a checkpoint directory")
    if not manifest.is_file():
        raise ConfigError(f"model: {name!r} has no {MANIFEST_NAME}: not a model checkpoint "
                          "directory (a Hugging Face model directory becomes one with "
                          "`esopt model fetch-hub DIR --out OUT`)")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        raise ConfigError(f"model: {manifest} cannot be read: {e}") from None
    if not isinstance(data, dict) or "sha256" not in data:
        raise ConfigError(f"model: {manifest} is not a model manifest (no 'sha256' of the "
                          "weights)")


def parse_config(config: dict) -> Config:
    """The typed config; unknown keys (with the closest valid one), wrong types and bad
    values fail here, before any job, with the dotted key."""
    return parse(Config, config)


def merge_config(base: dict, over: dict) -> dict:
    """`over` merged into `base` key by key, nested mappings recursively (as Snakemake
    merges configfiles and --config)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = (merge_config(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict)
                  else v)
    return out


def check_config(config: dict) -> None:
    """Parse the whole config and resolve its runs, as the Snakefile does (parse_config
    before the schema's validate, then run_specs and ahd_run_list)."""
    run_specs(config)
    ahd_run_list(config)


def _check(key: str, fn):
    try:
        return fn()
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"{key}: {e}") from None


def run_specs(config: dict | Config) -> list[RunSpec]:
    """Every run of every configured experiment."""
    cfg = config if isinstance(config, Config) else parse_config(config)
    specs = []
    base_model = model_dir(cfg.model)
    eval_models = _eval_models(cfg)
    for exp_name in cfg.experiments:
        if exp_name == "ahd":  # heuristic design has runs of its own: esopt.pipeline.ahd
            continue
        specs += _experiment_specs(exp_name, getattr(cfg, exp_name), cfg, base_model,
                                   eval_models)
    return specs


def _eval_models(cfg: Config) -> dict[str, str]:
    """eval_models: name -> checkpoint directory, each resolvable, with distinct path
    names, none the base model itself."""
    out, slugs = {}, {}
    for i, name in enumerate(cfg.eval_models):
        key = f"eval_models[{i}]"
        try:
            path = model_dir(name)
        except ConfigError as e:
            raise ConfigError(f"{key}: {e}") from None
        slug = model_slug(name)
        if not slug:
            raise ConfigError(f"{key}: {name!r} has no letters or digits to name its runs")
        if slug in slugs:
            raise ConfigError(f"{key}: {name!r} and {slugs[slug]!r} name the same runs "
                              f"(base_{slug})")
        if name == cfg.model:
            raise ConfigError(f"{key}: {name!r} is the base model (its base runs are there)")
        out[name], slugs[slug] = path, name
    return out


def _experiment_specs(name: str, exp: ExperimentSection, cfg: Config, base_model: str,
                      eval_models: dict[str, str] | None = None) -> list[RunSpec]:
    env, env_options = exp.env, dict(exp.env_options)
    if not exp.horizons:
        raise ConfigError(f"{name}.horizons: at least one H* is needed")
    for h in exp.horizons:
        _check(f"{name}.env", lambda h=h: make_env(env, **horizon_kwargs(env, env_options, h)))
        if exp.eval.env_options:
            _check(f"{name}.eval.env_options", lambda h=h: make_env(
                env, **{**horizon_kwargs(env, env_options, h), **exp.eval.env_options}))
    es = exp.es
    rl_decoder = exp.rl.train_decoder.sampling()
    eval_decoder = exp.eval.decoder.sampling()
    # What each method samples its training rollouts with (see esopt.pipeline.spec).
    decoders = {"grpo": rl_decoder, "ppo": rl_decoder, "grpo_b": eval_decoder}
    shared = dict(
        experiment=name, env=env, env_options=env_options, model=base_model,
        tasks_per_direction=es.tasks_per_direction, eval_decoder=eval_decoder,
        rl=exp.rl.rl_config(), eval_tasks=exp.eval.tasks, eval_repeats=exp.eval.repeats,
        keep_every=es.keep_every, eval_env_options=dict(exp.eval.env_options),
        failed_episode_reward=es.failed_episode_reward,
        serving_dtype=cfg.serving_dtype, backend=cfg.backend,
        runtime=plain(cfg.runtime),
    )
    asynchrony = _check(f"{name}.es.async_es", es.async_es.async_config)
    specs = []
    for h in exp.horizons:
        for method in exp.methods:
            decoder = decoders.get(method, exp.train_decoder.sampling())
            schedule = _check(f"{name}.sigma.{method}", lambda h=h, m=method: sigma_schedule(
                _sigma_config(exp, h, m), es.generations))
            budget = _rl_budget(name, exp, method)
            for seed in method_seeds(name, exp, method):
                es_config = _check(f"{name}.es", lambda s=schedule, seed=seed, m=method: ESConfig(
                    **{"population_size": es.population_size, "alpha": es.alpha, "sigma": s,
                       "shaping": es.shaping, "antithetic": es.antithetic, "run_seed": seed,
                       **_companion_options(es, m)}))
                specs.append(_check(name, lambda kw=dict(
                    horizon=h, method=method, seed=seed, es=es_config,
                    asynchrony=asynchrony,
                    train_decoder=decoder, **budget): RunSpec(**{**shared, **kw})))
        # Evaluation-only models: evaluated as base is (its decoder, tasks and seeds).
        schedule = sigma_schedule(_sigma_config(exp, h, "base"), es.generations)
        for model, path in (eval_models or {}).items():
            for seed in exp.seeds:
                base_es = ESConfig(population_size=es.population_size, alpha=es.alpha,
                                   sigma=schedule, shaping=es.shaping,
                                   antithetic=es.antithetic, run_seed=seed)
                kw = dict(shared, model=path, horizon=h, method="base", seed=seed,
                          asynchrony=asynchrony, es=base_es, eval_model=model,
                          train_decoder=exp.train_decoder.sampling())
                specs.append(_check(name, lambda kw=kw: RunSpec(**kw)))
    return specs


def method_seeds(name: str, exp: ExperimentSection, method: str) -> list[int]:
    """The training seeds of `method` in experiment `name`: seeds_by_method's, else
    `seeds`; base's also include every seed another listed method uses (each trained run
    is paired with the base model's evaluation at its seed)."""
    for key, seeds in exp.seeds_by_method.items():
        where = f"{name}.seeds_by_method.{key}"
        if key not in METHODS:
            raise ConfigError(f"{where}: unknown method; choose from {list(METHODS)}")
        if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise ConfigError(f"{where}: need one or more distinct seeds >= 0, got {seeds}")
    own = list(exp.seeds_by_method.get(method, exp.seeds))
    if method != "base":
        return own
    others = {s for m in exp.methods if m != "base"
              for s in exp.seeds_by_method.get(m, exp.seeds)}
    return own + sorted(others - set(own))


def _rl_budget(name: str, exp: ExperimentSection, method: str) -> dict:
    """RunSpec fields of an RL run whose budget matches an ES method's training FLOPs (its
    rl steps and keep_every: esopt.pipeline.budget); {} for any other run."""
    target = exp.rl.budget.match_flops_of
    if method not in RL_METHODS or target is None:
        return {}
    es = exp.es
    episodes = es_run_episodes(es.generations, es.population_size, es.tasks_per_direction)
    rl = exp.rl.rl_config()
    steps = matched_rl_steps(method, episodes, rl.tasks_per_step * rl.group_size)
    return {"rl": replace(rl, steps=steps),
            "keep_every": matched_keep_every(steps, es.generations, es.keep_every)}


def trace2skill_json(config: dict | Config, experiment: str) -> str:
    """The experiment's Trace2Skill settings as JSON (what the distillation job gets)."""
    import dataclasses
    import json

    cfg = config if isinstance(config, Config) else parse_config(config)
    return json.dumps(dataclasses.asdict(getattr(cfg, experiment).trace2skill), sort_keys=True)


def landscape_runs(config: dict | Config) -> list[tuple[RunSpec, LandscapeSection]]:
    """Figure 6's probes: per experiment with landscape.enabled, landscape.method's run of
    the first seed at every H* (none when the experiment does not run that method)."""
    cfg = config if isinstance(config, Config) else parse_config(config)
    specs = run_specs(cfg)
    out = []
    for name in cfg.experiments:
        exp = None if name == "ahd" else getattr(cfg, name)
        if exp is None or not exp.landscape.enabled:
            continue
        seed = min(method_seeds(name, exp, exp.landscape.method))
        out += [(s, exp.landscape) for s in specs
                if (s.experiment, s.method, s.seed) == (name, exp.landscape.method, seed)]
    return out


def _companion_options(es, method: str) -> dict:
    """ESConfig fields of the companion methods (over the shared ones): CoPES subspaces,
    low-rank ES's rank, mirrored sampling, vector noise and its own G."""
    if method == "copes":
        return {"subspaces": es.copes.subspaces, "subspace_chunk": es.copes.chunk_elements,
                "subspace_normalisation": es.copes.normalisation}
    if method == "lowrank_es":
        return {"rank": es.lowrank_es.rank, "antithetic": es.lowrank_es.antithetic,
                "full_rank_vectors": es.lowrank_es.full_rank_vectors,
                "population_size": es.lowrank_es.population_size or es.population_size}
    return {}


def _sigma_config(exp: ExperimentSection, horizon: int, method: str) -> dict:
    """The method's schedule with its per-H* override; `base` never perturbs."""
    if method not in ES_METHODS + ASYNC_METHODS:
        return {"kind": "constant", "sigma_0": 1e-3}
    cfg = getattr(exp.sigma, method).as_dict()
    override = exp.sigma_by_horizon.get(horizon)
    return {**cfg, **(getattr(override, method).as_dict() if override else {})}


def ahd_run_list(config: dict):
    """The AHD runs of the config (empty unless `ahd` is among the experiments)."""
    from esopt.pipeline.ahd import AHDConfigError, ahd_runs

    cfg = config if isinstance(config, Config) else parse_config(config)
    if "ahd" not in cfg.experiments:
        return []
    try:
        return ahd_runs(cfg.ahd, model_dir(cfg.model), backend=cfg.backend,
                        serving_dtype=cfg.serving_dtype, runtime=plain(cfg.runtime))
    except AHDConfigError as e:
        raise ConfigError(str(e)) from None


def scale_file(root: str | Path, scale: str) -> Path:
    """config/scales/{scale}.yaml, or a ConfigError listing the scales that exist."""
    path = Path(root) / "config" / "scales" / f"{scale}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (Path(root) / "config" / "scales").glob("*.yaml"))
        raise ConfigError(f"scale: no scale {scale!r} ({path} not found); choose one of {known}")
    return path
