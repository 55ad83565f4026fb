"""The AHD problem registry: what the LLM writes, how it is run, scored and referenced."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from esopt.ahd import aco_problems, asp, instances, kp, tsp
from esopt.runtime.sandbox import HeuristicFailure, Outcome, SandboxLimits, run_sandboxed


@dataclass(frozen=True)
class Problem:
    """One AHD problem. `objective` is a mean over a split's instances.

    `data(split, root)` gives a split's instances (from the files under `root`, or the
    generator when `root` is None); `payload(data)` is what the sandboxed harness gets;
    `objective(value, data, split)` validates and scores the harness's output in the parent.
    """

    name: str
    entry: str
    sense: str  # "min" or "max"
    task: str  # the problem statement in the prompts
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    io_note: str
    harness: str
    train_split: str
    test_splits: tuple[str, ...]
    greedy_source: str
    """The baseline heuristic: Greedy Construct (constructive) or ReEvo's seed (ACO)."""
    data: Callable[[str, str | None], Any]
    objective: Callable[[Any, Any, str], float]
    optimum: Callable[[Any], float] | None
    payload: Callable[[Any], dict] = lambda data: {"instances": data}  # noqa: E731
    kind: str = "constructive"  # or "aco" (Table 14)
    chunk: int = 0
    """Instances per sandbox call (0: all); bounds the size of the matrices sent back."""

    def improvement(self, parent: float, child: float) -> float:
        """How much the child improves on the parent, positive when better."""
        return parent - child if self.sense == "min" else child - parent


def _files_or(generator, problem: str):
    def data(split: str, root: str | None = None):
        return generator(split) if root is None else instances.load(root, problem, split)
    return data


def _tsp_objective(tours, data, split: str) -> float:
    return float(tsp.tour_lengths(data, tours).mean())


def _tsp_optimum(coords) -> float:
    if coords.shape[1] <= 20 and len(coords) <= 100:
        return float(np.mean([tsp.held_karp(tsp.distance_matrix(c)) for c in coords]))
    # LKH-3 equals Held-Karp on every TSP20 test instance checked; far faster on 1000.
    return float(np.mean([tsp.lkh_length(c) for c in coords]))


def _kp_objective(packings, data, split: str) -> float:
    return float(kp.packing_values(data, packings).mean())


def _kp_optimum(data) -> float:
    return float(np.mean([kp.optimum(items, kp.capacity(len(items))) for items in data]))


def _asp_data(split: str, root: str | None = None) -> tuple[int, int]:
    if split not in asp.INSTANCES:
        raise ValueError(f"unknown ASP split {split!r}; expected one of {sorted(asp.INSTANCES)}")
    return asp.INSTANCES[split]


ACO_NOTE = ("Return a numpy array of the input's shape; larger entries mean more promising. "
            "An ant colony (pheromone x heuristic, 30 ants) builds the solutions from it.")


