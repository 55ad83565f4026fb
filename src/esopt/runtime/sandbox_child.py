"""The child side of `esopt.runtime.sandbox`: limits, guard, run, one JSON line back.

Run as `python -I -m esopt.runtime.sandbox_child JOB.pkl RESULT_FD`. Everything trusted
(the job file, the harness module, numpy) is loaded before the guard goes up; after that
only the untrusted code and the harness run, and the result leaves through RESULT_FD.
"""

from __future__ import annotations

import builtins
import importlib
import io
import json
import os
import pickle
import resource
import sys
import threading
import traceback

from esopt.runtime.sandbox import HeuristicFailure, Outcome

# Refused outright, whatever the arguments: new processes, signals, native code, network.
_FORBIDDEN_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "resource.setrlimit", "resource.prlimit", "sys.addaudithook", "webbrowser.open",
    "urllib.Request", "os.startfile", "os.setuid", "os.setgid",
})
_FORBIDDEN_PREFIXES = ("socket.", "ctypes.", "_ctypes.", "ftplib.", "smtplib.", "http.", "imaplib.",
                       "nntplib.", "poplib.", "telnetlib.")
# Path arguments that may only point inside the working directory (writes, renames, removals).
_PATH_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1), "os.mkdir": (0,),
    "os.symlink": (0, 1), "os.link": (0, 1), "os.chmod": (0,), "os.chown": (0,),
    "os.truncate": (0,), "os.utime": (0,), "os.chdir": (0,), "os.chflags": (0,),
    "os.lchflags": (0,), "os.lchmod": (0,), "os.lchown": (0,), "shutil.rmtree": (0,),
    "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (0, 1),
    "shutil.chown": (0,), "shutil.make_archive": (0,), "shutil.unpack_archive": (1,),
}
# Imported before the guard goes up (numpy loads native code through ctypes), so that the
# untrusted code's own `import numpy as np` is a lookup, not a refused dlopen.
PRELOAD = ("numpy", "math", "random", "itertools", "heapq", "collections", "functools",
           "statistics", "operator", "bisect", "copy")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class SandboxViolation(PermissionError):
    """An action the sandbox refuses; raised inside the untrusted code."""


class _Guard:
    def __init__(self, work_dir: str):
        self.root = os.path.realpath(work_dir)
        self.violations: list[str] = []
        self._busy = threading.local()

    def _inside(self, path) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor: its opening was checked
        try:
            path = os.fsdecode(path)
        except TypeError:
            return False
        real = os.path.realpath(path)
        return real == self.root or real.startswith(self.root + os.sep)

    def _refuse(self, event: str, detail: str):
        self.violations.append(f"{event}: {detail}"[:300])
        raise SandboxViolation(f"sandbox: {event} is not allowed ({detail})"[:300])

    def __call__(self, event: str, args: tuple):
        if getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            self._check(event, args)
        finally:
            self._busy.on = False

    def _check(self, event: str, args: tuple):
        if event in _FORBIDDEN_EVENTS or event.startswith(_FORBIDDEN_PREFIXES):
            self._refuse(event, repr(args)[:120])
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes and not self._inside(path):
                self._refuse(event, f"write to {path!r}")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and args[i] is not None and not self._inside(args[i]):
                    self._refuse(event, f"path {args[i]!r}")


class _BoundedText(io.TextIOBase):
    """A stdout/stderr that keeps the first `limit` characters and counts the rest."""

    def __init__(self, limit: int):
        self.limit, self.parts, self.kept, self.dropped = limit, [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        s = str(s)
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(s[:room])
            self.kept += min(room, len(s))
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def text(self) -> str:
        tail = f"...[{self.dropped} more characters dropped]" if self.dropped else ""
        return "".join(self.parts) + tail


def _set_limits(limits) -> None:
    def both(kind, value):
        resource.setrlimit(kind, (value, value))

    both(resource.RLIMIT_CPU, int(limits.cpu_s))
    both(resource.RLIMIT_AS, int(limits.memory_mb) << 20)
    both(resource.RLIMIT_FSIZE, int(limits.file_mb) << 20)
    both(resource.RLIMIT_CORE, 0)


def main(argv: list[str]) -> int:
    job_path, result_fd = argv[0], int(argv[1])
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    result = os.fdopen(result_fd, "w", encoding="utf-8")  # opened before the guard goes up
    _set_limits(job["limits"])
    module_name, func_name = job["harness"].split(":")
    harness = getattr(importlib.import_module(module_name), func_name)
    for name in PRELOAD:
        importlib.import_module(name)
    out, err = _BoundedText(job["limits"].output_chars), _BoundedText(job["limits"].output_chars)
    guard = _Guard(job["work"])
    message: dict = {}
    try:
        code = compile(job["source"], "<heuristic>", "exec")
    except (SyntaxError, ValueError) as e:
        message = {"outcome": Outcome.SYNTAX_ERROR.value, "detail": f"{type(e).__name__}: {e}"}
    else:
        sys.stdout, sys.stderr = out, err
        sys.addaudithook(guard)
        try:
            namespace: dict = {"__name__": "heuristic", "__builtins__": builtins}
            exec(code, namespace)
            message = {"outcome": Outcome.OK.value, "value": harness(namespace, job["payload"])}
        except HeuristicFailure as e:
            message = {"outcome": e.outcome.value, "detail": str(e)}
        except MemoryError as e:
            message = {"outcome": Outcome.MEMORY.value, "detail": f"MemoryError: {e}"}
        except SandboxViolation as e:
            message = {"outcome": Outcome.FORBIDDEN.value, "detail": str(e)}
        except BaseException as e:  # noqa: BLE001 - SystemExit and friends are failures too
            tb = traceback.format_exception(type(e), e, e.__traceback__, limit=-3)
            message = {"outcome": Outcome.EXCEPTION.value, "detail": "".join(tb)[-1500:]}
        if guard.violations and message["outcome"] == Outcome.OK.value:
            message = {"outcome": Outcome.FORBIDDEN.value, "detail": guard.violations[0]}
        message["violations"] = guard.violations
    message["stdout"], message["stderr"] = out.text(), err.text()
    try:
        line = json.dumps(message, allow_nan=True)
    except (TypeError, ValueError) as e:
        line = json.dumps({"outcome": Outcome.WRONG_TYPE.value, "detail": f"result: {e}"})
    result.write(line + "\n")
    result.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
