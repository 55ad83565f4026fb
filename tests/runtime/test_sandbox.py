"""Hostile LLM-written code is contained, scored as a typed failure, and the run goes on."""

import errno
import os
import socket
import threading

import pytest

from esopt.runtime.sandbox import Outcome, SandboxLimits, run_sandboxed

HARNESS = "esopt.runtime.sandbox:call_entry"
FAST = SandboxLimits(wall_s=20, cpu_s=2, memory_mb=1024, file_mb=1, output_chars=200)


def run(source: str, *args, limits: SandboxLimits = FAST):
    return run_sandboxed(source, HARNESS, {"entry": "f", "args": list(args)}, limits)


def test_well_behaved_code_returns_its_value():
    result = run("import numpy as np\ndef f(x):\n    return float(np.sum(np.arange(x)))\n", 5)
    assert result.outcome is Outcome.OK and result.value == 10.0


@pytest.mark.parametrize(
    "source, outcome",
    [
        ("def f(x) return x", Outcome.SYNTAX_ERROR),
        ("def f(x):\n    return 1 / 0\n", Outcome.EXCEPTION),
        ("import sys\ndef f(x):\n    sys.exit(0)\n", Outcome.EXCEPTION),
        ("def f(x):\n    return {1, 2}\n", Outcome.WRONG_TYPE),
        ("g = 1\n", Outcome.WRONG_TYPE),  # no function called f
        ("import os\ndef f(x):\n    os._exit(0)\n", Outcome.CRASH),
    ],
)
def test_ordinary_failures_are_typed(source, outcome):
    assert run(source, 1).outcome is outcome


def test_infinite_loop_is_stopped_by_the_cpu_limit():
    result = run("def f(x):\n    while True:\n        pass\n", 1)
    assert result.outcome is Outcome.TIMEOUT
    assert result.wall_s < FAST.wall_s


def test_sleeping_code_is_stopped_by_the_wall_clock():
    limits = SandboxLimits(wall_s=1.5, cpu_s=30)
    result = run("import time\ndef f(x):\n    time.sleep(60)\n", 1, limits=limits)
    assert result.outcome is Outcome.TIMEOUT and result.wall_s < 10


@pytest.mark.parametrize("source", [
    # Growing by touched pages costs ~1-2 s of CPU in page faults before the limit: give
    # it CPU time so that the address-space limit, not the CPU limit, is what stops it.
    "def f(x):\n    held = []\n    while True:\n        held.append(bytearray(10**7))\n",
    "def f(x):\n    return len([0] * 10**10)\n",
])
def test_memory_bomb_is_a_memory_failure(source):
    limits = SandboxLimits(wall_s=60, cpu_s=20, memory_mb=1024)
    assert run(source, 1, limits=limits).outcome is Outcome.MEMORY


@pytest.mark.parametrize(
    "source",
    [
        "import os\ndef f(x):\n    while True:\n        os.fork()\n",
        "import subprocess\ndef f(x):\n    subprocess.Popen(['sleep', '100'])\n",
        "import os\ndef f(x):\n    os.system('sleep 100')\n",
        "import multiprocessing as mp\ndef f(x):\n    mp.Process(target=print).start()\n",
    ],
)
def test_process_creation_is_forbidden(source):
    result = run(source, 1)
    assert result.outcome is Outcome.FORBIDDEN, result.detail


def test_killing_the_parent_is_forbidden_and_the_parent_lives():
    source = "import os\ndef f(x):\n    os.kill(os.getppid(), 9)\n    os.kill(x, 9)\n"
    result = run(source, os.getpid())
    assert result.outcome is Outcome.FORBIDDEN and "os.kill" in result.detail


def test_opening_a_socket_is_forbidden_even_when_the_error_is_caught():
    source = (
        "import socket\n"
        "def f(x):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', x), timeout=1)\n"
        "    except Exception:\n"
        "        pass\n"
        "    return 1\n"
    )
    with socket.socket() as server:  # a listener the code would reach without the sandbox
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.5)
        result = run(source, server.getsockname()[1])
        with pytest.raises(TimeoutError):
            server.accept()
    assert result.outcome is Outcome.FORBIDDEN and result.violations


def test_no_socket_reaches_anything_even_without_the_guard():
    # Below the tripwire: the jail's empty network namespace, and seccomp's refusal.
    source = (
        "import socket\n"
        "def f(port):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=1)\n"
        "    except OSError as e:\n"
        "        return e.errno\n"
        "    return 0\n"
    )
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.5)
        result = run_sandboxed(source, HARNESS, {"entry": "f", "args": [server.getsockname()[1]]},
                               FAST, guard=False)
        with pytest.raises(TimeoutError):
            server.accept()
    assert result.network_isolated and result.ok
    assert result.value in (errno.EPERM, errno.ENETUNREACH, errno.EADDRNOTAVAIL)


def test_writing_outside_the_work_directory_is_forbidden(tmp_path):
    target = tmp_path / "escaped.txt"
    attempts = [
        f"open({str(target)!r}, 'w').write('x')",
        f"import os; os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY)",
        f"import pathlib; pathlib.Path({str(target)!r}).write_text('x')",
        f"import os; os.symlink({str(target)!r}, 'link'); open('link', 'w').write('x')",
        f"open('a', 'w').close(); import shutil; shutil.copyfile('a', {str(target)!r})",
        f"import os; os.rename('.', {str(tmp_path / 'moved')!r})",
    ]
    for attempt in attempts:
        result = run(f"def f(x):\n    {attempt}\n    return 1\n", 1)
        assert result.outcome in (Outcome.FORBIDDEN, Outcome.EXCEPTION), (attempt, result)
    assert sorted(os.listdir(tmp_path)) == []


def test_files_inside_the_work_directory_are_allowed_and_removed_afterwards():
    source = (
        "import os\n"
        "def f(x):\n"
        "    with open('scratch.txt', 'w') as fh:\n"
        "        fh.write('hello')\n"
        "    return os.path.abspath('scratch.txt')\n"
    )
    result = run(source, 1)
    assert result.outcome is Outcome.OK
    assert result.value.endswith("scratch.txt") and not os.path.exists(result.value)


def test_huge_output_is_truncated_and_the_code_still_scores():
    source = "def f(x):\n    for _ in range(20000):\n        print('y' * 500)\n    return 7\n"
    result = run(source, 1)
    assert result.outcome is Outcome.OK and result.value == 7
    assert 200 <= len(result.stdout) < 400 and "more characters dropped" in result.stdout


def test_raw_writes_to_stdout_are_capped_by_the_file_size_limit():
    source = "import os\ndef f(x):\n    while True:\n        os.write(1, b'z' * 65536)\n"
    result = run(source, 1)
    assert result.outcome in (Outcome.EXCEPTION, Outcome.CRASH)  # EFBIG or SIGXFSZ
    assert len(result.stdout) <= FAST.output_chars + 20


def test_a_batch_with_hostile_members_goes_on():
    sources = [
        "def f(x):\n    return x + 1\n",
        "def f(x):\n    while True:\n        pass\n",
        "import os\ndef f(x):\n    os.fork()\n",
        "def f(x):\n    return x + 2\n",
    ]
    results = [None] * len(sources)

    def work(i):
        results[i] = run(sources[i], 10)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(sources))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.TIMEOUT, Outcome.FORBIDDEN,
                                            Outcome.OK]
    assert [results[0].value, results[3].value] == [11, 12]


def test_limits_are_validated():
    with pytest.raises(ValueError, match="cpu_s"):
        SandboxLimits(cpu_s=0)
    with pytest.raises(ValueError, match="module:function"):
        run_sandboxed("", "no_colon")
