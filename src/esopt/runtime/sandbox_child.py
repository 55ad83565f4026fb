"""The child side of `esopt.runtime.sandbox`: limits, seccomp, tripwire, then serve calls.

Run as `python -I -c BOOT REQ_FD REP_FD MODE WORK` (esopt.runtime.sandbox_jail starts
it, inside the jail in `isolated` mode). Everything trusted (numpy, the job, a jail-side
harness, the seccomp filter) is loaded before the untrusted code runs. Then the code is
executed and the child answers the trusted side's requests: call a function of the
code's namespace with these arguments, or end. Its answers are plain data frames
(esopt.runtime.sandbox_wire) that the trusted side decodes strictly: nothing this
process writes decides an outcome by itself.
"""

from __future__ import annotations

import builtins
import errno
import importlib
import io
import os
import resource
import sys

import numpy  # noqa: F401 - preloaded: the code's own `import numpy` is then a lookup

from esopt.runtime import sandbox_guard, sandbox_wire
from esopt.runtime.sandbox import HeuristicFailure, Outcome

# Imported before the tripwire goes up, so that the code's imports are lookups.
PRELOAD = ("numpy", "math", "random", "itertools", "heapq", "collections", "functools",
           "statistics", "operator", "bisect", "copy", "json", "re", "string",
           "fractions", "decimal", "time", "typing", "dataclasses", "enum", "pathlib")
# Denied by seccomp (EPERM) once the code may run: no process started (fork, vfork, and
# clone without CLONE_THREAD: threads stay allowed, bounded by the address space; a
# process limit alone does not hold where the jail's user maps to root outside, which
# the kernel exempts from RLIMIT_NPROC), no program executed, no socket opened, no
# process traced or its memory read, no namespace, mount, keyring, SysV IPC, FIFO or
# device node, no io_uring or BPF, no signal sent (the tripwire's frames could be
# reached from a signal handler), no kernel module or reboot.
SECCOMP_DENY = (
    "fork", "vfork", "execve", "execveat", "socket", "socketpair", "ptrace", "process_vm_readv",
    "process_vm_writev", "process_madvise", "pidfd_getfd", "pidfd_open", "kcmp", "mount",
    "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsmount",
    "fsconfig", "move_mount", "open_tree", "keyctl", "add_key", "request_key", "bpf",
    "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl",
    "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "shmget", "msgget", "semget", "mknod", "mknodat", "kill",
    "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal",
    "alarm", "setitimer", "timer_create", "personality", "syslog", "vhangup",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
)


CLONE_THREAD = 0x00010000


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
    def both(kind, soft, hard=None):
        resource.setrlimit(kind, (soft, soft if hard is None else hard))

    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(used.ru_utime + used.ru_stime + 0.999)  # the import, not the code's budget
    # SIGXCPU at the soft limit, SIGKILL one second later.
    both(resource.RLIMIT_CPU, spent + int(limits.cpu_s), spent + int(limits.cpu_s) + 1)
    both(resource.RLIMIT_AS, int(limits.memory_mb) << 20)
    both(resource.RLIMIT_FSIZE, int(limits.file_mb) << 20)
    both(resource.RLIMIT_CORE, 0)
    both(resource.RLIMIT_NOFILE, 256)
    # Processes and threads of this user: counted per user namespace, so in a jail this
    # bounds the jail (its pid 1, this process, and what the code starts).
    both(resource.RLIMIT_NPROC, int(limits.processes) + 2)


def _load_seccomp(libraries: dict[str, str | None]) -> bool:
    """Deny SECCOMP_DENY with EPERM, for this process and all it starts; False where
    libseccomp (pyseccomp) cannot be loaded. `libraries`: the trusted side's
    ctypes.util.find_library answers (the jail has no ldconfig cache to ask)."""
    if not libraries.get("seccomp"):
        return False
    import ctypes.util

    find = ctypes.util.find_library
    ctypes.util.find_library = lambda name: libraries.get(name) or find(name)
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError):
        return False
    finally:
        ctypes.util.find_library = find
    f = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for name in SECCOMP_DENY:
        try:
            f.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        except (ValueError, RuntimeError, OSError):
            pass  # not a syscall on this architecture
    # clone: threads only. clone3 hides its flags behind a pointer: ENOSYS makes the C
    # library fall back to clone, whose flags the filter can read.
    f.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone",
               pyseccomp.Arg(0, pyseccomp.MASKED_EQ, CLONE_THREAD, 0))
    try:
        f.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    except (ValueError, RuntimeError, OSError):
        pass
    f.load()
    return True


