"""Run untrusted, LLM-written code in a child process and get back a number or a typed failure.

The layers, outermost first (each one catches what the next one misses):

1. A child process in its own session and process group, killed as a group (SIGKILL)
   when it returns, when it crashes and when the wall-clock timeout expires.
2. Where unprivileged user namespaces work (Linux), the child runs under
   `unshare --user --net`: a network namespace with no interfaces, so no socket
   reaches anything.
3. Resource limits the child sets on itself before any untrusted line runs, hard and
   soft alike so the code cannot raise them: CPU seconds, address space, file size
   (bounds anything written, stdout included) and no core dumps.
4. A working directory that is a fresh temporary directory, removed afterwards.
5. A `sys.addaudithook` guard (hooks cannot be removed once installed) that refuses
   process creation, signals, sockets, ctypes and any write, rename or removal outside the
   working directory. A refused action is an error inside the code *and* is recorded, so
   code that catches the error is still scored `forbidden`.

The untrusted code never computes its own score: a trusted harness (an importable
`module:function`) runs it and returns plain data (tours, item choices, sets), and the
caller validates and scores that data in the parent process.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Outcome(str, enum.Enum):
    """How a sandboxed run ended; everything except `ok` is a failure."""

    OK = "ok"
    SYNTAX_ERROR = "syntax_error"
    EXCEPTION = "exception"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    WRONG_TYPE = "wrong_type"
    INVALID_SOLUTION = "invalid_solution"
    FORBIDDEN = "forbidden"
    CRASH = "crash"  # died without a result: a signal, os._exit, a corrupted result channel


class HeuristicFailure(Exception):
    """Raised by a harness (in the child) or a validator (in the parent) with its outcome."""

    outcome = Outcome.EXCEPTION


class WrongType(HeuristicFailure):
    outcome = Outcome.WRONG_TYPE


class InvalidSolution(HeuristicFailure):
    outcome = Outcome.INVALID_SOLUTION


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. Address space includes numpy's import (~0.3 GB virtual)."""

    wall_s: float = 30.0
    cpu_s: int = 30
    memory_mb: int = 1536
    file_mb: int = 4  # largest file the child may write, captured stdout/stderr included
    output_chars: int = 4000  # stdout/stderr kept in the result (head), the rest counted
    result_mb: int = 64  # largest result the parent reads back

    def __post_init__(self):
        for name in ("wall_s", "cpu_s", "memory_mb", "file_mb", "output_chars", "result_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {getattr(self, name)}")


@dataclass
class SandboxResult:
    outcome: Outcome
    value: Any = None
    detail: str = ""
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    network_isolated: bool = False
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


