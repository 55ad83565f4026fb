"""Chance on Agentic Sudoku: the success of a player that writes a uniformly random digit
into a uniformly random one of the board's blank cells every turn, through the real
environment (its rules: a move that breaks one costs the turn; budget 3*H* turns).

A model whose held-out success is at or below this number has shown no Sudoku skill;
scale=small adds ESOpt on Sudoku only above it (issue 39).

    python benchmarks/sudoku_chance.py [--size 4] [--horizons 1 2] [--boards 4000]

Boards are the environment's held-out seeds (esopt.agent.evaluate.task_seeds("test")), so
they include the boards every Sudoku evaluation plays first. Prints the rate with its 95%
binomial interval per H*.
"""

from __future__ import annotations

import argparse
import math
import random

from esopt.agent.evaluate import task_seeds
from esopt.envs.sudoku import SudokuEnv
from esopt.envs.sudoku_board import empty_cells


def random_player_success(size: int, blanks: int, seeds: list[int], rng_seed: int = 0
                          ) -> float:
    env = SudokuEnv(blanks=blanks, size=size, few_shot=0, action_format="cell")
    rng = random.Random(rng_seed)
    solved = 0
    for seed in seeds:
        env.reset(seed)
        cells = empty_cells(env.board)  # the blanks, fixed for the episode
        assert len(cells) == blanks, (seed, cells)
        done = False
        while not done:
            r, c = rng.choice(cells)
            done = env.step(f"r{r + 1}c{c + 1}={rng.randint(1, size)}").done
        solved += env.success
    return solved / len(seeds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--horizons", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--boards", type=int, default=4000)
    args = ap.parse_args()
    seeds = task_seeds("test", args.boards)
    for h in args.horizons:
        p = random_player_success(args.size, h, seeds)
        half = 1.96 * math.sqrt(p * (1 - p) / len(seeds))
        print(f"{args.size}x{args.size} Sudoku, H*={h}, {3 * h} turns: random player "
              f"{100 * p:.1f}% [{100 * (p - half):.1f}, {100 * (p + half):.1f}] over "
              f"{len(seeds)} boards")


if __name__ == "__main__":
    main()
