"""Config -> RunSpecs: defaults, overrides, and errors that name the key."""

import copy
from dataclasses import replace

import pytest
import yaml

from esopt.pipeline.config import ConfigError, model_dir, run_specs, scale_file
from esopt.pipeline.spec import RunSpec
from tests.workflow.conftest import REPO


def base_config():
    """config.yaml with every Table 1 row (scale tiny-table1: H*=1, 2 and all six methods),
    the config most tests need; the default tiny `all` runs base and ESOpt at H*=1."""
    from esopt.pipeline.config import merge_config

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    table1 = yaml.safe_load((REPO / "config/scales/tiny-table1.yaml").read_text())
    return copy.deepcopy(merge_config(cfg, table1))


def test_the_default_tiny_run_is_esopt_against_base_with_statistics():
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    runs = run_specs(cfg)
    assert sorted({s.experiment for s in runs}) == ["countdown", "sudoku"]
    for experiment in ("sudoku", "countdown"):
        specs = {s.method: s for s in runs if s.experiment == experiment}
        # GRPO beside ESOpt on Countdown (issue 37), at ESOpt's training FLOPs
        methods = ["base", "esopt", "grpo"] if experiment == "countdown" else ["base", "esopt"]
        assert sorted(specs) == methods and {s.horizon for s in specs.values()} == {1}
        esopt = specs["esopt"]
        assert esopt.env == experiment
        assert esopt.generations >= 20 and esopt.eval_tasks >= 128  # issue 22's protocol
        assert esopt.kept_generations() == [0, 10, 20]
        assert specs["base"].eval_tasks == esopt.eval_tasks
    countdown = next(s for s in runs if (s.experiment, s.method) == ("countdown", "esopt"))
    assert countdown.run_dir == "results/countdown/h1/esopt/seed0"
    assert countdown.env_kwargs == {"count": 2, "max_number": 10, "few_shot": 3}
    assert countdown.es.population_size == 16 and countdown.tasks_per_direction == 16
    grpo = next(s for s in runs if (s.experiment, s.method) == ("countdown", "grpo"))
    assert grpo.rl.steps == 64 and grpo.eval_tasks == countdown.eval_tasks
    assert grpo.kept_generations() == [0, 32, 64]  # the FLOPs of ESOpt's generations 0, 10, 20


def test_table1_config_gives_one_spec_per_horizon_method_seed():
    specs = run_specs(base_config())
    assert len(specs) == 2 * 6 * 1  # H* x methods (base, 2 ES, 3 RL) x seeds
    esopt = next(s for s in specs if s.method == "esopt" and s.horizon == 2)
    last = esopt.es.generations - 1
    assert esopt.es.sigma.kind == "cosine" and esopt.es.sigma(last) == esopt.es.sigma.sigma_T
    assert esopt.env_kwargs["blanks"] == 2 and esopt.env_kwargs["size"] == 4
    assert esopt.run_dir == "results/sudoku/h2/esopt/seed0"
    base = next(s for s in specs if s.method == "base")
    assert base.generations == 0 and base.kept_generations() == [0]


def test_kept_generations_are_every_kth_and_the_last():
    spec = next(s for s in run_specs(base_config()) if s.method == "vanilla_es")
    g = spec.es.generations
    assert spec.kept_generations()[-1] == g
    assert all(k % spec.keep_every == 0 or k == g for k in spec.kept_generations())


def test_spec_roundtrips_through_json():
    for spec in run_specs(base_config()):
        assert RunSpec.from_json(spec.to_json()) == spec


def test_rl_methods_train_with_their_decoders_and_steps():
    specs = {(s.method, s.horizon): s for s in run_specs(base_config())}
    grpo, grpo_b, ppo = specs[("grpo", 1)], specs[("grpo_b", 1)], specs[("ppo", 1)]
    assert grpo.train_decoder.temperature == 1.0 and grpo.train_decoder.top_k == 0
    assert ppo.train_decoder == grpo.train_decoder
    assert grpo_b.train_decoder == grpo_b.eval_decoder  # GRPO-B samples as it is evaluated
    assert specs[("esopt", 1)].train_decoder.temperature == 0.7
    assert grpo.generations == grpo.rl.steps and grpo.kept_generations()[-1] == grpo.rl.steps
    assert RunSpec.from_json(grpo.to_json()).rl == grpo.rl


