"""The audit-hook tripwire inside the sandbox child: records and refuses attempts.

CPython documents audit hooks as no security boundary, and this is none: the boundary is
the jail (esopt.runtime.sandbox_jail). The hook makes attempts visible: a refused action
raises inside the untrusted code *and* is reported to the trusted side at once, over the
result pipe, so code that catches the error, or later tampers with the child, is still
scored `forbidden`.

Hardening against tampering: the hook is a closure whose state no module holds (no
global to rebind, no class method to replace), the functions it calls are bound when it
is installed, its functions run on a private copy of this module's globals and builtins
(so rebinding a name in a module changes nothing), and the ways to reach it are refused:
`gc` object walks, the frames of tracebacks, generators and coroutines (a refused action's
traceback holds the hook's frame), tracing and profiling, new audit hooks. The child keeps
no handle to it.
"""

from __future__ import annotations

import builtins
import json
import os
import posix
import stat
import sys
import types

# Refused outright, whatever the arguments: new processes, signals, native code, network,
# the ways to reach the hook (gc walks, frames, tracing), and SQLite (ATTACH writes files
# without an audit event).
FORBIDDEN_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "resource.setrlimit", "resource.prlimit", "sys.addaudithook", "webbrowser.open",
    "urllib.Request", "os.startfile", "os.setuid", "os.setgid", "os.setreuid",
    "os.setregid", "os.setresuid", "os.setresgid", "os.setgroups",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
    "sys._current_exceptions", "sys.settrace", "sys.setprofile",
    "cpython._PySys_ClearAuditHooks",
    "sqlite3.connect", "sqlite3.connect/handle", "sqlite3.enable_load_extension",
    "sqlite3.load_extension",
})
FORBIDDEN_PREFIXES = ("socket.", "ctypes.", "_ctypes.", "ftplib.", "smtplib.", "http.",
                      "imaplib.", "nntplib.", "poplib.", "telnetlib.", "_posixsubprocess.",
                      "_xxsubinterpreters.", "winreg.")
# Attributes that hand out frames: a refused action's traceback would hold the hook's own
# frame. (sys._getframe stays allowed: namedtuple, TypeVar and enum need it, and no frame
# of the untrusted code's callers holds anything of the hook.)
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# Modules whose fresh import is refused: process creation without an audit event
# (_posixsubprocess), native calls, SQLite, and a second copy of `posix` (whose
# functions the child replaced before the hook went up).
FORBIDDEN_IMPORTS = frozenset({"_posixsubprocess", "ctypes", "_ctypes", "sqlite3",
                               "_sqlite3", "posix", "_xxsubinterpreters", "_testcapi",
                               "_testinternalcapi", "_testbuffer", "_testmultiphase",
                               "multiprocessing", "_multiprocessing", "pty"})
