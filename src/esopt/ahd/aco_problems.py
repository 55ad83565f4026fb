"""ACO heuristic design (paper Table 14; ReEvo's tsp_aco, cvrp_aco, bpp_offline_aco).

The LLM writes `heuristics(...) -> np.ndarray`, a matrix of how promising each edge (TSP,
CVRP) or item pair (BPP) is. The child process only computes these matrices (the
harnesses below); the trusted parent checks them and runs the colony (`esopt.ahd.aco`),
seeded per instance, so the objective is deterministic. Inputs follow ReEvo's eval.py:
the distance matrix's diagonal is set to 1 (so `1 / distance_matrix` is finite), and the
matrix gets +1e-9 and a floor of 1e-9 (TSP, CVRP) or is clipped to [1e-6, 1e6] and
normalised by its maximum (BPP).

Generated instances (without `ahd.instances`) follow ReEvo's gen_inst.py conventions:
TSP points U[0,1]^2; CVRP depot (0.5, 0.5) and integer demands 1..9, capacity 50; BPP
item sizes 20..100, capacity 150.
"""

from __future__ import annotations

import base64

import numpy as np

from esopt.ahd import aco
from esopt.ahd.common import call_many, frozen
from esopt.runtime.sandbox import WrongType

CVRP_CAPACITY = 50
BPP_CAPACITY = 150
SEEDS = {"tsp_aco": 1234, "cvrp_aco": 1235, "bpp_offline_aco": 1236}
SIZES = {
    "tsp_aco": {"train": (5, 50), "val20": (64, 20), "val50": (64, 50), "val100": (64, 100),
                "test20": (64, 20), "test50": (64, 50), "test100": (64, 100)},
    "cvrp_aco": {"train": (10, 50), "val20": (64, 20), "val50": (64, 50), "val100": (64, 100),
                 "test20": (64, 20), "test50": (64, 50), "test100": (64, 100)},
    "bpp_offline_aco": {"train": (5, 500), "val120": (64, 120), "val500": (64, 500),
                        "val1000": (64, 1000), "test500": (64, 500), "test1000": (64, 1000)},
}

TSP_SEED = '''\
import numpy as np

def heuristics(distance_matrix: np.ndarray) -> np.ndarray:
    """Inverse distance (ReEvo's seed heuristic)."""
    return 1 / distance_matrix
'''
CVRP_SEED = '''\
import numpy as np

def heuristics(distance_matrix: np.ndarray, coordinates: np.ndarray, demands: np.ndarray,
               capacity: int) -> np.ndarray:
    """Inverse distance (ReEvo's seed heuristic)."""
    return 1 / distance_matrix
'''
BPP_SEED = '''\
import numpy as np

def heuristics(demand: np.ndarray, capacity: int) -> np.ndarray:
    """Item j's size over the largest, whatever i (ReEvo's seed heuristic)."""
    return np.tile(demand / demand.max(), (demand.shape[0], 1))
'''


def generate(problem: str, split: str) -> np.ndarray:
    """Instances drawn per split from a seed of (problem, split), read-only."""
    if split not in SIZES[problem]:
        raise ValueError(f"unknown {problem} split {split!r}; expected one of "
                         f"{sorted(SIZES[problem])}")
    count, n = SIZES[problem][split]
    rng = np.random.default_rng([SEEDS[problem], sorted(SIZES[problem]).index(split)])
    if problem == "tsp_aco":
        data = rng.random((count, n, 2))
    elif problem == "cvrp_aco":
        data = np.empty((count, n + 1, 3))
        data[:, 1:, 0] = rng.integers(1, 10, size=(count, n))
        data[:, 1:, 1:] = rng.random((count, n, 2))
        data[:, 0] = (0.0, 0.5, 0.5)
    else:
        data = rng.integers(20, 101, size=(count, n))
    data.setflags(write=False)
    return data


