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


# What one instance is, per problem, with n the size in the file's name: (shape, what).
LAYOUTS = {
    "tsp_constructive": (lambda n: (n, 2), "{n} points (x, y)"),
    "kp_constructive": (lambda n: (n, 2), "{n} items (weight, value)"),
    "tsp_aco": (lambda n: (n, 2), "{n} points (x, y)"),
    "cvrp_aco": (lambda n: (n + 1, 3), "the depot and {n} customers (demand, x, y)"),
    "bpp_offline_aco": (lambda n: (n,), "{n} item sizes (integers)"),
}


class InstanceFileError(FileNotFoundError):
    """A configured instance directory lacks a file a split needs."""


class InstanceDataError(ValueError):
    """An instance file that cannot be scored: unreadable, of the wrong shape, not finite."""


def instance_path(root: str | Path, problem: str, split: str) -> Path:
    """Where `split` of `problem` lives under `root` (.npy, or .npz for offline BPP)."""
    stems = FILES.get(problem)
    if stems is None or split not in stems:
        raise ValueError(f"no instance file for {problem} split {split!r}; known: "
                         f"{sorted(stems or {})}")
    ext = "npz" if problem == "bpp_offline_aco" else "npy"
    return Path(root) / problem / f"{stems[split]}_dataset.{ext}"


def _read(path: str) -> np.ndarray:
    """The array of an instance file (the `demands` of an .npz), as stored."""
    try:
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                if "demands" not in z.files:
                    raise InstanceDataError(f"ahd.instances: {path} has no 'demands' array "
                                            f"(has {sorted(z.files)})")
                return z["demands"]
        return np.load(path, allow_pickle=False)
    except InstanceDataError:
        raise
    except (OSError, ValueError, EOFError) as e:  # truncated, not numpy, pickled objects
        raise InstanceDataError(f"ahd.instances: {path} is not a readable numpy file: {e}"
                                ) from None


@functools.lru_cache(maxsize=32)
def _load(path: str, problem: str, size: int) -> np.ndarray:
    if not Path(path).exists():
        raise InstanceFileError(f"ahd.instances: {path} does not exist")
    data = _read(path)
    instance, what = LAYOUTS[problem]
    expected = instance(size)
    # A wrong shape or a NaN would score `nan` (or crash inside a colony), far from the file.
    if (data.dtype.kind not in "iuf" or data.ndim != 1 + len(expected)
            or data.shape[1:] != expected or len(data) == 0):
        raise InstanceDataError(
            f"ahd.instances: {path} holds a {data.dtype} array of shape {data.shape}; "
            f"{problem} needs numbers of shape (instances >= 1, {', '.join(map(str, expected))})"
            f": per instance {what.format(n=size)}")
    bad = np.argwhere(~np.isfinite(data))
    if len(bad):
        raise InstanceDataError(f"ahd.instances: {path} has a non-finite value "
                                f"{data[tuple(bad[0])]} at index {tuple(bad[0].tolist())}")
    if problem == "bpp_offline_aco":
        if np.any(data != np.round(data)):
            raise InstanceDataError(f"ahd.instances: {path}: item sizes must be integers")
        data = data.astype(np.int64)
    else:
        data = data.astype(np.float64)
    data.setflags(write=False)
    return data


def load(root: str | Path, problem: str, split: str) -> np.ndarray:
    """The split's instances from the files under `root`, read-only and cached; a file of
    the wrong shape or with non-finite values raises InstanceDataError naming it."""
    path = instance_path(root, problem, split)
    size = int("".join(ch for ch in FILES[problem][split] if ch.isdigit()))  # train50 -> 50
    return _load(str(path), problem, size)


def describe(root: str | Path | None) -> str:
    """Which instances a row was computed on (written next to the reference rows)."""
    if root is None:
        return "generated (the project's seed streams; not the benchmarks' test files)"
    return f"files under {Path(root).resolve()}"
