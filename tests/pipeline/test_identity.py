"""A run's identity (what rules hand Snakemake as params) leaves the runtime settings out;
the stages get them back through `--runtime`."""

import json

from esopt.cli import _spec, build_parser
from esopt.pipeline.config import run_specs
from tests.pipeline.test_config import base_config

CLUSTER = {"cluster": "slurm", "workers": 32, "threads_per_worker": 8, "timeout_min": 240,
           "poll_s": 20.0, "slurm": {"partition": "gpu", "gpus_per_node": 1}}


def _specs(runtime: dict):
    cfg = base_config()
    cfg["runtime"] = runtime
    return run_specs(cfg)


def test_runtime_settings_are_not_part_of_a_runs_identity():
    local, cluster = _specs({"cluster": "local", "workers": 1}), _specs(CLUSTER)
    for a, b in zip(local, cluster, strict=True):
        assert a.runtime != b.runtime and a.to_json() != b.to_json()  # recorded...
        assert a.identity_json() == b.identity_json()                 # ...not identity
        assert "runtime" not in json.loads(a.identity_json())


def test_a_stage_gets_its_runtime_back_from_the_command_line():
    spec = _specs(CLUSTER)[0]
    args = build_parser().parse_args(["stage", "reduce", "--spec", spec.identity_json(),
                                      "--runtime", json.dumps(spec.runtime),
                                      "--generation", "0", "--directions", "d", "--out", "o"])
    assert _spec(args) == spec
