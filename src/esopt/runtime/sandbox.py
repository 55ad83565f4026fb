"""Run untrusted, LLM-written code and get back a number or a typed failure.

The boundary is the operating system (esopt.runtime.sandbox_jail): in the default
`isolated` mode each call runs in a fresh bubblewrap jail (new user, mount, pid, network
and ipc namespaces; read-only binds of what the interpreter needs; a size-capped tmpfs
working directory; its own /proc; dies with its parent, and its pid namespace takes every
descendant with it). Inside, before any untrusted line runs, the child sets hard resource
limits (CPU seconds, address space, file size, processes, descriptors, no core dumps),
loads a seccomp filter (no execve, sockets, ptrace, namespaces, signals, SysV IPC; see
sandbox_child.SECCOMP_DENY), and installs an audit-hook tripwire (sandbox_guard) that
refuses and *reports* attempts, so code that catches the error is still `forbidden`.

The result cannot be forged by the untrusted code. The harness ("module:function") runs
here, in the trusted process, and calls into the jailed code over a narrow pipe protocol
(sandbox_wire): its `namespace` argument is a proxy whose functions are calls into the
jail, and what comes back is decoded strictly as plain data (never unpickled). Outcome
and value are decided here: by the harness, the protocol's state, the wall-clock deadline
and the child's exit status. Text the code writes anywhere is at most its own output.
A call without untrusted source (`source == ""`, the DocVQA shell) runs its harness in
the jail instead: trusted code over untrusted data, isolated like the rest.

Where isolation cannot be had, the sandbox refuses to run (SandboxUnavailable) unless
the weaker `guard-only` mode is asked for (`runtime.sandbox: guard-only`, or
ESOPT_SANDBOX); every result records its mode. docs/sandbox.md says what each mode
guarantees and what it does not.
"""

from __future__ import annotations

import enum
import importlib
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esopt.runtime import sandbox_jail, sandbox_wire
from esopt.runtime.sandbox_jail import SandboxUnavailable, set_mode

__all__ = ["Outcome", "HeuristicFailure", "WrongType", "InvalidSolution", "SandboxLimits",
           "SandboxResult", "SandboxUnavailable", "run_sandboxed", "call_entry", "run_script",
           "sandbox_mode", "set_mode"]


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
    """Per-call limits. Address space includes numpy's import (~0.3 GB virtual)."""

    wall_s: float = 30.0
    cpu_s: int = 30
    memory_mb: int = 1536
    file_mb: int = 4  # largest file the child may write, captured stdout/stderr included
    output_chars: int = 4000  # stdout/stderr kept in the result (head), the rest counted
    result_mb: int = 64  # largest frame the trusted side reads back
    disk_mb: int = 64  # all files in the working directory together (isolated mode)
    processes: int = 8  # processes and threads the code may start (isolated mode)

    def __post_init__(self):
        for name in ("wall_s", "cpu_s", "memory_mb", "file_mb", "output_chars", "result_mb",
                     "disk_mb", "processes"):
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
    mode: str = ""
    """isolated or guard-only: the boundary this call ran under."""
    seccomp: bool = False
    """Whether the child's seccomp filter was loaded."""
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def network_isolated(self) -> bool:
        """No socket reaches anything: an empty network namespace, or seccomp's refusal."""
        return self.mode == "isolated" or self.seccomp


def sandbox_mode() -> str:
    """The mode generated code runs in here (isolated or guard-only); raises
    SandboxUnavailable where `isolated` is asked for and cannot be had."""
    return sandbox_jail.resolve_mode()


class _RemoteFailure(HeuristicFailure):
    """A call into the jail ended in a failure the child reported (its own outcome)."""

    def __init__(self, outcome: Outcome, detail: str):
        super().__init__(detail)
        self.outcome = outcome


