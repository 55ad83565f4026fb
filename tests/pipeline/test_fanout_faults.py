"""A crashing direction in the local fan-out (one subprocess per shard): the generation
fails with the worker's own exception and traceback, and a rerun scores only the missing
directions. The same assertion runs against SLURM in tests/slurm/test_faults.py."""

import pytest

from esopt.pipeline.lineage import direction_path
from esopt.pipeline.stages import evaluate_directions
from esopt.runtime.fanout import FanoutError
from tests.conftest import assert_reports_injected_failure, smoke_run_spec
from tests.support.faults import fault_environment

LOCAL = {"cluster": "local", "workers": 2, "threads_per_worker": 1, "eval_threads": 1,
         "timeout_min": 10}


def test_a_crashing_direction_fails_the_local_generation_with_its_traceback(
        tiny_dir, tmp_path, monkeypatch):
    spec = smoke_run_spec(tiny_dir, LOCAL)
    out = tmp_path / "directions"
    for k, v in fault_environment(fail_direction=1).items():  # the shard of directions 1, 3
        monkeypatch.setenv(k, v)
    with pytest.raises(FanoutError) as err:
        evaluate_directions(spec, 0, str(tiny_dir), str(out), str(out) + ".done.json")
    assert_reports_injected_failure(str(err.value), 1)
    done = {i for i in range(4) if direction_path(out, i).exists()}
    assert done == {0, 2}  # the other shard finished; direction 3 came after the crash
    before = {i: direction_path(out, i).stat().st_mtime_ns for i in done}
    monkeypatch.delenv("ESOPT_FAIL_DIRECTION")
    evaluate_directions(spec, 0, str(tiny_dir), str(out), str(out) + ".done.json")
    assert all(direction_path(out, i).exists() for i in range(4))
    assert all(direction_path(out, i).stat().st_mtime_ns == before[i] for i in done)
