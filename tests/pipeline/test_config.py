"""Config -> RunSpecs: defaults, overrides, and errors that name the key."""

import copy

import pytest
import yaml

from esopt.pipeline.config import ConfigError, model_dir, run_specs, scale_file
from esopt.pipeline.spec import RunSpec
from tests.workflow.conftest import REPO


def base_config():
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return copy.deepcopy(cfg)


def test_default_config_gives_one_spec_per_horizon_method_seed():
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