def _describe(e: BaseException) -> str:
    """'Type: message' and the traceback's line numbers; no frames (the tripwire refuses
    them, and the traceback of a refused action holds the hook's own)."""
    lines = []
    tb = e.__traceback__
    while tb is not None:
        lines.append(tb.tb_lineno)
        tb = tb.tb_next
    try:
        message = str(e)
    except BaseException:  # noqa: BLE001 - the code's own __str__ may fail too
        message = "<unprintable>"
    where = f" (traceback lines {', '.join(map(str, lines[1:][-6:]))})" if lines[1:] else ""
    return f"{type(e).__name__}: {message}"[:1500] + where


def _failure(e: BaseException) -> tuple[str, str]:
    if isinstance(e, HeuristicFailure):
        return e.outcome.value, str(e)
    if isinstance(e, MemoryError):
        return Outcome.MEMORY.value, f"MemoryError: {e}"
    if isinstance(e, sandbox_guard.SandboxViolation):
        return Outcome.FORBIDDEN.value, str(e)
    return Outcome.EXCEPTION.value, _describe(e)


def main(argv: list[str]) -> int:
    req_fd, rep_fd, work = int(argv[0]), int(argv[1]), argv[3]  # argv[2]: the mode
    for name in PRELOAD:
        importlib.import_module(name)

    def send(kind: str, fields: dict | None = None, value=None, with_value=False) -> None:
        sandbox_wire.write_blocking(rep_fd, sandbox_wire.jail_frame(kind, fields, value,
                                                                    with_value))

    shared: dict = {}  # read-only arrays sent once (sandbox_wire.trusted_frame)
    job = sandbox_wire.read_trusted_frame(req_fd, shared)
    if job is None:
        return 0
    os.chdir(work)
    for name, data in job["files"].items():
        with open(name, "wb") as f:
            f.write(data)
    limits = job["limits"]
    harness = None
    if job["harness"]:  # jail-side: trusted code over untrusted data (no untrusted source)
        module_name, func_name = job["harness"].split(":")
        harness = getattr(importlib.import_module(module_name), func_name)
    _set_limits(limits)
    seccomp = _load_seccomp(job["libraries"])
    out, err = _BoundedText(limits.output_chars), _BoundedText(limits.output_chars)
    try:
        code = compile(job["source"], "<heuristic>", "exec")
    except (SyntaxError, ValueError) as e:
        send("failed", {"outcome": Outcome.SYNTAX_ERROR.value,
                        "detail": f"{type(e).__name__}: {e}", "seccomp": seccomp})
        return 0
    send("started", {"seccomp": seccomp})
    if job["guard"]:
        sandbox_guard.disarm_unaudited()
        sandbox_guard.install(os.getcwd(), rep_fd)
    sys.stdout, sys.stderr = out, err
    namespace: dict = {"__name__": "heuristic", "__builtins__": builtins}
    try:
        exec(code, namespace)
        if harness is not None:
            value = harness(namespace, job["payload"])
    except BaseException as e:  # noqa: BLE001 - SystemExit and friends are failures too
        outcome, detail = _failure(e)
        send("failed", {"outcome": outcome, "detail": detail})
        return 0
    if harness is not None:
        _send_value(send, "value", value)
    else:
        names = {k: callable(v) for k, v in list(namespace.items())[:10000]
                 if type(k) is str and not k.startswith("__")}
        send("ready", {"names": names})
        while (request := sandbox_wire.read_trusted_frame(req_fd, shared)) is not None:
            if request["op"] != "call":
                break
            values = []
            try:
                function = namespace[request["name"]]
                for args, kwargs in request["calls"]:
                    values.append(function(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001
                outcome, detail = _failure(e)
                send("raise", {"outcome": outcome, "detail": detail})
                continue
            _send_value(send, "return", values)
    send("output", {"stdout": out.text(), "stderr": err.text()})
    return 0


def _send_value(send, kind: str, value) -> None:
    try:
        send(kind, value=value, with_value=True)
    except sandbox_wire.Unencodable as e:
        send("raise", {"outcome": Outcome.WRONG_TYPE.value,
                       "detail": f"returned {e} (plain data only: numbers, strings, lists, "
                                 f"tuples, dicts, sets, numpy arrays)"})
    except (ValueError, RecursionError) as e:  # e.g. an int too long to print
        send("raise", {"outcome": Outcome.WRONG_TYPE.value, "detail": f"result: {e}"})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
