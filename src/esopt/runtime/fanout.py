"""Fan-out of shards of work through submitit: local processes, SLURM job arrays, or inline.

Jobs get small arguments (paths, JSON, indices), never models. Every running task has a
deadline (its running time, never its queue wait), and a task that leaves the SLURM queue
without a result is reported lost, so no job can hang a generation.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

CLUSTERS = ("local", "slurm", "debug", "inline")


# A task that is neither done nor in the queue for this long is lost. SLURM drops an array
# task cancelled while still pending from both squeue and sacct, so submitit would wait
# on it forever; the grace covers squeue's brief gaps (a requeue, a slow controller).
LOST_AFTER_S = 10.0
# Seconds between status queries of a SLURM array: one squeue of this array (and one sacct
# through submitit's watcher) per poll; 15-30 s keeps a busy controller's load negligible.
SLURM_POLL_S = 20.0
# Slack past a task's time limit before the fan-out cancels it itself (SLURM or submitit
# normally end or requeue it first).
DEADLINE_GRACE_S = 120.0
RUNNING_STATES = ("RUNNING", "COMPLETING", "STOPPED", "SUSPENDED")
# How often a local shard checks that the process that fanned it out still runs.
DRIVER_POLL_S = 1.0


class FanoutError(RuntimeError):
    """Some shards failed; the message carries each failure's traceback."""


def _elapsed_s(text: str) -> float:
    """squeue's %M (time used: [days-][hours:]minutes:seconds) in seconds."""
    days, _, clock = text.rpartition("-")
    parts = [int(x) for x in clock.split(":")]
    seconds = 0
    for x in parts:
        seconds = seconds * 60 + x
    return seconds + int(days or 0) * 86400


