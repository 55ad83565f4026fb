"""Fault injection for the fan-out tests, from outside the library.

The library never reads a fault switch. A test that wants a crashing or a slow direction
puts `fault_site/` on PYTHONPATH (its `sitecustomize` wraps
`esopt.pipeline.objective.score_directions` in every Python process that starts with it:
the local fan-out's subprocesses and SLURM's array tasks inherit the environment) and sets
ESOPT_FAIL_DIRECTION (that direction raises) or ESOPT_DIRECTION_DELAY_S (each direction
waits that long first).
"""

from __future__ import annotations

import os
from pathlib import Path

SITE = Path(__file__).resolve().parent / "fault_site"
INJECTED_LINE = 'raise RuntimeError(f"injected failure in direction {d.index}")'


def fault_environment(fail_direction: int | None = None,
                      delay_s: float | None = None) -> dict[str, str]:
    """Environment variables that inject the faults into processes started with them."""
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH"))
                                         if p)}
    if fail_direction is not None:
        env["ESOPT_FAIL_DIRECTION"] = str(fail_direction)
    if delay_s is not None:
        env["ESOPT_DIRECTION_DELAY_S"] = str(delay_s)
    return env
