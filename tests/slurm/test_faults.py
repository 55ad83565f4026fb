"""Fault handling of the SLURM fan-out. Thread joins are hang guards, not timing claims
(the scheduling overhead is measured by benchmarks/slurm_overhead.py)."""

import os
import re
import subprocess
import threading
import time

import pytest

from esopt.pipeline.lineage import direction_path
from esopt.pipeline.stages import evaluate_directions
from esopt.runtime.fanout import FanoutError, map_shards
from tests.conftest import assert_reports_injected_failure
from tests.support.faults import fault_environment

pytestmark = pytest.mark.slurm


def _run(spec, out, **faults):
    env = fault_environment(**faults)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        evaluate_directions(spec, 0, spec.model, str(out), str(out) + ".done.json")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _mtimes(out, n):
    return {i: direction_path(out, i).stat().st_mtime_ns for i in range(n)
            if direction_path(out, i).exists()}


def _array_tasks(folder) -> list[str]:
    """Ids (<array>_<task>) of the array tasks whose batch script lives under folder."""
    q = subprocess.run(["squeue", "-h", "-r", "-o", "%i %o"], capture_output=True, text=True,
                       timeout=10).stdout
    return [line.split()[0] for line in q.splitlines() if str(folder) in line]


def _wait_for_task(folder, suffix: str, timeout_s: float = 60) -> str:
    """The id of the array task (under folder) ending in suffix, once squeue lists it (a
    single squeue can come back empty while the controller is busy: poll, don't sample)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ids = [i for i in _array_tasks(folder) if i.endswith(suffix)]
        except subprocess.TimeoutExpired:
            ids = []
        if ids:
            return ids[0]
        time.sleep(0.2)
    raise AssertionError(f"no array task *{suffix} under {folder} in squeue")


def _wait_for_tasks(folder, n: int, timeout_s: float = 30) -> list[str]:
    """The sorted ids of the array tasks under folder, once squeue lists n of them (or
    what it lists when timeout_s has passed)."""
    deadline = time.monotonic() + timeout_s
    ids = []
    while len(ids) < n and time.monotonic() < deadline:
        ids = sorted(_array_tasks(folder))
        time.sleep(0.2)
    return ids


def test_a_crashing_direction_fails_the_generation_with_its_traceback(smoke_spec, tmp_path):
    out = tmp_path / "directions"
    with pytest.raises(FanoutError) as err:
        _run(smoke_spec, out, fail_direction=1)
    assert_reports_injected_failure(str(err.value), 1)
    done = _mtimes(out, 4)
    assert 1 not in done and {0, 2} <= set(done)  # the other shard finished its work
    _run(smoke_spec, out)  # rerun: only the missing directions are evaluated
    after = _mtimes(out, 4)
    assert set(after) == {0, 1, 2, 3}
    assert all(after[i] == done[i] for i in done)


def test_a_cancelled_array_task_fails_the_generation_and_a_rerun_recovers(smoke_spec, tmp_path):
    out = tmp_path / "directions"
    errors = []

    def run():
        try:
            # 4 s per direction: task 1 (load + 2 directions) outlives the cancel, sent as
            # soon as squeue lists it (pending or running)
            _run(smoke_spec, out, delay_s=4)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    task = _wait_for_task(out.parent, "_1")
    subprocess.run(["scancel", task], check=True, timeout=10)
    t.join(timeout=300)  # hang guard (the fan-out's own deadline is timeout_min)
    assert not t.is_alive(), "the generation kept waiting on a cancelled task"
    assert len(errors) == 1 and isinstance(errors[0], FanoutError), errors
    msg = str(errors[0])
    assert "1 of 2 shard(s) failed" in msg and f"--- shard {task} ---" in msg, msg
    assert "CANCELLED" in msg or "left the SLURM queue" in msg, msg
    _run(smoke_spec, out)  # rerun recovers
    assert set(_mtimes(out, 4)) == {0, 1, 2, 3}


def test_an_array_task_cancelled_while_pending_is_reported_lost(tmp_path):
    # SLURM drops such a task from squeue and sacct at once: submitit alone waits forever.
    import operator

    held = {"partition": "debug", "cpus_per_task": 1, "mem_gb": 1,
            "additional_parameters": {"hold": True}}
    errors, results = [], []

    def run():
        try:
            results.append(map_shards(operator.add, [(1, 2), (3, 4)], cluster="slurm",
                                      folder=tmp_path / "submitit", timeout_min=2, slurm=held,
                                      poll_s=0.5))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ids = _wait_for_tasks(tmp_path, 2)
    assert len(ids) == 2, ids
    subprocess.run(["scancel", ids[1]], check=True, timeout=10)
    subprocess.run(["scontrol", "release", ids[0]], check=True, timeout=10)
    t.join(timeout=300)  # hang guard, past map_shards' own deadline (timeout_min + 2 min)
    assert not t.is_alive(), "the fan-out kept waiting on a task SLURM no longer holds"
    assert not results and len(errors) == 1 and isinstance(errors[0], FanoutError)
    msg = str(errors[0])
    # Reported lost (not the fan-out's deadline: "shards not done after ...").
    assert "1 of 2 shard(s) failed" in msg and ids[1] in msg and "left the SLURM queue" in msg


def test_a_preempted_task_requeues_and_resumes(smoke_spec, tmp_path):
    out = tmp_path / "directions"
    errors = []

    def run():
        try:
            _run(smoke_spec, out, delay_s=8)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    first = direction_path(out, 0)  # shard 0 = directions 0 and 2
    deadline = time.monotonic() + 120
    while not first.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.exists()
    written = first.stat().st_mtime_ns
    task = _wait_for_task(out.parent, "_0")
    # What SLURM sends before preemption or the time limit; submitit requeues the task.
    subprocess.run(["scancel", "--signal=USR2", task], check=True, timeout=10)
    t.join(timeout=300)
    assert not t.is_alive() and not errors, errors
    assert first.stat().st_mtime_ns == written  # not redone after the requeue
    import pyarrow.parquet as pq

    workers = {i: pq.read_table(direction_path(out, i)).column("worker")[0].as_py()
               for i in (0, 2)}
    assert workers[0] != workers[2]  # direction 2 ran in the requeued process


def _in_thread(fn):
    """Start fn in a daemon thread; return (thread, results, errors)."""
    results, errors = [], []

    def run():
        try:
            results.append(fn())
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, results, errors


def test_queue_wait_does_not_count_against_the_deadline(tmp_path):
    # Held in the queue for twice the deadline, then released: the array still completes.
    import operator

    held = {"partition": "debug", "cpus_per_task": 1, "mem_gb": 1,
            "additional_parameters": {"hold": True}}
    t, results, errors = _in_thread(lambda: map_shards(
        operator.add, [(1, 2), (3, 4)], cluster="slurm", folder=tmp_path / "submitit",
        timeout_min=1, slurm=held, poll_s=0.5, deadline_s=3))
    ids = _wait_for_tasks(tmp_path, 2)
    assert len(ids) == 2, ids
    time.sleep(6)  # pending for 2x deadline_s
    assert t.is_alive() and not errors, errors
    subprocess.run(["scontrol", "release", ids[0].split("_")[0]], check=True, timeout=10)
    t.join(timeout=120)  # hang guard
    assert not t.is_alive() and not errors, errors
    assert results == [[3, 7]]


def test_a_task_running_past_the_deadline_is_cancelled(tmp_path):
    t0 = time.monotonic()
    small = {"partition": "debug", "cpus_per_task": 1, "mem_gb": 1}
    t, results, errors = _in_thread(lambda: map_shards(
        time.sleep, [(120,), (0,)], cluster="slurm", folder=tmp_path / "submitit",
        timeout_min=5, slurm=small, poll_s=0.5, deadline_s=3))
    t.join(timeout=90)  # hang guard: the task would sleep 120 s
    assert not t.is_alive() and not results and len(errors) == 1, (results, errors)
    msg = str(errors[0])
    assert isinstance(errors[0], FanoutError) and "ran past the deadline" in msg, msg
    assert time.monotonic() - t0 < 60
    overdue = re.search(r"\['(\d+_0)'\]", msg).group(1)  # only the sleeping task, named
    deadline = time.monotonic() + 30  # ...and the fan-out cancelled it (sacct lags a bit)
    state = ""
    while "CANCELLED" not in state and time.monotonic() < deadline:
        state = subprocess.run(["sacct", "-n", "-X", "-j", overdue, "-o", "State"],
                               capture_output=True, text=True, timeout=10).stdout
        time.sleep(0.5)
    assert "CANCELLED" in state, state