def distances(coords: np.ndarray) -> np.ndarray:
    """Euclidean distances with the diagonal set to 1 (ReEvo's placeholder)."""
    dist = np.sqrt(((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1))
    dist[np.diag_indices_from(dist)] = 1.0
    return dist


def _encode(matrix, n: int) -> str:
    try:
        matrix = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise WrongType(f"heuristics returned {type(matrix).__name__}, not a matrix") from e
    if matrix.shape != (n, n):
        raise WrongType(f"heuristics returned shape {matrix.shape}, expected {(n, n)}")
    return base64.b64encode(matrix.astype(np.float32).tobytes()).decode("ascii")


def _entry(namespace: dict):
    fn = namespace.get("heuristics")
    if not callable(fn):
        raise WrongType("the code defines no function 'heuristics'")
    return fn


def tsp_harness(namespace: dict, payload: dict) -> list[str]:
    """Trusted side: the candidate's heuristic matrix per instance (float32, base64), all
    instances in one round trip into the sandbox."""
    fn = _entry(namespace)
    calls = [((frozen(distances(c)),), {}) for c in payload["instances"]]
    return [_encode(m, len(c)) for m, c in zip(call_many(fn, calls), payload["instances"],
                                                 strict=True)]


def cvrp_harness(namespace: dict, payload: dict) -> list[str]:
    fn = _entry(namespace)
    calls = [((frozen(distances(inst[:, 1:])), frozen(inst[:, 1:]), frozen(inst[:, 0]),
               CVRP_CAPACITY), {}) for inst in payload["instances"]]
    return [_encode(m, len(inst)) for m, inst in zip(call_many(fn, calls),
                                                     payload["instances"], strict=True)]


def bpp_harness(namespace: dict, payload: dict) -> list[str]:
    fn = _entry(namespace)
    calls = [((frozen(d), BPP_CAPACITY), {}) for d in payload["instances"]]
    return [_encode(m, len(d)) for m, d in zip(call_many(fn, calls), payload["instances"],
                                               strict=True)]


def decode(matrices, n: int) -> list[np.ndarray]:
    """Parent side: the matrices back as float64, checked (finite, right shape)."""
    out = []
    for i, text in enumerate(matrices):
        try:
            m = np.frombuffer(base64.b64decode(text, validate=True), dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise WrongType(f"instance {i}: unreadable heuristic matrix") from e
        if m.size != n * n:
            raise WrongType(f"instance {i}: {m.size} entries, expected {n * n}")
        m = m.astype(np.float64).reshape(n, n)
        if not np.isfinite(m).all():
            raise WrongType(f"instance {i}: the heuristic matrix has NaN or inf entries")
        out.append(m)
    return out


def _edge_prior(m: np.ndarray) -> np.ndarray:
    m = m + 1e-9
    m[m < 1e-9] = 1e-9
    return m


def _pair_prior(m: np.ndarray) -> np.ndarray:
    m = np.clip(m, 1e-6, 1e6)
    m = m / m.max()
    m[m < 1e-6] = 1e-6
    return m


def _check_count(matrices, data) -> None:
    if not isinstance(matrices, list) or len(matrices) != len(data):
        raise WrongType(f"{len(matrices) if isinstance(matrices, list) else '?'} matrices "
                        f"for {len(data)} instances")


def tsp_objective(matrices, data: np.ndarray, split: str) -> float:
    """Mean best tour length over the instances (ReEvo's 30 ants x 100 iterations)."""
    _check_count(matrices, data)
    heus = decode(matrices, data.shape[1])
    return float(np.mean([aco.tsp_aco(distances(c), _edge_prior(h), aco.TSP_PARAMS, seed=i)
                          for i, (c, h) in enumerate(zip(data, heus, strict=True))]))


def cvrp_objective(matrices, data: np.ndarray, split: str) -> float:
    """Mean best total route length (capacity 50; 30 ants x 100 iterations)."""
    _check_count(matrices, data)
    heus = decode(matrices, data.shape[1])
    return float(np.mean([
        aco.cvrp_aco(distances(inst[:, 1:]), inst[:, 0], CVRP_CAPACITY, _edge_prior(h),
                     aco.CVRP_PARAMS, seed=i)
        for i, (inst, h) in enumerate(zip(data, heus, strict=True))]))


def bpp_objective(matrices, data: np.ndarray, split: str) -> float:
    """Mean bins used (capacity 150; ReEvo's 20 ants x 15 iterations to train, 30 x 100 to
    test)."""
    _check_count(matrices, data)
    params = aco.BPP_TRAIN_PARAMS if split == "train" else aco.BPP_TEST_PARAMS
    heus = decode(matrices, data.shape[1])
    return float(np.mean([aco.bpp_aco(d, BPP_CAPACITY, _pair_prior(h), params, seed=i)
                          for i, (d, h) in enumerate(zip(data, heus, strict=True))]))