def test_sigma_by_horizon_overrides_one_horizon():
    cfg = base_config()
    cfg["sudoku"]["sigma_by_horizon"] = {2: {"esopt": {"sigma_0": 7e-4, "sigma_T": 5e-4}}}
    specs = {(s.method, s.horizon): s for s in run_specs(cfg)}
    assert specs[("esopt", 2)].es.sigma.sigma_0 == 7e-4
    assert specs[("esopt", 1)].es.sigma.sigma_0 == 3e-3


@pytest.mark.parametrize("edit, key", [
    (lambda c: c["sudoku"]["sigma"]["esopt"].update(sigma_0=-1.0), "sudoku.sigma.esopt"),
    (lambda c: c["sudoku"]["es"].update(population_size=1), "sudoku.es"),
    (lambda c: c["sudoku"].update(env="chess"), "sudoku.env"),
    (lambda c: c["sudoku"].update(methods=["ppo2"]), "sudoku.methods"),
    (lambda c: c["sudoku"].update(horizons=[]), "sudoku.horizons"),
    (lambda c: c["sudoku"]["es"].update(generations=0), "sudoku.es.generations"),
    (lambda c: c["sudoku"]["eval"]["decoder"].update(top_p=0), "sudoku.eval.decoder"),
    (lambda c: c["sudoku"]["rl"].update(group_size=1), "sudoku.rl"),
    (lambda c: c["sudoku"]["rl"].update(lr=0.0), "sudoku.rl"),
    (lambda c: c["sudoku"]["rl"].update(learning_rate=1e-6), "sudoku.rl"),
    (lambda c: c["sudoku"]["rl"]["train_decoder"].update(top_k=-1), "sudoku.rl.train_decoder"),
    (lambda c: c.update(experiments=["webarena"]), "experiments"),
    (lambda c: c.update(model="no/such/thing/here"), "model"),
])
def test_bad_values_name_their_key(edit, key):
    cfg = base_config()
    edit(cfg)
    with pytest.raises(ConfigError) as err:
        run_specs(cfg)
    assert str(err.value).startswith(key)


def test_scale_files_and_model_dirs():
    assert scale_file(REPO, "smoke").name == "smoke.yaml"
    with pytest.raises(ConfigError, match="scale: no scale 'huge'"):
        scale_file(REPO, "huge")
    assert model_dir("smollm2-135m-instruct") == "resources/models/smollm2-135m-instruct"
    assert model_dir("Qwen/Qwen3.5-4B") == "resources/models/hub/Qwen--Qwen3.5-4B"


def _checkpoint(path):
    """A real (tiny) checkpoint directory, written by esopt's checkpoint writer."""
    import torch
    from transformers import LlamaConfig

    from esopt.runtime.checkpoint import write_checkpoint

    write_checkpoint(path, {"w": torch.zeros(2)},
                     config=LlamaConfig(hidden_size=8, num_attention_heads=2))
    return path


def test_model_is_a_known_name_a_hub_id_or_a_checkpoint_directory(tmp_path):
    ckpt = str(_checkpoint(tmp_path / "ckpt"))
    assert model_dir(ckpt) == ckpt
    assert model_dir("tiny-random") == "resources/models/tiny-random"
    cfg = base_config()
    cfg["model"] = ckpt
    assert {s.model for s in run_specs(cfg)} == {ckpt}


@pytest.mark.parametrize("make, message", [
    # Issue 35: any existing path used to pass (and failed later, inside a job).
    (lambda d: d.mkdir(), "has no manifest.json: not a model checkpoint directory"),
    (lambda d: d.write_text("weights"), "is a file, not a checkpoint directory"),
    (lambda d: (d.mkdir(), (d / "manifest.json").write_text('{"sha256": "ab",\n')),
     r"manifest.json cannot be read: .*line 2"),
    (lambda d: (d.mkdir(), (d / "manifest.json").write_text('{"model": "x"}')),
     "manifest.json is not a model manifest"),
])
def test_a_model_path_that_is_no_checkpoint_is_refused_naming_the_key(tmp_path, make, message):
    bad = tmp_path / "model"
    make(bad)
    for key, edit in (("model", lambda c: c.update(model=str(bad))),
                      (r"eval_models\[0\]: model", lambda c: c.update(eval_models=[str(bad)]))):
        cfg = base_config()
        edit(cfg)
        with pytest.raises(ConfigError, match=rf"^{key}: .*{message}"):
            run_specs(cfg)


