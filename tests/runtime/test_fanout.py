"""How the fan-out asks SLURM about its array: one squeue of that array only, parsed into
states and running time (a fake squeue records the call; the real cluster is tests/slurm)."""

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time

import psutil
import pytest

from esopt.runtime.fanout import _elapsed_s, _slurm_array_tasks


@pytest.fixture()
def fake_squeue(tmp_path, monkeypatch):
    """A `squeue` on PATH that logs its argv and prints `stdout` (exit `rc`, `stderr`)."""
    def install(stdout: str = "", rc: int = 0, stderr: str = ""):
        (tmp_path / "out.txt").write_text(stdout)
        (tmp_path / "err.txt").write_text(stderr)
        script = tmp_path / "squeue"
        script.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/argv.txt\n"
                          f"cat {tmp_path}/out.txt\ncat {tmp_path}/err.txt >&2\nexit {rc}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        return tmp_path / "argv.txt"
    return install


def test_squeue_is_asked_about_this_array_only(fake_squeue):
    argv = fake_squeue("77_0 RUNNING 1:05\n77_1 PENDING 0:00\n78_0 RUNNING 3:00\n")
    tasks = _slurm_array_tasks("77")
    assert argv.read_text().split()[:5] == ["-h", "-r", "-j", "77", "-o"]
    # another array's line (a filter that failed open) is never taken for this one's
    assert tasks == {"77_0": ("RUNNING", 65.0), "77_1": ("PENDING", 0.0)}


def test_a_forgotten_array_is_empty_and_a_failing_squeue_is_unknown(fake_squeue):
    fake_squeue(rc=1, stderr="slurm_load_jobs error: Invalid job id specified\n")
    assert _slurm_array_tasks("77") == {}  # every task left the queue: lost unless done
    fake_squeue(rc=1, stderr="slurm_load_jobs error: Unable to contact slurm controller\n")
    assert _slurm_array_tasks("77") is None  # no answer: nothing is declared lost


@pytest.mark.parametrize("text, seconds", [("0:07", 7), ("12:34", 754), ("1:02:03", 3723),
                                           ("2-01:00:00", 2 * 86400 + 3600)])
def test_squeue_time_used_in_seconds(text, seconds):
    assert _elapsed_s(text) == seconds


# --- local shards end with the process that fanned them out ---------------------------

DRIVER = """
import sys, time
from pathlib import Path
from esopt.runtime.fanout import map_shards

def shard(path):
    import os
    Path(path).write_text(str(os.getpid()))
    time.sleep(120)

map_shards(shard, [(sys.argv[1] + "/a",), (sys.argv[1] + "/b",)], cluster="local",
           folder=sys.argv[1] + "/submitit")
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_local_shards_stop_when_their_driver_is_killed(tmp_path, sig):
    """Killing a run (snakemake stopping a job, or kill -9) must not leave its shards
    computing: submitit's local controller outlives the driver by design."""
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)])
    pids = []
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            pids = [int(p.read_text()) for p in (tmp_path / "a", tmp_path / "b")
                    if p.exists() and p.read_text()]
            time.sleep(0.2)
        assert len(pids) == 2, "the shards did not start"
        driver.send_signal(sig)
        driver.wait(10)
        deadline = time.monotonic() + 10
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(map(_alive, pids)), "shards outlived their driver"
    finally:
        driver.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
