"""Fan-out of shards of work through submitit: local processes, SLURM job arrays, or inline.

Jobs get small arguments (paths, JSON, indices), never models. Every wait has a
deadline, so a lost job can never hang a generation.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

CLUSTERS = ("local", "slurm", "debug", "inline")


# A task that is neither done nor in the queue for this long is lost. SLURM drops an array
# task cancelled while still pending from both squeue and sacct, so submitit would wait
# on it forever; the grace covers squeue's brief gaps (a requeue, a slow controller).
LOST_AFTER_S = 10.0


class FanoutError(RuntimeError):
    """Some shards failed; the message carries each failure's traceback."""


def _slurm_queued_tasks(array_id: str) -> set[str] | None:
    """Ids (<array>_<task>) of this array's tasks that SLURM still holds (pending,
    running, completing, requeued), or None when squeue cannot answer."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {t for t in out.split() if t.startswith(f"{array_id}_")}


def map_shards(fn: Callable, args: Sequence[tuple], *, cluster: str = "local",
               folder: str | Path = "logs/submitit", timeout_min: int = 60,
               slurm: dict | None = None, poll_s: float = 1.0,
               on_poll: Callable[[], None] | None = None) -> list:
    """Run fn(*a) for every a in args, as one job array; return results in order.

    `on_poll` is called while waiting (every `poll_s`), e.g. to report progress.

    `inline` runs in this process (no submitit); `debug` is submitit's in-process
    executor; `local` runs one subprocess per shard; `slurm` one array task per shard.
    """
    if cluster not in CLUSTERS:
        raise ValueError(f"runtime.cluster: unknown {cluster!r}; choose one of {list(CLUSTERS)}")
    if not args:
        return []
    if cluster == "inline":
        return [fn(*a) for a in args]
    import submitit

    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    params = {"timeout_min": timeout_min}
    if cluster == "slurm":
        # None removes a setting (a local test cluster has no GPUs to ask for).
        params.update({f"slurm_{k}" if not k.startswith("slurm_") else k: v
                       for k, v in (slurm or {}).items() if v is not None})
        params["slurm_array_parallelism"] = len(args)
    executor.update_parameters(**params)
    jobs = executor.map_array(fn, *zip(*args, strict=True))
    log.info("submitted %d shard(s) to %s: %s", len(jobs), cluster, jobs[0].job_id.split("_")[0])
    deadline = time.monotonic() + timeout_min * 60 + 120
    absent_since: dict[str, float] = {}
    lost: set[str] = set()
    while True:
        if cluster == "slurm":
            # Refresh the array's states now (one sacct call): submitit's watcher would
            # otherwise wait up to a minute before it notices a cancelled task.
            jobs[0].watcher.update()
            lost = _lost_tasks(jobs, absent_since)
        if on_poll is not None:
            on_poll()
        if all(j.job_id in lost or j.done() for j in jobs):
            break
        if time.monotonic() > deadline:
            for j in jobs:
                j.cancel(check=False)
            raise FanoutError(f"shards not done after {timeout_min} min; cancelled")
        time.sleep(poll_s)
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


def _lost_tasks(jobs: Sequence, absent_since: dict[str, float]) -> set[str]:
    """Ids of the tasks that have been neither done nor queued for LOST_AFTER_S."""
    queued = _slurm_queued_tasks(jobs[0].job_id.split("_")[0])
    if queued is None:
        return set()
    now = time.monotonic()
    for j in jobs:
        if j.job_id in queued or j.done():
            absent_since.pop(j.job_id, None)
        else:
            absent_since.setdefault(j.job_id, now)
    return {i for i, t in absent_since.items() if now - t > LOST_AFTER_S}