# Issue 16: one source of truth for the config (esopt.pipeline.sections), strict keys.

SCALES = sorted(p.stem for p in (REPO / "config/scales").glob("*.yaml"))


def merged(*parts: dict) -> dict:
    from esopt.pipeline.config import merge_config

    out: dict = {}
    for p in parts:
        out = merge_config(out, p)
    return out


def test_committed_schema_is_the_generated_one():
    from esopt.pipeline.sections import config_schema_yaml

    committed = (REPO / "workflow/schemas/config.schema.yaml").read_text()
    assert committed == config_schema_yaml(), (
        "regenerate: esopt config schema > workflow/schemas/config.schema.yaml")


def test_schema_defaults_are_the_dataclass_defaults():
    # What Snakemake's validate fills into an empty config is exactly what the parser
    # assumes for absent keys, at every level (sections, decoders, sigma, runtime).
    from snakemake.utils import validate

    from esopt.pipeline.config import parse_config
    from esopt.pipeline.sections import Config

    filled: dict = {}
    validate(filled, str(REPO / "workflow/schemas/config.schema.yaml"))
    assert filled["sudoku"]["es"]["alpha"] == 5e-4 and filled["runtime"]["workers"] == 1
    assert filled["ahd"]["decoder"]["max_new_tokens"] == 512
    assert filled["sudoku"]["rl"]["train_decoder"]["temperature"] == 1.0
    assert parse_config(filled) == parse_config({}) == Config()
    # The same holds for a partial section: the validator fills the rest as the parser does.
    partial = {"sudoku": {"es": {"generations": 3}, "eval": {"decoder": {"top_k": 5}}}}
    expected = parse_config(copy.deepcopy(partial))
    validate(partial, str(REPO / "workflow/schemas/config.schema.yaml"))
    assert parse_config(partial) == expected


@pytest.mark.parametrize("scale", SCALES)
def test_every_scale_file_is_valid_under_the_strict_schema(scale):
    import jsonschema

    from esopt.pipeline.config import parse_config

    assert {"smoke", "tiny", "paper", "ahd", "math", "math-paper"} <= set(SCALES)
    cfg = merged(base_config(), yaml.safe_load((REPO / f"config/scales/{scale}.yaml").read_text()))
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    jsonschema.Draft202012Validator(schema).validate(cfg)
    parsed = parse_config(cfg)
    assert parsed.scale == scale


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(populaton_size=32), "populaton_size: unknown key"),
    (lambda c: c["sudoku"]["es"].update(populaton_size=32),
     "sudoku.es.populaton_size: unknown key; did you mean 'population_size'?"),
    (lambda c: c["sudoku"]["sigma"]["esopt"].update(sigma_t=1e-4),
     "sudoku.sigma.esopt.sigma_t: unknown key; did you mean 'sigma_T'?"),
    (lambda c: c["sudoku"].update(sigma_by_horizon={2: {"esopt": {"sigma0": 1e-3}}}),
     "sudoku.sigma_by_horizon.2.esopt.sigma0: unknown key; did you mean 'sigma_0'?"),
    (lambda c: c["sudoku"].update(sigma_by_horizon={"x": {"esopt": {"sigma_0": 1e-3}}}),
     "sudoku.sigma_by_horizon: key 'x' must be an integer"),
    (lambda c: c["sudoku"]["es"].update(population_size="8"),
     "sudoku.es.population_size: expected an integer, got '8'"),
    (lambda c: c["sudoku"]["es"].update(keep_every=True),
     "sudoku.es.keep_every: expected an integer, got True"),
    (lambda c: c["sudoku"].update(horizons=2), "sudoku.horizons: expected a list, got 2"),
    (lambda c: c["ahd"].update(budjet=4), "ahd.budjet: unknown key; did you mean 'budget'?"),
    (lambda c: c["runtime"].update(threads=2), "runtime.threads: unknown key"),
])
def test_unknown_keys_and_wrong_types_name_the_key(edit, message):
    cfg = base_config()
    edit(cfg)
    with pytest.raises(ConfigError) as err:
        run_specs(cfg)
    assert str(err.value).startswith(message), str(err.value)