def _slurm_array_tasks(array_id: str) -> dict[str, tuple[str, float]] | None:
    """This array's tasks that SLURM still holds (pending, running, completing, requeued),
    as {<array>_<task>: (state, seconds running in this attempt)}; {} once SLURM no longer
    knows the array; None when squeue cannot answer. Queries only this array (`-j`)."""
    try:
        proc = subprocess.run(["squeue", "-h", "-r", "-j", array_id, "-o", "%i %T %M"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        # squeue -j fails on a job id the controller has forgotten (all tasks purged).
        return {} if "Invalid job id" in proc.stderr else None
    tasks = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0].startswith(f"{array_id}_"):
            tasks[fields[0]] = (fields[1], _elapsed_s(fields[2]))
    return tasks


def map_shards(fn: Callable, args: Sequence[tuple], *, cluster: str = "local",
               folder: str | Path = "logs/submitit", timeout_min: int = 60,
               slurm: dict | None = None, poll_s: float | None = None,
               deadline_s: float | None = None,
               on_poll: Callable[[], None] | None = None) -> list:
    """Run fn(*a) for every a in args, as one job array; return results in order.

    `inline` runs in this process (no submitit); `debug` is submitit's in-process
    executor; `local` runs one subprocess per shard; `slurm` one array task per shard.

    Every `poll_s` (SLURM_POLL_S on SLURM, 1 s elsewhere) the array's state is queried and
    `on_poll` called (e.g. to report progress). The deadline, `deadline_s` (default
    timeout_min plus DEADLINE_GRACE_S), counts running time: on SLURM each task's own time
    in its current attempt, so queue wait, a requeue or a hold never count against it.
    """
    if cluster not in CLUSTERS:
        raise ValueError(f"runtime.cluster: unknown {cluster!r}; choose one of {list(CLUSTERS)}")
    if not args:
        return []
    if cluster == "inline":
        return [fn(*a) for a in args]
    import submitit

    if poll_s is None:
        poll_s = SLURM_POLL_S if cluster == "slurm" else 1.0
    if deadline_s is None:
        deadline_s = timeout_min * 60 + DEADLINE_GRACE_S
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    params = {"timeout_min": timeout_min}
    if cluster == "slurm":
        # None removes a setting (a local test cluster has no GPUs to ask for).
        params.update({f"slurm_{k}" if not k.startswith("slurm_") else k: v
                       for k, v in (slurm or {}).items() if v is not None})
        params["slurm_array_parallelism"] = len(args)
    executor.update_parameters(**params)
    if cluster == "local":
        fn = functools.partial(_while_alive, fn, os.getpid(), _process_key(os.getpid()))
    jobs = executor.map_array(fn, *zip(*args, strict=True))
    array_id = jobs[0].job_id.split("_")[0]
    log.info("submitted %d shard(s) to %s: %s (status every %g s)", len(jobs), cluster,
             array_id, poll_s)
    lost = _wait(jobs, cluster, poll_s, deadline_s, on_poll)
    results, failures = [], []
    for j in jobs:
        if j.job_id in lost:  # result() would wait on it forever
            failures.append(f"--- shard {j.job_id} ---\nleft the SLURM queue without a "
                            "result (cancelled or killed before it could report)")
            results.append(None)
            continue
        try:
            results.append(j.result())
        except Exception as e:  # noqa: BLE001 - collect every shard's failure
            failures.append(f"--- shard {j.job_id} ---\n{e}")
            results.append(None)
    if failures:
        raise FanoutError(f"{len(failures)} of {len(jobs)} shard(s) failed:\n" +
                          "\n".join(failures))
    return results


def _process_key(pid: int) -> float | None:
    """A live process's identity: its start time (a recycled pid gets another); None once
    it has ended (a zombie has ended)."""
    try:
        process = psutil.Process(pid)
        return None if process.status() == psutil.STATUS_ZOMBIE else process.create_time()
    except psutil.NoSuchProcess:
        return None


def _while_alive(fn: Callable, driver: int, key: float | None, *args):
    """Run fn(*args) in a local shard, ending the shard when the process that fanned it out
    ends: submitit's local controller is built to outlive that process, so a stopped run
    (snakemake killing a job, kill -9, Ctrl-C) would otherwise leave its shards computing."""
    def watch():
        while _process_key(driver) == key:
            time.sleep(DRIVER_POLL_S)
        log.error("the fan-out's process %d ended: stopping this shard", driver)
        os._exit(1)

    threading.Thread(target=watch, name="driver-watch", daemon=True).start()
    return fn(*args)


def _wait(jobs: Sequence, cluster: str, poll_s: float, deadline_s: float,
          on_poll: Callable[[], None] | None) -> set[str]:
    """Poll until every task is done or lost (returned); cancel the array and raise when a
    task has run (on SLURM: in its current attempt) past deadline_s."""
    array_id = jobs[0].job_id.split("_")[0]
    started = time.monotonic()
    absent_since: dict[str, float] = {}
    lost: set[str] = set()
    while True:
        overdue = []
        if cluster == "slurm":
            # Refresh the array's states now (one sacct call): submitit's watcher would
            # otherwise wait up to a minute before it notices a cancelled task.
            jobs[0].watcher.update()
            tasks = _slurm_array_tasks(array_id)
            if tasks is not None:
                lost = _lost_tasks(jobs, tasks, absent_since)
                overdue = [t for t, (state, ran_s) in tasks.items()
                           if state in RUNNING_STATES and ran_s > deadline_s]
        elif time.monotonic() - started > deadline_s:  # local processes never queue
            overdue = [j.job_id for j in jobs if not j.done()]
        if on_poll is not None:
            on_poll()
        if all(j.job_id in lost or j.done() for j in jobs):
            return lost
        if overdue:
            for j in jobs:
                j.cancel(check=False)
            raise FanoutError(f"shard(s) {sorted(overdue)} ran past the deadline "
                              f"({deadline_s:g} s of running time); cancelled the array")
        time.sleep(poll_s)


def _lost_tasks(jobs: Sequence, queued: dict, absent_since: dict[str, float]) -> set[str]:
    """Ids of the tasks that have been neither done nor queued for LOST_AFTER_S."""
    now = time.monotonic()
    for j in jobs:
        if j.job_id in queued or j.done():
            absent_since.pop(j.job_id, None)
        else:
            absent_since.setdefault(j.job_id, now)
    return {i for i, t in absent_since.items() if now - t > LOST_AFTER_S}
