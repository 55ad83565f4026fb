"""The operating-system boundary of the sandbox: a bubblewrap jail per call, and its modes.

`isolated` (the default): each sandboxed call runs in a fresh bubblewrap (`bwrap`) jail:
new user, mount, pid, network, ipc, uts (and cgroup) namespaces; inside, only read-only
binds of /usr (system libraries), the interpreter's prefix, the virtual environment and
the project's src/, a size-capped tmpfs working directory, its own /proc, a read-only
/dev with the usual nodes, and nothing else: no host /tmp, no HOME, no project data,
results or shared data. The jail dies with its parent, and when its first process ends
the pid namespace takes every descendant with it. Unprivileged inside (uid 65534, no
capabilities, no further user namespaces).

`guard-only`: no jail (for machines without unprivileged user namespaces): the same
child under resource limits, seccomp where it loads, and the audit-hook tripwire. It is
weaker (reads anywhere the user may read, no total disk cap, a process that leaves its
session survives), and it is chosen only explicitly (`runtime.sandbox: guard-only` or
ESOPT_SANDBOX=guard-only); `isolated` on a machine that cannot jail refuses to run.

bubblewrap over `unshare` with a mount tree of our own, by measurement: a bare start
costs ~25 ms against ~12 ms for `unshare` (which then still lacks the mount tree), both
small beside the ~300 ms of an interpreter importing numpy (benchmarks/sandbox.py prints
them); and bwrap brings the size-capped tmpfs, the read-only remounts, --die-with-parent
and --disable-userns without a setup helper of our own to keep correct.

A spare jail is started ahead (one per process and tmpfs size) so that a call finds an
interpreter that has already imported numpy; each jail serves exactly one call.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

MODES = ("isolated", "guard-only")
JAIL_WORK = "/job"  # the working directory inside the jail
JAIL_UID = 65534
_SRC_ROOT = str(Path(__file__).resolve().parents[2])
_CHILD_BOOT = (f"import sys; sys.path.insert(0, {_SRC_ROOT!r}); import runpy; "
               "runpy.run_module('esopt.runtime.sandbox_child', run_name='__main__')")


class SandboxUnavailable(RuntimeError):
    """The configured isolation cannot be had on this machine; the message says why and
    which option accepts a weaker mode."""


_mode_override: str | None = None


def set_mode(mode: str | None) -> None:
    """Set this process's sandbox mode (None: back to the environment's)."""
    global _mode_override
    if mode is not None and mode not in MODES:
        raise ValueError(f"runtime.sandbox: unknown mode {mode!r}; expected one of {MODES}")
    _mode_override = mode


def configured_mode() -> str:
    """The mode asked for: set_mode(), else ESOPT_SANDBOX, else the runtime section's
    `sandbox` (ESOPT_RUNTIME, which the workflow sets), else isolated."""
    if _mode_override is not None:
        return _mode_override
    mode = os.environ.get("ESOPT_SANDBOX")
    source = "ESOPT_SANDBOX"
    if not mode:
        try:
            mode = json.loads(os.environ.get("ESOPT_RUNTIME") or "{}").get("sandbox")
        except (ValueError, AttributeError):
            mode = None
        source = "runtime.sandbox (ESOPT_RUNTIME)"
    mode = mode or "isolated"
    if mode not in MODES:
        raise ValueError(f"{source}: unknown sandbox mode {mode!r}; expected one of {MODES}")
    return mode


def _host_links() -> list[str]:
    """/lib, /lib64, /bin, /sbin as the host has them: symlinks into /usr, or binds."""
    args = []
    for name in ("lib", "lib64", "lib32", "libx32", "bin", "sbin"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _read_only_roots() -> list[str]:
    """What the interpreter needs, read-only: /usr, its prefix, the environment, src/,
    and ESOPT_SANDBOX_BIND (colon-separated) for module trees elsewhere (HPC)."""
    roots = ["/usr", sys.base_prefix, sys.prefix, _SRC_ROOT,
             *filter(None, os.environ.get("ESOPT_SANDBOX_BIND", "").split(":"))]
    exe = os.path.realpath(sys.executable)
    roots.append(os.path.dirname(os.path.dirname(exe)))
    out: list[str] = []
    for root in sorted({os.path.realpath(r) for r in roots if os.path.isdir(r)}, key=len):
        if not any(root == o or root.startswith(o + "/") for o in out):
            out.append(root)
    # Keep the spelled paths too (a venv's symlinked python resolves through them).
    for r in (sys.prefix, sys.base_prefix, _SRC_ROOT):
        if os.path.isdir(r) and r not in out and os.path.realpath(r) != r:
            out.append(r)
    return out


def bwrap_argv(disk_mb: int) -> list[str]:
    """The bwrap command line of a jail whose working tmpfs holds `disk_mb` MB."""
    exe = shutil.which("bwrap")
    argv = [exe, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--uid", str(JAIL_UID),
            "--gid", str(JAIL_UID), "--disable-userns", "--die-with-parent", "--new-session",
            "--hostname", "sandbox"]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    for root in _read_only_roots():
        argv += ["--ro-bind", root, root]
    argv += _host_links()
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(int(disk_mb) << 20), "--perms", "0700", "--tmpfs", JAIL_WORK,
             "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", JAIL_WORK,
             "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
             "--setenv", "TMPDIR", JAIL_WORK]
    for key in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        argv += ["--setenv", key, "1"]
    return argv


@functools.lru_cache(maxsize=1)
def isolation_problem() -> str | None:
    """None when a jail can be made here, else what is missing (probed once a process)."""
    if not sys.platform.startswith("linux"):
        return f"operating-system isolation needs Linux namespaces (this is {sys.platform})"
    if shutil.which("bwrap") is None:
        return ("bubblewrap is not installed (the `bwrap` command; Debian/Ubuntu: "
                "apt-get install bubblewrap)")
    argv = [*bwrap_argv(1), sys.executable, "-I", "-c", "pass"]
    try:
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL, env=_bwrap_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap could not start: {e}"
    if probe.returncode != 0:
        why = probe.stderr.strip().splitlines()[-1:] or [f"exit status {probe.returncode}"]
        hint = ""
        for knob in ("/proc/sys/kernel/unprivileged_userns_clone",
                     "/proc/sys/user/max_user_namespaces",
                     "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"):
            try:
                value = Path(knob).read_text().strip()
            except OSError:
                continue
            bad = value == "0" if "apparmor" not in knob else value == "1"
            if bad:
                hint = f"; {knob} is {value}"
        return f"bwrap cannot create the jail's namespaces (unprivileged user namespaces: " \
               f"{why[0]}{hint})"
    return None


def resolve_mode() -> str:
    """The mode this process runs generated code in; refuses `isolated` where it cannot be
    had, naming what is missing and the option that accepts the weaker mode."""
    mode = configured_mode()
    if mode == "isolated":
        problem = isolation_problem()
        if problem:
            raise SandboxUnavailable(
                f"sandbox: generated code runs only under operating-system isolation, and "
                f"this machine cannot provide it: {problem}. Install bubblewrap and allow "
                f"unprivileged user namespaces, or accept the weaker mode (resource limits, "
                f"seccomp and an audit-hook tripwire; no namespaces) with `runtime.sandbox: "
                f"guard-only` in the config (or ESOPT_SANDBOX=guard-only).")
    return mode


@functools.lru_cache(maxsize=1)
def libraries() -> dict[str, str | None]:
    """Where libc and libseccomp are, for the child's seccomp binding (pyseccomp asks
    ctypes.util.find_library, which has no ldconfig cache to read inside the jail)."""
    import ctypes.util

    found = {}
    for name in ("c", "seccomp"):
        lib = ctypes.util.find_library(name)
        if lib and not lib.startswith("/"):
            for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64",
                      "/lib64", "/usr/lib", "/lib", f"/usr/lib/{os.uname().machine}-linux-gnu"):
                if os.path.exists(os.path.join(d, lib)):
                    lib = os.path.join(d, lib)
                    break
        found[name] = lib
    return found


def _bwrap_env() -> dict[str, str]:
    # bwrap's own environment is readable as its pid 1's /proc/1/environ inside: keep it bare.
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def _guard_only_env() -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


@dataclass
class Jail:
    """One started child (jailed or not) waiting for its one job."""

    proc: subprocess.Popen
    req_fd: int  # trusted -> child
    rep_fd: int  # child -> trusted
    out: object  # the child's stdout and stderr (unlinked files outside the jail)
    err: object
    mode: str
    work: str  # the working directory as the child sees it
    host_tmp: str | None = None  # guard-only: the temporary directory to remove

    def kill(self, close_output: bool = True) -> None:
        """SIGKILL the child; in a jail, the pid namespace ends with it, and every
        descendant with the namespace."""
        pid = self.proc.pid
        if self.mode == "isolated" and self.proc.poll() is None:
            # The jail's pid 1 first, so that bwrap reaps it (killed first, bwrap would
            # leave it to the host's init as a zombie).
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    inner = [int(p) for p in f.read().split()]
            except OSError:
                inner = []
            for child in inner:
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
            if inner:
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for fd in (self.req_fd, self.rep_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if close_output:
            self.out.close()
            self.err.close()
        if self.host_tmp:
            shutil.rmtree(self.host_tmp, ignore_errors=True)


def start_jail(mode: str, disk_mb: int) -> Jail:
    """Start a child that imports its libraries and then waits for a job on its pipe."""
    import tempfile

    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    host_tmp = None
    if mode == "isolated":
        argv, cwd, work, env = [*bwrap_argv(disk_mb), sys.executable], None, JAIL_WORK, \
            _bwrap_env()
    else:
        host_tmp = tempfile.mkdtemp(prefix="esopt-sandbox-")
        work = os.path.join(host_tmp, "work")
        os.mkdir(work)
        argv, cwd, env = [sys.executable], work, _guard_only_env()
    argv += ["-I", "-c", _CHILD_BOOT, str(req_r), str(rep_w), mode, work]
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env, pass_fds=(req_r, rep_w),
                                start_new_session=True)
    finally:
        os.close(req_r)
        os.close(rep_w)
    os.set_blocking(req_w, False)
    return Jail(proc, req_w, rep_r, out, err, mode, work, host_tmp)


class _Spares:
    """One started child per (mode, disk size) kept ready, each used once.

    Children are started by one long-lived thread: bwrap's --die-with-parent follows the
    starting *thread*, so a jail started by a short-lived thread would die with it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ready: dict[tuple, Jail] = {}
        self.wanted: list[tuple] = []
        self.wake = threading.Condition(self.lock)
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="esopt-sandbox-spares",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            with self.lock:
                while not self.wanted:
                    self.wake.wait()
                key = self.wanted.pop(0)
            try:
                jail = start_jail(*key)
            except OSError:
                continue
            with self.lock:
                old = self.ready.pop(key, None)
                self.ready[key] = jail
            if old is not None:
                old.kill()

    def take(self, mode: str, disk_mb: int) -> Jail | None:
        """A started child for this key (or None), and a replacement is ordered."""
        key = (mode, disk_mb)
        with self.lock:
            jail = self.ready.pop(key, None)
            if key not in self.wanted:
                self.wanted.append(key)
                self.wake.notify()
        if jail is not None and jail.proc.poll() is not None:  # died while waiting
            jail.kill()
            return None
        return jail


_spares: _Spares | None = None
_spares_lock = threading.Lock()


def drop_spares() -> None:
    """Kill this process's idle spare children (they are started again on demand)."""
    with _spares_lock:
        if _spares is None or _spares.pid != os.getpid():
            return
        with _spares.lock:
            idle, _spares.ready = list(_spares.ready.values()), {}
            _spares.wanted.clear()
    for jail in idle:
        jail.kill()


def spare_jail(mode: str, disk_mb: int) -> Jail | None:
    """A ready child from this process's spares (None on the first call of a key)."""
    global _spares
    if os.environ.get("ESOPT_SANDBOX_SPARES", "1") == "0":
        return None
    with _spares_lock:
        if _spares is None or _spares.pid != os.getpid():  # new, or inherited by a fork
            _spares = _Spares()
        return _spares.take(mode, disk_mb)