def test_defaults_are_one_whichever_experiment():
    # Sudoku and math sections fall back to the same ES defaults (they used to differ
    # between the schema, which Snakemake applied, and the code).
    from esopt.es.strategy import ESConfig
    from esopt.pipeline.config import parse_config

    cfg = parse_config({})
    assert cfg.sudoku.es == cfg.math.es
    assert cfg.sudoku.es.alpha == ESConfig.alpha == 5e-4
    assert (cfg.sudoku.es.keep_every, cfg.sudoku.es.generations) == (10, 1)
    assert cfg.math.env == "math_tool" and cfg.sudoku.env == "sudoku"


def test_runtime_settings_are_recorded_but_not_the_experiment():
    specs = run_specs(base_config())
    other = base_config()
    other["runtime"].update(workers=7, cluster="debug", threads_per_worker=3)
    for a, b in zip(specs, run_specs(other), strict=True):
        assert b.runtime["workers"] == 7 and a.runtime["workers"] == 2
        assert replace(a, runtime={}) == replace(b, runtime={})


def test_config_commands_print_the_schema_and_check_files(capsys, tmp_path):
    from esopt.cli import main

    main(["config", "schema"])
    assert capsys.readouterr().out == (REPO / "workflow/schemas/config.schema.yaml").read_text()
    main(["config", "check", str(REPO / "config/config.yaml"),
          str(REPO / "config/scales/smoke.yaml")])
    assert capsys.readouterr().out.startswith("ok: ")
    (tmp_path / "bad.yaml").write_text("sudoku: {eval: {repeat: 3}}\n")
    with pytest.raises(ConfigError, match=r"sudoku.eval.repeat: unknown key; did you mean "
                                          r"'repeats'\?"):
        main(["config", "check", str(REPO / "config/config.yaml"), str(tmp_path / "bad.yaml")])


# Every bad config file of the workflow tests, through check_config (what the Snakefile
# runs before any job) on config.yaml + the scale file + the user's file, merged as
# Snakemake merges them (the user's file over both).
@pytest.mark.parametrize("override, key", [
    ("sudoku: {sigma: {esopt: {kind: cosine, sigma_0: -1.0e-3, sigma_T: 1.0e-4}}}",
     "sudoku.sigma.esopt.sigma_0: must be > 0"),
    ("sudoku: {es: {population_size: 1}}", "sudoku.es.population_size: must be >= 2"),
    ("sudoku: {methods: [base, dpo]}", "sudoku.methods: unknown value 'dpo'"),
    ("sudoku: {rl: {group_size: 1}}", "sudoku.rl.group_size: must be >= 2"),
    ("sudoku: {rl: {steps: 0}}", "sudoku.rl.steps: must be >= 1"),
    ("sudoku: {env: chess}", "sudoku.env: env: unknown environment 'chess'"),
    ("sudoku: {landscape: {grid: 4}}", "sudoku.landscape: grid must be odd"),
    ("math: {trace2skill: {iterations: 0}}", "math.trace2skill.iterations: must be >= 1"),
    ("sudoku: {landscape: {method: grpo}}", "sudoku.landscape.method: unknown value 'grpo'"),
    ("scale: huge", "scale: no scale 'huge'"),
    ("sudoku: {sigma: {vanilla_es: {kind: exponential, sigma_0: 1.0e-3}}}",
     "sudoku.sigma.vanilla_es.kind: unknown value 'exponential'"),
    ("runtime: {cluster: kubernetes}", "runtime.cluster: unknown value 'kubernetes'"),
    ("ahd: {methods: [sample, esopt_grpo]}", "ahd.methods: unknown value 'esopt_grpo'"),
    ("ahd: {es: {sigma_0: 0.0}}", "ahd.es.sigma_0: must be > 0"),
    ("ahd: {problems: [tsp_constructive], batch_size: 1}", "ahd.batch_size: must be >= 2"),
    # Issue 16: a typo used to run silently with the default.
    ("populaton_size: 32", "populaton_size: unknown key"),
    ("sudoku: {es: {populaton_size: 32}}",
     "sudoku.es.populaton_size: unknown key; did you mean 'population_size'?"),
    ("sudoku: {eval: {decoder: {temprature: 0.5}}}",
     "sudoku.eval.decoder.temprature: unknown key; did you mean 'temperature'?"),
    ("math: {es: {generatons: 3}}", "math.es.generatons: unknown key; did you mean 'generations'?"),
    ("ahd: {limits: {wall: 5}}", "ahd.limits.wall: unknown key; did you mean 'wall_s'?"),
    ("runtime: {worker: 4}", "runtime.worker: unknown key; did you mean 'workers'?"),
    ("sudoku: {es: {population_size: eight}}",
     "sudoku.es.population_size: expected an integer, got 'eight'"),
    ("sudoku: {es: {alpha: 1e-3}}", "sudoku.es.alpha: expected a number, got the string '1e-3'"),
    ("sudoku: {es: {antithetic: 1}}", "sudoku.es.antithetic: expected true or false, got 1"),
    # Issue 35: a repeated seed ran (and reported) the same run twice; no seed ran nothing.
    ("sudoku: {seeds: [0, 1, 0]}", "sudoku.seeds[2]: 0 is listed twice"),
    ("sudoku: {seeds: []}", "sudoku.seeds: at least one entry is needed, got []"),
    ("countdown: {seeds: [3, 3]}", "countdown.seeds[1]: 3 is listed twice"),
    ("ahd: {seeds: [1, 1]}", "ahd.seeds[1]: 1 is listed twice"),
    ("ahd: {seeds: []}", "ahd.seeds: at least one entry is needed"),
])
def test_bad_config_files_name_the_key(override, key):
    from esopt.pipeline.config import check_config

    user = yaml.safe_load(override)
    cfg = merged(yaml.safe_load((REPO / "config/config.yaml").read_text()), user)
    with pytest.raises(ConfigError) as err:
        cfg = merged(cfg, yaml.safe_load(scale_file(REPO, cfg["scale"]).read_text()), user)
        check_config(cfg)
    assert key in str(err.value), str(err.value)


