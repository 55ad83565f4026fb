"""Cost of the sandbox per call, before (the audit-hook-only sandbox of eaa2347) and after
(the jail), measured in one run on this machine.

    python benchmarks/sandbox.py                 # ~1-2 minutes on 2 cores
    python benchmarks/sandbox.py --calls 40 --evals 5

Prints: ms per sandboxed call (a trivial `call_entry` function, and a math-tool script);
AHD evaluations per second (the greedy TSP heuristic on the 64-instance train split,
objective computed in the parent); and the bare start of a jail, bwrap against `unshare`
(the measurement behind choosing bubblewrap). "before" is the old implementation, taken
from git (`--before REV`) into a temporary package and run beside the new one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRIVIAL = "def f(x):\n    return x + 1\n"
SCRIPT = "import math\nprint(math.comb(30, 12))\n"


def old_sandbox(rev: str, into: Path):
    """The sandbox (and TSP harness) of `rev` as the package esopt_before.runtime."""
    pkg = into / "src" / "esopt_before" / "runtime"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    for name in ("sandbox.py", "sandbox_child.py"):
        text = subprocess.run(["git", "show", f"{rev}:src/esopt/runtime/{name}"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout
        text = text.replace("esopt.runtime.sandbox", "esopt_before.runtime.sandbox")
        (pkg / name).write_text(text)
    tsp = subprocess.run(["git", "show", f"{rev}:src/esopt/ahd/tsp.py"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    (pkg / "tsp.py").write_text(tsp.replace("esopt.runtime.sandbox",
                                            "esopt_before.runtime.sandbox"))
    sys.path.insert(0, str(into / "src"))
    import esopt_before.runtime.sandbox as before

    return before


def per_call(fn, n: int) -> tuple[float, float]:
    """Mean and std of ms per call over n calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.mean(times), statistics.stdev(times) if n > 1 else 0.0


def jail_start_ms(n: int) -> dict[str, float]:
    """A bare jail around /bin/true: bwrap (our argv) against unshare."""
    from esopt.runtime.sandbox_jail import bwrap_argv

    cmds = {"bwrap": [*bwrap_argv(1), "/bin/true"],
            "unshare": ["unshare", "--user", "--map-root-user", "--pid", "--net", "--ipc",
                        "--mount", "--fork", "--mount-proc", "/bin/true"]}
    out = {}
    for name, argv in cmds.items():
        if shutil.which(argv[0]) is None:
            continue
        try:
            out[name] = per_call(lambda a=argv: subprocess.run(a, check=True, capture_output=True),
                                 n)[0]
        except subprocess.CalledProcessError:
            out[name] = float("nan")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20, help="calls per variant")
    p.add_argument("--evals", type=int, default=3, help="AHD evaluations per variant")
    p.add_argument("--before", default="eaa2347", help="git revision of the old sandbox")
    args = p.parse_args(argv)

    import numpy as np

    from esopt.ahd import tsp
    from esopt.ahd.problems import PROBLEMS, evaluate
    from esopt.runtime import sandbox

    H = "esopt.runtime.sandbox:call_entry"
    tmp = Path(tempfile.mkdtemp(prefix="esopt-bench-sandbox-"))
    try:
        before = old_sandbox(args.before, tmp)
        variants = {"before": None, "after guard-only": "guard-only",
                    "after isolated": "isolated"}
        try:
            sandbox.set_mode("isolated")
            mode = sandbox.sandbox_mode()
        except sandbox.SandboxUnavailable as e:
            print(f"isolated mode unavailable here: {e}")
            del variants["after isolated"]
            mode = "guard-only"
        print(f"machine: {os.cpu_count()} cores; isolation this machine got: {mode}")
        data = tsp.instances("train")
        problem = PROBLEMS["tsp_constructive"]
        rows = []
        for label, m in variants.items():
            if m is None:
                call = lambda: before.run_sandboxed(TRIVIAL, "esopt_before.runtime.sandbox:"  # noqa: E731
                                                    "call_entry", {"entry": "f", "args": [1]})
                script = lambda: before.run_sandboxed(SCRIPT, "esopt_before.runtime.sandbox:"  # noqa: E731
                                                      "run_script", None)

                def ahd():
                    r = before.run_sandboxed(problem.greedy_source,
                                             "esopt_before.runtime.tsp:harness",
                                             {"instances": data})
                    assert r.ok, r.detail
                    return float(tsp.tour_lengths(data, r.value).mean())
            else:
                sandbox.set_mode(m)
                call = lambda: sandbox.run_sandboxed(TRIVIAL, H, {"entry": "f", "args": [1]})  # noqa: E731
                script = lambda: sandbox.run_sandboxed(SCRIPT, "esopt.runtime.sandbox:run_script")  # noqa: E731

                def ahd():
                    ev = evaluate(problem, problem.greedy_source, "train")
                    assert ev.ok, ev.detail
                    return ev.objective
            assert call().value == 2
            ms, sd = per_call(call, args.calls)
            ms_script, _ = per_call(script, args.calls)
            objective = ahd()
            eval_ms, eval_sd = per_call(ahd, args.evals)
            rows.append((label, ms, sd, ms_script, 1000 / eval_ms, eval_ms, eval_sd, objective))
        base = rows[0]
        print(f"{'variant':<18} {'ms/call':>14} {'x before':>8} {'ms/script':>10} "
              f"{'AHD evals/s':>11} {'ms/eval':>14} {'x before':>8}  objective")
        for label, ms, sd, ms_script, eps, eval_ms, eval_sd, objective in rows:
            print(f"{label:<18} {ms:7.1f} ± {sd:5.1f} {ms / base[1]:8.2f} {ms_script:10.1f} "
                  f"{eps:11.2f} {eval_ms:7.0f} ± {eval_sd:4.0f} {eval_ms / base[5]:8.2f}  "
                  f"{objective:.6f}")
        assert len({round(r[7], 9) for r in rows}) == 1, "the objective changed"
        starts = jail_start_ms(args.calls)
        print("bare jail start around /bin/true (ms): " +
              ", ".join(f"{k} {v:.1f}" for k, v in starts.items()))
        print(f"numpy {np.__version__}; calls per variant {args.calls}, AHD evals {args.evals}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
