"""The AHD problem registry: what the LLM writes, how it is run, scored and referenced."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from esopt.ahd import asp, kp, tsp
from esopt.runtime.sandbox import HeuristicFailure, Outcome, SandboxLimits, run_sandboxed


@dataclass(frozen=True)
class Problem:
    """One constructive AHD problem. `objective` is a mean over a split's instances."""

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
    payload: Callable[[str], dict]
    objective: Callable[[Any, str], float]
    optimum: Callable[[str], float]

    def improvement(self, parent: float, child: float) -> float:
        """How much the child improves on the parent, positive when better."""
        return parent - child if self.sense == "min" else child - parent


def _tsp_objective(tours, split: str) -> float:
    return float(tsp.tour_lengths(tsp.instances(split), tours).mean())


def _tsp_optimum(split: str) -> float:
    coords = tsp.instances(split)
    if coords.shape[1] <= 20:
        return float(np.mean([tsp.held_karp(tsp.distance_matrix(c)) for c in coords]))
    return float(np.mean([tsp.lkh_length(c) for c in coords]))


def _kp_objective(packings, split: str) -> float:
    return float(kp.packing_values(kp.instances(split), packings).mean())


def _kp_optimum(split: str) -> float:
    data = kp.instances(split)
    return float(np.mean([kp.optimum(items, kp.capacity(len(items))) for items in data]))


def _asp_objective(scores, split: str) -> float:
    return asp.objective(scores, *asp.INSTANCES[split])


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
        payload=lambda split: {"instances": tsp.instances(split)},
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
        payload=lambda split: {"instances": kp.instances(split)},
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
        payload=lambda split: dict(zip(("n", "w"), asp.INSTANCES[split], strict=True)),
        objective=_asp_objective,
        optimum=lambda split: float(asp.BEST_KNOWN[asp.INSTANCES[split]]),
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

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


DEFAULT_LIMITS = SandboxLimits()


def evaluate(problem: Problem, source: str, split: str,
             limits: SandboxLimits = DEFAULT_LIMITS) -> Evaluation:
    """Run `source` in the sandbox on a split and score it in this (trusted) process."""
    start = time.perf_counter()
    result = run_sandboxed(source, problem.harness, problem.payload(split), limits)
    if not result.ok:
        return Evaluation(result.outcome, detail=result.detail,
                          wall_s=time.perf_counter() - start)
    try:
        value = problem.objective(result.value, split)
    except HeuristicFailure as e:
        return Evaluation(e.outcome, detail=str(e), wall_s=time.perf_counter() - start)
    return Evaluation(Outcome.OK, objective=value, wall_s=time.perf_counter() - start)