# Event -> (indices of path arguments that must stay inside the working directory,
# index of the dir_fd argument those paths are relative to, or None).
PATH_EVENTS = {
    "os.remove": ((0,), 1), "os.rmdir": ((0,), 1), "os.rename": ((0, 1), 2),
    "os.mkdir": ((0,), 2), "os.symlink": ((0, 1), 2), "os.link": ((0, 1), 2),
    "os.chmod": ((0,), 2), "os.chown": ((0,), 3), "os.truncate": ((0,), None),
    "os.utime": ((0,), 3), "os.chdir": ((0,), None), "os.chflags": ((0,), None),
    "os.lchflags": ((0,), None), "os.lchmod": ((0,), None), "os.lchown": ((0,), None),
    "os.setxattr": ((0,), None), "os.removexattr": ((0,), None),
    "shutil.rmtree": ((0,), 1), "shutil.copyfile": ((1,), None),
    "shutil.copytree": ((1,), None), "shutil.move": ((0, 1), None),
    "shutil.chown": ((0,), None), "shutil.make_archive": ((0,), None),
    "shutil.unpack_archive": ((1,), None),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class SandboxViolation(PermissionError):
    """An action the sandbox refuses; raised inside the untrusted code."""


def _refusing(name: str):
    def refused(*args, **kwargs):
        raise SandboxViolation(f"sandbox: {name} is not allowed")
    return refused


def disarm_unaudited() -> None:
    """Replace functions that act without an audit event (FIFOs, device nodes) by refusals,
    in `os` and `posix` alike; a fresh import of `posix` is refused by the hook."""
    for module in (os, posix):
        for name in ("mkfifo", "mknod"):
            if hasattr(module, name):
                setattr(module, name, _refusing(f"os.{name}"))
    if "_posixsubprocess" in sys.modules:
        sys.modules["_posixsubprocess"].fork_exec = _refusing("_posixsubprocess.fork_exec")




def install(work_dir: str, report_fd: int) -> None:
    """Install the hook for a child whose working directory is `work_dir`; violations are
    written to `report_fd` as protocol frames (esopt.runtime.sandbox_wire) at once."""
    private = dict(globals())
    private["__builtins__"] = dict(builtins.__dict__)
    types.FunctionType(_install.__code__, private, "_install")(work_dir, report_fd)


def _install(work_dir: str, report_fd: int) -> None:
    # Runs on private globals (see install): every name below is this call's own.
    root = posix.fspath(work_dir)
    lstat, readlink, getcwd, pstat, write = (posix.lstat, posix.readlink, posix.getcwd,
                                             posix.stat, posix.write)
    is_link, is_dir = stat.S_ISLNK, stat.S_ISDIR
    quote = json.encoder.encode_basestring_ascii  # the C encoder, bound now
    forbidden, prefixes, frame_attrs = FORBIDDEN_EVENTS, FORBIDDEN_PREFIXES, FRAME_ATTRIBUTES
    forbidden_imports, path_events, write_flags = FORBIDDEN_IMPORTS, PATH_EVENTS, _WRITE_FLAGS
    violation = SandboxViolation
    sep = "/"

    def as_text(path):
        """str paths as they are, bytes decoded; None for anything else (never a call
        into an object's own methods: the hook runs no code the untrusted code wrote)."""
        if type(path) is str:
            return path
        if type(path) is bytes:
            return path.decode("utf-8", "surrogateescape")
        if type(path) is int:
            try:
                return readlink(f"/proc/self/fd/{path}")
            except OSError:
                return None
        return None

    def resolve(path: str, base: str) -> str:
        """Absolute, symlinks followed (a bounded walk, like os.path.realpath)."""
        parts = (path if path.startswith(sep) else base + sep + path).split(sep)
        out: list = []
        hops, i = 0, 0
        while i < len(parts):
            part = parts[i]
            i += 1
            if part in ("", "."):
                continue
            if part == "..":
                if out:
                    out.pop()
                continue
            candidate = sep + sep.join(out + [part])
            try:
                mode = lstat(candidate).st_mode
            except OSError:
                out.append(part)
                continue
            if is_link(mode) and hops < 40:
                hops += 1
                try:
                    target = readlink(candidate)
                except OSError:
                    out.append(part)
                    continue
                if target.startswith(sep):
                    out = []
                parts, i = target.split(sep) + parts[i:], 0
                continue
            out.append(part)
        return sep + sep.join(out)

    def inside(path, dir_fd=None) -> bool:
        text = as_text(path)
        if text is None:
            return False
        base = getcwd()
        if type(dir_fd) is int and not text.startswith(sep):
            try:
                base = readlink(f"/proc/self/fd/{dir_fd}")
            except OSError:
                return False
        real = resolve(text, base)
        return real == root or real.startswith(root + sep)

    def summary(args) -> str:
        if type(args) is not tuple:
            return type(args).__name__
        shown = [repr(a) if type(a) in (str, bytes, int, float, bool) or a is None
                 else f"<{type(a).__name__}>" for a in args[:4]]
        return ("(" + ", ".join(shown) + ")")[:120]

    def refuse(event: str, detail: str):
        text = f"{event}: {detail}"[:300]
        header = ('{"t": "violation", "text": ' + quote(text) + ', "blobs": []}').encode()
        body = len(header).to_bytes(4, "big") + header
        try:
            write(report_fd, len(body).to_bytes(4, "big") + body)  # < PIPE_BUF: atomic
        except OSError:
            pass  # a closed channel: the trusted side sees its end
        raise violation(f"sandbox: {text}")

    def check(event: str, args) -> None:
        if event in forbidden or event.startswith(prefixes):
            refuse(event, summary(args))
        if event == "import":
            name = args[0] if args else ""
            if type(name) is str and name.split(".")[0] in forbidden_imports:
                refuse(event, name)
        elif event in ("object.__getattr__", "object.__setattr__", "object.__delattr__"):
            if len(args) > 1 and type(args[1]) is str and args[1] in frame_attrs:
                refuse(event, args[1])
        elif event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writes = (type(mode) is str and any(c in mode for c in "wax+")) or (
                type(flags) is int and flags & write_flags)
            if writes and not inside(path):
                refuse(event, f"write to {summary((path,))}")
            if not writes and type(path) in (str, bytes):
                # A directory outside, opened as a descriptor, is the dir_fd route out.
                try:
                    outside_dir = is_dir(pstat(path).st_mode) and not inside(path)
                except (OSError, ValueError):
                    outside_dir = False
                if outside_dir:
                    refuse(event, f"directory {summary((path,))} as a descriptor")
        elif event in path_events:
            indices, fd_index = path_events[event]
            dir_fd = args[fd_index] if fd_index is not None and fd_index < len(args) else None
            for i in indices:
                if i < len(args) and args[i] is not None and not inside(args[i], dir_fd):
                    refuse(event, f"path {summary((args[i],))}")

    sys.addaudithook(check)
