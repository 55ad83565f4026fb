"""Benchmark instance files by path (`ahd.instances: <dir>`), the generators otherwise.

The standard test sets of the constructive and ACO benchmarks (MCTS-AHD / ReEvo; e.g.
1000 instances for TSP20/50 and KP50/100) live in `<dir>/<problem>/{split}{N}_dataset.npy`
(`.npz` with `demands` for offline BPP). Without a directory the project's generators
serve instead: they follow the benchmarks' conventions but, for TSP, are NOT the
distributed test files, so rows computed on them are not the paper's.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

# split name -> file stem, per problem (a split's N is in its file name).
FILES = {
    "tsp_constructive": {"train": "train50", "val": "val50", "test20": "test20",
                         "test50": "test50", "test100": "test100", "test200": "test200"},
    "kp_constructive": {"train": "train100", "val50": "val50", "val100": "val100",
                        "val200": "val200", "test50": "test50", "test100": "test100",
                        "test200": "test200"},
    "tsp_aco": {"train": "train50", "val20": "val20", "val50": "val50", "val100": "val100",
                "test20": "test20", "test50": "test50", "test100": "test100"},
    "cvrp_aco": {"train": "train50", "val20": "val20", "val50": "val50", "val100": "val100",
                 "test20": "test20", "test50": "test50", "test100": "test100"},
    "bpp_offline_aco": {"train": "train500", "val120": "val120", "val500": "val500",
                        "val1000": "val1000", "test500": "test500", "test1000": "test1000"},
}


class InstanceFileError(FileNotFoundError):
    """A configured instance directory lacks a file a split needs."""


def instance_path(root: str | Path, problem: str, split: str) -> Path:
    """Where `split` of `problem` lives under `root` (.npy, or .npz for offline BPP)."""
    stems = FILES.get(problem)
    if stems is None or split not in stems:
        raise ValueError(f"no instance file for {problem} split {split!r}; known: "
                         f"{sorted(stems or {})}")
    ext = "npz" if problem == "bpp_offline_aco" else "npy"
    return Path(root) / problem / f"{stems[split]}_dataset.{ext}"


@functools.lru_cache(maxsize=32)
def _load(path: str) -> np.ndarray:
    if not Path(path).exists():
        raise InstanceFileError(f"ahd.instances: {path} does not exist")
    if path.endswith(".npz"):
        with np.load(path) as z:
            data = np.asarray(z["demands"], dtype=np.int64)
    else:
        data = np.load(path, allow_pickle=False).astype(np.float64)
    data.setflags(write=False)
    return data


def load(root: str | Path, problem: str, split: str) -> np.ndarray:
    """The split's instances from the files under `root`, read-only and cached."""
    return _load(str(instance_path(root, problem, split)))


def describe(root: str | Path | None) -> str:
    """Which instances a row was computed on (written next to the reference rows)."""
    if root is None:
        return "generated (the project's seed streams; not the benchmarks' test files)"
    return f"files under {Path(root).resolve()}"
