"""From the workflow's config mapping (config.yaml + scale file + --config) to RunSpecs.

Every value is checked here, at DAG-build time, so a bad config fails before any job
starts, with the offending key in the message.
"""

from __future__ import annotations

from pathlib import Path

from esopt.backends.base import SamplingParams
from esopt.envs.base import make_env
from esopt.es.strategy import ESConfig
from esopt.models import EMBEDDED_MODELS
from esopt.pipeline.spec import (
    ES_METHODS,
    METHODS,
    RLConfig,
    RunSpec,
    horizon_kwargs,
    sigma_schedule,
)

TINY_RANDOM = "tiny-random"  # a random small Llama with SmolLM2's tokenizer (smoke scale)


class ConfigError(ValueError):
    """A config value that cannot run; the message starts with the key."""


def model_dir(name: str) -> str:
    """Where the base model's checkpoint lives: embedded names and Hub ids are built by
    rules under resources/models; a local directory is used in place."""
    if name in EMBEDDED_MODELS or name == TINY_RANDOM:
        return f"resources/models/{name}"
    if Path(name).exists():
        return name
    if name.count("/") == 1 and not name.startswith((".", "/")):
        return "resources/models/hub/" + name.replace("/", "--")
    raise ConfigError(f"model: {name!r} is neither an embedded model "
                      f"({sorted(EMBEDDED_MODELS) + [TINY_RANDOM]}), a directory, nor a Hub id")


def _decoder(d: dict, key: str) -> SamplingParams:
    try:
        return SamplingParams(**{**d, "stop": tuple(d.get("stop", ()))})
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{key}: {e}") from None


def _check(key: str, fn):
    try:
        return fn()
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"{key}: {e}") from None


def run_specs(config: dict) -> list[RunSpec]:
    """Every run of every configured experiment."""
    specs = []
    base_model = model_dir(config["model"])
    for exp_name in config.get("experiments", []):
        if exp_name == "ahd":  # heuristic design has runs of its own: esopt.pipeline.ahd
            continue
        if exp_name not in config:
            raise ConfigError(f"experiments: {exp_name!r} has no section of its own")
        specs += _experiment_specs(exp_name, config[exp_name], config, base_model)
    return specs


def _experiment_specs(name: str, exp: dict, config: dict, base_model: str) -> list[RunSpec]:
    env = exp.get("env", name)
    env_options = dict(exp.get("env_options", {}))
    horizons = exp.get("horizons", [])
    if not horizons:
        raise ConfigError(f"{name}.horizons: at least one H* is needed")
    for h in horizons:
        _check(f"{name}.env", lambda h=h: make_env(env, **horizon_kwargs(env, env_options, h)))
        eval_options = exp.get("eval", {}).get("env_options", {})
        if eval_options:
            _check(f"{name}.eval.env_options", lambda h=h, o=eval_options: make_env(
                env, **{**horizon_kwargs(env, env_options, h), **o}))
    methods = exp.get("methods", list(METHODS))
    for m in methods:
        if m not in METHODS:
            raise ConfigError(f"{name}.methods: unknown method {m!r}; choose from {list(METHODS)}")
    es = exp.get("es", {})
    generations = es.get("generations", 1)
    if generations < 1:
        raise ConfigError(f"{name}.es.generations must be >= 1, got {generations}")
    eval_cfg = exp.get("eval", {})
    rl_cfg = dict(exp.get("rl", {}))
    rl_decoder = _decoder(rl_cfg.pop("train_decoder", {"temperature": 1.0}),
                          f"{name}.rl.train_decoder")
    rl = _check(f"{name}.rl", lambda: RLConfig(**rl_cfg))
    eval_decoder = _decoder(eval_cfg.get("decoder", {}), f"{name}.eval.decoder")
    train_decoder = _decoder(exp.get("train_decoder", {}), f"{name}.train_decoder")
    # What each method samples its training rollouts with (see esopt.pipeline.spec).
    decoders = {"grpo": rl_decoder, "ppo": rl_decoder, "grpo_b": eval_decoder}
    shared = dict(
        experiment=name, env=env, env_options=env_options, model=base_model,
        tasks_per_direction=es.get("tasks_per_direction", 8),
        eval_decoder=eval_decoder, rl=rl,
        eval_tasks=eval_cfg.get("tasks", 32), eval_repeats=eval_cfg.get("repeats", 1),
        keep_every=es.get("keep_every", 10),
        eval_env_options=dict(eval_cfg.get("env_options", {})),
        serving_dtype=config.get("serving_dtype", "float32"),
        backend=config.get("backend", "hf"),
        runtime=dict(config.get("runtime", {})),
    )
    specs = []
    for h in horizons:
        for method in methods:
            decoder = decoders.get(method, train_decoder)
            schedule = _check(f"{name}.sigma.{method}", lambda h=h, m=method: sigma_schedule(
                _sigma_config(exp, h, m), generations))
            for seed in exp.get("seeds", [0]):
                es_config = _check(f"{name}.es", lambda s=schedule, seed=seed: ESConfig(
                    population_size=es.get("population_size", 8),
                    alpha=float(es.get("alpha", 5e-4)), sigma=s,
                    shaping=es.get("shaping", "zscore"),
                    antithetic=es.get("antithetic", False), run_seed=seed))
                specs.append(_check(name, lambda kw=dict(
                    horizon=h, method=method, seed=seed, es=es_config,
                    train_decoder=decoder): RunSpec(**shared, **kw)))
    return specs


def _sigma_config(exp: dict, horizon: int, method: str) -> dict:
    """The method's schedule with its per-H* override; `base` never perturbs."""
    if method not in ES_METHODS:
        return {"kind": "constant", "sigma_0": 1e-3}
    cfg = exp.get("sigma", {}).get(method, {"kind": "constant", "sigma_0": 1e-3})
    return {**cfg, **exp.get("sigma_by_horizon", {}).get(horizon, {}).get(method, {})}


def ahd_run_list(config: dict):
    """The AHD runs of the config (empty unless `ahd` is among the experiments)."""
    from esopt.pipeline.ahd import AHDConfigError, ahd_runs

    if "ahd" not in config.get("experiments", []):
        return []
    try:
        return ahd_runs(config.get("ahd", {}), model_dir(config["model"]))
    except AHDConfigError as e:
        raise ConfigError(str(e)) from None


def scale_file(root: str | Path, scale: str) -> Path:
    """config/scales/{scale}.yaml, or a ConfigError listing the scales that exist."""
    path = Path(root) / "config" / "scales" / f"{scale}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (Path(root) / "config" / "scales").glob("*.yaml"))
        raise ConfigError(f"scale: no scale {scale!r} ({path} not found); choose one of {known}")
    return path