class _Session:
    """The trusted end of one child's pipes: frames in and out against one deadline."""

    def __init__(self, jail: sandbox_jail.Jail, deadline: float, cap: int):
        self.jail, self.deadline = jail, deadline
        self.reader = sandbox_wire.Reader(jail.rep_fd, cap)
        self.violations: list[str] = []
        self.shared: dict[int, Any] = {}  # read-only arrays the child already holds

    def send(self, message) -> None:
        sandbox_wire.write_all(self.jail.req_fd,
                               sandbox_wire.trusted_frame(message, self.shared),
                               self.deadline)

    def recv(self, *kinds: str, deadline: float | None = None) -> dict:
        """The next frame of one of `kinds`; violation frames are recorded on the way."""
        while True:
            frame = sandbox_wire.decode_frame(self.reader.frame(deadline or self.deadline))
            if frame["t"] == "violation":
                self.violations.append(str(frame.get("text", ""))[:300])
                continue
            if frame["t"] not in kinds:
                raise sandbox_wire.ProtocolError(f"unexpected {frame['t']!r} frame")
            return frame

    def call(self, name: str, calls: list) -> list:
        """Results of name(*args, **kwargs) for each (args, kwargs), in order, in one round
        trip; the first failure is raised. Read-only arrays travel once per call session
        (the child hands the code a fresh writable copy each time)."""
        self.send({"op": "call", "name": name, "calls": calls})
        frame = self.recv("return", "raise")
        if frame["t"] == "raise":
            raise _RemoteFailure(_failure_outcome(frame), str(frame.get("detail", ""))[:2000])
        values = frame.get("v")
        if not isinstance(values, list) or len(values) != len(calls):
            raise sandbox_wire.ProtocolError("a return frame with the wrong number of values")
        return values


def _failure_outcome(frame: dict) -> Outcome:
    try:
        outcome = Outcome(frame.get("outcome"))
    except ValueError:
        raise sandbox_wire.ProtocolError(f"unknown outcome {frame.get('outcome')!r}") from None
    if outcome is Outcome.OK:
        raise sandbox_wire.ProtocolError("a failure frame that says ok")
    return outcome


class RemoteFunction:
    """A function of the jailed code: calling it is a call into the jail."""

    def __init__(self, session: _Session, name: str):
        self._session, self.__name__ = session, name

    def __call__(self, *args, **kwargs):
        return self._session.call(self.__name__, [(args, kwargs)])[0]

    def map(self, calls: list[tuple[tuple, dict]], chunk: int = 8192) -> list:
        """Many calls, in order, a round trip per `chunk` of them (a stateful function sees
        them in this order)."""
        out: list = []
        for i in range(0, len(calls), chunk):
            out += self._session.call(self.__name__, list(calls[i:i + chunk]))
        return out


class RemoteNamespace:
    """What a trusted harness sees as the code's namespace: its functions, as proxies."""

    def __init__(self, session: _Session, names: dict):
        self._session = session
        self._functions = {k for k, v in names.items() if v is True}

    def get(self, name: str, default=None):
        return RemoteFunction(self._session, name) if name in self._functions else default

    def __getitem__(self, name: str):
        if name not in self._functions:
            raise KeyError(name)
        return RemoteFunction(self._session, name)

    def __contains__(self, name) -> bool:
        return name in self._functions


def _head(f, chars: int) -> str:
    f.seek(0)
    text = f.read(chars * 4 + 4).decode("utf-8", "replace")
    return text if len(text) <= chars else text[:chars] + "...[truncated]"


_CPU_SIGNALS = {signal.SIGXCPU, signal.SIGKILL}


def run_sandboxed(
    source: str,
    harness: str,
    payload: Any = None,
    limits: SandboxLimits = SandboxLimits(),
    *,
    files: dict[str, bytes] | None = None,
    guard: bool = True,
) -> SandboxResult:
    """Execute `source` in a sandboxed child; `harness(namespace, payload)` scores it.

    `harness` is "package.module:function"; it runs in this process with the code's
    namespace as a proxy (see the module docstring), or, when `source` is empty, in the
    child. Its return value must be JSON-serialisable and comes back as `result.value`.
    `files` (plain names -> bytes) are written into the child's working directory first
    (the page image of a document task). `guard=False` leaves out the audit-hook tripwire
    (tests of the operating-system boundary alone).
    """
    if ":" not in harness:
        raise ValueError(f"harness must be 'module:function', got {harness!r}")
    files = dict(files or {})
    for name in files:
        if not name or name != Path(name).name or name in (".", ".."):
            raise ValueError(f"sandbox files: {name!r} is not a plain file name")
    if sum(len(d) for d in files.values()) > (limits.disk_mb << 20) * 3 // 4:
        raise ValueError(f"sandbox files: {sum(len(d) for d in files.values())} bytes do not "
                         f"fit the working directory's {limits.disk_mb} MB (limits.disk_mb)")
    mode = sandbox_mode()
    in_jail = source == ""
    trusted = None
    if not in_jail:
        module_name, func_name = harness.split(":")
        trusted = getattr(importlib.import_module(module_name), func_name)
    start = time.perf_counter()
    jail = sandbox_jail.spare_jail(mode, limits.disk_mb) or \
        sandbox_jail.start_jail(mode, limits.disk_mb)
    session = _Session(jail, time.monotonic() + limits.wall_s, limits.result_mb << 20)
    result = SandboxResult(Outcome.CRASH, mode=mode)
    try:
        result = _converse(session, source, harness if in_jail else None, trusted, payload,
                           files, limits, guard, result)
    finally:
        jail.kill(close_output=False)
        result.stdout = _head(jail.out, limits.output_chars) + result.stdout
        result.stderr = _head(jail.err, limits.output_chars) + result.stderr
        jail.out.close()
        jail.err.close()
    result.violations = session.violations[:20]
    if result.violations and result.outcome in (Outcome.OK, Outcome.CRASH):
        # Caught, then tampered with or forged: the attempt is what the result says.
        result.outcome, result.value = Outcome.FORBIDDEN, None
        result.detail = result.violations[0]
    result.wall_s = time.perf_counter() - start
    return result


