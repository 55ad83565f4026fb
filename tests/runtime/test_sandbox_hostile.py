"""Hostile programs against the sandbox, each checked against the world outside.

Every program runs twice: with the audit-hook tripwire (it must be caught: not `ok`, and
the world intact) and without it (`guard=False`: the operating-system boundary alone
must hold: the world intact, whatever the label). The world is: canary files and a
directory outside the jail, the project's source tree, a TCP and an AF_UNIX listener,
the parent's environment, and the process table (nothing left running).

Programs are `def f(ctx)`, called through `esopt.runtime.sandbox:call_entry` with ctx =
the outside paths and ports, as an attacker who knows them would be.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import stat
import time
from pathlib import Path

import psutil
import pytest

from esopt.runtime import sandbox_jail
from esopt.runtime.sandbox import Outcome, SandboxLimits, run_sandboxed

pytestmark = pytest.mark.skipif(sandbox_jail.isolation_problem() is not None,
                                reason=f"no jail here: {sandbox_jail.isolation_problem()}")

HARNESS = "esopt.runtime.sandbox:call_entry"
LIMITS = SandboxLimits(wall_s=8, cpu_s=4, memory_mb=1024, file_mb=2, output_chars=2000,
                       disk_mb=16, processes=8)
MARK = "43210"  # the argument of every `sleep` a program tries to leave behind
SRC = Path(sandbox_jail._SRC_ROOT)
SRC_FILE = SRC / "esopt" / "ahd" / "tsp.py"


def _src_state() -> tuple:
    return (hashlib.sha256(SRC_FILE.read_bytes()).hexdigest(),
            stat.S_IMODE(SRC_FILE.stat().st_mode),
            sorted(p.name for p in SRC_FILE.parent.iterdir()))


def _ours(p: psutil.Process) -> bool:
    try:
        cmd = " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return f"sleep {MARK}" in cmd or (str(SRC) in cmd and "sandbox_child" in cmd)


def seen_outside(value: str) -> list:
    """What `read_files_outside` saw beyond the jail's own mount points: any file's
    content, and any directory entry that is not a step of the path to a root bound
    read-only (the checkout and its venv are bound at their real paths, so from a clone
    at /tmp/x the jail's /tmp lists the mount point `x`, and nothing under it but them)."""
    import ast

    roots = [Path(r) for r in sandbox_jail._read_only_roots()]
    extra = []
    for p, found in ast.literal_eval(value):
        path = Path(os.path.normpath(p))
        steps = {r.relative_to(path).parts[0] for r in roots if path in r.parents}
        if not isinstance(found, list) or not set(found) <= steps:
            extra.append((p, found))
    return extra


def leftovers() -> list[str]:
    """Processes a program started (or a child of ours) still alive after its call."""
    deadline = time.monotonic() + 3
    while True:
        found = [f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in psutil.process_iter()
                 if _ours(p) and p.status() != psutil.STATUS_ZOMBIE]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.fixture
def world(tmp_path, monkeypatch):
    """The outside: canaries, listeners, a secret in the parent's environment."""
    monkeypatch.setenv("ESOPT_SANDBOX_SPARES", "0")  # no idle child in the process table
    sandbox_jail.drop_spares()
    secret = secrets.token_hex(16)
    monkeypatch.setenv("ESOPT_CANARY_SECRET", secret)
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text(f"gold answer {secret}")
    canary.chmod(0o600)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.settimeout(0.05)
    unix_path = str(tmp_path / "listener.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    unix.listen(4)
    unix.settimeout(0.05)
    ctx = {"outside": str(outside), "canary": str(canary), "src": str(SRC),
           "src_file": str(SRC_FILE), "port": tcp.getsockname()[1], "unix": unix_path,
           "parent": os.getpid(), "mark": MARK}
    before = _src_state()
    assert not leftovers(), "processes of an earlier test are still running"
    yield {"ctx": ctx, "secret": secret}
    for server in (tcp, unix):
        with pytest.raises((TimeoutError, socket.timeout, BlockingIOError)):
            server.accept()  # nobody connected
        server.close()
    assert sorted(os.listdir(outside)) == ["canary.txt"]
    assert canary.read_text() == f"gold answer {secret}"
    assert stat.S_IMODE(canary.stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["listener.sock", "outside"]
    assert _src_state() == before
    assert leftovers() == []


PROGRAMS = {
    # --- writes, deletes, renames, chmods outside: by path, by dir_fd, through symlinks ---
    "write_by_path": """
def f(c):
    for p in (c['outside'] + '/new.txt', c['canary'], c['src_file'], c['src'] + '/evil.py'):
        try:
            with open(p, 'a') as fh:
                fh.write('pwned')
        except OSError:
            pass
    return 1
""",
    "delete_by_path": """
import os, shutil
def f(c):
    for op in (lambda: os.remove(c['canary']), lambda: os.remove(c['src_file']),
               lambda: shutil.rmtree(c['outside']), lambda: os.rmdir(c['outside'])):
        try:
            op()
        except OSError:
            pass
    return 1
""",
    "rename_by_path": """
import os
def f(c):
    for a, b in ((c['canary'], c['outside'] + '/moved'), (c['src_file'], c['src_file'] + '.x'),
                 ('.', c['outside'] + '/job')):
        try:
            os.rename(a, b)
        except OSError:
            pass
    return 1
""",
    "chmod_by_path": """
import os
def f(c):
    for p in (c['canary'], c['src_file'], c['outside']):
        try:
            os.chmod(p, 0o777)
        except OSError:
            pass
    return 1
""",
    "write_by_dir_fd": """
import os
def f(c):
    for d in (c['outside'], os.path.dirname(c['src_file'])):
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        for op in (lambda: os.close(os.open('planted.py', os.O_CREAT | os.O_WRONLY, dir_fd=fd)),
                   lambda: os.open('tsp.py', os.O_WRONLY | os.O_APPEND, dir_fd=fd),
                   lambda: os.remove('tsp.py', dir_fd=fd),
                   lambda: os.rename('tsp.py', 'gone.py', src_dir_fd=fd, dst_dir_fd=fd),
                   lambda: os.chmod('tsp.py', 0o777, dir_fd=fd),
                   lambda: os.mkdir('newdir', dir_fd=fd)):
            try:
                op()
            except OSError:
                pass
    return 1
""",
    "dir_fd_dotdot_from_inside": """
import os
def f(c):
    fd = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
    rel = os.path.relpath(c['canary'], os.getcwd())
    for op in (lambda: os.remove(rel, dir_fd=fd), lambda: os.open(rel, os.O_WRONLY, dir_fd=fd),
               lambda: os.chmod(rel, 0o777, dir_fd=fd)):
        try:
            op()
        except OSError:
            pass
    return 1
""",
    "symlink_writes": """
import os
def f(c):
    for i, target in enumerate((c['canary'], c['src_file'], c['outside'])):
        try:
            os.symlink(target, f'link{i}')
            if i < 2:
                open(f'link{i}', 'w').write('pwned')
            else:
                open(f'link{i}/planted', 'w').write('pwned')
        except OSError:
            pass
    return 1
""",
    "sqlite_and_fifo_outside": """
import os
def f(c):
    try:
        import sqlite3
        con = sqlite3.connect(':memory:')
        con.execute(f"ATTACH DATABASE '{c['outside']}/x.db' AS x")
        con.execute('CREATE TABLE x.t (a)')
        con.commit()
    except Exception:
        pass
    for p in (c['outside'] + '/fifo', c['src'] + '/fifo'):
        try:
            os.mkfifo(p)
        except Exception:
            pass
    return 1
""",
    # --- process creation, every route, and processes left behind ----------------------
    "subprocess_popen": """
import subprocess
def f(c):
    subprocess.Popen(['sleep', c['mark']], start_new_session=True)
    return 1
""",
    "os_system": """
import os
def f(c):
    return os.system(f"sleep {c['mark']} &")
""",
    "ctypes_system": """
def f(c):
    import ctypes
    libc = ctypes.CDLL(None)
    return libc.system(f"sleep {c['mark']} &".encode())
""",
    "posixsubprocess_fork_exec": """
import os, sys
def f(c):
    import _posixsubprocess
    args = [b'/usr/bin/sleep', c['mark'].encode()]
    r, w = os.pipe()
    _posixsubprocess.fork_exec(args, [args[0]], True, (), None, None, -1, -1, -1, -1, -1, -1,
                               r, w, True, True, None, None, None, -1, None, False)
    return 1
""",
    "fork_setsid_orphan": """
import os, time
def f(c):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(100)  # the grandchild, orphaned, in its own session
        os._exit(0)
    os.waitpid(pid, 0)
    return pid
""",
    "multiprocessing_spawn": """
def f(c):
    import multiprocessing as mp
    ctx = mp.get_context('spawn')
    p = ctx.Process(target=print, args=('escaped',), daemon=False)
    p.start()
    return p.pid
""",
    "kill_the_parent": """
import os, signal
def f(c):
    for pid in (c['parent'], os.getppid(), 1):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return 1
""",
    # --- reads outside ---------------------------------------------------------------------
    "read_files_outside": """
import os
def f(c):
    seen = []
    for p in (c['canary'], '/etc/passwd', '/etc/shadow', os.path.expanduser('~/.bashrc'),
              '/root/.bashrc', '/work/shared/data', '/tmp', '/home', '/var',
              c['src'] + '/../tests', c['src'] + '/../results', c['src'] + '/../data'):
        try:
            if os.path.isdir(p):
                seen.append((p, os.listdir(p)[:5]))
            else:
                seen.append((p, open(p).read()[:200]))
        except OSError:
            pass
    return repr(seen)
""",
    "read_proc_environ": """
import os
def f(c):
    found = []
    for pid in [c['parent'], os.getppid(), 1] + [p for p in os.listdir('/proc') if p.isdigit()]:
        for what in ('environ', 'cmdline'):
            try:
                found.append(open(f'/proc/{pid}/{what}', 'rb').read().decode('latin1'))
            except OSError:
                pass
    return '\\n'.join(found) + repr(dict(os.environ))
""",
    # --- network ---------------------------------------------------------------------------
    "tcp_connect": """
import socket
def f(c):
    for host in ('127.0.0.1', 'localhost', '10.0.2.2'):
        try:
            socket.create_connection((host, c['port']), timeout=0.5).send(b'hi')
            return 'connected'
        except OSError:
            pass
    return 1
""",
    "unix_connect": """
import socket
def f(c):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(c['unix'])
        s.send(b'hi')
        return 'connected'
    except OSError:
        return 1
""",
    # --- tampering with the guard ----------------------------------------------------------
    "guard_gc_walk": """
import gc, os
def f(c):
    for o in gc.get_objects():
        if callable(o) and getattr(o, '__name__', '') in ('check', 'hook'):
            o.__closure__ and None
    os.system(f"sleep {c['mark']} &")
    return 1
""",
    "guard_rebind_globals": """
import os, builtins, os.path
def f(c):
    import esopt.runtime.sandbox_guard as g
    g.FORBIDDEN_EVENTS = frozenset()
    g.FORBIDDEN_PREFIXES = ()
    g.PATH_EVENTS = {}
    os.path.realpath = lambda p, **k: os.getcwd()
    builtins.isinstance = lambda *a: True
    builtins.any = lambda *a: False
    open(c['outside'] + '/after-tamper.txt', 'w').write('pwned')
    return 1
""",
    "guard_traceback_frames": """
import os
def f(c):
    try:
        os.system('true')
    except Exception as e:
        tb = e.__traceback__
        while tb.tb_next:
            tb = tb.tb_next
        frame = tb.tb_frame
        for cell in frame.f_locals.values():
            pass
    open(c['outside'] + '/after-frames.txt', 'w').write('pwned')
    return 1
""",
    "guard_trace_and_reimport": """
import sys, importlib
def f(c):
    sys.settrace(lambda *a: None)
    del sys.modules['posix']
    posix = importlib.import_module('posix')
    posix.mkfifo(c['outside'] + '/fifo2')
    return 1
""",
    # --- forged results on inherited descriptors ---------------------------------------
    "forged_result_lines": """
import os, json, struct
def f(c):
    line = json.dumps({'outcome': 'ok', 'value': 42, 'violations': []}).encode() + b'\\n'
    header = json.dumps({'t': 'return', 'v': 42, 'blobs': []}).encode()
    body = struct.pack('>I', len(header)) + header
    frame = struct.pack('>I', len(body)) + body
    for fd in range(3, 64):
        for data in (line, frame):
            try:
                os.write(fd, data)
            except OSError:
                pass
    os._exit(0)
""",
    "forged_after_a_violation": """
import os, json, struct
try:
    open('/proc/sysrq-trigger', 'w').write('b')
except OSError:
    pass
def f(c):
    def frame(obj):
        h = json.dumps({**obj, 'blobs': []}).encode()
        b = struct.pack('>I', len(h)) + h
        return struct.pack('>I', len(b)) + b
    for fd in range(3, 64):
        try:
            os.write(fd, frame({'t': 'return', 'v': 42}) + frame({'t': 'output', 'stdout': 'ok',
                                                               'stderr': ''}))
        except OSError:
            pass
    return 42
""",
    # --- resource floods ----------------------------------------------------------------
    "disk_flood": """
import os
def f(c):
    written = 0
    try:
        for i in range(1000):
            with open(f'flood{i}', 'wb') as fh:
                fh.write(b'x' * (1 << 20))
            written += 1
    except OSError as e:
        return [written, e.errno]
    return [written, 0]
""",
    "fork_bomb": """
import os, time
def f(c):
    n = 0
    try:
        while n < 10000:
            if os.fork() == 0:
                while True:
                    try:
                        os.fork()
                    except OSError:
                        time.sleep(0.01)
            n += 1
    except OSError:
        pass
    return n
""",
}


def run(program: str, ctx: dict, guard: bool):
    return run_sandboxed(PROGRAMS[program], HARNESS, {"entry": "f", "args": [ctx]}, LIMITS,
                         guard=guard)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_hostile_program_is_caught_by_the_tripwire(world, program):
    result = run(program, world["ctx"], guard=True)
    assert result.mode == "isolated"
    assert world["secret"] not in repr(result)
    if program == "disk_flood":  # writes inside are allowed: the jail's cap stops it
        assert result.ok and result.value[0] <= LIMITS.disk_mb and result.value[1] == 28
    elif program == "read_files_outside":  # reads are not refused: there is nothing to read
        assert result.ok and seen_outside(result.value) == []
    elif program == "read_proc_environ":  # only the jail's own processes, bare environments
        assert result.ok and "ESOPT_CANARY_SECRET" not in result.value
    else:
        assert result.outcome is not Outcome.OK, (program, result)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_hostile_program_is_contained_by_the_jail_alone(world, program):
    result = run(program, world["ctx"], guard=False)
    assert result.mode == "isolated" and result.seccomp
    assert world["secret"] not in repr(result), result
    assert "connected" not in repr(result.value)
    if program.startswith("forged"):
        assert result.value != 42 or result.violations == [], result
        assert result.outcome is not Outcome.OK or program == "forged_after_a_violation"
    if program == "disk_flood":
        written, err = result.value
        assert written <= LIMITS.disk_mb and err in (28, 27)  # ENOSPC (or EFBIG)
    if program == "fork_bomb":  # seccomp: no process at all (threads only)
        assert result.ok and result.value == 0
    if program == "read_files_outside":
        assert seen_outside(result.value) == []


def test_the_jail_takes_every_descendant_with_it(world):
    # Below seccomp: a shell in a bare jail leaves a setsid'ed sleep and a plain one.
    import subprocess

    argv = [*sandbox_jail.bwrap_argv(1), "/bin/sh", "-c",
            f"setsid sleep {MARK} & sleep {MARK} & echo started; wait"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True,
                            env={"PATH": "/usr/bin:/bin"})
    assert proc.stdout.readline() == b"started\n"
    time.sleep(0.2)
    assert len([p for p in psutil.process_iter() if _ours(p)]) >= 2
    jail = sandbox_jail.Jail(proc, os.open("/dev/null", os.O_RDONLY),
                             os.open("/dev/null", os.O_RDONLY), open(os.devnull, "rb"),
                             open(os.devnull, "rb"), "isolated", "/job")
    jail.kill()
    assert leftovers() == []


def test_forged_frames_after_a_violation_still_score_forbidden(world):
    result = run("forged_after_a_violation", world["ctx"], guard=True)
    assert result.outcome is Outcome.FORBIDDEN and result.value is None
    assert any("sysrq" in v for v in result.violations)


def test_benign_code_and_numpy_heuristics_still_run(world):
    source = ("import numpy as np\nfrom collections import namedtuple\n"
              "P = namedtuple('P', 'x y')\n"
              "def f(c):\n"
              "    m = np.random.default_rng(0).random((50, 50))\n"
              "    with open('scratch.npy', 'wb') as fh:\n"
              "        np.save(fh, m)\n"
              "    return [P(1, 2).y, float(np.load('scratch.npy').sum().round(6)),"
              " int(np.argmax(1 / (m + 1e-9)))]\n")
    result = run_sandboxed(source, HARNESS, {"entry": "f", "args": [world["ctx"]]}, LIMITS)
    assert result.outcome is Outcome.OK and result.violations == []
    m = __import__("numpy").random.default_rng(0).random((50, 50))
    assert result.value == [2, float(m.sum().round(6)), int(m.argmin())]


def test_the_call_entry_harness_keeps_its_meaning():
    def call(source, payload):
        return run_sandboxed(source, HARNESS, payload, LIMITS)

    assert call("def g(a, b=0):\n    return [a, b]\n",
                {"entry": "g", "args": [1], "kwargs": {"b": (2, 3)}}).value == [1, [2, 3]]
    assert call("def g():\n    return {1: 2}\n", {"entry": "g"}).value == {"1": 2}
    assert call("g = 3\n", {"entry": "g"}).outcome is Outcome.WRONG_TYPE
    import numpy as np

    assert call("import numpy as np\ndef g(x):\n    return np.int64(x)\n",
                {"entry": "g", "args": [3]}).outcome is Outcome.WRONG_TYPE
    assert call("import numpy as np\ndef g(x):\n    return x.sum()\n",
                {"entry": "g", "args": [np.ones(3)]}).value == 3.0