PROBLEMS: dict[str, Problem] = {
    "tsp_constructive": Problem(
        name="tsp_constructive", entry="select_next_node", sense="min",
        task=("Given a set of nodes with their coordinates, you need to find the shortest route "
              "that visits each node once and returns to the starting node. The task can be "
              "solved step-by-step by starting from the current node and iteratively choosing "
              "the next node. Help me design a novel algorithm that is different from the "
              "algorithms in literature to select the next node in each step."),
        inputs=("current_node", "destination_node", "unvisited_nodes", "distance_matrix"),
        outputs=("next_node",),
        io_note=("'current_node', 'destination_node' and 'next_node' are node IDs; "
                 "'unvisited_nodes' is a set of node IDs; 'distance_matrix' is a numpy array "
                 "of distances between nodes."),
        harness="esopt.ahd.tsp:harness", train_split="train", test_splits=("test20", "test50"),
        greedy_source=tsp.GREEDY_SOURCE,
        data=_files_or(tsp.instances, "tsp_constructive"),
        objective=_tsp_objective, optimum=_tsp_optimum,
    ),
    "kp_constructive": Problem(
        name="kp_constructive", entry="select_next_item", sense="max",
        task=("Given a set of items with weights and values and a knapsack capacity, you need "
              "to select items that fit into the knapsack so that their total value is as "
              "large as possible. The task can be solved step-by-step by iteratively choosing "
              "the next item to add. Help me design a novel algorithm to select the next item "
              "in each step."),
        inputs=("remaining_capacity", "weights", "values"),
        outputs=("next_item",),
        io_note=("'remaining_capacity' is a float; 'weights' and 'values' are numpy arrays of "
                 "the remaining items; 'next_item' is the index of an item that fits."),
        harness="esopt.ahd.kp:harness", train_split="train", test_splits=("test50", "test100"),
        greedy_source=kp.GREEDY_SOURCE,
        data=_files_or(kp.instances, "kp_constructive"),
        objective=_kp_objective, optimum=_kp_optimum,
    ),
    "asp_constructive": Problem(
        name="asp_constructive", entry="priority", sense="max",
        task=("The admissible sets problem asks for the largest set of vectors in {0, 1, 2}^n "
              "with exactly w non-zero entries such that for any three distinct vectors there "
              "is a coordinate where their values are {0, 1, 2}, {0, 0, 1} or {0, 0, 2}. The "
              "set is built greedily. Help me design a function that scores each vector with "
              "the priority of adding it to the set."),
        inputs=("el", "n", "w"),
        outputs=("priority",),
        io_note="'el' is a tuple of n integers in {0, 1, 2}; 'n' and 'w' are ints; return a float.",
        harness="esopt.ahd.asp:harness", train_split="train", test_splits=("n15w10", "n21w15"),
        greedy_source="def priority(el, n, w):\n    return 0.0\n",
        data=_asp_data,
        payload=lambda nw: dict(zip(("n", "w"), nw, strict=True)),
        objective=lambda scores, nw, split: asp.objective(scores, *nw),
        optimum=lambda nw: float(asp.BEST_KNOWN[nw]),
    ),
    "tsp_aco": Problem(
        name="tsp_aco", entry="heuristics", sense="min",
        task=("Solving Traveling Salesman Problem (TSP) via stochastic solution sampling following "
              "\"heuristics\". TSP requires finding the shortest path that visits all given nodes "
              "and returns to the starting node. Help me design a novel function that gives, for "
              "each edge, a prior indicator of how promising it is to include it in a solution."),
        inputs=("distance_matrix",), outputs=("heuristics",),
        io_note=("'distance_matrix' is an (n, n) numpy array (its diagonal is 1). " + ACO_NOTE),
        harness="esopt.ahd.aco_problems:tsp_harness", train_split="train",
        test_splits=("test50", "test100"), greedy_source=aco_problems.TSP_SEED,
        data=_files_or(lambda s: aco_problems.generate("tsp_aco", s), "tsp_aco"),
        objective=aco_problems.tsp_objective, optimum=None, kind="aco", chunk=16,
    ),
    "cvrp_aco": Problem(
        name="cvrp_aco", entry="heuristics", sense="min",
        task=("Solving Capacitated Vehicle Routing Problem (CVRP) via stochastic solution "
              "sampling. CVRP requires finding the shortest routes from the depot (node 0) that "
              "visit every customer once, each route's demand within the vehicle capacity. "
              "Help me design a novel function that gives, for each edge, a prior indicator of "
              "how promising it is to include it in a solution."),
        inputs=("distance_matrix", "coordinates", "demands", "capacity"), outputs=("heuristics",),
        io_note=("'distance_matrix' is (n, n) (diagonal 1), 'coordinates' (n, 2), 'demands' (n,) "
                 "with the depot 0 at demand 0, 'capacity' an int. " + ACO_NOTE),
        harness="esopt.ahd.aco_problems:cvrp_harness", train_split="train",
        test_splits=("test50", "test100"), greedy_source=aco_problems.CVRP_SEED,
        data=_files_or(lambda s: aco_problems.generate("cvrp_aco", s), "cvrp_aco"),
        objective=aco_problems.cvrp_objective, optimum=None, kind="aco", chunk=16,
    ),
    "bpp_offline_aco": Problem(
        name="bpp_offline_aco", entry="heuristics", sense="min",
        task=("Solving the offline Bin Packing Problem (BPP) via stochastic solution sampling. "
              "BPP requires packing all items of given sizes into as few bins of equal capacity "
              "as possible. Help me design a novel function that gives, for each pair of items, "
              "a prior indicator of how promising it is to put them in the same bin."),
        inputs=("demand", "capacity"), outputs=("heuristics",),
        io_note=("'demand' is an (n,) numpy array of item sizes, 'capacity' an int; return an "
                 "(n, n) array, entry [i, j] for items i and j together. " + ACO_NOTE),
        harness="esopt.ahd.aco_problems:bpp_harness", train_split="train",
        test_splits=("test500", "test1000"), greedy_source=aco_problems.BPP_SEED,
        data=_files_or(lambda s: aco_problems.generate("bpp_offline_aco", s), "bpp_offline_aco"),
        objective=aco_problems.bpp_objective, optimum=None, kind="aco", chunk=4,
    ),
}


def get_problem(name: str) -> Problem:
    if name not in PROBLEMS:
        raise ValueError(f"unknown AHD problem {name!r}; expected one of {sorted(PROBLEMS)}")
    return PROBLEMS[name]


@dataclass
class Evaluation:
    """One heuristic on one split: the objective, or a typed failure."""

    outcome: Outcome
    objective: float = float("nan")
    detail: str = ""
    wall_s: float = 0.0
    sandbox: str = ""
    """The sandbox mode the code ran in (isolated or guard-only)."""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


DEFAULT_LIMITS = SandboxLimits()


def evaluate(problem: Problem, source: str, split: str,
             limits: SandboxLimits = DEFAULT_LIMITS, instances: str | None = None) -> Evaluation:
    """Run `source` in the sandbox on a split and score it in this (trusted) process.

    `instances`: the directory of benchmark files (None: the generators)."""
    start = time.perf_counter()
    data = problem.data(split, instances)
    step = problem.chunk or len(data) if problem.kind == "aco" else 0
    parts = [data[i: i + step] for i in range(0, len(data), step)] if step else [data]
    values: list = []
    for part in parts:
        result = run_sandboxed(source, problem.harness, problem.payload(part), limits)
        if not result.ok:
            return Evaluation(result.outcome, detail=result.detail,
                              wall_s=time.perf_counter() - start, sandbox=result.mode)
        values = result.value if not step else values + [result.value]
    try:
        if step:  # one list per part, joined here: a malformed part fails the candidate
            values = [v for part in values for v in part]
        value = problem.objective(values, data, split)
    except HeuristicFailure as e:
        return Evaluation(e.outcome, detail=str(e), wall_s=time.perf_counter() - start,
                          sandbox=result.mode)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError) as e:
        # A malformed result fails this candidate, not the search.
        return Evaluation(Outcome.WRONG_TYPE, detail=f"malformed result: {type(e).__name__}: "
                          f"{e}"[:500], wall_s=time.perf_counter() - start, sandbox=result.mode)
    return Evaluation(Outcome.OK, objective=value, wall_s=time.perf_counter() - start,
                      sandbox=result.mode)