def _converse(session: _Session, source: str, jail_harness: str | None, trusted, payload,
              files: dict, limits: SandboxLimits, guard: bool,
              result: SandboxResult) -> SandboxResult:
    """The protocol of one call, from the job to the child's output; fills `result`."""
    job = {"source": source, "harness": jail_harness, "files": files, "limits": limits,
           "guard": guard, "payload": payload if jail_harness else None,
           "libraries": sandbox_jail.libraries()}
    try:
        session.send(job)
        frame = session.recv("started", "failed")
        if frame["t"] == "started":
            result.seccomp = frame.get("seccomp") is True
            frame = session.recv("value" if jail_harness else "ready", "failed")
        if frame["t"] == "failed":
            result.outcome = _failure_outcome(frame)
            result.detail = str(frame.get("detail", ""))[:2000]
            return result
        if jail_harness:
            value = frame.get("v")
        else:
            names = frame.get("names")
            if not isinstance(names, dict):
                raise sandbox_wire.ProtocolError("a ready frame without names")
            value = trusted(RemoteNamespace(session, names), payload)
        try:
            result.value = json.loads(json.dumps(value, allow_nan=True))
        except (TypeError, ValueError, RecursionError) as e:
            result.outcome, result.detail = Outcome.WRONG_TYPE, f"result: {e}"
            return result
        result.outcome = Outcome.OK
        session.send({"op": "end"})
        output = session.recv("output", deadline=min(session.deadline,
                                                     time.monotonic() + 5.0))
        result.stdout = str(output.get("stdout", ""))[: limits.output_chars + 100]
        result.stderr = str(output.get("stderr", ""))[: limits.output_chars + 100]
    except HeuristicFailure as e:
        result.outcome, result.detail = e.outcome, str(e)[:2000]
    except sandbox_wire.ChannelTimeout:
        if result.outcome is not Outcome.OK:  # an OK whose output is late stays OK
            result.outcome = Outcome.TIMEOUT
            result.detail = f"wall-clock limit {limits.wall_s} s"
    except sandbox_wire.ChannelClosed:
        if result.outcome is not Outcome.OK:
            _died(session.jail, limits, result)
    except sandbox_wire.ProtocolError as e:
        result.outcome, result.value = Outcome.CRASH, None
        result.detail = f"corrupted result channel: {e}"
    except Exception as e:  # noqa: BLE001 - the harness choked on the code's data
        result.outcome, result.value = Outcome.EXCEPTION, None
        result.detail = f"harness: {type(e).__name__}: {e}"[:2000]
    return result


def _died(jail: sandbox_jail.Jail, limits: SandboxLimits, result: SandboxResult) -> None:
    """The child closed its pipe without an answer: the CPU limit, or a crash."""
    try:
        code = jail.proc.wait(timeout=5)
    except Exception:  # noqa: BLE001 - still running: a crash all the same
        code = None
    signo = -code if code is not None and code < 0 else (
        code - 128 if code is not None and code > 128 else None)
    if signo in _CPU_SIGNALS:
        result.outcome, result.detail = Outcome.TIMEOUT, f"CPU limit {limits.cpu_s} s"
    else:
        result.outcome, result.detail = Outcome.CRASH, f"no result: exit status {code}"


def call_entry(namespace: dict, payload: dict) -> Any:
    """Generic harness: call `payload["entry"](*payload["args"])` from the untrusted code."""
    entry = namespace.get(payload["entry"])
    if not callable(entry):
        raise WrongType(f"the code defines no function {payload['entry']!r}")
    return entry(*payload.get("args", ()), **payload.get("kwargs", {}))


def run_script(namespace: Any, payload: Any) -> None:
    """Harness for scripts (the math tool): the code ran at exec time; its prints are the
    output (`result.stdout`)."""
    return None
