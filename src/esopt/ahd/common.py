"""Pieces the constructive problems share: split streams and checks on returned indices."""

from __future__ import annotations

import numpy as np

from esopt.runtime.sandbox import WrongType


def uniform_split(seed: int, splits, split: str, problem: str) -> np.ndarray:
    """Split `split` of a stream of U(0,1) arrays (count, size, 2) drawn in `splits` order
    from `np.random.seed(seed)`'s legacy generator (the MCTS-AHD convention), read-only."""
    names = [s[0] for s in splits]
    if split not in names:
        raise ValueError(f"unknown {problem} split {split!r}; expected one of {names}")
    stream = np.random.RandomState(seed)  # the legacy global-seed stream, explicitly
    for name, count, size in splits:
        data = stream.rand(count, size, 2)
        if name == split:
            data.setflags(write=False)
            return data
    raise AssertionError("unreachable")


def as_index(value, function: str) -> int:
    """The int a heuristic returned (numpy ints allowed, bools and floats not)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise WrongType(f"{function} returned {type(value).__name__}, not an int")
    return int(value)


def index_array(values, what: str) -> np.ndarray:
    """Parent side: a list of Python ints (as the sandbox's JSON gives them) as an int64
    array; floats, bools, strings or nested lists are a WrongType of the candidate."""
    if not isinstance(values, list) or not all(type(v) is int for v in values):
        raise WrongType(f"{what}: expected a list of integer indices")
    if any(not -2**62 < v < 2**62 for v in values):
        raise WrongType(f"{what}: an index out of range")
    return np.asarray(values, dtype=np.int64)


def call_many(function, calls: list[tuple[tuple, dict]]) -> list:
    """function(*args, **kwargs) for each call, in order: one round trip into the sandbox
    when `function` is the jailed code's (it has `map`), else plain calls."""
    if hasattr(function, "map"):
        return function.map(calls)
    return [function(*args, **kwargs) for args, kwargs in calls]


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only array: sent into the sandbox once per call session (the code gets a
    fresh writable copy each time, as from `array.copy()`)."""
    array = np.array(array)
    array.setflags(write=False)
    return array