@functools.lru_cache(maxsize=1)
def network_namespace_prefix() -> tuple[str, ...]:
    """`unshare` argv prefix that gives the child an empty network namespace, or ()."""
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return ()
    variants = (("--user", "--map-current-user", "--net"), ("--user", "--map-root-user", "--net"))
    for flags in variants:
        try:
            probe = subprocess.run([exe, *flags, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return (exe, *flags)
    return ()


# The child imports the parent's own esopt (this source tree), not whichever one the
# interpreter's site-packages names: `-I` ignores PYTHONPATH, so the path is put in here.
_SRC_ROOT = str(Path(__file__).resolve().parents[2])
_CHILD_BOOT = (f"import sys; sys.path.insert(0, {_SRC_ROOT!r}); import runpy; "
               "runpy.run_module('esopt.runtime.sandbox_child', run_name='__main__')")


def _child_env() -> dict[str, str]:
    # One BLAS thread: the sandbox is a scoring loop, and threads multiply virtual memory.
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _read_capped(fd: int, cap: int, sink: list[bytes]) -> None:
    """Drain a pipe, keeping at most `cap` bytes (a flood must not fill the parent)."""
    kept = 0
    with os.fdopen(fd, "rb", closefd=True) as f:
        while chunk := f.read(1 << 16):
            if kept < cap:
                sink.append(chunk[: cap - kept])
            kept += len(chunk)
    if kept > cap:
        sink.append(b"\0TRUNCATED")


def _head(path: Path, chars: int) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(chars * 4 + 4)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return text if len(text) <= chars else text[:chars] + "...[truncated]"


def run_sandboxed(
    source: str,
    harness: str,
    payload: Any = None,
    limits: SandboxLimits = SandboxLimits(),
    *,
    isolate_network: bool = True,
    files: dict[str, bytes] | None = None,
) -> SandboxResult:
    """Execute `source`, then `harness(namespace, payload)` in a sandboxed child process.

    `harness` is "package.module:function", imported by the child before the guard goes
    up; its return value must be JSON-serialisable and comes back as `result.value`.
    `files` (plain names -> bytes) are written into the child's working directory first
    (the page image of a document task).
    """
    if ":" not in harness:
        raise ValueError(f"harness must be 'module:function', got {harness!r}")
    for name in files or {}:
        if not name or name != Path(name).name or name in (".", ".."):
            raise ValueError(f"sandbox files: {name!r} is not a plain file name")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="esopt-sandbox-") as tmp:
        tmp = Path(tmp)
        work = tmp / "work"
        work.mkdir()
        for name, data in (files or {}).items():
            (work / name).write_bytes(data)
        job = {"source": source, "harness": harness, "payload": payload, "work": str(work),
               "limits": limits}
        (tmp / "job.pkl").write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        prefix = network_namespace_prefix() if isolate_network else ()
        read_fd, write_fd = os.pipe()
        argv = [*prefix, sys.executable, "-I", "-c", _CHILD_BOOT, str(tmp / "job.pkl"),
                str(write_fd)]
        with open(tmp / "stdout", "wb") as out, open(tmp / "stderr", "wb") as err:
            try:
                proc = subprocess.Popen(
                    argv, cwd=work, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    env=_child_env(), pass_fds=(write_fd,), start_new_session=True,
                )
            finally:
                os.close(write_fd)
            chunks: list[bytes] = []
            reader = threading.Thread(
                target=_read_capped, args=(read_fd, limits.result_mb << 20, chunks), daemon=True
            )
            reader.start()
            timed_out = False
            try:
                proc.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # The whole group: whatever the code managed to start dies with it.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
                reader.join(timeout=10)
        result = _decode(b"".join(chunks), proc.returncode, timed_out, limits)
        result.stdout = _head(tmp / "stdout", limits.output_chars) + result.stdout
        result.stderr = _head(tmp / "stderr", limits.output_chars) + result.stderr
        result.network_isolated = bool(prefix)
    result.wall_s = time.perf_counter() - start
    return result


def _decode(raw: bytes, returncode: int, timed_out: bool, limits: SandboxLimits) -> SandboxResult:
    if timed_out:
        return SandboxResult(Outcome.TIMEOUT, detail=f"wall-clock limit {limits.wall_s} s")
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL) and not raw:
        # RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one.
        return SandboxResult(Outcome.TIMEOUT, detail=f"CPU limit {limits.cpu_s} s")
    if not raw or raw.endswith(b"\0TRUNCATED"):
        why = f"exit status {returncode}" if raw == b"" else "result larger than the cap"
        return SandboxResult(Outcome.CRASH, detail=f"no result: {why}")
    try:
        message = json.loads(raw.decode("utf-8").splitlines()[-1])
        outcome = Outcome(message["outcome"])
    except (ValueError, KeyError, IndexError, UnicodeDecodeError) as e:
        return SandboxResult(Outcome.CRASH, detail=f"unreadable result: {e}")
    return SandboxResult(
        outcome,
        value=message.get("value"),
        detail=str(message.get("detail", ""))[:2000],
        stdout=str(message.get("stdout", "")),
        stderr=str(message.get("stderr", "")),
        violations=[str(v) for v in message.get("violations", [])][:20],
    )


def call_entry(namespace: dict, payload: dict) -> Any:
    """Generic harness: call `payload["entry"](*payload["args"])` from the untrusted code."""
    entry = namespace.get(payload["entry"])
    if not callable(entry):
        raise WrongType(f"the code defines no function {payload['entry']!r}")
    return entry(*payload.get("args", ()), **payload.get("kwargs", {}))


def run_script(namespace: dict, payload: Any) -> None:
    """Harness for scripts (the math tool): the code ran at exec time; its prints are the
    output (`result.stdout`)."""
    return None