@pytest.mark.parametrize("seeds", [[0, 0], []])
def test_the_schema_refuses_repeated_or_no_seeds_too(seeds):
    # Snakemake validates the merged config against the schema as well as parsing it.
    import jsonschema

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate({"sudoku": {"seeds": [0, 1]}, "ahd": {"seeds": [2]}})
    for section in ("sudoku", "math", "ahd"):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({section: {"seeds": seeds}})


def test_eval_models_are_evaluated_as_base_with_runs_of_their_own():
    cfg = base_config()
    plain = {s.run_dir: s.to_json() for s in run_specs(cfg)}
    cfg["eval_models"] = ["Qwen/Qwen3.5-27B"]
    specs = run_specs(cfg)
    extra = [s for s in specs if s.eval_model]
    assert {s.horizon for s in extra} == {s.horizon for s in specs} and all(
        s.method == "base" and s.generations == 0 for s in extra)
    assert extra[0].run_dir.split("/")[3] == "base_qwen_qwen3_5_27b"
    assert extra[0].model == "resources/models/hub/Qwen--Qwen3.5-27B"
    base = next(s for s in specs if s.method == "base" and not s.eval_model
                and s.horizon == extra[0].horizon and s.seed == extra[0].seed)
    # Evaluated as base is: the same tasks, decoder and repeats.
    assert (base.eval_decoder, base.eval_tasks, base.eval_repeats) == (
        extra[0].eval_decoder, extra[0].eval_tasks, extra[0].eval_repeats)
    assert RunSpec.from_json(extra[0].to_json()) == extra[0]
    # The other runs are unchanged (same JSON: nothing reruns).
    assert {s.run_dir: s.to_json() for s in specs if not s.eval_model} == plain


@pytest.mark.parametrize("models, message", [
    (["no such model"], r"eval_models\[0\]: model: 'no such model' is neither"),
    (["Qwen/Qwen3.5-27B", "qwen/qwen3.5_27b"], r"eval_models\[1\]: .* name the same runs"),
    (["smollm2-135m-instruct"], r"eval_models\[0\]: .* is the base model"),
])
def test_eval_models_are_validated(models, message):
    cfg = base_config()
    cfg["eval_models"] = models
    with pytest.raises(ConfigError, match=message):
        run_specs(cfg)


def test_bf16_weights_serving_is_the_hf_backends():
    cfg = base_config()
    cfg["serving_dtype"] = "bfloat16-weights"
    assert {s.serving_dtype for s in run_specs(cfg)} == {"bfloat16-weights"}
    cfg["backend"] = "vllm"
    with pytest.raises(ConfigError, match="bfloat16-weights is the hf backend's"):
        run_specs(cfg)
