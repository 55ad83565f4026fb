"""Resolving the config's `ahd` section into runs."""

import pytest

from esopt.pipeline.ahd import AHDConfigError, AHDRun, ahd_runs

SECTION = {"problems": ["tsp_constructive", "kp_constructive"],
           "methods": ["sample", "esopt_sample", "esopt_eoh"], "seeds": [0, 1],
           "budget": 40, "batch_size": 8, "pop_size": 4,
           "es": {"alpha": 1e-3, "sigma_0": 1e-3, "sigma_T": 1e-4}}


def test_one_run_per_problem_method_and_seed_with_its_es_schedule():
    runs = ahd_runs(SECTION, "resources/models/m")
    assert len(runs) == 2 * 3 * 2
    by_key = {(r.problem, r.method, r.seed): r for r in runs}
    sample = by_key[("kp_constructive", "esopt_sample", 1)].search_config()
    assert sample.es.population_size == 8 and sample.es.run_seed == 1
    assert sample.es.sigma.generations == 40 // 8 == sample.es_updates
    eoh = by_key[("kp_constructive", "esopt_eoh", 0)].search_config()
    assert eoh.es.population_size == 4 and eoh.es_updates == 2 * (40 // 16)
    assert by_key[("tsp_constructive", "sample", 0)].search_config().es is None
    run = by_key[("tsp_constructive", "sample", 0)]
    assert run.run_dir == "results/ahd/tsp_constructive/sample/seed0"
    assert AHDRun.from_json(run.to_json()) == run


@pytest.mark.parametrize("change, message", [
    ({"problems": ["vrp"]}, "ahd.problems: unknown value 'vrp'"),
    ({"methods": ["grpo"]}, "ahd.methods: unknown value 'grpo'"),
    ({"seeds": []}, "ahd.seeds: at least one entry"),
    ({"es": {"sigma_0": -1.0}}, "sigma"),
    ({"batch_size": 1}, "ahd.batch_size: must be >= 2"),
    ({"budjet": 10}, "ahd.budjet: unknown key; did you mean 'budget'?"),
])
def test_bad_sections_name_the_key(change, message):
    with pytest.raises(AHDConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ahd_runs({**SECTION, **change}, "m")


def test_eoh_mutation_factor_sets_the_es_directions():
    (run,) = ahd_runs({**SECTION, "problems": ["cvrp_aco"], "methods": ["esopt_eoh"],
                       "seeds": [0], "budget": 2000, "pop_size": 10, "mutation_factor": 3},
                      "m")
    cfg = run.search_config()
    assert cfg.es.population_size == 30 and cfg.es.sigma.generations == 50 == cfg.es_updates


def test_disabled_or_missing_section_has_no_runs():
    assert ahd_runs({}, "m") == [] and ahd_runs({**SECTION, "enabled": False}, "m") == []


def test_the_config_schema_lists_exactly_these_methods_and_problems():
    from esopt.ahd.problems import PROBLEMS
    from esopt.pipeline.ahd import AHD_METHODS
    from esopt.pipeline.sections import AHD_METHODS as SCHEMA_METHODS
    from esopt.pipeline.sections import AHD_PROBLEMS

    assert set(SCHEMA_METHODS) == set(AHD_METHODS) and set(AHD_PROBLEMS) == set(PROBLEMS)


def test_runs_serve_on_the_configured_backend(monkeypatch, tmp_path):
    """The search loads its proposer through the backend loader with the config's backend,
    serving dtype and device (not a hard-coded HF float32 load); the runtime's fan-out
    settings are not part of the run."""
    from esopt.backends import factory
    from esopt.pipeline import ahd, config

    cfg = {"experiments": ["ahd"], "backend": "vllm", "serving_dtype": "bfloat16",
           "runtime": {"device": "cuda:1", "workers": 7, "vllm": {"max_model_len": 4096}},
           "ahd": {**SECTION, "problems": ["tsp_constructive"], "methods": ["sample"],
                   "seeds": [0]}}
    (run,) = config.ahd_run_list(cfg)
    assert (run.backend, run.serving_dtype) == ("vllm", "bfloat16")
    assert run.serving == {"device": "cuda:1", "vllm": {"max_model_len": 4096}}
    assert AHDRun.from_json(run.to_json()) == run
    loaded = []

    class Loaded(Exception):
        pass

    def fake_load(checkpoint, backend, serving_dtype, runtime=None):
        loaded.append((checkpoint, backend, serving_dtype, runtime))
        raise Loaded

    monkeypatch.setattr(factory, "load_policy", fake_load)
    with pytest.raises(Loaded):
        ahd.run_ahd(run, tmp_path)
    assert loaded == [(run.model, "vllm", "bfloat16", run.serving)]
